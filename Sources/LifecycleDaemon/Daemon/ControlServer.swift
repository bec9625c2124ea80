import CSupport
import Glibc
import LifecycleModel
import LifecycleProtocol

/// One lifectl connection: requests in, one reply per request.
final class ControlClient {
    /// The peer's credentials as the kernel gave them at connect time (SO_PEERCRED).
    let uid: uid_t
    let gid: gid_t
    let pid: pid_t
    var connection: Connection?
    private let coder: LineCoder

    init(uid: uid_t, gid: gid_t, pid: pid_t, coder: LineCoder) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.coder = coder
    }

    func reply(_ reply: ControlReply) {
        connection?.send(coder.encode(reply))
    }
}

/// The control socket (docs/CONTROL.md), RUNTIME_DIR/control.sock, mode 0666 in a directory only its owner can write
/// to. Anyone who can reach it may query (`ControlRequest.queryVerbs`: list, status, scenes, watch); every other verb needs
/// `ControlAccess`. A user other than root and the daemon's holds at most `maxConnectionsPerUser` connections,
/// so that nobody can take all of the daemon's descriptors.
///
/// A query can cost a walk over every app, and anyone may send them as fast as they like: so the connections of
/// those `ControlAccess` does not allow to change states (strangers) are served one request per wakeup and at a
/// lower priority than every other source of the loop. A request of root, the daemon's user or the control
/// group then waits for at most the one stranger's request in progress, never for a queue of them, and the
/// strangers share what is left round-robin. Their refusals are logged once per interval with a count
/// (`RefusalLog`).
final class ControlServer {
    /// Enough for any script's parallel lifectl calls; few enough that one user cannot exhaust the daemon's fds.
    static let maxConnectionsPerUser = 32
    /// sd-event's priority for strangers' connections: after every source at the default priority (0).
    static let strangerPriority: Int64 = 10
    private let refusals: RefusalLog
    /// The last failure to look up `[Control] Group=`, logged once.
    private var lastGroupWarning: String?
    private let context: ControlContext
    private let persistence: Persistence
    private let adoption: Adoption
    private let path: String
    private var listener: UnixListener?
    private var clients: [ObjectIdentifier: ControlClient] = [:]
    /// The connections that sent `watch`, told of every change through the daemon's observers.
    private let watchers: ControlWatchers
    /// The daemon's effective uid, read once: it never changes, and a geteuid() per request was a system call on
    /// every state change's path.
    private let daemonUID = geteuid()

    /// Listens on `path`, or on `passedFD` when a `.socket` unit passed the socket in (socket activation).
    init(context: ControlContext, persistence: Persistence, adoption: Adoption, path: String,
         passedFD: Int32? = nil) throws(SystemError) {
        self.context = context
        self.persistence = persistence
        self.adoption = adoption
        self.path = path
        refusals = RefusalLog(loop: context.loop)
        watchers = ControlWatchers(host: context.host, requests: context.requests)
        if passedFD == nil { try Self.checkDirectory(of: path) }
        // Queries are open to everyone; changes are checked per request with SO_PEERCRED.
        let listener = try UnixListener(loop: context.loop, path: path, what: "the control socket", passedFD: passedFD) {
            [unowned self] connection, peer in self.accept(connection, from: peer)
        }
        self.listener = listener
        context.observers.add(watchers)
        Log.info(passedFD == nil ? "Listening on \(path)" : "Listening on the control socket passed by the service manager (fd \(listener.descriptor))")
    }

    /// The socket's directory must be one only its owner (the daemon's user, or root) can write to: in a directory
    /// others can write to, they could replace control.sock with their own socket and take the requests of
    /// lifectl users. Refuse to start rather than listen there.
    static func checkDirectory(of socketPath: String) throws(SystemError) {
        let directory = socketPath.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        var info = stat()
        guard stat(directory.isEmpty ? "/" : directory, &info) == 0 else {
            throw SystemError(operation: "check the runtime directory \(directory)", errno: errno)
        }
        let mode = info.st_mode & 0o7777
        guard info.st_uid == geteuid() || info.st_uid == 0 else {
            throw SystemError(operation: "listen in \(directory): it belongs to uid \(info.st_uid), not to this daemon's user \(geteuid()) or root",
                              errno: EPERM)
        }
        guard mode & 0o022 == 0 else {
            throw SystemError(operation: "listen in \(directory): others may write to it (mode 0\(String(mode, radix: 8))); make it 0755 or 0700",
                              errno: EPERM)
        }
    }

