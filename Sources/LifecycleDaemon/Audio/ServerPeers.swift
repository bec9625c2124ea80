import CSupport
import Glibc

/// The kernel's word on who is connected to the sound server, which is what lets a stream's claimed pid count.
///
/// A sound-server client names its own process (`application.process.id`), and neither PulseAudio nor PipeWire's
/// PulseAudio service vouches for it (docs/CONFIG.md, `Audio=`). The kernel does: a process's descriptors
/// (/proc/PID/fd) name its sockets, and sock_diag says whom each is connected to; a socket the server accepted is
/// bound to the server's socket file. A claim of pid P stands when P holds at least as many connections to the
/// server as there are clients claiming P: a client that names another process then either names one with no
/// connection, or adds a claim beyond that process's own, and in both cases no claim of P counts. Verdicts are
/// kept while the same clients claim the same pid, so an event costs the pids whose claimants changed.
///
/// PipeWire's PulseAudio service lists PipeWire's own clients beside its PulseAudio ones, each of them one
/// connection to PipeWire's socket: for that server both sockets are the server's (`addSocket`), so that a process
/// playing through PipeWire's protocol is counted as one playing through PulseAudio's.
final class ServerPeers {
    /// A socket file, as stat() has it.
    private struct SocketFile: Hashable {
        var device: UInt64
        var inode: UInt64
    }

    /// The server's socket files.
    private var sockets: Set<SocketFile>
    private let diag: FileDescriptor
    private let procRoot: String
    /// The verdict for each claimed pid, and the clients that claimed it when it was reached.
    private var verdicts: [pid_t: (claimants: Set<UInt32>, confirmed: Bool)] = [:]

    /// For the server listening at `socketPath`; nil when that is not a socket file or sock_diag is not to be had
    /// (then no claim can be confirmed).
    init?(socketPath: String, procRoot: String = "/proc") {
        guard let file = Self.socketFile(socketPath) else { return nil }
        let fd = cs_sock_diag_open()
        guard fd >= 0 else { return nil }
        diag = FileDescriptor(owning: fd, path: "the sock_diag socket")
        sockets = [file]
        self.procRoot = procRoot
    }

    private static func socketFile(_ path: String) -> SocketFile? {
        var status = stat()
        guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFSOCK else { return nil }
        return SocketFile(device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
    }

    /// Counts connections to the socket file at `path` as connections to the server too; false when it is not a
    /// socket file. For a server whose every client is listed, whichever socket it came by: more sockets than
    /// that would let a process's connections to one vouch for claims made through another.
    @discardableResult
    func addSocket(_ path: String) -> Bool {
        guard let file = Self.socketFile(path) else { return false }
        sockets.insert(file)
        verdicts = [:]
        return true
    }

    /// PipeWire's own socket beside its PulseAudio service's, both where they are by default: `pipewire-0` in the
    /// runtime directory whose `pulse/native` is `pulseSocket`.
    static func pipeWireSocket(besidePulseSocket pulseSocket: String) -> String? {
        guard pulseSocket.hasSuffix("/pulse/native") else { return nil }
        return pulseSocket.dropLast("pulse/native".count) + "pipewire-0"
    }

    /// The socket path in a libpulse server string (`unix:/run/user/1000/pulse/native` or a bare path), nil for a
    /// server reached otherwise (`tcp:`), whose clients the kernel cannot name.
    static func socketPath(inServerString server: String) -> String? {
        var text = Substring(server)
        if text.hasPrefix("{"), let end = text.firstIndex(of: "}") { text = text[text.index(after: end)...] }
        if text.hasPrefix("unix:") { text = text.dropFirst(5) }
        return text.hasPrefix("/") ? String(text) : nil
    }

    /// Which of `claims` (client index → the pid it names) the kernel bears out.
    func confirmed(_ claims: [UInt32: pid_t]) -> Set<pid_t> {
        var claimants: [pid_t: Set<UInt32>] = [:]
        for (client, pid) in claims { claimants[pid, default: []].insert(client) }
        verdicts = verdicts.filter { claimants[$0.key] == $0.value.claimants }
        var result: Set<pid_t> = []
        for (pid, clients) in claimants {
            let confirmed = verdicts[pid]?.confirmed ?? (connections(of: pid) >= clients.count)
            verdicts[pid] = (clients, confirmed)
            if confirmed { result.insert(pid) }
        }
        return result
    }

    /// How many distinct sockets `pid` holds that are connected to the server.
    func connections(of pid: pid_t) -> Int {
        guard pid > 0, let directory = opendir("\(procRoot)/\(pid)/fd") else { return 0 }
        defer { closedir(directory) }
        var sockets: Set<UInt32> = []
        var link = [CChar](repeating: 0, count: 64)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard name.first != "." else { continue }
            let count = readlink("\(procRoot)/\(pid)/fd/\(name)", &link, link.count - 1)
            guard count > 0 else { continue }
            let target = String(decoding: link[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard target.hasPrefix("socket:["), target.hasSuffix("]"),
                  let socket = UInt32(target.dropFirst(8).dropLast()) else { continue }
            sockets.insert(socket)
        }
        return sockets.filter(isConnectedToServer).count
    }

    private func isConnectedToServer(_ socket: UInt32) -> Bool {
        var peer: UInt32 = 0
        var boundDevice: UInt64 = 0
        var boundInode: UInt64 = 0
        guard cs_unix_socket_diag(diag.rawValue, socket, &peer, &boundDevice, &boundInode) == 0, peer != 0,
              cs_unix_socket_diag(diag.rawValue, peer, &peer, &boundDevice, &boundInode) == 0 else { return false }
        return sockets.contains(SocketFile(device: boundDevice, inode: boundInode))
    }
}
