import LifecycleModel

// The app protocol: what flows over the socket inherited as LIFECYCLE_FD. See docs/PROTOCOL.md.

/// A message from a client (an app) to the daemon.
public enum ClientMessage: Sendable, Equatable {
    /// The first message: the protocol version the client speaks, and the notification types it observes.
    /// On the app socket (a reconnection after the daemon's restart), also the app's name and the token the
    /// daemon gave in its hello.
    case hello(protocol: Int, observe: [String]?, app: String? = nil, token: String? = nil)
    /// The handler of message `id` has returned. Answers ride on the ack: `configuration` for
    /// configurationForConnecting, `state` (the scene's state to keep) for sceneDidEnterBackground, `result`
    /// (`newData`, `noData`, `failed`) for performFetch.
    case ack(id: Int, configuration: String? = nil, state: JSONValue? = nil, result: String? = nil)
    /// Replace the set of notification types the client observes.
    case observe([String])
    /// Post a notification to every app that observes it (`app` nil), or to one app.
    case post(name: String, payload: JSONValue?, app: String?)
    /// UIKit's beginBackgroundTask; the client picks the id, unique on its connection.
    case beginBackgroundTask(task: Int, name: String)
    case endBackgroundTask(task: Int)
    /// UIKit's requestSceneSessionActivation: bring session `scene` to focus (reconnecting it), or, with no
    /// `scene`, open a new session with `role` (default `window`) and optionally a `configuration`.
    case requestSceneActivation(scene: String?, role: String?, configuration: String?, options: JSONValue?)
    /// UIKit's requestSceneSessionDestruction: disconnect the scene and discard its session.
    case requestSceneDestruction(scene: String)
}

extension ClientMessage: JSONReadable, JSONWritable {
    static let types = ["hello", "ack", "observe", "post", "beginBackgroundTask", "endBackgroundTask",
                        "requestSceneActivation", "requestSceneDestruction"]

    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        let type: String = try fields.required("type")
        switch type {
        case "ack":
            self = .ack(id: try fields.required("id"), configuration: try fields.optional("configuration"),
                        state: try fields.optional("state"), result: try fields.optional("result"))
        case "hello":
            self = .hello(protocol: try fields.required("protocol"), observe: try fields.optional("observe"),
                          app: try fields.optional("app"), token: try fields.optional("token"))
        case "observe": self = .observe(try fields.required("names"))
        case "post":
            self = .post(name: try fields.required("name"), payload: try fields.optional("payload"),
                         app: try fields.optional("app"))
        case "beginBackgroundTask":
            self = .beginBackgroundTask(task: try fields.required("task"), name: try fields.optional("name") ?? "")
        case "endBackgroundTask": self = .endBackgroundTask(task: try fields.required("task"))
        case "requestSceneActivation":
            self = .requestSceneActivation(scene: try fields.optional("scene"), role: try fields.optional("role"),
                                           configuration: try fields.optional("configuration"),
                                           options: try fields.optional("options"))
        case "requestSceneDestruction":
            self = .requestSceneDestruction(scene: try fields.required("scene"))
        default:
            throw ProtocolError("unknown message type '\(ProtocolError.clipped(type, to: 80))' (expected one of: \(Self.types.joined(separator: ", ")))")
        }
    }

    /// Members in key order, as everything on the wire.
    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        switch self {
        case .hello(let version, let observe, let app, let token):
            writer.member("app", app)
            writer.member("observe", observe)
            writer.member("protocol", version)
            writer.member("token", token)
            writer.member("type", "hello")
        case .ack(let id, let configuration, let state, let result):
            writer.member("configuration", configuration)
            writer.member("id", id)
            writer.member("result", result)
            writer.member("state", state)
            writer.member("type", "ack")
        case .observe(let names):
            writer.member("names", names)
            writer.member("type", "observe")
        case .post(let name, let payload, let app):
            writer.member("app", app)
            writer.member("name", name)
            writer.member("payload", payload)
            writer.member("type", "post")
        case .beginBackgroundTask(let task, let name):
            writer.member("name", name)
            writer.member("task", task)
            writer.member("type", "beginBackgroundTask")
        case .endBackgroundTask(let task):
            writer.member("task", task)
            writer.member("type", "endBackgroundTask")
        case .requestSceneActivation(let scene, let role, let configuration, let options):
            writer.member("configuration", configuration)
            writer.member("options", options)
            writer.member("role", role)
            writer.member("scene", scene)
            writer.member("type", "requestSceneActivation")
        case .requestSceneDestruction(let scene):
            writer.member("scene", scene)
            writer.member("type", "requestSceneDestruction")
        }
        writer.endObject()
    }
}

