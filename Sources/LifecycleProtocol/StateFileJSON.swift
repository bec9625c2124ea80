// The state file's JSON (docs/PROTOCOL.md, the state files): the model's lasting state of an app, which the daemon
// writes at each of its transitions and a restarted daemon reads back. Members in key order, a nil optional left
// out; reading ignores unknown members, and an optional absent from a file of an older daemon is nil.

import LifecycleModel

extension AppSnapshot: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(state: try fields.required("state"), launches: try fields.required("launches"),
                  deadlineMisses: try fields.required("deadlineMisses"),
                  terminatedInBackground: try fields.required("terminatedInBackground"),
                  memoryTerminations: try fields.required("memoryTerminations"), observing: try fields.required("observing"),
                  queue: try fields.required("queue"), sessions: try fields.required("sessions"),
                  nextSceneNumber: try fields.required("nextSceneNumber"), discardedUntold: try fields.required("discardedUntold"),
                  nextMessageID: try fields.optional("nextMessageID"),
                  tasks: try fields.optional("tasks", as: [StoredTask].self)?.map(\.task),
                  enteredBackgroundAtMicroseconds: try fields.optional("enteredBackgroundAtMicroseconds"),
                  told: try fields.optional("told"))
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("deadlineMisses", deadlineMisses)
        writer.member("discardedUntold", discardedUntold)
        writer.member("enteredBackgroundAtMicroseconds", enteredBackgroundAtMicroseconds)
        writer.member("launches", launches)
        writer.member("memoryTerminations", memoryTerminations)
        writer.member("nextMessageID", nextMessageID)
        writer.member("nextSceneNumber", nextSceneNumber)
        writer.member("observing", observing)
        writer.member("queue", queue)
        writer.member("sessions", sessions)
        writer.member("state", state)
        writer.member("tasks", tasks?.map(StoredTask.init))
        writer.member("terminatedInBackground", terminatedInBackground)
        writer.member("told", told)
        writer.endObject()
    }
}

extension Told: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        guard let scenesValue = fields.value("scenes") else { throw ProtocolError("missing field '\(fields.prefix)scenes'") }
        guard case .object(let members) = scenesValue else {
            throw .badField(fields.prefix + "scenes", expected: "an object", found: scenesValue)
        }
        var scenes: [String: SceneActivationState] = [:]
        for member in members {
            scenes[member.key] = try SceneActivationState(json: member.value, path: fields.prefix + "scenes." + member.key)
        }
        self.init(state: try fields.required("state"), scenes: scenes, launch: try fields.optional("launch"))
    }

    /// The scenes an object keyed by session id, in the UTF-8 order of the ids.
    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("launch", launch)
        writer.key("scenes")
        writer.beginObject()
        for scene in scenes.sorted(by: { JSONWriter.precedesInUTF8($0.key, $1.key) }) {
            writer.dynamicKey(scene.key)
            writer.string(scene.value.rawValue)
        }
        writer.endObject()
        writer.member("state", state)
        writer.endObject()
    }
}

extension NotificationQueue: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(limit: try fields.required("limit"), stored: try fields.required("entries"))
    }

    /// The entries in first-post order, each with its kept payloads oldest first, then the limit.
    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("entries", stored)
        writer.member("limit", limit)
        writer.endObject()
    }
}

extension NotificationQueue.StoredEntry: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(name: try fields.required("name"), coalescing: try fields.required("coalescing"),
                  payload: try fields.optional("payload"), payloads: try fields.required("payloads"),
                  posts: try fields.required("posts"), dropped: try fields.required("dropped"))
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("coalescing", coalescing)
        writer.member("dropped", dropped)
        writer.member("name", name)
        writer.member("payload", payload)
        writer.member("payloads", payloads)
        writer.member("posts", posts)
        writer.endObject()
    }
}

extension SceneSession: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(id: try fields.required("id"), role: try fields.required("role"),
                  configuration: try fields.required("configuration"), state: try fields.optional("state"),
                  savedState: try fields.optional("savedState"), connectionOptions: try fields.required("connectionOptions"),
                  lastActivation: try fields.required("lastActivation"))
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("configuration", configuration)
        writer.member("connectionOptions", connectionOptions)
        writer.member("id", id)
        writer.member("lastActivation", lastActivation)
        writer.member("role", role)
        writer.member("savedState", savedState)
        writer.member("state", state)
        writer.endObject()
    }
}

/// An open background task as the state file keeps it: `{"id": 1, "name": "upload"}`.
struct StoredTask: JSONReadable, JSONWritable {
    var task: BackgroundTask

    init(_ task: BackgroundTask) { self.task = task }

    init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        task = BackgroundTask(id: try fields.required("id"), name: try fields.required("name"))
    }

    func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("id", task.id)
        writer.member("name", task.name)
        writer.endObject()
    }
}
