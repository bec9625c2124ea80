import FoundationEssentials
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

extension ClientMessage: Codable {
    enum CodingKeys: String, CodingKey {
        case type, `protocol`, id, observe, names, name, payload, app, task, configuration, state, scene, role, options, token
        case result
    }

    static let types = ["hello", "ack", "observe", "post", "beginBackgroundTask", "endBackgroundTask",
                        "requestSceneActivation", "requestSceneDestruction"]

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "hello":
            self = .hello(protocol: try container.decode(Int.self, forKey: .protocol),
                          observe: try container.decodeIfPresent([String].self, forKey: .observe),
                          app: try container.decodeIfPresent(String.self, forKey: .app),
                          token: try container.decodeIfPresent(String.self, forKey: .token))
        case "ack":
            self = .ack(id: try container.decode(Int.self, forKey: .id),
                        configuration: try container.decodeIfPresent(String.self, forKey: .configuration),
                        state: try container.decodeIfPresent(JSONValue.self, forKey: .state),
                        result: try container.decodeIfPresent(String.self, forKey: .result))
        case "observe": self = .observe(try container.decode([String].self, forKey: .names))
        case "post":
            self = .post(name: try container.decode(String.self, forKey: .name),
                         payload: try container.decodeIfPresent(JSONValue.self, forKey: .payload),
                         app: try container.decodeIfPresent(String.self, forKey: .app))
        case "beginBackgroundTask":
            self = .beginBackgroundTask(task: try container.decode(Int.self, forKey: .task),
                                        name: try container.decodeIfPresent(String.self, forKey: .name) ?? "")
        case "endBackgroundTask": self = .endBackgroundTask(task: try container.decode(Int.self, forKey: .task))
        case "requestSceneActivation":
            self = .requestSceneActivation(scene: try container.decodeIfPresent(String.self, forKey: .scene),
                                           role: try container.decodeIfPresent(String.self, forKey: .role),
                                           configuration: try container.decodeIfPresent(String.self, forKey: .configuration),
                                           options: try container.decodeIfPresent(JSONValue.self, forKey: .options))
        case "requestSceneDestruction":
            self = .requestSceneDestruction(scene: try container.decode(String.self, forKey: .scene))
        default:
            throw ProtocolError("unknown message type '\(ProtocolError.clipped(type, to: 80))' (expected one of: \(Self.types.joined(separator: ", ")))")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .hello(let version, let observe, let app, let token):
            try container.encode("hello", forKey: .type)
            try container.encode(version, forKey: .protocol)
            try container.encodeIfPresent(observe, forKey: .observe)
            try container.encodeIfPresent(app, forKey: .app)
            try container.encodeIfPresent(token, forKey: .token)
        case .ack(let id, let configuration, let state, let result):
            try container.encode("ack", forKey: .type)
            try container.encode(id, forKey: .id)
            try container.encodeIfPresent(configuration, forKey: .configuration)
            try container.encodeIfPresent(state, forKey: .state)
            try container.encodeIfPresent(result, forKey: .result)
        case .observe(let names):
            try container.encode("observe", forKey: .type)
            try container.encode(names, forKey: .names)
        case .post(let name, let payload, let app):
            try container.encode("post", forKey: .type)
            try container.encode(name, forKey: .name)
            try container.encodeIfPresent(payload, forKey: .payload)
            try container.encodeIfPresent(app, forKey: .app)
        case .beginBackgroundTask(let task, let name):
            try container.encode("beginBackgroundTask", forKey: .type)
            try container.encode(task, forKey: .task)
            try container.encode(name, forKey: .name)
        case .endBackgroundTask(let task):
            try container.encode("endBackgroundTask", forKey: .type)
            try container.encode(task, forKey: .task)
        case .requestSceneActivation(let scene, let role, let configuration, let options):
            try container.encode("requestSceneActivation", forKey: .type)
            try container.encodeIfPresent(scene, forKey: .scene)
            try container.encodeIfPresent(role, forKey: .role)
            try container.encodeIfPresent(configuration, forKey: .configuration)
            try container.encodeIfPresent(options, forKey: .options)
        case .requestSceneDestruction(let scene):
            try container.encode("requestSceneDestruction", forKey: .type)
            try container.encode(scene, forKey: .scene)
        }
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

