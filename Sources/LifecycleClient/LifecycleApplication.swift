import CSupport
import Dispatch
import Glibc
import LifecycleModel
import LifecycleProtocol

/// The client side of the lifecycled protocol, in the shape of `UIApplication`.
///
/// `main(delegate:)` connects through the socket the daemon handed over (`LIFECYCLE_FD`), says hello,
/// and from then on turns each lifecycle message into a delegate call and a notification on the main
/// actor, acknowledging it once both have returned. Started without `LIFECYCLE_FD` (by hand, in a
/// debugger), the app runs standalone: it is told it launched and became active, and nothing more.
/// What each message does is its `ClientSession`'s; this class owns the socket, the main queue and the clock.
@MainActor
public final class LifecycleApplication {
    /// The app's state as the messages so far say (UIKit's rule: "did" callbacks change it before the
    /// delegate runs, "will" callbacks after it returns, or when its deferred acknowledgement is sent).
    public var applicationState: AppState { session.applicationState }
    /// `LIFECYCLE_APP`, or nil when standalone.
    public let name: String?
    /// Whether the daemon is connected (false when standalone, while reconnecting, or after the daemon hung up).
    public var isConnected: Bool { session.isConnected }
    public let notificationCenter = LifecycleNotificationCenter()

    private(set) var session: ClientSession!
    private var fd: Int32?
    /// LIFECYCLE_SOCKET: where to reconnect if the daemon restarts, with the token of its hello.
    private let socketPath: String?
    private var reconnectDeadline: DispatchTime?
    /// How long to keep trying to reconnect after the daemon went away.
    private static let reconnectWindow: Double = 60
    private var readSource: (any DispatchSourceRead)?
    private var observeScheduled = false

    /// The running application, once `main(delegate:)` has been called.
    public private(set) static var shared: LifecycleApplication?

    /// `token`: LIFECYCLE_TOKEN, which lets a client whose inherited connection died before its first hello
    /// connect again.
    init(fd: Int32?, name: String?, socketPath: String?, token: String?, delegate: (any ApplicationDelegate)?) {
        self.fd = fd
        self.name = name
        self.socketPath = socketPath
        session = ClientSession(application: self, delegate: delegate, notificationCenter: notificationCenter,
                                token: token, canReconnect: socketPath != nil)
        session.driver = self
    }

    /// Run the app: like `UIApplicationMain`, it never returns.
    /// `configure` runs before the first message is read: add notification observers there.
    public static func main(delegate: any ApplicationDelegate,
                            configure: (LifecycleApplication) -> Void = { _ in }) -> Never {
        // The token is a secret: out of the environment before any program the app starts can inherit it.
        let token = ProcessEnvironment.get("LIFECYCLE_TOKEN")
        unsetenv("LIFECYCLE_TOKEN")
        let application = LifecycleApplication(fd: ProcessEnvironment.get("LIFECYCLE_FD").flatMap(Int32.init),
                                               name: ProcessEnvironment.get("LIFECYCLE_APP"),
                                               socketPath: ProcessEnvironment.get("LIFECYCLE_SOCKET"), token: token,
                                               delegate: delegate)
        shared = application
        configure(application)
        application.start()
        dispatchMain()
    }

    private func start() {
        guard let fd else { return session.runStandalone() }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        watch(fd)
        session.opened()
    }

    private func watch(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: .main)
        source.setEventHandler { [weak self] in
            MainActor.assumeIsolated { self?.readAvailable() }
        }
        source.setCancelHandler { close(fd) }
        source.resume()
        readSource = source
    }

    private func readAvailable() {
        guard let fd else { return }
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while session.isConnected && self.fd == fd {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                session.received(buffer[..<count])
            } else if count < 0 && errno == EINTR {
                continue
            } else if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                return
            } else {
                return session.connectionLost("lifecycled closed the connection")
            }
        }
    }

    // MARK: Scenes

    /// The connected scenes by session identifier (UIApplication.connectedScenes).
    public var connectedScenes: [String: Scene] { session.connectedScenes }

    /// The delegate type for scenes that connect with `configuration` (UIKit's Info.plist
    /// `UISceneDelegateClassName`). Register in `main`'s `configure`, before any scene connects.
    public func register(_ type: any SceneDelegate.Type, forConfiguration configuration: String) {
        session.register(type, forConfiguration: configuration)
    }

    /// The delegate type for scenes whose configuration has no type of its own.
    public func register(_ type: any SceneDelegate.Type) {
        session.register(type, forConfiguration: nil)
    }

    /// UIKit's requestSceneSessionActivation: bring an existing session to focus (reconnecting it), or
    /// with `session` nil, open a new scene with `role` and `configuration` (nil: the daemon's defaults).
    /// A refusal (unknown session, no multiple scenes) reaches `application(_:requestFailed:message:)`.
    public func requestSceneSessionActivation(_ session: String?, role: String? = nil, configuration: String? = nil,
                                              options: JSONValue? = nil) {
        self.session.send(.requestSceneActivation(scene: session, role: role, configuration: configuration, options: options))
    }

    /// UIKit's requestSceneSessionDestruction: disconnect the scene and discard its session.
    public func requestSceneSessionDestruction(_ session: String) {
        self.session.send(.requestSceneDestruction(scene: session))
    }

    // MARK: Background tasks, posting, deferred acknowledgements

    /// Seconds the app may still run in the background while it holds background tasks (UIKit's
    /// backgroundTimeRemaining); `.infinity` in the foreground, where the time has not started.
    public var backgroundTimeRemaining: Double { session.backgroundTimeRemaining }

    /// UIKit's beginBackgroundTask(withName:expirationHandler:): keep running in the background until
    /// `endBackgroundTask` (or until the time runs out; `expirationHandler` is called shortly before).
    public func beginBackgroundTask(withName name: String = "",
                                    expirationHandler: (@MainActor () -> Void)? = nil) -> BackgroundTaskIdentifier {
        BackgroundTaskIdentifier(rawValue: session.beginBackgroundTask(name: name, expiration: expirationHandler))
    }

    public func endBackgroundTask(_ identifier: BackgroundTaskIdentifier) {
        session.endBackgroundTask(identifier.rawValue)
    }

    /// Post a notification to the apps that observe `name` (or to one app). The type must be declared
    /// in the daemon's configuration; a refusal reaches `application(_:requestFailed:message:)`.
    public func post(_ name: LifecycleNotification.Name, payload: JSONValue? = nil, to app: String? = nil) {
        session.send(.post(name: name.rawValue, payload: payload, app: app))
    }

    /// Called from a delegate method (or an observer of a lifecycle notification): its message is acknowledged
    /// when the returned handle's `acknowledge()` is called instead of when the method returns, for work that
    /// finishes later. Until then a "will" callback leaves `applicationState` where it was, and the daemon waits,
    /// up to the message's deadline. Outside a callback the handle acknowledges nothing.
    public func deferAcknowledgement() -> DeferredAcknowledgement {
        DeferredAcknowledgement(session: session, acknowledgement: session.deferCurrent())
    }
}

