// Scenes: UIKit's iOS 13 multi-window lifecycle. An app that declares `[Scenes]` has scene sessions; each
// connected scene has its own activation state, and the app's state is derived from them
// (AppState.derived(fromScenes:)). The order of scene callbacks is in Rules.swift; Supervisor+Scenes.swift
// carries out the scene requests.

/// The callbacks the daemon sends to one scene of an app, named after `UISceneDelegate`.
public enum SceneCallback: String, Sendable, CaseIterable {
    /// `scene(_:willConnectTo:options:)`: carries the session, its configuration, the connection options
    /// and the state the client saved at its last `sceneDidEnterBackground`.
    case sceneWillConnect
    case sceneWillEnterForeground
    case sceneDidBecomeActive
    case sceneWillResignActive
    case sceneDidEnterBackground
    /// The scene is released; its session (and saved state) stays until discarded.
    case sceneDidDisconnect

    /// The scene's state after this callback; `.some(nil)`: disconnected.
    public var resultingState: SceneActivationState?? {
        switch self {
        case .sceneWillConnect: .some(.unattached)
        case .sceneWillEnterForeground, .sceneWillResignActive: .some(.foregroundInactive)
        case .sceneDidBecomeActive: .some(.foregroundActive)
        case .sceneDidEnterBackground: .some(.background)
        case .sceneDidDisconnect: .some(nil)
        }
    }

    /// UIKit's naming rule, as for the app: "did" moves the scene when sent, "will" when acknowledged.
    /// `sceneWillConnect` is the exception UIKit makes too: during the callback the scene already exists,
    /// `unattached`.
    public var changesStateOnSend: Bool { self == .sceneWillConnect || rawValue.hasPrefix("sceneDid") }
}

/// One `[Scenes] Configuration=ROLE:NAME` line: a configuration the app offers for a role.
public struct SceneConfiguration: Sendable, Equatable, Hashable {
    public var role: String
    public var name: String
    public init(role: String, name: String) {
        self.role = role
        self.name = name
    }
}

/// `[Scenes]`: the app uses the scene lifecycle (UIKit's `UIApplicationSceneManifest`).
public struct ScenePolicy: Sendable, Equatable {
    /// `SupportsMultipleScenes=`: more than one session at a time (UIApplicationSupportsMultipleScenes).
    public var supportsMultipleScenes = false
    /// The configurations, in config order; the first one of a role is that role's default.
    public var configurations: [SceneConfiguration] = []
    /// `MaxSceneSessions=`: the most sessions the app keeps. Each session is kept in the app's state file with up to
    /// `SavedStateLimit` of saved state, and every change rewrites that file: the bound keeps both in proportion to
    /// what a person can use, whatever the app asks for.
    public var maxSessions = ScenePolicy.defaultMaxSessions

    /// More windows of one app than a person can tell apart, while the saved states at the bound keep the state
    /// file small (docs/CONFIG.md gives its size).
    public static let defaultMaxSessions = 32

    public init(supportsMultipleScenes: Bool = false, configurations: [SceneConfiguration] = [],
                maxSessions: Int = ScenePolicy.defaultMaxSessions) {
        self.supportsMultipleScenes = supportsMultipleScenes
        self.configurations = configurations
        self.maxSessions = max(1, maxSessions)
    }

    /// The role a scene gets when nobody names one: UIKit's application window role.
    public static let defaultRole = "window"

    /// The configurations in effect: a `[Scenes]` that names none offers one, `window:Default`.
    public var effectiveConfigurations: [SceneConfiguration] {
        configurations.isEmpty ? [SceneConfiguration(role: Self.defaultRole, name: "Default")] : configurations
    }

    public func defaultConfiguration(for role: String) -> String? {
        effectiveConfigurations.first { $0.role == role }?.name
    }

    public func offers(_ name: String, for role: String) -> Bool {
        effectiveConfigurations.contains { $0.role == role && $0.name == name }
    }
}

/// A scene session, as `UISceneSession`: it outlives the scene's connection and the app's process,
/// and is kept until discarded.
public struct SceneSession: Sendable, Equatable {
    /// sceneWillConnect carries the session's saved state and its connection options in one protocol line
    /// (65,536 bytes): the state kept is at most 32 KiB of JSON, the options of `scene open` at most 16 KiB.
    public static let savedStateLimit = 32 * 1024
    public static let optionsLimit = 16 * 1024

    /// The persistent identifier: `s1`, `s2`, … per app, never reused in the daemon's life.
    public let id: String
    public let role: String
    /// The configuration the app chose when the scene last connected (the role's default before that).
    public internal(set) var configuration: String
    /// nil: disconnected (the session exists, no scene is connected to it).
    public internal(set) var state: SceneActivationState?
    /// The opaque JSON the client handed over with its last `sceneDidEnterBackground` ack; given back in
    /// `sceneWillConnect` at the next connection.
    public internal(set) var savedState: JSONValue?
    /// The options of the pending or current connection (who asked, what they asked for).
    public internal(set) var connectionOptions: JSONValue = .object([:])
    /// Order of the last activation (higher: more recent); 0: never active.
    public internal(set) var lastActivation = 0

    public init(id: String, role: String, configuration: String, state: SceneActivationState? = nil, savedState: JSONValue? = nil,
                connectionOptions: JSONValue = .object([:]), lastActivation: Int = 0) {
        self.id = id
        self.role = role
        self.configuration = configuration
        self.state = state
        self.savedState = savedState
        self.connectionOptions = connectionOptions
        self.lastActivation = lastActivation
    }

    public var isConnected: Bool { state != nil }
}

/// What a client answers with its ack, for the messages that ask something.
public struct AckReply: Sendable, Equatable {
    /// For `configurationForConnecting`: the configuration name the app chose.
    public var configuration: String?
    /// For `sceneDidEnterBackground`: the scene's state to keep with its session.
    public var savedState: JSONValue?
    /// For `performFetch`: what the fetch found.
    public var fetchResult: FetchResult?
    public init(configuration: String? = nil, savedState: JSONValue? = nil, fetchResult: FetchResult? = nil) {
        self.configuration = configuration
        self.savedState = savedState
        self.fetchResult = fetchResult
    }
}
