import LifecycleModel

@_exported import enum LifecycleModel.SceneActivationState

/// One scene's callbacks, in the shape of `UISceneDelegate` / `UIWindowSceneDelegate`.
///
/// For apps whose lifecycled config declares `[Scenes]`. Register a delegate type for each configuration
/// name (`LifecycleApplication.register(_:forConfiguration:)`, the part of UIKit's Info.plist scene manifest
/// that names `UISceneDelegateClassName`); the library makes one delegate per connected scene. Each method
/// is acknowledged when it returns, as for the application delegate, and the app's own callbacks
/// (`applicationDidBecomeActive`, …) follow when the scenes change the app's state.
@MainActor
public protocol SceneDelegate: AnyObject {
    init()
    /// The scene connects (disconnected → unattached): `scene.restoredState` holds what
    /// `stateRestorationActivity(for:)` returned when it last entered the background, if anything.
    func scene(_ scene: Scene, willConnectTo session: SceneSession, options: JSONValue)
    /// The scene is released; its session stays (and comes back with its state at the next connection).
    func sceneDidDisconnect(_ scene: Scene)
    func sceneDidBecomeActive(_ scene: Scene)
    func sceneWillResignActive(_ scene: Scene)
    func sceneWillEnterForeground(_ scene: Scene)
    func sceneDidEnterBackground(_ scene: Scene)
    /// Asked right after `sceneDidEnterBackground`: the state to keep with the session (UIKit's
    /// `stateRestorationActivity(for:)`), handed back at the next connection, even after a relaunch.
    func stateRestorationActivity(for scene: Scene) -> JSONValue?
}

extension SceneDelegate {
    public func scene(_ scene: Scene, willConnectTo session: SceneSession, options: JSONValue) {}
    public func sceneDidDisconnect(_ scene: Scene) {}
    public func sceneDidBecomeActive(_ scene: Scene) {}
    public func sceneWillResignActive(_ scene: Scene) {}
    public func sceneWillEnterForeground(_ scene: Scene) {}
    public func sceneDidEnterBackground(_ scene: Scene) {}
    public func stateRestorationActivity(for scene: Scene) -> JSONValue? { nil }
}

/// `UISceneSession`: the persistent identity of a scene, kept by the daemon until discarded.
public struct SceneSession: Sendable, Equatable {
    public var persistentIdentifier: String
    /// `window`, `externalDisplay`, or a role of your own declared in `[Scenes]`.
    public var role: String
    /// The configuration name the scene connects with.
    public var configuration: String
}

/// `UIScene`: one connected scene.
@MainActor
public final class Scene {
    public let session: SceneSession
    public internal(set) var activationState: SceneActivationState = .unattached
    /// The scene's delegate, made from the type registered for its configuration (nil if none is).
    public let delegate: (any SceneDelegate)?
    /// What the scene saved when it last entered the background (`stateRestorationActivity(for:)`).
    public let restoredState: JSONValue?
    /// The connection's options: who asked (`origin`), and whatever the requester passed.
    public let connectionOptions: JSONValue

    init(session: SceneSession, delegate: (any SceneDelegate)?, restoredState: JSONValue?, connectionOptions: JSONValue) {
        self.session = session
        self.delegate = delegate
        self.restoredState = restoredState
        self.connectionOptions = connectionOptions
    }
}
