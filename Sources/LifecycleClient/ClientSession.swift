import LifecycleModel
import LifecycleProtocol

/// What a `ClientSession` asks of the connection it runs on. `LifecycleApplication` is the one that owns a
/// socket; the conformance vectors' runner plays one to drive the session without a process of its own.
@MainActor
protocol ClientSessionDriver: AnyObject {
    /// Writes one encoded line (its newline included) to the connection.
    func write(_ line: [UInt8])
    /// The connection is over: close it, and with `retry` connect to LIFECYCLE_SOCKET again, then call
    /// `ClientSession.opened()` (or `reconnectionGaveUp()` once the window is over). `welcomed`: the daemon had
    /// answered this connection's hello, so a new reconnection window starts.
    func hangUp(reason: String, retry: Bool, welcomed: Bool)
    /// The observed names changed: call `ClientSession.sendObservedNames()` once the app's current turn is done.
    func observedNamesChanged()
}

/// The library's side of the protocol, without I/O: it turns each line the daemon sends into delegate, scene
/// delegate and notification calls with the app's state changes, and the app's answers into the lines it sends
/// back (acks, deferred acks, the hello and a reconnection's hello with its token, requests). It decides when the
/// connection ends and whether to reconnect; its driver reads, writes, closes and keeps time.
@MainActor
final class ClientSession {
    unowned let application: LifecycleApplication
    weak var driver: (any ClientSessionDriver)?
    /// Held strongly, as UIApplicationMain's delegate lives as long as the app.
    let delegate: (any ApplicationDelegate)?
    let notificationCenter: LifecycleNotificationCenter
    /// Whether LIFECYCLE_SOCKET was given: without it, a connection that ends is not replaced.
    let canReconnect: Bool

    var applicationState: AppState = .inactive
    var backgroundTimeRemaining: Double = .infinity
    private(set) var isConnected = false
    /// The key of the daemon's hello (or of LIFECYCLE_TOKEN) that a reconnecting hello carries.
    private(set) var token: String?
    /// Whether this connection's hello was answered: a refusal or a reset before that, on a reconnection, is retried.
    private var welcomed = false
    private var reconnecting = false
    /// Counts connections: an ack owed on an earlier one is not sent on the next (its message died with it).
    private var generation = 0
    private var framer = LineFramer()
    private let coder = LineCoder()
    /// The message whose callback is running, for `deferAcknowledgement()`.
    private var current: Acknowledgement?

    /// Open background tasks and their expiration handlers.
    private var backgroundTasks: [Int: (name: String, expiration: (@MainActor () -> Void)?)] = [:]
    private var nextTaskID = 1
    private(set) var connectedScenes: [String: Scene] = [:]
    private var sceneDelegateTypes: [String: any SceneDelegate.Type] = [:]
    private var defaultSceneDelegateType: (any SceneDelegate.Type)?

    /// The lifecycle callbacks are always delivered; only the other names are asked for.
    private static let lifecycleNames = Set(LifecycleCallback.allCases.map(\.rawValue))
    private static let memoryWarningName = "didReceiveMemoryWarning"

    init(application: LifecycleApplication, delegate: (any ApplicationDelegate)?,
         notificationCenter: LifecycleNotificationCenter, token: String?, canReconnect: Bool) {
        self.application = application
        self.delegate = delegate
        self.notificationCenter = notificationCenter
        self.token = token
        self.canReconnect = canReconnect
        notificationCenter.namesChanged = { [weak self] _ in
            guard let self, self.isConnected else { return }
            self.driver?.observedNamesChanged()
        }
    }

    // MARK: The connection's turns

    /// Not started by lifecycled: a freshly launched, focused app, and nothing more.
    func runStandalone() {
        deliver(.didFinishLaunching, id: nil, options: LaunchOptions(launchedBy: "standalone"))
        deliver(.didBecomeActive, id: nil, options: nil)
    }

    /// A connection is up (the inherited one, or a reconnection): say hello. A reconnection's hello names the app
    /// and carries the token, so that the daemon gives it the app's connection back.
    func opened() {
        generation += 1
        isConnected = true
        welcomed = false
        framer = LineFramer()
        let names = observedTypes
        let reconnection = generation > 1
        send(.hello(protocol: protocolVersion, observe: names.isEmpty ? nil : names,
                    app: reconnection && token != nil ? (application.name ?? "") : nil, token: reconnection ? token : nil))
    }

    /// The bytes the connection read.
    func received(_ bytes: ArraySlice<UInt8>) {
        guard isConnected else { return }
        framer.append(bytes)
        while isConnected {
            let line: [UInt8]
            do {
                guard let next = try framer.nextLine() else { return }
                line = next
            } catch {
                // The framing is broken: nothing later on this stream can be trusted.
                return end("lifecycled sent a \(error)", afterError: true)
            }
            // Lines of types this version does not know, or that it cannot use, are skipped, as the protocol asks.
            guard let message = try? coder.decode(ServerMessage.self, from: line) else { continue }
            handle(message)
        }
    }

