import FoundationEssentials
import LifecycleModel

// The app protocol: what flows over the socket inherited as LIFECYCLE_FD. See docs/PROTOCOL.md.

/// A message from a client (an app) to the daemon.
public enum ClientMessage: Sendable, Equatable {
    /// The first message: the protocol version the client speaks.
    case hello(protocol: Int)
    /// The handler of message `id` has returned.
    case ack(id: Int)
}

extension ClientMessage: Codable {
    enum CodingKeys: String, CodingKey { case type, `protocol`, id }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "hello": self = .hello(protocol: try container.decode(Int.self, forKey: .protocol))
        case "ack": self = .ack(id: try container.decode(Int.self, forKey: .id))
        default: throw ProtocolError("unknown message type '\(type)' (expected hello or ack)")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .hello(let version):
            try container.encode("hello", forKey: .type)
            try container.encode(version, forKey: .protocol)
        case .ack(let id):
            try container.encode("ack", forKey: .type)
            try container.encode(id, forKey: .id)
        }
    }
}

/// A message from the daemon to a client.
public enum ServerMessage: Sendable, Equatable {
    /// The answer to the client's hello.
    case welcome(protocol: Int, app: String, state: AppState)
    /// A lifecycle callback to run and acknowledge.
    case callback(LifecycleCallback, id: Int, deadlineMs: Int, launchOptions: LaunchOptions?)
    /// What the client did wrong; the daemon closes the connection after it.
    case error(String)
}

extension ServerMessage: Codable {
    enum CodingKeys: String, CodingKey { case type, `protocol`, app, state, id, deadlineMs, launchOptions, message }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "hello":
            self = .welcome(protocol: try container.decode(Int.self, forKey: .protocol),
                            app: try container.decode(String.self, forKey: .app),
                            state: try container.decode(AppState.self, forKey: .state))
        case "error":
            self = .error(try container.decode(String.self, forKey: .message))
        default:
            guard let callback = LifecycleCallback(rawValue: type) else {
                throw ProtocolError("unknown message type '\(type)'")
            }
            self = .callback(callback, id: try container.decode(Int.self, forKey: .id),
                             deadlineMs: try container.decode(Int.self, forKey: .deadlineMs),
                             launchOptions: try container.decodeIfPresent(LaunchOptions.self, forKey: .launchOptions))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .welcome(let version, let app, let state):
            try container.encode("hello", forKey: .type)
            try container.encode(version, forKey: .protocol)
            try container.encode(app, forKey: .app)
            try container.encode(state, forKey: .state)
        case .callback(let callback, let id, let deadlineMs, let options):
            try container.encode(callback.rawValue, forKey: .type)
            try container.encode(id, forKey: .id)
            try container.encode(deadlineMs, forKey: .deadlineMs)
            try container.encodeIfPresent(options, forKey: .launchOptions)
        case .error(let message):
            try container.encode("error", forKey: .type)
            try container.encode(message, forKey: .message)
        }
    }
}
