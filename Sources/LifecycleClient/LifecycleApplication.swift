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
@MainActor
public final class LifecycleApplication {
    /// The app's state as the messages so far say (UIKit's rule: "did" callbacks change it before the
    /// delegate runs, "will" callbacks after it returns).
    public private(set) var applicationState: AppState = .inactive
    /// `LIFECYCLE_APP`, or nil when standalone.
    public let name: String?
    /// Whether the daemon is connected (false when standalone, or after the daemon hung up).
    public private(set) var isConnected = false
    public let notificationCenter = LifecycleNotificationCenter()

    /// Held strongly, as UIApplicationMain's delegate lives as long as the app.
    private let delegate: (any ApplicationDelegate)?
    private var fd: Int32?
    /// LIFECYCLE_SOCKET: where to reconnect if the daemon restarts, with the token of its hello.
    private let socketPath = ProcessEnvironment.get("LIFECYCLE_SOCKET")
    private var reconnectToken: String?
    /// Whether this connection's hello was answered: a refusal before that, on a reconnection, is retried.
    private var welcomed = false
    private var reconnectDeadline: DispatchTime?
    /// How long to keep trying to reconnect after the daemon went away.
    private static let reconnectWindow: Double = 60
    private var framer = LineFramer()
    private let coder = LineCoder()
    private var readSource: (any DispatchSourceRead)?
    /// Open background tasks and their expiration handlers.
    private var backgroundTasks: [Int: (name: String, expiration: (@MainActor () -> Void)?)] = [:]
    private var nextTaskID = 1
    /// The lifecycle callbacks are always delivered; only the other names are asked for.
    private static let lifecycleNames = Set(LifecycleCallback.allCases.map(\.rawValue))

    /// The running application, once `main(delegate:)` has been called.
    public private(set) static var shared: LifecycleApplication?

    private init(fd: Int32?, name: String?, delegate: any ApplicationDelegate) {
        self.fd = fd
        self.name = name
        self.delegate = delegate
    }

    /// Run the app: like `UIApplicationMain`, it never returns.
    /// `configure` runs before the first message is read: add notification observers there.
    public static func main(delegate: any ApplicationDelegate,
                            configure: (LifecycleApplication) -> Void = { _ in }) -> Never {
        let fd = ProcessEnvironment.get("LIFECYCLE_FD").flatMap(Int32.init)
        let application = LifecycleApplication(fd: fd, name: ProcessEnvironment.get("LIFECYCLE_APP"), delegate: delegate)
        shared = application
        configure(application)
        application.start()
        dispatchMain()
    }

