/// The lifecycle callbacks the daemon sends to a client, named after `UIApplicationDelegate`.
public enum LifecycleCallback: String, Sendable, CaseIterable {
    case didFinishLaunching
    case didBecomeActive
    case willResignActive
    case didEnterBackground
    case willEnterForeground
    case willTerminate

    /// The state the app is in after this callback.
    /// UIKit's naming is the rule: during a "did" callback the app is already in the new state,
    /// during a "will" callback it is still in the old one and moves when the handler returns (the ack).
    /// `nil`: the callback does not change the state (the launch already made the app inactive,
    /// and termination ends with the process exit).
    public var resultingState: AppState? {
        switch self {
        case .didFinishLaunching, .willTerminate: nil
        case .didBecomeActive: .active
        case .willResignActive: .inactive
        case .didEnterBackground: .background
        case .willEnterForeground: .inactive
        }
    }

    /// The state changes when the message is sent ("did") rather than when it is acknowledged ("will").
    public var changesStateOnSend: Bool { rawValue.hasPrefix("did") }
}

/// Why and how the app was launched, handed to `didFinishLaunching` (UIKit's launch options).
public struct LaunchOptions: Sendable, Equatable {
    /// Who asked for the launch: `lifectl`, `autoLaunch`, `restart`, or a client name.
    public var launchedBy: String
    /// The app is launched straight into the background (`lifectl launch --background`).
    public var background: Bool
    /// The previous run of this app ended while it was in the background or suspended.
    public var terminatedInBackground: Bool

    public init(launchedBy: String, background: Bool = false, terminatedInBackground: Bool = false) {
        self.launchedBy = launchedBy
        self.background = background
        self.terminatedInBackground = terminatedInBackground
    }
}