/// A message from the daemon to a client.
public enum ServerMessage: Sendable, Equatable {
    /// The answer to the client's hello. `token` lets the client reconnect through the app socket
    /// (LIFECYCLE_SOCKET) if the daemon restarts; keep it secret.
    case welcome(protocol: Int, app: String, state: AppState, token: String? = nil)
    /// A lifecycle callback to run and acknowledge.
    case callback(LifecycleCallback, id: Int, deadlineMs: Int, launchOptions: LaunchOptions?)
    /// What the client did wrong; the daemon closes the connection after it.
    case error(String)
    /// A notification: after a sleep, one per type carrying the net change.
    case notification(NotificationDelivery)
    /// The answer to beginBackgroundTask: the time left in the background (nil: in the foreground; the time
    /// starts when the app enters the background).
    case backgroundTaskBegan(task: Int, name: String, remainingMs: Int?)
    /// The background task time runs out in `remainingMs`: end these tasks, or be suspended anyway.
    case backgroundTimeWillExpire(tasks: [BackgroundTask], remainingMs: Int)
    /// A post the daemon could not take (unknown type or app); the connection stays.
    case postFailed(name: String, message: String)
    /// A scene-delegate callback to run and acknowledge; `sceneWillConnect` carries the connection.
    case sceneCallback(SceneCallback, id: Int, deadlineMs: Int, scene: String, connection: SceneConnection?)
    /// Which configuration the connecting scene uses: answer with `ack` and `configuration`.
    case configurationForConnecting(id: Int, deadlineMs: Int, scene: String, role: String, proposed: String, options: JSONValue)
    /// These sessions were discarded: free what was kept for them.
    case didDiscardSceneSessions(id: Int, deadlineMs: Int, scenes: [String])
    /// A scene request the daemon refused (`request` is its type); the connection stays.
    case requestFailed(request: String, message: String)
    /// A background wake: fetch what is new within `deadlineMs`, then ack with a `result`.
    case performFetch(id: Int, deadlineMs: Int)
}