/// A message's acknowledgement taken by `LifecycleApplication.deferAcknowledgement()`.
@MainActor
public final class DeferredAcknowledgement {
    private weak var session: ClientSession?
    private let acknowledgement: Acknowledgement?

    init(session: ClientSession, acknowledgement: Acknowledgement?) {
        self.session = session
        self.acknowledgement = acknowledgement
    }

    /// Sends the ack, once. Not sent when the connection it belongs to has ended since (its message died with it).
    public func acknowledge() {
        guard let acknowledgement else { return }
        session?.acknowledge(acknowledgement)
    }
}

extension LifecycleApplication: ClientSessionDriver {
    func write(_ bytes: [UInt8]) {
        guard let fd else { return }
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count > 0 {
                sent += count
            } else if count < 0 && errno == EINTR {
                continue
            } else if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                // The daemon reads promptly and messages are tiny; wait for room rather than drop an ack.
                var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&descriptor, 1, 1000)
            } else {
                return session.connectionLost("lost the connection to lifecycled")
            }
        }
    }

    /// Observers added in one turn of the main queue (a `configure` block, a handler) make one `observe` message.
    func observedNamesChanged() {
        guard !observeScheduled else { return }
        observeScheduled = true
        DispatchQueue.main.async { [weak self] in
            MainActor.assumeIsolated {
                guard let self else { return }
                self.observeScheduled = false
                self.session.sendObservedNames()
            }
        }
    }

    func hangUp(reason: String, retry: Bool, welcomed: Bool) {
        // The read source's cancel handler closes the descriptor (closing it under a live source is unsafe).
        readSource?.cancel()
        readSource = nil
        fd = nil
        // A welcomed connection that ends starts a new window, and is tried again at once.
        if welcomed { reconnectDeadline = nil }
        guard retry, let socketPath else {
            reconnectDeadline = nil
            _ = "lifecycle: \(reason); running on without lifecycle messages\n".withCString { Glibc.write(2, $0, strlen($0)) }
            return
        }
        _ = "lifecycle: \(reason); reconnecting through \(socketPath)\n".withCString { Glibc.write(2, $0, strlen($0)) }
        let deadline = reconnectDeadline ?? DispatchTime.now() + Self.reconnectWindow
        reconnectDeadline = deadline
        DispatchQueue.main.asyncAfter(deadline: .now() + .milliseconds(welcomed ? 0 : 200)) { [weak self] in
            MainActor.assumeIsolated { self?.tryReconnect(path: socketPath, until: deadline) }
        }
    }

    /// Every 200 ms until the restarted daemon listens again (or the window closes): connect, then a hello
    /// naming the app with the token; the daemon answers with a fresh hello and goes on.
    private func tryReconnect(path: String, until deadline: DispatchTime) {
        let socket = cs_unix_connect(path)
        if socket >= 0 {
            fd = socket
            watch(socket)
            return session.opened()
        }
        guard DispatchTime.now() < deadline else {
            reconnectDeadline = nil
            _ = "lifecycle: could not reconnect to lifecycled; running on without lifecycle messages\n".withCString { Glibc.write(2, $0, strlen($0)) }
            return session.reconnectionGaveUp()
        }
        DispatchQueue.main.asyncAfter(deadline: .now() + .milliseconds(200)) { [weak self] in
            MainActor.assumeIsolated { self?.tryReconnect(path: path, until: deadline) }
        }
    }
}

/// UIKit's UIBackgroundTaskIdentifier.
public struct BackgroundTaskIdentifier: RawRepresentable, Hashable, Sendable {
    public var rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
}
