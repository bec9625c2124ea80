import Glibc
import LifecycleModel

@_exported import enum LifecycleModel.AppState
@_exported import struct LifecycleModel.LaunchOptions
@_exported import enum LifecycleModel.LifecycleCallback
@_exported import enum LifecycleModel.JSONValue
@_exported import enum LifecycleModel.FetchResult

/// The app's lifecycle callbacks, in the shape of `UIApplicationDelegate`.
///
/// `LifecycleApplication.main(delegate:)` calls these on the main actor, one at a time, in the order
/// the daemon sends them. When a method returns, the library acknowledges the message; the daemon does
/// not stop the process, or move it on, before that (or the message's deadline). Every method has a
/// default implementation that does nothing.
@MainActor
public protocol ApplicationDelegate: AnyObject {
    /// The app was launched (notRunning → inactive). Restore state here.
    func application(_ application: LifecycleApplication, didFinishLaunchingWithOptions options: LaunchOptions)
    /// The app has focus (inactive → active). Start or resume foreground work.
    func applicationDidBecomeActive(_ application: LifecycleApplication)
    /// The app is about to lose focus (active → inactive). Pause ongoing foreground work.
    func applicationWillResignActive(_ application: LifecycleApplication)
    /// The app is hidden (inactive → background). Save state and release shared resources now:
    /// after the grace time the process is stopped without further notice.
    func applicationDidEnterBackground(_ application: LifecycleApplication)
    /// The app is about to return to the foreground (background → inactive). Undo what you did on entering the background.
    func applicationWillEnterForeground(_ application: LifecycleApplication)
    /// The app is about to be terminated (SIGTERM follows the return of this method). Save state.
    func applicationWillTerminate(_ application: LifecycleApplication)
    /// Memory is short: free caches and anything that can be rebuilt. Suspended apps are terminated
    /// first when pressure persists, least recently used first. As in UIKit, the `didReceiveMemoryWarning`
    /// notification is posted right after, to its observers and the catch-all ones: free caches in one place.
    func applicationDidReceiveMemoryWarning(_ application: LifecycleApplication)
    /// Scenes (apps with `[Scenes]`): which configuration the connecting scene uses. Return nil for the
    /// one the daemon proposes (`session.configuration`: the one asked for, or the role's default).
    func application(_ application: LifecycleApplication, configurationForConnecting session: SceneSession,
                     options: JSONValue) -> String?
    /// Scene sessions were discarded (by `lifectl scene discard`, or your own request): free what you
    /// kept for them. Sessions discarded while the app was not running are reported after it launches.
    func application(_ application: LifecycleApplication, didDiscardSceneSessions sessions: [String])
    /// A background wake (`ResumeEverySec=`; UIKit's `application(_:performFetchWithCompletionHandler:)`): fetch
    /// what is new and return what you found; the app is suspended again after the return (or the deadline).
    func applicationPerformFetch(_ application: LifecycleApplication) -> FetchResult
    /// The daemon refused a request: a post (`request` is `post`) or a scene request. The connection stays.
    /// The default writes it on standard error.
    func application(_ application: LifecycleApplication, requestFailed request: String, message: String)
    /// The connection to the daemon turned: answered (`connected`), gone with a reconnection under way
    /// (`reconnecting`), or over for good (`disconnected`; the app runs on without messages).
    func application(_ application: LifecycleApplication, connectionDidChange event: ConnectionEvent)
}

extension ApplicationDelegate {
    public func application(_ application: LifecycleApplication, didFinishLaunchingWithOptions options: LaunchOptions) {}
    public func applicationDidBecomeActive(_ application: LifecycleApplication) {}
    public func applicationWillResignActive(_ application: LifecycleApplication) {}
    public func applicationDidEnterBackground(_ application: LifecycleApplication) {}
    public func applicationWillEnterForeground(_ application: LifecycleApplication) {}
    public func applicationWillTerminate(_ application: LifecycleApplication) {}
    public func applicationDidReceiveMemoryWarning(_ application: LifecycleApplication) {}
    public func application(_ application: LifecycleApplication, configurationForConnecting session: SceneSession,
                            options: JSONValue) -> String? { nil }
    public func application(_ application: LifecycleApplication, didDiscardSceneSessions sessions: [String]) {}
    public func applicationPerformFetch(_ application: LifecycleApplication) -> FetchResult { .noData }
    public func application(_ application: LifecycleApplication, requestFailed request: String, message: String) {
        _ = "lifecycle: \(request) refused: \(message)\n".withCString { write(2, $0, strlen($0)) }
    }
    public func application(_ application: LifecycleApplication, connectionDidChange event: ConnectionEvent) {}
}

/// How the connection to lifecycled turned (`ApplicationDelegate.application(_:connectionDidChange:)`).
public enum ConnectionEvent: String, Sendable {
    /// The daemon answered the hello, the first or a reconnection's.
    case connected
    /// The daemon went away; the library connects to LIFECYCLE_SOCKET again, every 200 ms for a minute.
    case reconnecting
    /// For good: an error from the daemon, a broken line, or the reconnection gave up.
    case disconnected
}