extension ServerMessage: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        let type: String = try fields.required("type")
        switch type {
        case "hello":
            self = .welcome(protocol: try fields.required("protocol"), app: try fields.required("app"),
                            state: try fields.required("state"), token: try fields.optional("token"))
        case "error":
            self = .error(try fields.required("message"))
        case "notification":
            self = .notification(NotificationDelivery(
                name: try fields.required("name"), payload: try fields.optional("payload"),
                payloads: try fields.optional("payloads"), posts: try fields.required("posts"),
                dropped: try fields.optional("dropped") ?? 0))
        case "backgroundTaskBegan":
            self = .backgroundTaskBegan(task: try fields.required("task"), name: try fields.required("name"),
                                        remainingMs: try fields.optional("remainingMs"))
        case "backgroundTimeWillExpire":
            self = .backgroundTimeWillExpire(tasks: try fields.required("tasks", as: [WireTask].self).map(\.task),
                                             remainingMs: try fields.required("remainingMs"))
        case "postFailed":
            self = .postFailed(name: try fields.required("name"), message: try fields.required("message"))
        case "configurationForConnecting":
            self = .configurationForConnecting(id: try fields.required("id"), deadlineMs: try fields.required("deadlineMs"),
                                               scene: try fields.required("scene"), role: try fields.required("role"),
                                               proposed: try fields.required("configuration"),
                                               options: try fields.optional("options") ?? .object([:]))
        case "didDiscardSceneSessions":
            self = .didDiscardSceneSessions(id: try fields.required("id"), deadlineMs: try fields.required("deadlineMs"),
                                            scenes: try fields.required("scenes"))
        case "performFetch":
            self = .performFetch(id: try fields.required("id"), deadlineMs: try fields.required("deadlineMs"))
        case "requestFailed":
            self = .requestFailed(request: try fields.required("request"), message: try fields.required("message"))
        default:
            if let callback = SceneCallback(rawValue: type) {
                var connection: SceneConnection?
                if callback == .sceneWillConnect {
                    connection = SceneConnection(role: try fields.required("role"),
                                                 configuration: try fields.required("configuration"),
                                                 options: try fields.optional("options") ?? .object([:]),
                                                 savedState: try fields.optional("state"))
                }
                self = .sceneCallback(callback, id: try fields.required("id"), deadlineMs: try fields.required("deadlineMs"),
                                      scene: try fields.required("scene"), connection: connection)
            } else if let callback = LifecycleCallback(rawValue: type) {
                self = .callback(callback, id: try fields.required("id"), deadlineMs: try fields.required("deadlineMs"),
                                 launchOptions: try fields.optional("launchOptions"))
            } else {
                throw ProtocolError("unknown message type '\(ProtocolError.clipped(type, to: 80))'")
            }
        }
    }

    /// Members in key order, as everything on the wire.
    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        switch self {
        case .welcome(let version, let app, let state, let token):
            writer.member("app", app)
            writer.member("protocol", version)
            writer.member("state", state)
            writer.member("token", token)
            writer.member("type", "hello")
        case .callback(let callback, let id, let deadlineMs, let options):
            writer.member("deadlineMs", deadlineMs)
            writer.member("id", id)
            writer.member("launchOptions", options)
            writer.member("type", callback)
        case .error(let message):
            writer.member("message", message)
            writer.member("type", "error")
        case .notification(let delivery):
            writer.member("dropped", delivery.dropped)
            writer.member("name", delivery.name)
            writer.member("payload", delivery.payload)
            writer.member("payloads", delivery.payloads)
            writer.member("posts", delivery.posts)
            writer.member("type", "notification")
        case .backgroundTaskBegan(let task, let name, let remainingMs):
            writer.member("name", name)
            // null in the foreground: the time has not started.
            writer.key("remainingMs")
            if let remainingMs { writer.integer(Int64(remainingMs)) } else { writer.null() }
            writer.member("task", task)
            writer.member("type", "backgroundTaskBegan")
        case .backgroundTimeWillExpire(let tasks, let remainingMs):
            writer.member("remainingMs", remainingMs)
            writer.member("tasks", tasks.map(WireTask.init))
            writer.member("type", "backgroundTimeWillExpire")
        case .postFailed(let name, let message):
            writer.member("message", message)
            writer.member("name", name)
            writer.member("type", "postFailed")
        case .sceneCallback(let callback, let id, let deadlineMs, let scene, let connection):
            writer.member("configuration", connection?.configuration)
            writer.member("deadlineMs", deadlineMs)
            writer.member("id", id)
            writer.member("options", connection?.options)
            writer.member("role", connection?.role)
            writer.member("scene", scene)
            // null when nothing was saved: the key is always there, so clients need not guess.
            writer.member("state", connection.map { $0.savedState ?? .null })
            writer.member("type", callback)
        case .configurationForConnecting(let id, let deadlineMs, let scene, let role, let proposed, let options):
            writer.member("configuration", proposed)
            writer.member("deadlineMs", deadlineMs)
            writer.member("id", id)
            writer.member("options", options)
            writer.member("role", role)
            writer.member("scene", scene)
            writer.member("type", "configurationForConnecting")
        case .didDiscardSceneSessions(let id, let deadlineMs, let scenes):
            writer.member("deadlineMs", deadlineMs)
            writer.member("id", id)
            writer.member("scenes", scenes)
            writer.member("type", "didDiscardSceneSessions")
        case .performFetch(let id, let deadlineMs):
            writer.member("deadlineMs", deadlineMs)
            writer.member("id", id)
            writer.member("type", "performFetch")
        case .requestFailed(let request, let message):
            writer.member("message", message)
            writer.member("request", request)
            writer.member("type", "requestFailed")
        }
        writer.endObject()
    }
}

/// A background task on the wire: `{"name": "upload", "task": 1}`.
struct WireTask: JSONReadable, JSONWritable {
    var task: BackgroundTask

    init(_ task: BackgroundTask) { self.task = task }

    init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        task = BackgroundTask(id: try fields.required("task"), name: try fields.required("name"))
    }

    func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("name", task.name)
        writer.member("task", task.id)
        writer.endObject()
    }
}

extension LaunchOptions: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(launchedBy: try fields.required("launchedBy"), background: try fields.required("background"),
                  terminatedInBackground: try fields.required("terminatedInBackground"))
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("background", background)
        writer.member("launchedBy", launchedBy)
        writer.member("terminatedInBackground", terminatedInBackground)
        writer.endObject()
    }
}

extension ServerMessage {
    /// The wire form of a message the model delivers.
    public init(_ delivery: Delivery) {
        let deadlineMs = Int(delivery.deadline / .milliseconds(1))
        switch delivery.message {
        case .app(let callback, let options):
            self = .callback(callback, id: delivery.id, deadlineMs: deadlineMs, launchOptions: options)
        case .scene(let callback, let scene, let connection):
            self = .sceneCallback(callback, id: delivery.id, deadlineMs: deadlineMs, scene: scene, connection: connection)
        case .configurationForConnecting(let scene, let role, let proposed, let options):
            self = .configurationForConnecting(id: delivery.id, deadlineMs: deadlineMs, scene: scene, role: role,
                                               proposed: proposed, options: options)
        case .didDiscardSceneSessions(let scenes):
            self = .didDiscardSceneSessions(id: delivery.id, deadlineMs: deadlineMs, scenes: scenes)
        case .performFetch:
            self = .performFetch(id: delivery.id, deadlineMs: deadlineMs)
        }
    }
}
