import Glibc
import LifecycleModel
import LifecycleProtocol

/// The app protocol on each app's connection (docs/PROTOCOL.md): hello, acks, observe, post, background tasks,
/// scene requests, and the violations that end a session; a client's reconnection with its token after a restart
/// of the daemon, and the connections the service manager kept through one.
final class ClientSessions {
    private let loop: EventLoop
    private unowned let host: any DaemonHost
    private let fdStore: FDStore
    private let coder: LineCoder

    init(loop: EventLoop, host: any DaemonHost, fdStore: FDStore, coder: LineCoder) {
        self.loop = loop
        self.host = host
        self.fdStore = fdStore
        self.coder = coder
    }

    /// The connection of `name` on `fd`, its events fed to `event(_:_:_:)`.
    func open(_ name: String, fd: FileDescriptor) throws(SystemError) -> Connection {
        var connection: Connection?
        connection = try Connection(fd: fd, loop: loop) { [unowned self] event in
            guard let connection else { return }
            self.event(name, connection, event)
        }
        return connection!
    }

    /// A lifecycle message for the app's client, if it has a connection.
    func send(_ name: String, _ delivery: Delivery) {
        guard let connection = host.runtime(name)?.connection else { return }
        connection.send(coder.encode(ServerMessage(delivery)))
        Log.debug("\(name): sent \(delivery.name) (id \(delivery.id))")
    }

    /// Any other message for the app's client, if it has a connection.
    func send(_ name: String, _ message: ServerMessage) {
        host.runtime(name)?.connection?.send(coder.encode(message))
    }

    func event(_ name: String, _ connection: Connection, _ event: Connection.Event) {
        guard let app = host.runtime(name), app.connection === connection else { return }
        switch event {
        case .line(let line):
            let message: ClientMessage
            do {
                message = try coder.decode(ClientMessage.self, from: line)
            } catch {
                return violation(app, error.message)
            }
            received(message, from: app, on: connection)
        case .framingError(let message):
            violation(app, message)
        case .closed:
            app.connection = nil
            fdStore.releaseConnection(app)
            if host.record(name)?.isTerminating == true {
                Log.debug("\(name): the client closed its connection while terminating")
            } else {
                Log.notice("\(name): the client closed its connection; managing it without messages")
            }
            host.handle(.event(.disconnected(app: name)))
        }
    }

    private func received(_ message: ClientMessage, from app: AppRuntime, on connection: Connection) {
        let name = app.name
        switch message {
        case .hello(let version, let observe, _, _):
            // One hello per connection is a rule of the connection, not of the app: `helloed` starts over with
            // each connection the app gets (a launch, a reconnection), so it stays here, not in the model.
            guard !app.helloed else { return violation(app, "second hello") }
            guard version == protocolVersion else {
                return violation(app, "protocol \(version) is not spoken here (this daemon speaks \(protocolVersion))")
            }
            app.helloed = true
            let state = host.record(name)?.state ?? .notRunning
            connection.send(coder.encode(ServerMessage.welcome(protocol: protocolVersion, app: name, state: state, token: app.token)))
            if let observe { host.handle(.event(.observe(app: name, names: Set(observe)))) }
            host.handle(.event(.hello(app: name)))
        case _ where !app.helloed:
            violation(app, "message before hello")
        case .ack(let id, let configuration, let state, let result):
            host.handle(.event(.ack(app: name, id: id, reply: AckReply(configuration: configuration, savedState: state,
                                                                           fetchResult: result.flatMap(FetchResult.init(rawValue:))))))
        case .requestSceneActivation(let scene, let role, let configuration, let options):
            let request: Request = scene.map(Request.focusScene)
                ?? .openScene(role: role, configuration: configuration, options: options ?? .object([:]))
            sceneRequest(request, from: app, type: "requestSceneActivation")
        case .requestSceneDestruction(let scene):
            sceneRequest(.discardScene(scene), from: app, type: "requestSceneDestruction")
        case .observe(let names):
            host.handle(.event(.observe(app: name, names: Set(names))))
        case .post(let type, let payload, let target):
            let outcome = host.handle(.post(type: type, payload: payload ?? .object([:]), to: target, from: .client(name)))
            if let refusal = outcome.refusal {
                connection.send(coder.encode(ServerMessage.postFailed(name: type, message: refusal.description)))
            } else {
                Log.debug("\(name) posted \(type): \(outcome.delivered) delivered, \(outcome.queued) queued")
            }
        case .beginBackgroundTask(let task, let taskName):
            guard !host.hasOpenTask(app: name, id: task) else {
                return violation(app, "background task \(task) is already open")
            }
            host.handle(.event(.beginBackgroundTask(app: name, task: BackgroundTask(id: task, name: taskName))))
        case .endBackgroundTask(let task):
            host.handle(.event(.endBackgroundTask(app: name, id: task)))
        }
    }

