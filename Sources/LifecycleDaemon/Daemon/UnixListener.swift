import CSupport
import Glibc

/// A listening Unix socket on the loop, the control socket's and the app socket's: each connection is handed over
/// with its peer's credentials as the kernel gave them at connect time (SO_PEERCRED); one whose credentials cannot be
/// read is closed. Each wakeup takes at most `perWakeup` connections, so that a burst of connects is served between
/// the loop's other sources instead of before them (the socket stays readable while more wait, and sd-event serves
/// the sources that waited longer first).
final class UnixListener {
    /// Who connected, as the kernel vouches for it.
    struct Peer {
        let pid: pid_t
        let uid: uid_t
        let gid: gid_t
    }

    static let perWakeup = 64

    let path: String
    /// What the socket is, for the log ("the control socket").
    private let what: String
    private let fd: FileDescriptor
    /// The socket file is ours (not one a service manager passed in): `close` removes it.
    private let ownsPath: Bool
    private var source: EventSource?

    /// Listens on `path`, made here with mode 0666 (who may do what is decided per peer, not by the file's mode), or
    /// on `passedFD`, a listening socket a service manager passed in. `accept` gets each connection, which closes when
    /// this loop iteration ends unless `accept` keeps it.
    init(loop: EventLoop, path: String, what: String, passedFD: Int32? = nil,
         accept: @escaping (FileDescriptor, Peer) -> Void) throws(SystemError) {
        self.path = path
        self.what = what
        if let passedFD {
            fd = FileDescriptor(owning: passedFD, path: "\(what), passed by the service manager")
            _ = cs_set_nonblocking(passedFD)
            ownsPath = false
        } else {
            let listening = cs_unix_listen(path, 128)
            guard listening >= 0 else { throw SystemError(operation: "listen on \(path)", errno: -listening) }
            fd = FileDescriptor(owning: listening, path: path)
            ownsPath = true
            chmod(path, 0o666)
        }
        source = try loop.watch(fd: fd.rawValue, events: IOEvents.readable) { [unowned self] _ in self.acceptAll(accept) }
    }

    var descriptor: Int32 { fd.rawValue }

    func close() {
        source?.cancel()
        source = nil
        try? fd.close()
        if ownsPath { unlink(path) }
    }

    private func acceptAll(_ accept: (FileDescriptor, Peer) -> Void) {
        var taken = 0
        defer {
            // Each burst at debug level with its count, so that the budget can be seen at work.
            if taken > 1 {
                Log.debug("\(what): took \(taken) connections in one wakeup"
                          + (taken >= Self.perWakeup ? " (its budget); the rest wait for the next" : ""))
            }
        }
        for _ in 0..<Self.perWakeup {
            let accepted = cs_accept_cloexec_nonblock(fd.rawValue)
            guard accepted >= 0 else { return }
            taken += 1
            let connection = FileDescriptor(owning: accepted, path: "a connection on \(what)")
            var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
            guard cs_peer_credentials(connection.rawValue, &pid, &uid, &gid) == 0 else { continue }
            accept(connection, Peer(pid: pid, uid: uid, gid: gid))
        }
    }
}
