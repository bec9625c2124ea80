import CSupport
import Glibc
import LifecycleModel
import LifecycleProtocol

/// RUNTIME_DIR/app.sock: where an app's client reconnects after the daemon restarted (its socketpair died
/// with the old daemon), and where the process of an external app (`External=yes`) attaches. Daemon-spawned apps
/// are told the path in LIFECYCLE_SOCKET and a token in the daemon's hello. A connection here must say hello
/// first, naming its app: with that token, from one of the app's own processes (its process group or its cgroup,
/// by SO_PEERCRED); or, for an external app, without a token, as its `ExternalUser=` and from a process that
/// leads its own process group (Daemon.attachExternal). Anything else gets an error and is closed.
/// Once attached, the connection is the app's, exactly as its socketpair was.
final class AppSocketServer {
    private let loop: EventLoop
    private let coder: LineCoder
    private let sessions: ClientSessions
    private let externalApps: ExternalApps
    let path: String
    private var listener: UnixListener?
    private var pending: [ObjectIdentifier: Pending] = [:]
    /// How long a connection may stay without its hello.
    static let helloTimeout: Duration = .seconds(5)
    /// At most this many connections waiting for their hello at once (a connect flood cannot grow memory).
    static let pendingLimit = 64
    /// At most this many of them from one uid other than root's, so that one local user cannot take every slot
    /// and lock out the apps that reconnect after a restart of the daemon. Root is held by the global limit alone:
    /// apps without `User=` run as root, and all of them reconnect at once after a restart.
    static let pendingLimitPerUser = 8
    /// Users who hit their limit, logged once until one of their connections is done.
    private var cappedUsers: Set<uid_t> = []

    final class Pending {
        let pid: pid_t
        let uid: uid_t
        /// Held while the hello is awaited; once attached the app holds the connection (and the
        /// connection's handler holds this entry, for its app's name).
        var connection: Connection?
        weak var attached: Connection?
        var timer: EventSource?
        /// Set once the hello is accepted: from then on the connection is this app's.
        var app: String?
        init(pid: pid_t, uid: uid_t) {
            self.pid = pid
            self.uid = uid
        }
    }

    init(loop: EventLoop, coder: LineCoder, sessions: ClientSessions, externalApps: ExternalApps, path: String) throws(SystemError) {
        self.loop = loop
        self.coder = coder
        self.sessions = sessions
        self.externalApps = externalApps
        self.path = path
        // Apps may run as other users (User=); what lets one in is its token and its pid, not the file mode.
        listener = try UnixListener(loop: loop, path: path, what: "the app socket") { [unowned self] connection, peer in
            self.accept(connection, from: peer)
        }
        Log.info("Listening for reconnecting apps on \(path)")
    }

    func close() {
        listener?.close()
        listener = nil
        for entry in pending.values where entry.app == nil { entry.connection?.closeQuietly() }
        pending = [:]
    }

    private func accept(_ clientFD: FileDescriptor, from peer: UnixListener.Peer) {
        let pid = peer.pid, uid = peer.uid
        guard pending.count < Self.pendingLimit else { return }
        if uid != 0, pending.values.count(where: { $0.uid == uid }) >= Self.pendingLimitPerUser {
            return refuseAtOnce(clientFD, uid: uid, pid: pid)
        }
        let entry = Pending(pid: pid, uid: uid)
        let key = ObjectIdentifier(entry)
        do {
            entry.connection = try Connection(fd: clientFD, loop: loop) { [unowned self, entry] event in
                if let app = entry.app, let connection = entry.attached { return self.sessions.event(app, connection, event) }
                guard entry.app == nil else { return }
                switch event {
                case .line(let line): self.firstLine(line, from: entry, key: key)
                case .framingError(let message): self.refuse(entry, key: key, message)
                case .closed: self.drop(key)
                }
            }
            entry.timer = try loop.timer { [unowned self, weak entry] in
                guard let entry else { return }
                self.refuse(entry, key: key, "no hello within \(Int(Self.helloTimeout / .seconds(1)))s")
            }
            entry.timer?.arm(after: Self.helloTimeout)
            pending[key] = entry
        } catch {
            Log.warning("Failed to watch a connection on \(path): \(error)")
        }
    }