    /// End of file, a reset, a failed write.
    func connectionLost(_ reason: String) {
        end(reason, afterError: false)
    }

    /// The reconnection window closed without a welcome.
    func reconnectionGaveUp() {
        guard reconnecting else { return }
        reconnecting = false
        changed(.disconnected)
    }

    /// `afterError`: the daemon meant to hang up (an error, a broken line), unless it refused a reconnection's hello.
    private func end(_ reason: String, afterError: Bool) {
        guard isConnected else { return }
        isConnected = false
        let wasWelcomed = welcomed
        welcomed = false
        framer = LineFramer()
        let retry = canReconnect && token != nil && (!afterError || (reconnecting && !wasWelcomed))
        driver?.hangUp(reason: reason, retry: retry, welcomed: wasWelcomed)
        if retry {
            if !reconnecting {
                reconnecting = true
                changed(.reconnecting)
            }
        } else {
            reconnecting = false
            changed(.disconnected)
        }
    }

    private func changed(_ event: ConnectionEvent) {
        delegate?.application(application, connectionDidChange: event)
    }

    // MARK: Messages

    private func handle(_ message: ServerMessage) {
        switch message {
        case .welcome(_, _, let state, let newToken):
            applicationState = state
            welcomed = true
            reconnecting = false
            if let newToken { token = newToken }
            changed(.connected)
        case .callback(let callback, let id, _, let options):
            deliver(callback, id: id, options: options)
        case .error(let text):
            end("lifecycled reported a protocol error: \(text)", afterError: true)
        case .notification(let delivery):
            // UIKit calls applicationDidReceiveMemoryWarning, then posts the notification: both, in that order.
            if delivery.name == Self.memoryWarningName { delegate?.applicationDidReceiveMemoryWarning(application) }
            notificationCenter.post(LifecycleNotification(
                name: LifecycleNotification.Name(delivery.name), payload: delivery.payload,
                payloads: delivery.payloads, posts: delivery.posts, dropped: delivery.dropped))
        case .backgroundTaskBegan(_, _, let remainingMs):
            backgroundTimeRemaining = remainingMs.map { Double($0) / 1000 } ?? .infinity
        case .backgroundTimeWillExpire(let tasks, let remainingMs):
            backgroundTimeRemaining = Double(remainingMs) / 1000
            for task in tasks { backgroundTasks[task.id]?.expiration?() }
        case .postFailed(_, let message):
            delegate?.application(application, requestFailed: "post", message: message)
        case .requestFailed(let request, let message):
            delegate?.application(application, requestFailed: request, message: message)
        case .configurationForConnecting(let id, _, let scene, let role, let proposed, let options):
            let session = SceneSession(persistentIdentifier: scene, role: role, configuration: proposed)
            let ack = Acknowledgement(id: id, generation: generation)
            ack.configuration = delegate?.application(application, configurationForConnecting: session, options: options)
            acknowledge(ack)
        case .didDiscardSceneSessions(let id, _, let scenes):
            run(Acknowledgement(id: id, generation: generation)) {
                delegate?.application(application, didDiscardSceneSessions: scenes)
            }
        case .sceneCallback(let callback, let id, _, let scene, let connection):
            deliver(callback, id: id, scene: scene, connection: connection)
        case .performFetch(let id, _):
            let ack = Acknowledgement(id: id, generation: generation)
            ack.result = (delegate?.applicationPerformFetch(application) ?? .noData).rawValue
            acknowledge(ack)
        }
    }

    /// Runs the delegate and the observers for one callback, then acknowledges it (UIKit's naming rule: a "did"
    /// callback moves the state before the delegate runs, a "will" one at its ack).
    private func deliver(_ callback: LifecycleCallback, id: Int?, options: LaunchOptions?) {
        if callback.changesStateOnSend, let next = callback.resultingState { applicationState = next }
        let ack = Acknowledgement(id: id, generation: generation)
        if !callback.changesStateOnSend, let next = callback.resultingState {
            ack.after = { [unowned self] in self.applicationState = next }
        }
        run(ack) {
            if let delegate {
                switch callback {
                case .didFinishLaunching:
                    delegate.application(application, didFinishLaunchingWithOptions: options ?? LaunchOptions(launchedBy: "unknown"))
                case .didBecomeActive: delegate.applicationDidBecomeActive(application)
                case .willResignActive: delegate.applicationWillResignActive(application)
                case .didEnterBackground: delegate.applicationDidEnterBackground(application)
                case .willEnterForeground: delegate.applicationWillEnterForeground(application)
                case .willTerminate: delegate.applicationWillTerminate(application)
                }
            }
            notificationCenter.post(LifecycleNotification(name: .lifecycle(callback),
                                                          userInfo: id.map { ["id": String($0)] } ?? [:]))
        }
    }