/// A background task on the wire: `{"task": 1, "name": "upload"}`.
struct WireTask: Codable {
    var task: Int
    var name: String
}

extension ServerMessage: Codable {
    enum CodingKeys: String, CodingKey {
        case type, `protocol`, app, state, id, deadlineMs, launchOptions, message, token
        case name, payload, payloads, posts, dropped, task, tasks, remainingMs
        case scene, scenes, role, configuration, options, request
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "hello":
            self = .welcome(protocol: try container.decode(Int.self, forKey: .protocol),
                            app: try container.decode(String.self, forKey: .app),
                            state: try container.decode(AppState.self, forKey: .state),
                            token: try container.decodeIfPresent(String.self, forKey: .token))
        case "error":
            self = .error(try container.decode(String.self, forKey: .message))
        case "notification":
            self = .notification(NotificationDelivery(
                name: try container.decode(String.self, forKey: .name),
                payload: try container.decodeIfPresent(JSONValue.self, forKey: .payload),
                payloads: try container.decodeIfPresent([JSONValue].self, forKey: .payloads),
                posts: try container.decode(Int.self, forKey: .posts),
                dropped: try container.decodeIfPresent(Int.self, forKey: .dropped) ?? 0))
        case "backgroundTaskBegan":
            self = .backgroundTaskBegan(task: try container.decode(Int.self, forKey: .task),
                                        name: try container.decode(String.self, forKey: .name),
                                        remainingMs: try container.decodeIfPresent(Int.self, forKey: .remainingMs))
        case "backgroundTimeWillExpire":
            let tasks = try container.decode([WireTask].self, forKey: .tasks)
            self = .backgroundTimeWillExpire(tasks: tasks.map { BackgroundTask(id: $0.task, name: $0.name) },
                                             remainingMs: try container.decode(Int.self, forKey: .remainingMs))
        case "postFailed":
            self = .postFailed(name: try container.decode(String.self, forKey: .name),
                               message: try container.decode(String.self, forKey: .message))
        case "configurationForConnecting":
            self = .configurationForConnecting(id: try container.decode(Int.self, forKey: .id),
                                               deadlineMs: try container.decode(Int.self, forKey: .deadlineMs),
                                               scene: try container.decode(String.self, forKey: .scene),
                                               role: try container.decode(String.self, forKey: .role),
                                               proposed: try container.decode(String.self, forKey: .configuration),
                                               options: try container.decodeIfPresent(JSONValue.self, forKey: .options) ?? .object([:]))
        case "didDiscardSceneSessions":
            self = .didDiscardSceneSessions(id: try container.decode(Int.self, forKey: .id),
                                            deadlineMs: try container.decode(Int.self, forKey: .deadlineMs),
                                            scenes: try container.decode([String].self, forKey: .scenes))
        case "performFetch":
            self = .performFetch(id: try container.decode(Int.self, forKey: .id),
                                 deadlineMs: try container.decode(Int.self, forKey: .deadlineMs))
        case "requestFailed":
            self = .requestFailed(request: try container.decode(String.self, forKey: .request),
                                  message: try container.decode(String.self, forKey: .message))
        case _ where SceneCallback(rawValue: type) != nil:
            let callback = SceneCallback(rawValue: type)!
            var connection: SceneConnection?
            if callback == .sceneWillConnect {
                connection = SceneConnection(role: try container.decode(String.self, forKey: .role),
                                             configuration: try container.decode(String.self, forKey: .configuration),
                                             options: try container.decodeIfPresent(JSONValue.self, forKey: .options) ?? .object([:]),
                                             savedState: try container.decodeIfPresent(JSONValue.self, forKey: .state))
            }
            self = .sceneCallback(callback, id: try container.decode(Int.self, forKey: .id),
                                  deadlineMs: try container.decode(Int.self, forKey: .deadlineMs),
                                  scene: try container.decode(String.self, forKey: .scene), connection: connection)
        default:
            guard let callback = LifecycleCallback(rawValue: type) else {
                throw ProtocolError("unknown message type '\(ProtocolError.clipped(type, to: 80))'")
            }
            self = .callback(callback, id: try container.decode(Int.self, forKey: .id),
                             deadlineMs: try container.decode(Int.self, forKey: .deadlineMs),
                             launchOptions: try container.decodeIfPresent(LaunchOptions.self, forKey: .launchOptions))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .welcome(let version, let app, let state, let token):
            try container.encode("hello", forKey: .type)
            try container.encode(version, forKey: .protocol)
            try container.encode(app, forKey: .app)
            try container.encode(state, forKey: .state)
            try container.encodeIfPresent(token, forKey: .token)
        case .callback(let callback, let id, let deadlineMs, let options):
            try container.encode(callback.rawValue, forKey: .type)
            try container.encode(id, forKey: .id)
            try container.encode(deadlineMs, forKey: .deadlineMs)
            try container.encodeIfPresent(options, forKey: .launchOptions)
        case .error(let message):
            try container.encode("error", forKey: .type)
            try container.encode(message, forKey: .message)
        case .notification(let delivery):
            try container.encode("notification", forKey: .type)
            try container.encode(delivery.name, forKey: .name)
            try container.encodeIfPresent(delivery.payload, forKey: .payload)
            try container.encodeIfPresent(delivery.payloads, forKey: .payloads)
            try container.encode(delivery.posts, forKey: .posts)
            try container.encode(delivery.dropped, forKey: .dropped)
        case .backgroundTaskBegan(let task, let name, let remainingMs):
            try container.encode("backgroundTaskBegan", forKey: .type)
            try container.encode(task, forKey: .task)
            try container.encode(name, forKey: .name)
            // null in the foreground: the time has not started.
            try container.encode(remainingMs, forKey: .remainingMs)
        case .backgroundTimeWillExpire(let tasks, let remainingMs):
            try container.encode("backgroundTimeWillExpire", forKey: .type)
            try container.encode(tasks.map { WireTask(task: $0.id, name: $0.name) }, forKey: .tasks)
            try container.encode(remainingMs, forKey: .remainingMs)
        case .postFailed(let name, let message):
            try container.encode("postFailed", forKey: .type)
            try container.encode(name, forKey: .name)
            try container.encode(message, forKey: .message)
        case .sceneCallback(let callback, let id, let deadlineMs, let scene, let connection):
            try container.encode(callback.rawValue, forKey: .type)
            try container.encode(id, forKey: .id)
            try container.encode(deadlineMs, forKey: .deadlineMs)
            try container.encode(scene, forKey: .scene)
            if let connection {
                try container.encode(connection.role, forKey: .role)
                try container.encode(connection.configuration, forKey: .configuration)
                try container.encode(connection.options, forKey: .options)
                // null when nothing was saved: the key is always there, so clients need not guess.
                try container.encode(connection.savedState ?? .null, forKey: .state)
            }
        case .configurationForConnecting(let id, let deadlineMs, let scene, let role, let proposed, let options):
            try container.encode("configurationForConnecting", forKey: .type)
            try container.encode(id, forKey: .id)
            try container.encode(deadlineMs, forKey: .deadlineMs)
            try container.encode(scene, forKey: .scene)
            try container.encode(role, forKey: .role)
            try container.encode(proposed, forKey: .configuration)
            try container.encode(options, forKey: .options)
        case .didDiscardSceneSessions(let id, let deadlineMs, let scenes):
            try container.encode("didDiscardSceneSessions", forKey: .type)
            try container.encode(id, forKey: .id)
            try container.encode(deadlineMs, forKey: .deadlineMs)
            try container.encode(scenes, forKey: .scenes)
        case .performFetch(let id, let deadlineMs):
            try container.encode("performFetch", forKey: .type)
            try container.encode(id, forKey: .id)
            try container.encode(deadlineMs, forKey: .deadlineMs)
        case .requestFailed(let request, let message):
            try container.encode("requestFailed", forKey: .type)
            try container.encode(request, forKey: .request)
            try container.encode(message, forKey: .message)
        }
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
