import LifecycleModel

// The `watch` verb's stream (docs/CONTROL.md, "watch"): after the request, one JSON object per line, each with
// an `event`, until the client hangs up or the daemon ends the watch.

/// One line of a watch stream. Which fields a line has depends on its `event`:
/// - `app`: the snapshot, one per app before `ready`: `app`, `state`, `since`, `pid` when it runs;
/// - `scene`: the snapshot of one scene session, after its app's line: `app`, `scene`, `state`;
/// - `ready`: the snapshot is complete; `protocol` is the control protocol's version;
/// - `transition`: `app`, `from`, `to`, `reason`, `time`;
/// - `sceneTransition`: `app`, `scene`, `from`, `to` (`disconnected` for a session without a scene), `reason`, `time`;
/// - `added`, `removed`: an app appears in or leaves the configuration: `app`, `time`, and `state` for `added`;
/// - `dropped`, `closing`: the daemon ends the watch (the client did not keep up, or the daemon stops):
///   `reason`, `time`; the connection closes after it.
public struct WatchEvent: Sendable, Equatable {
    public var event: String
    public var app: String?
    public var scene: String?
    public var state: String?
    public var pid: Int32?
    public var since: String?
    public var from: String?
    public var to: String?
    public var reason: String?
    public var time: String?
    public var `protocol`: Int?

    public init(event: String, app: String? = nil, scene: String? = nil, state: String? = nil, pid: Int32? = nil,
                since: String? = nil, from: String? = nil, to: String? = nil, reason: String? = nil,
                time: String? = nil, protocol: Int? = nil) {
        self.event = event
        self.app = app
        self.scene = scene
        self.state = state
        self.pid = pid
        self.since = since
        self.from = from
        self.to = to
        self.reason = reason
        self.time = time
        self.protocol = `protocol`
    }

    /// The events that end a watch: the connection closes after them.
    public var endsWatch: Bool { event == "dropped" || event == "closing" }
}

extension WatchEvent: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(event: try fields.required("event"), app: try fields.optional("app"), scene: try fields.optional("scene"),
                  state: try fields.optional("state"), pid: try fields.optional("pid"), since: try fields.optional("since"),
                  from: try fields.optional("from"), to: try fields.optional("to"), reason: try fields.optional("reason"),
                  time: try fields.optional("time"), protocol: try fields.optional("protocol"))
    }

    /// Members in key order, a nil optional left out.
    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("app", app)
        writer.member("event", event)
        writer.member("from", from)
        writer.member("pid", pid)
        writer.member("protocol", `protocol`)
        writer.member("reason", reason)
        writer.member("scene", scene)
        writer.member("since", since)
        writer.member("state", state)
        writer.member("time", time)
        writer.member("to", to)
        writer.endObject()
    }
}