    /// The connection is closed at once, with one error line: the socket is new and empty, so the short write
    /// cannot block (it is non-blocking anyway, and a failure only loses the explanation).
    private func refuseAtOnce(_ clientFD: FileDescriptor, uid: uid_t, pid: pid_t) {
        let message = "too many connections waiting for their hello from uid \(uid) (at most \(Self.pendingLimitPerUser))"
        let line = coder.encode(ServerMessage.error(message))
        _ = line.withUnsafeBytes { write(clientFD.rawValue, $0.baseAddress, $0.count) }
        if cappedUsers.insert(uid).inserted {
            Log.event(.protocolError, .warning, "app socket: \(message); refusing more from pid \(pid) and others of that user",
                      [("LIFECYCLE_REASON", "pending limit per user"), ("LIFECYCLE_UID", String(uid))])
        }
    }

    private func firstLine(_ line: [UInt8], from entry: Pending, key: ObjectIdentifier) {
        guard case .hello(_, _, let app?, let token)? = try? coder.decode(ClientMessage.self, from: line) else {
            return refuse(entry, key: key, "the first message on the app socket must be a hello with the app's name and its token"
                + " (or no token, for an app with External=yes)")
        }
        // The name is the client's word: in log lines and errors it is clipped, so that a 64 KiB name is not
        // repeated, and control characters become '?', so that a name cannot fake a log line.
        var scalars = String.UnicodeScalarView()
        for scalar in app.unicodeScalars.prefix(64) { scalars.append(scalar.value < 0x20 || scalar.value == 0x7f ? "?" : scalar) }
        let shown = String(scalars) + (app.unicodeScalars.count > 64 ? "…" : "")
        if let token {
            if let reason = sessions.reattach(app, token: token, peer: entry.pid, connection: entry.connection!) {
                Log.event(.protocolError, .warning, "Refused a reconnection as \(shown) from pid \(entry.pid) (uid \(entry.uid)): \(reason)",
                          [("LIFECYCLE_APP", shown), ("LIFECYCLE_REASON", reason)])
                return refuse(entry, key: key, "cannot reconnect as '\(shown)': \(reason)")
            }
        } else if let reason = externalApps.attach(app, peer: entry.pid, uid: entry.uid,
                                                     pidfd: peerPIDFD(entry.connection!.fd.rawValue, pid: entry.pid),
                                                     connection: entry.connection!) {
            Log.event(.protocolError, .warning, "Refused an external client as \(shown) from pid \(entry.pid) (uid \(entry.uid)): \(reason)",
                      [("LIFECYCLE_APP", shown), ("LIFECYCLE_REASON", reason), ("LIFECYCLE_PID", String(entry.pid)),
                       ("LIFECYCLE_UID", String(entry.uid))])
            return refuse(entry, key: key, "cannot attach as '\(shown)': \(reason)")
        }
        let connection = entry.connection!
        entry.app = app
        entry.attached = connection
        entry.connection = nil
        entry.timer?.cancel()
        entry.timer = nil
        pending[key] = nil
        cappedUsers.remove(entry.uid)
        // The hello itself is the app's first message on its new connection: answered as any hello.
        sessions.event(app, connection, .line(line))
    }

    private func refuse(_ entry: Pending, key: ObjectIdentifier, _ message: String) {
        entry.connection?.send(coder.encode(ServerMessage.error(message)))
        entry.connection?.closeQuietly()
        drop(key)
    }

    private func drop(_ key: ObjectIdentifier) {
        guard let entry = pending.removeValue(forKey: key) else { return }
        cappedUsers.remove(entry.uid)
        entry.timer?.cancel()
        entry.timer = nil
        if entry.app == nil { entry.connection = nil }
    }
}

/// Linux's SO_PEERPIDFD (6.5; asm-generic/socket.h, newer than this system's headers): a pidfd of the process
/// that connected, which, unlike its pid, can never name another process later.
private let soPeerPIDFD: Int32 = 77

/// A pidfd of the peer of `fd`: SO_PEERPIDFD where the kernel has it, else pidfd_open of its SO_PEERCRED pid
/// (which could, in a short window, name a new process with a recycled pid); pidfd_open's error when neither works.
func peerPIDFD(_ fd: Int32, pid: pid_t) -> Result<FileDescriptor, SystemError> {
    var pidfd: Int32 = -1
    var length = socklen_t(MemoryLayout<Int32>.size)
    if getsockopt(fd, SOL_SOCKET, soPeerPIDFD, &pidfd, &length) == 0, pidfd >= 0 {
        _ = fcntl(pidfd, F_SETFD, FD_CLOEXEC)
        return .success(FileDescriptor(owning: pidfd, path: "pidfd of \(pid)"))
    }
    return Result { () throws(SystemError) in try openPidFD(pid) }
}