    private func start(helloApp app: String? = nil, token: String? = nil) {
        guard let fd else {
            // Standalone: behave as a freshly launched, focused app.
            deliver(.didFinishLaunching, id: nil, options: LaunchOptions(launchedBy: "standalone"))
            deliver(.didBecomeActive, id: nil, options: nil)
            return
        }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        isConnected = true
        send(ClientMessage.hello(protocol: protocolVersion, observe: observedTypes.sorted(), app: app, token: token))
        notificationCenter.namesChanged = { [weak self] _ in
            guard let self else { return }
            self.send(ClientMessage.observe(self.observedTypes.sorted()))
        }
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
        while isConnected {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                framer.append(buffer[..<count])
                handleLines()
            } else if count < 0 && errno == EINTR {
                continue
            } else if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                return
            } else {
                disconnect("lifecycled closed the connection", reconnect: true)
                return
            }
        }
    }

    private func handleLines() {
        while isConnected {
            let line: [UInt8]
            do {
                guard let next = try framer.nextLine() else { return }
                line = next
            } catch {
                return disconnect("bad framing from lifecycled: \(error)")
            }
            // Messages of types this version does not know are skipped, as the protocol asks.
            guard let message = try? coder.decode(ServerMessage.self, from: line) else { continue }
            switch message {
            case .welcome(_, _, let state, let token):
                applicationState = state
                welcomed = true
                reconnectDeadline = nil
                if let token { reconnectToken = token }
            case .callback(let callback, let id, _, let options):
                deliver(callback, id: id, options: options)
            case .error(let text):
                // An error on a welcomed connection was meant; before the hello of a reconnection it is a
                // refusal (too many connections waiting, say), retried within the window.
                disconnect("lifecycled reported a protocol error: \(text)", reconnect: !welcomed && reconnectDeadline != nil)
            case .notification(let delivery):
                if delivery.name == memoryWarningName { delegate?.applicationDidReceiveMemoryWarning(self) }
                notificationCenter.post(LifecycleNotification(
                    name: LifecycleNotification.Name(delivery.name), payload: delivery.payload,
                    payloads: delivery.payloads, posts: delivery.posts, dropped: delivery.dropped))
            case .backgroundTaskBegan(_, _, let remainingMs):
                backgroundTimeRemaining = remainingMs.map { Double($0) / 1000 } ?? .infinity
            case .backgroundTimeWillExpire(let tasks, let remainingMs):
                backgroundTimeRemaining = Double(remainingMs) / 1000
                for task in tasks { backgroundTasks[task.id]?.expiration?() }
            case .postFailed(let name, let message):
                _ = "lifecycle: posting \(name) failed: \(message)\n".withCString { write(2, $0, strlen($0)) }
            case .requestFailed(let request, let message):
                _ = "lifecycle: \(request) refused: \(message)\n".withCString { write(2, $0, strlen($0)) }
            case .configurationForConnecting(let id, _, let scene, let role, let proposed, let options):
                let session = SceneSession(persistentIdentifier: scene, role: role, configuration: proposed)
                let chosen = delegate?.application(self, configurationForConnecting: session, options: options)
                send(ClientMessage.ack(id: id, configuration: chosen))
            case .didDiscardSceneSessions(let id, _, let scenes):
                delegate?.application(self, didDiscardSceneSessions: scenes)
                send(ClientMessage.ack(id: id))
            case .sceneCallback(let callback, let id, _, let scene, let connection):
                deliver(callback, id: id, scene: scene, connection: connection)
            case .performFetch(let id, _):
                let result = delegate?.applicationPerformFetch(self) ?? .noData
                send(ClientMessage.ack(id: id, result: result.rawValue))
            }
        }
    }

    private let memoryWarningName = "didReceiveMemoryWarning"

    /// Run the delegate and the observers for one callback, then acknowledge it.
    private func deliver(_ callback: LifecycleCallback, id: Int?, options: LaunchOptions?) {
        if callback.changesStateOnSend, let next = callback.resultingState { applicationState = next }
        if let delegate {
            switch callback {
            case .didFinishLaunching:
                delegate.application(self, didFinishLaunchingWithOptions: options ?? LaunchOptions(launchedBy: "unknown"))
            case .didBecomeActive: delegate.applicationDidBecomeActive(self)
            case .willResignActive: delegate.applicationWillResignActive(self)
            case .didEnterBackground: delegate.applicationDidEnterBackground(self)
            case .willEnterForeground: delegate.applicationWillEnterForeground(self)
            case .willTerminate: delegate.applicationWillTerminate(self)
            }
        }
        notificationCenter.post(LifecycleNotification(name: .lifecycle(callback),
                                                      userInfo: id.map { ["id": String($0)] } ?? [:]))
        if !callback.changesStateOnSend, let next = callback.resultingState { applicationState = next }
        if let id { send(ClientMessage.ack(id: id)) }
    }

    private var observedTypes: Set<String> { notificationCenter.observedNames.subtracting(Self.lifecycleNames) }

    // MARK: Scenes

    /// The connected scenes by session identifier (UIApplication.connectedScenes).
    public private(set) var connectedScenes: [String: Scene] = [:]
    private var sceneDelegateTypes: [String: any SceneDelegate.Type] = [:]

    /// The delegate type for scenes that connect with `configuration` (UIKit's Info.plist
    /// `UISceneDelegateClassName`). Register in `main`'s `configure`, before any scene connects.
    public func register(_ type: any SceneDelegate.Type, forConfiguration configuration: String) {
        sceneDelegateTypes[configuration] = type
    }

    /// UIKit's requestSceneSessionActivation: bring an existing session to focus (reconnecting it), or
    /// with `session` nil, open a new scene with `role` and `configuration` (nil: the daemon's defaults).
    /// A refusal (unknown session, no multiple scenes) is reported on stderr.
    public func requestSceneSessionActivation(_ session: String?, role: String? = nil, configuration: String? = nil,
                                              options: JSONValue? = nil) {
        send(ClientMessage.requestSceneActivation(scene: session, role: role, configuration: configuration, options: options))
    }

    /// UIKit's requestSceneSessionDestruction: disconnect the scene and discard its session.
    public func requestSceneSessionDestruction(_ session: String) {
        send(ClientMessage.requestSceneDestruction(scene: session))
    }

    /// Run the scene's delegate for one callback, then acknowledge it (with the state to keep, after
    /// sceneDidEnterBackground).
    private func deliver(_ callback: SceneCallback, id: Int, scene id_: String, connection: SceneConnection?) {
        var savedState: JSONValue?
        if callback == .sceneWillConnect, let connection {
            let session = SceneSession(persistentIdentifier: id_, role: connection.role, configuration: connection.configuration)
            let scene = Scene(session: session, delegate: sceneDelegateTypes[connection.configuration]?.init(),
                              restoredState: connection.savedState, connectionOptions: connection.options)
            connectedScenes[id_] = scene
            scene.delegate?.scene(scene, willConnectTo: session, options: connection.options)
        } else if let scene = connectedScenes[id_] {
            if callback.changesStateOnSend, let next = callback.resultingState, let next { scene.activationState = next }
            switch callback {
            case .sceneWillConnect: break
            case .sceneWillEnterForeground: scene.delegate?.sceneWillEnterForeground(scene)
            case .sceneDidBecomeActive: scene.delegate?.sceneDidBecomeActive(scene)
            case .sceneWillResignActive: scene.delegate?.sceneWillResignActive(scene)
            case .sceneDidEnterBackground:
                scene.delegate?.sceneDidEnterBackground(scene)
                savedState = scene.delegate?.stateRestorationActivity(for: scene)
            case .sceneDidDisconnect:
                scene.delegate?.sceneDidDisconnect(scene)
                connectedScenes[id_] = nil
            }
            if !callback.changesStateOnSend, let next = callback.resultingState, let next { scene.activationState = next }
        }
        send(ClientMessage.ack(id: id, state: savedState))
    }

    // MARK: Background tasks and posting

    /// Seconds the app may still run in the background while it holds background tasks (UIKit's
    /// backgroundTimeRemaining); `.infinity` in the foreground, where the time has not started.
    public private(set) var backgroundTimeRemaining: Double = .infinity

    /// UIKit's beginBackgroundTask(withName:expirationHandler:): keep running in the background until
    /// `endBackgroundTask` (or until the time runs out; `expirationHandler` is called shortly before).
    public func beginBackgroundTask(withName name: String = "",
                                    expirationHandler: (@MainActor () -> Void)? = nil) -> BackgroundTaskIdentifier {
        let id = nextTaskID
        nextTaskID += 1
        backgroundTasks[id] = (name, expirationHandler)
        send(ClientMessage.beginBackgroundTask(task: id, name: name))
        return BackgroundTaskIdentifier(rawValue: id)
    }

    public func endBackgroundTask(_ identifier: BackgroundTaskIdentifier) {
        guard backgroundTasks.removeValue(forKey: identifier.rawValue) != nil else { return }
        send(ClientMessage.endBackgroundTask(task: identifier.rawValue))
    }

    /// Post a notification to the apps that observe `name` (or to one app). The type must be declared
    /// in the daemon's configuration; a refusal is reported on stderr.
    public func post(_ name: LifecycleNotification.Name, payload: JSONValue? = nil, to app: String? = nil) {
        send(ClientMessage.post(name: name.rawValue, payload: payload, app: app))
    }

    private func send(_ message: ClientMessage) {
        guard let fd, isConnected else { return }
        let bytes = coder.encode(message)
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
                return disconnect("lost the connection to lifecycled", reconnect: true)
            }
        }
    }

    /// `reconnect`: the daemon went away (a restart, a crash): try the app socket with the token. Not after
    /// the daemon reported an error: then it meant to hang up.
    private func disconnect(_ reason: String, reconnect: Bool = false) {
        guard isConnected else { return }
        isConnected = false
        let welcomedBefore = welcomed
        welcomed = false
        // The read source's cancel handler closes the descriptor (closing it under a live source is unsafe).
        readSource?.cancel()
        readSource = nil
        fd = nil
        framer = LineFramer()
        guard reconnect, let socketPath, reconnectToken != nil else {
            _ = "lifecycle: \(reason); running on without lifecycle messages\n".withCString { write(2, $0, strlen($0)) }
            return
        }
        _ = "lifecycle: \(reason); reconnecting through \(socketPath)\n".withCString { write(2, $0, strlen($0)) }
        let deadline = reconnectDeadline ?? DispatchTime.now() + Self.reconnectWindow
        reconnectDeadline = deadline
        DispatchQueue.main.asyncAfter(deadline: .now() + .milliseconds(welcomedBefore ? 0 : 200)) { [weak self] in
            MainActor.assumeIsolated { self?.tryReconnect(path: socketPath, until: deadline) }
        }
    }

    /// Every 200 ms until the restarted daemon listens again (or the window closes): connect, then a hello
    /// naming the app with the token; the daemon answers with a fresh hello and goes on.
    private func tryReconnect(path: String, until deadline: DispatchTime) {
        let socket = cs_unix_connect(path)
        if socket >= 0 {
            fd = socket
            start(helloApp: name, token: reconnectToken)
            return
        }
        guard DispatchTime.now() < deadline else {
            reconnectDeadline = nil
            _ = "lifecycle: could not reconnect to lifecycled; running on without lifecycle messages\n".withCString { write(2, $0, strlen($0)) }
            return
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
