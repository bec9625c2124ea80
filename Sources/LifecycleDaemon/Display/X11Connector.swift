import CSupport
import CXCB
import Glibc

/// Why an attempt to connect to the X server failed, each with what the log needs to say it once.
enum X11ConnectFailure: Error, Equatable, CustomStringConvertible {
    /// Neither socket took the connection (the server is away, or its backlog is full).
    case unreachable(socket: String, errno: Int32)
    /// The socket's listener is not one of the expected owners: someone else bound the display's name.
    case unexpectedOwner(socket: String, uid: uid_t, pid: pid_t, expected: [uid_t])
    case noCredentials(socket: String, errno: Int32)
    /// The peer took the connection and did not finish the setup in time.
    case noAnswer(socket: String, timeout: Duration)
    /// The server answered the setup with a refusal (an Xauthority cookie it does not take), or the exchange broke.
    case setupFailed(socket: String, code: Int32)
    case noScreen(screen: Int32)
    case system(String)

    var description: String {
        switch self {
        case .unreachable(let socket, let errno):
            "Failed to connect to the X server at \(socket): \(String(cString: strerror(errno)))"
        case .unexpectedOwner(let socket, let uid, let pid, let expected):
            "the X socket \(socket) is served by uid \(uid) (pid \(pid)), not by uid "
                + expected.map(String.init).joined(separator: " or ") + "; not following it"
        case .noCredentials(let socket, let errno):
            "Failed to read who serves the X socket \(socket): \(String(cString: strerror(errno)))"
        case .noAnswer(let socket, let timeout):
            "the X server at \(socket) did not answer the connection setup within \(timeout)"
        case .setupFailed(let socket, let code):
            "the X server at \(socket) refused the connection setup (xcb error \(code); is its cookie in "
                + "$XAUTHORITY or ~/.Xauthority?)"
        case .noScreen(let screen):
            "the X server has no screen \(screen)"
        case .system(let reason):
            reason
        }
    }
}

/// Attempts to connect to a local X server that never blocks the loop. The socket is opened without waiting (the
/// abstract name, then the file, as libxcb does); its listener's credentials must be an expected owner's, as the
/// kernel read them at `listen`; then libxcb's setup exchange, which waits on the socket, runs on a thread of its
/// own (CXCB's setup.h) with a deadline, after which the socket is shut down and the attempt has failed.
final class X11Connector {
    private let loop: EventLoop
    private let name: X11DisplayName
    private let owners: [uid_t]
    private let timeout: Duration
    private var setup: UnsafeMutableRawPointer?
    private var socket = ""
    private var watch: EventSource?
    private lazy var deadline = try? LoopTimer(loop: loop) { [unowned self] in
        self.end()
        self.finish(.failure(.noAnswer(socket: self.socket, timeout: self.timeout)))
    }
    private var done: ((Result<OpaquePointer, X11ConnectFailure>) -> Void)?

    /// `owners`: the uids whose X server the daemon follows.
    init(loop: EventLoop, name: X11DisplayName, owners: [uid_t], timeout: Duration) {
        self.loop = loop
        self.name = name
        self.owners = owners
        self.timeout = timeout
    }

    deinit { cancel() }

    /// Starts an attempt (ending one under way); `done` runs once on the loop with the connection (set up, its screen
    /// checked), or why there is none. It may run before `start` returns.
    func start(_ done: @escaping (Result<OpaquePointer, X11ConnectFailure>) -> Void) {
        cancel()
        self.done = done
        let path = name.socketPath
        var fd = cs_unix_connect_abstract_nonblocking(path)
        socket = "@" + path
        if fd == -ENOENT || fd == -ECONNREFUSED {
            fd = cs_unix_connect_nonblocking(path)
            socket = path
        }
        guard fd >= 0 else { return finish(.failure(.unreachable(socket: socket, errno: -fd))) }
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        guard cs_peer_credentials(fd, &pid, &uid, &gid) == 0 else {
            let error = errno
            close(fd)
            return finish(.failure(.noCredentials(socket: socket, errno: error)))
        }
        guard owners.contains(uid) else {
            close(fd)
            return finish(.failure(.unexpectedOwner(socket: socket, uid: uid, pid: pid, expected: owners)))
        }
        guard let setup = lc_x11_setup_start(fd, name.display) else {
            return finish(.failure(.system("Failed to start the X connection setup: \(String(cString: strerror(errno)))")))
        }
        self.setup = UnsafeMutableRawPointer(setup)
        do {
            watch = try loop.watch(fd: lc_x11_setup_done_fd(setup), events: IOEvents.readable) { [unowned self] _ in
                self.setupEnded()
            }
        } catch {
            end()
            return finish(.failure(.system("Failed to watch the X connection setup: \(error)")))
        }
        guard let deadline else {
            end()
            return finish(.failure(.system("Failed to create the X connection setup's deadline")))
        }
        deadline.arm(after: timeout)
    }

    /// Ends the attempt under way without a word: the setup's thread, if any, returns once its socket is shut down.
    func cancel() {
        done = nil
        end(shutDown: true)
    }

    /// Stops watching the setup and lets go of it. `shutDown`: the exchange may be under way, and its thread returns
    /// once the socket is shut down; never once the setup succeeded, as the connection shares that socket.
    private func end(shutDown: Bool = true) {
        watch?.cancel()
        watch = nil
        guard let setup else { return }
        self.setup = nil
        deadline?.cancel()
        let handle = setup.assumingMemoryBound(to: lc_x11_setup.self)
        if shutDown { lc_x11_setup_cancel(handle) }
        lc_x11_setup_release(handle)
    }

    private func setupEnded() {
        guard let setup else { return }
        let handle = setup.assumingMemoryBound(to: lc_x11_setup.self)
        guard lc_x11_setup_finished(handle) != 0 else { return }
        let connection = lc_x11_setup_take(handle)
        end(shutDown: false)
        guard let connection else { return finish(.failure(.system("Failed to start the X connection setup: out of memory"))) }
        let code = xcb_connection_has_error(connection)
        if code != 0 {
            xcb_disconnect(connection)
            return finish(.failure(.setupFailed(socket: socket, code: code)))
        }
        guard Int(name.screen) < Int(xcb_get_setup(connection).pointee.roots_len) else {
            xcb_disconnect(connection)
            return finish(.failure(.noScreen(screen: name.screen)))
        }
        finish(.success(connection))
    }

    private func finish(_ result: Result<OpaquePointer, X11ConnectFailure>) {
        let done = self.done
        self.done = nil
        done?(result)
    }
}
