import CSupport
import Glibc
import LifecycleModel
import LifecycleProtocol

/// One lifectl connection: requests in, one reply per request.
final class ControlClient {
    let uid: uid_t
    let pid: pid_t
    var connection: Connection?
    private let coder: LineCoder

    init(uid: uid_t, pid: pid_t, coder: LineCoder) {
        self.uid = uid
        self.pid = pid
        self.coder = coder
    }

    func reply(_ reply: ControlReply) {
        connection?.send(coder.encode(reply))
    }
}

/// The control socket, RUNTIME_DIR/control.sock. Anyone who can reach it may query (list, status);
/// only root and the daemon's own user may change app states.
final class ControlServer {
    private unowned let daemon: Daemon
    private let path: String
    private let fd: Int32
    private var source: EventSource?
    private var clients: [ObjectIdentifier: ControlClient] = [:]
    /// We made the socket file (not socket activation): we remove it at exit.
    private let ownsPath: Bool

    /// Listens on `path`, or on `passedFD` when a `.socket` unit passed the socket in (socket activation).
    init(daemon: Daemon, path: String, passedFD: Int32? = nil) throws(SystemError) {
        self.daemon = daemon
        self.path = path
        if let passedFD {
            self.fd = passedFD
            _ = cs_set_nonblocking(passedFD)
            ownsPath = false
        } else {
            let fd = cs_unix_listen(path, 128)
            guard fd >= 0 else { throw SystemError(operation: "listen on \(path)", errno: -fd) }
            self.fd = fd
            ownsPath = true
            // Queries are open to everyone; changes are checked per request with SO_PEERCRED.
            chmod(path, 0o666)
        }
        source = try daemon.loop.watch(fd: fd, events: IOEvents.readable) { [unowned self] _ in
            self.acceptAll()
        }
        Log.info(passedFD == nil ? "Listening on \(path)" : "Listening on the control socket passed by the service manager (fd \(fd))")
    }

    func close() {
        source?.cancel()
        source = nil
        Glibc.close(fd)
        if ownsPath { unlink(path) }
        for client in clients.values { client.connection?.closeQuietly() }
        clients = [:]
    }

    private func acceptAll() {
        while true {
            let clientFD = cs_accept_cloexec_nonblock(fd)
            guard clientFD >= 0 else { return }
            var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
            guard cs_peer_credentials(clientFD, &pid, &uid, &gid) == 0 else {
                Glibc.close(clientFD)
                continue
            }
            let client = ControlClient(uid: uid, pid: pid, coder: daemon.coder)
            let key = ObjectIdentifier(client)
            do {
                client.connection = try Connection(fd: clientFD, loop: daemon.loop) { [unowned self] event in
                    switch event {
                    case .line(let line): self.handle(line, from: client)
                    case .framingError(let message):
                        client.reply(.failure("malformed request: \(message)"))
                        client.connection?.closeQuietly()
                        self.clients[key] = nil
                    case .closed:
                        self.clients[key] = nil
                    }
                }
                clients[key] = client
            } catch {
                Log.warning("Failed to watch a control connection: \(error)")
                Glibc.close(clientFD)
            }
        }
    }

    private func handle(_ line: [UInt8], from client: ControlClient) {
        let request: ControlRequest
        do {
            request = try daemon.coder.decode(ControlRequest.self, from: line)
        } catch {
            return client.reply(.failure("malformed request: \(ProtocolError(decoding: error, line: line).message)"))
        }
        switch request.verb {
        case "list":
            client.reply(ControlReply(ok: true, apps: daemon.allStatuses()))
        case "scenes":
            // The scene sessions ride on the apps' statuses; `lifectl scenes` prints them.
            if let name = request.app {
                guard let status = daemon.status(of: name) else { return client.reply(.failure("no such app '\(name)'")) }
                client.reply(ControlReply(ok: true, apps: [status]))
            } else {
                client.reply(ControlReply(ok: true, apps: daemon.allStatuses().filter { $0.scenes != nil }))
            }
        case "status":
            if let name = request.app {
                guard let status = daemon.status(of: name) else { return client.reply(.failure("no such app '\(name)'")) }
                client.reply(ControlReply(ok: true, apps: [status], daemon: daemon.daemonStatus()))
            } else {
                client.reply(ControlReply(ok: true, apps: daemon.allStatuses(), daemon: daemon.daemonStatus()))
            }
        default:
            let verbs = ControlRequest.queryVerbs + ControlRequest.lifecycleVerbs + ControlRequest.otherVerbs
            guard verbs.contains(request.verb) else {
                return client.reply(.failure("unknown verb '\(request.verb)' (expected one of: \(verbs.joined(separator: ", ")))"))
            }
            guard client.uid == 0 || client.uid == geteuid() else {
                Log.notice("Refused \(request.verb) from uid \(client.uid) (pid \(client.pid)): not root or uid \(geteuid())")
                return client.reply(.failure("permission denied: only root or uid \(geteuid()) may \(request.verb) apps"))
            }
            if request.verb == "simulate-memory-pressure" {
                // For machines whose kernel takes no PSI trigger, and for tests: the same path a trigger takes.
                Log.notice("Memory pressure simulated by uid \(client.uid) (pid \(client.pid))")
                daemon.memoryPressure(reading: ["simulated": true])
                return client.reply(ControlReply(ok: true))
            }
            if request.verb == "post" {
                guard let type = request.name, !type.isEmpty else { return client.reply(.failure("post needs a notification type")) }
                return client.reply(daemon.post(type, payload: request.data ?? .object([:]), to: request.app))
            }
            guard let lifecycleRequest = request.lifecycleRequest else {
                return client.reply(.failure("\(request.verb) needs a scene session (lifectl scenes lists them)"))
            }
            guard let name = request.app, !name.isEmpty else {
                return client.reply(.failure("\(request.verb) needs an app name"))
            }
            daemon.handle(lifecycleRequest, for: name, from: client)
        }
    }
}