    /// Runs the scene's delegate for one callback, then acknowledges it (with the state to keep, after
    /// sceneDidEnterBackground). A callback for a scene that is not connected reaches no delegate.
    private func deliver(_ callback: SceneCallback, id: Int, scene identifier: String, connection: SceneConnection?) {
        let ack = Acknowledgement(id: id, generation: generation)
        if callback == .sceneWillConnect, let connection {
            let session = SceneSession(persistentIdentifier: identifier, role: connection.role, configuration: connection.configuration)
            let type = sceneDelegateTypes[connection.configuration] ?? defaultSceneDelegateType
            let scene = Scene(session: session, delegate: type?.init(), restoredState: connection.savedState,
                              connectionOptions: connection.options)
            connectedScenes[identifier] = scene
            return run(ack) { scene.delegate?.scene(scene, willConnectTo: session, options: connection.options) }
        }
        guard let scene = connectedScenes[identifier] else { return acknowledge(ack) }
        if callback.changesStateOnSend, let next = callback.resultingState, let next { scene.activationState = next }
        if !callback.changesStateOnSend, let next = callback.resultingState, let next {
            ack.after = { scene.activationState = next }
        }
        run(ack) {
            switch callback {
            case .sceneWillConnect: break
            case .sceneWillEnterForeground: scene.delegate?.sceneWillEnterForeground(scene)
            case .sceneDidBecomeActive: scene.delegate?.sceneDidBecomeActive(scene)
            case .sceneWillResignActive: scene.delegate?.sceneWillResignActive(scene)
            case .sceneDidEnterBackground:
                scene.delegate?.sceneDidEnterBackground(scene)
                ack.state = scene.delegate?.stateRestorationActivity(for: scene)
            case .sceneDidDisconnect:
                scene.delegate?.sceneDidDisconnect(scene)
                connectedScenes[identifier] = nil
            }
        }
    }

    // MARK: Acknowledgements

    /// Runs one callback's handlers with `ack` as the message a deferral takes, then acknowledges it unless deferred.
    private func run(_ ack: Acknowledgement, _ body: () -> Void) {
        let outer = current
        current = ack
        body()
        current = outer
        if !ack.deferred { acknowledge(ack) }
    }

    /// The message whose callback is running, taken to be acknowledged later; nil outside a callback.
    func deferCurrent() -> Acknowledgement? {
        current?.deferred = true
        return current
    }

    /// Sends the ack (once) after the state change a "will" callback makes at its ack. An ack owed on an earlier
    /// connection is not sent: its message died with that connection.
    func acknowledge(_ ack: Acknowledgement) {
        guard !ack.done else { return }
        ack.done = true
        ack.after?()
        guard let id = ack.id, ack.generation == generation else { return }
        send(.ack(id: id, configuration: ack.configuration, state: ack.state, result: ack.result))
    }

    // MARK: The app's requests

    func register(_ type: any SceneDelegate.Type, forConfiguration configuration: String?) {
        if let configuration { sceneDelegateTypes[configuration] = type } else { defaultSceneDelegateType = type }
    }

    func beginBackgroundTask(name: String, expiration: (@MainActor () -> Void)?) -> Int {
        let id = nextTaskID
        nextTaskID += 1
        backgroundTasks[id] = (name, expiration)
        send(.beginBackgroundTask(task: id, name: name))
        return id
    }

    func endBackgroundTask(_ id: Int) {
        guard backgroundTasks.removeValue(forKey: id) != nil else { return }
        send(.endBackgroundTask(task: id))
    }

    /// What the driver calls once the app's turn that changed its observers is over: one `observe` for all of them.
    func sendObservedNames() {
        send(.observe(observedTypes))
    }

    private var observedTypes: [String] { notificationCenter.observedNames.subtracting(Self.lifecycleNames).sorted() }

    /// Nothing is sent without a connection (standalone, or while reconnecting): requests are not queued.
    func send(_ message: ClientMessage) {
        guard isConnected else { return }
        driver?.write(coder.encode(message))
    }
}

/// One message's acknowledgement, with what its answer carries.
@MainActor
final class Acknowledgement {
    /// nil for the callbacks of standalone mode, which nobody acknowledges.
    let id: Int?
    let generation: Int
    var configuration: String?
    var state: JSONValue?
    var result: String?
    /// The state change of a "will" callback, made at the ack.
    var after: (() -> Void)?
    var deferred = false
    var done = false

    init(id: Int?, generation: Int) {
        self.id = id
        self.generation = generation
    }
}