    func close() {
        refusals.flush()
        context.observers.remove(watchers)
        watchers.closeAll("lifecycled is stopping or restarting")
        listener?.close()
        listener = nil
        for client in clients.values { client.connection?.closeQuietly() }
        clients = [:]
    }

    private func accept(_ clientFD: FileDescriptor, from peer: UnixListener.Peer) {
        let pid = peer.pid, uid = peer.uid, gid = peer.gid
        if uid != 0 && uid != daemonUID
            && clients.values.count(where: { $0.uid == uid && $0.connection?.isOpen == true }) >= Self.maxConnectionsPerUser {
            refusals.refused(uid: uid, "Refused a control connection from uid \(uid) (pid \(pid)): it holds \(Self.maxConnectionsPerUser) already")
            // The socket is new and its buffer empty: the short reply fits; the peer may be gone, ignore errors.
            let reply = context.coder.encode(ControlReply.failure("too many connections from uid \(uid) (at most \(Self.maxConnectionsPerUser))"))
            _ = reply.withUnsafeBytes { Glibc.send(clientFD.rawValue, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
            return
        }
        // Decided once, at connect time: a membership change applies to the next connection.
        let privileged = access.mayChange(uid: uid, gid: gid, verb: "").isAllowed
        let client = ControlClient(uid: uid, gid: gid, pid: pid, coder: context.coder)
        let key = ObjectIdentifier(client)
        do {
            let connection = try Connection(fd: clientFD, loop: context.loop) { [unowned self] event in
                switch event {
                case .line(let line): self.handle(line, from: client)
                case .framingError(let message):
                    client.reply(.failure("malformed request: \(message)"))
                    client.connection?.closeQuietly()
                    self.clients[key] = nil
                    self.watchers.remove(client)
                case .closed:
                    self.clients[key] = nil
                    self.watchers.remove(client)
                }
            }
            connection.label = "control pid \(pid) uid \(uid)"
            if !privileged { connection.limitLines(to: 1, priority: Self.strangerPriority) }
            client.connection = connection
            clients[key] = client
        } catch {
            Log.warning("Failed to watch a control connection: \(error)")
        }
    }

    private var access: ControlAccess {
        ControlAccess(daemonUID: daemonUID, group: context.configuration.config.daemon.controlGroup) { [unowned self] warning in
            // Each stranger's connection and request asks again: the same problem is logged once, not per request.
            guard warning != self.lastGroupWarning else { return }
            self.lastGroupWarning = warning
            Log.warning(warning)
        }
    }

    /// `statuses` as `client` may see them: an app's saved scene state only for those who may change states
    /// and for the app's own user (`ControlAccess.seesSavedState`); the others get the rest of each status.
    private func shown(_ statuses: [AppStatus], to client: ControlClient) -> [AppStatus] {
        func hasSavedState(_ status: AppStatus) -> Bool { status.scenes?.contains { $0.savedState != nil } == true }
        // Most answers hold no saved state: no group lookup for them.
        guard statuses.contains(where: hasSavedState) else { return statuses }
        let privileged = access.mayChange(uid: client.uid, gid: client.gid, verb: "").isAllowed
        return statuses.map { status in
            guard hasSavedState(status) else { return status }
            let appUID = context.host.runtime(status.name).flatMap { app in
                app.config.user == nil ? daemonUID : (try? lookupCredentials(user: app.config.user, group: nil))?.uid
            }
            return ControlAccess.seesSavedState(peerUID: client.uid, privileged: privileged, appUID: appUID)
                ? status : StatusReport.hidingSavedState(status)
        }
    }

    private func handle(_ line: [UInt8], from client: ControlClient) {
        let request: ControlRequest
        do {
            request = try context.coder.decode(ControlRequest.self, from: line)
        } catch {
            return client.reply(.failure("malformed request: \(error.message)"))
        }
        switch request.verb {
        case "list":
            client.reply(ControlReply(ok: true, apps: shown(context.requests.allStatuses(), to: client)))
        case "scenes":
            // The scene sessions ride on the apps' statuses; `lifectl scenes` prints them.
            if let name = request.app {
                guard let status = context.requests.status(of: name) else { return client.reply(.failure("no such app '\(name)'")) }
                client.reply(ControlReply(ok: true, apps: shown([status], to: client)))
            } else {
                client.reply(ControlReply(ok: true, apps: shown(context.requests.allStatuses().filter { $0.scenes != nil }, to: client)))
            }
        case "watch":
            // The snapshot and the stream go out on the connection; only a refusal is a reply.
            if let failure = watchers.start(client, app: request.app) { client.reply(failure) }
        case "status":
            if let name = request.app {
                guard let status = context.requests.status(of: name) else { return client.reply(.failure("no such app '\(name)'")) }
                // No daemon block for one app: lifectl shows only the app (human and --json output, lifectl(1)),
                // and building it (sources, sorted notification types, mechanisms) would be most of the query's cost.
                client.reply(ControlReply(ok: true, apps: shown([status], to: client)))
            } else {
                client.reply(ControlReply(ok: true, apps: shown(context.requests.allStatuses(), to: client), daemon: context.host.daemonStatus()))
            }
        default:
            let verbs = ControlRequest.queryVerbs + ControlRequest.lifecycleVerbs + ControlRequest.otherVerbs
                + ControlRequest.spelledOtherwise
            guard verbs.contains(request.verb) else {
                return client.reply(.failure("unknown verb '\(ProtocolError.clipped(request.verb, to: 80))' (expected one of: \(verbs.joined(separator: ", ")))"))
            }
            let access = self.access
            switch access.mayChange(uid: client.uid, gid: client.gid, verb: request.verb) {
            case .refused(let message):
                refusals.refused(uid: client.uid, "Refused \(request.verb)\(request.app.map { " \($0)" } ?? "") from uid \(client.uid) gid \(client.gid) (pid \(client.pid)): not \(access.whoMay)")
                return client.reply(.failure(message))
            case .allowed(let why) where client.uid != 0 && client.uid != daemonUID:
                Log.info("Allowed \(request.verb)\(request.app.map { " \($0)" } ?? "") for uid \(client.uid) (pid \(client.pid)): \(why)")
            case .allowed:
                break
            }
            persistence.writeAfterThisCallback()
            if request.verb == "simulate-memory-pressure" {
                // For machines whose kernel takes no PSI trigger, and for tests: the same path a trigger takes.
                Log.notice("Memory pressure simulated by uid \(client.uid) (pid \(client.pid))")
                context.host.memoryPressure(reading: ["simulated": true])
                return client.reply(ControlReply(ok: true))
            }
            if request.verb == "resume-all" {
                Log.notice("Resume of every suspended app requested by uid \(client.uid) (pid \(client.pid))")
                adoption.resumeAll()
                return client.reply(ControlReply(ok: true, apps: context.requests.allStatuses()))
            }
            if request.verb == "reload" {
                return client.reply(context.configuration.reloadRequested(by: client.uid, pid: client.pid))
            }
            if request.verb == "post" {
                guard let type = request.name, !type.isEmpty else { return client.reply(.failure("post needs a notification type")) }
                return client.reply(context.requests.post(type, payload: request.data ?? .object([:]), to: request.app))
            }
            guard let lifecycleRequest = request.lifecycleRequest else {
                return client.reply(.failure("\(request.verb) needs a scene session (lifectl scenes lists them)"))
            }
            guard let name = request.app, !name.isEmpty else {
                return client.reply(.failure("\(request.verb) needs an app name"))
            }
            context.requests.handle(lifecycleRequest, for: name, from: client)
        }
    }
}