    /// A client asks for one of its own scenes (UIKit's requestSceneSessionActivation/Destruction).
    /// A refusal goes back as `requestFailed`; the connection stays.
    private func sceneRequest(_ request: Request, from app: AppRuntime, type: String) {
        if let refusal = host.handle(.request(request, app: app.name, origin: app.name)).refusal {
            Log.notice("\(app.name): refused its \(type): \(refusal)")
            app.connection?.send(coder.encode(ServerMessage.requestFailed(request: type, message: refusal.description)))
        } else {
            Log.info("\(app.name): asked to \(request) itself")
        }
    }

    /// A client broke the protocol: tell it what was wrong, hang up, and manage the app without messages.
    private func violation(_ app: AppRuntime, _ message: String) {
        Log.event(.protocolError, .warning,
                  "\(app.name): protocol error: \(message); disconnecting it (the app is managed without messages from now on)",
                  [("LIFECYCLE_APP", app.name), ("LIFECYCLE_REASON", message)])
        app.connection?.send(coder.encode(ServerMessage.error(message)))
        app.connection?.closeQuietly()
        app.connection = nil
        fdStore.releaseConnection(app)
        host.handle(.event(.disconnected(app: app.name)))
    }

    // MARK: Reconnection

    /// A client reconnects on the app socket: the right token, from one of the app's own processes, for a
    /// running app that has no connection. Returns why not, or nil once `connection` is the app's.
    func reattach(_ name: String, token: String, peer pid: pid_t, connection: Connection) -> String? {
        guard let app = host.runtime(name), let leader = app.pid else { return "no such app is running" }
        guard let expected = app.token, constantTimeEqual(token, expected) else { return "wrong token" }
        guard getpgid(pid) == leader || app.place.contains(pid, in: app) else {
            return "pid \(pid) is not one of its processes"
        }
        guard app.connection == nil else { return "it is connected already" }
        guard host.record(name)?.isTerminating != true else { return "it is terminating" }
        app.connection = connection
        app.helloed = false
        fdStore.releaseConnection(app)
        fdStore.storeConnection(app, fd: connection.fd.rawValue)
        Log.notice("\(name): its client reconnected (pid \(pid))")
        return nil
    }

    /// The connections the service manager passed back: each re-adopted app takes its own at once, and its
    /// client never notices that the daemon changed (what it sent meanwhile waits in the socket). The others
    /// are closed and dropped from the store.
    func attachStored(_ stored: [String: FileDescriptor]) {
        for (fdName, fd) in stored.sorted(by: { $0.key < $1.key }) {
            let name = String(fdName.dropFirst(FDStore.connectionPrefix.count))
            guard let app = host.runtime(name), app.pid != nil, app.connection == nil,
                  host.record(name)?.state.isRunning == true else {
                Log.info("\(name): dropping its stored connection (fd \(fd.rawValue)): the app was not re-adopted")
                fdStore.dropConnection(fdName: fdName)
                continue
            }
            _ = fcntl(fd.rawValue, F_SETFD, FD_CLOEXEC)
            do {
                app.connection = try open(name, fd: fd)
                app.helloed = true
                app.fdStored = true
                Log.notice("\(name): took back its client connection from the service manager's store")
                host.handle(.event(.hello(app: name)))
            } catch {
                Log.warning("\(name): Failed to watch its stored connection: \(error)")
                fdStore.dropConnection(fdName: fdName)
            }
        }
    }
}

/// Compares without stopping at the first difference, so that timing does not reveal a token's prefix.
func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let (x, y) = (Array(a.utf8), Array(b.utf8))
    guard x.count == y.count else { return false }
    var difference: UInt8 = 0
    for index in x.indices { difference |= x[index] ^ y[index] }
    return difference == 0
}
