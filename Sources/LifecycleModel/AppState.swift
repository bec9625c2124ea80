/// The five UIKit application states, plus `failed`: not running because its restart policy gave up.
///
/// UIKit's `UIApplication.State` has three foreground/background values; the full lifecycle of
/// "App Programming Guide for iOS — The App Life Cycle" adds notRunning and suspended. lifecycled
/// tracks all five, because on Linux the daemon, not the kernel, is the one that stops a process.
public enum AppState: String, Sendable, CaseIterable {
    case notRunning
    /// In the foreground but not receiving events: launching, or interrupted.
    case inactive
    /// In the foreground with focus. At most one app per focus domain.
    case active
    /// Hidden, still running for a bounded grace time at low priority.
    case background
    /// Stopped: no code runs.
    case suspended
    /// Not running, and the restart policy's start limit was hit: stays so until someone acts.
    case failed

    /// A process exists for the app.
    public var isRunning: Bool {
        switch self {
        case .inactive, .active, .background, .suspended: true
        case .notRunning, .failed: false
        }
    }

    public var isForeground: Bool { self == .inactive || self == .active }
}

/// What the daemon does to the app's scheduling priority in a state.
/// Mirrors Android's process importance ranks: foreground, cached (background), and frozen.
public enum PriorityClass: String, Sendable, Equatable {
    case foreground
    case background
    case suspended

    public init?(_ state: AppState) {
        switch state {
        case .inactive, .active: self = .foreground
        case .background: self = .background
        case .suspended: self = .suspended
        case .notRunning, .failed: return nil
        }
    }
}

/// The activation state of one scene (UIScene.ActivationState), for apps with several scenes.
public enum SceneActivationState: String, Sendable, CaseIterable {
    case unattached
    case foregroundInactive
    case foregroundActive
    case background
}

extension AppState {
    /// The app state of a running, multi-scene app, derived from its connected scenes as UIKit does:
    /// active if any scene is active, inactive if any scene is in the foreground, background otherwise.
    /// (suspended and notRunning are app-level and never derived.)
    public static func derived(fromScenes scenes: some Sequence<SceneActivationState>) -> AppState {
        var foreground = false
        for scene in scenes {
            switch scene {
            case .foregroundActive: return .active
            case .foregroundInactive: foreground = true
            case .unattached, .background: break
            }
        }
        return foreground ? .inactive : .background
    }
}
