import CSupport
import Glibc

/// How the connection to an outside server (sway, the X server, the sound server, the bus) comes back, and what of
/// its losses is logged. The next attempt comes when the server's socket appears (an inotify watch on its
/// directory), or, where there is no socket to wait for, after a delay that doubles up to a cap: nothing polls
/// while the server is away. The first failure after a success is a warning; the attempts that fail after it,
/// while the server stays away, get one short debug line each, so that an absent server costs one warning.
final class ReconnectingSource {
    /// When the next attempt comes.
    enum NextAttempt: Equatable, CustomStringConvertible {
        case after(Duration)
        case whenSocketAppears(String)

        var description: String {
            switch self {
            case .after(let delay): "next attempt in \(delay)"
            case .whenSocketAppears: "next attempt when its socket appears"
            }
        }
    }

    private let loop: EventLoop
    /// Whom it connects to, for the debug lines ("sway", "D-Bus").
    private let name: String
    private let first: Duration
    private let cap: Duration
    private let attempt: () -> Void
    private(set) var delay: Duration
    private var timer: LoopTimer?
    /// A failure since the last success was logged as a warning.
    private var lossLogged = false
    private lazy var watcher = DirectoryWatcher(loop: loop)
    private var socketWatch: Int?

    /// `attempt` runs on the loop when the delay has passed or the socket appeared; it reports its outcome with
    /// `succeeded` or `failed`.
    init(loop: EventLoop, name: String, first: Duration, cap: Duration, attempt: @escaping () -> Void) {
        self.loop = loop
        self.name = name
        self.first = first
        self.cap = cap
        self.attempt = attempt
        delay = first
    }

    /// The connection is up: the next loss starts again from the first delay, and is logged.
    func succeeded() {
        delay = first
        lossLogged = false
    }

    /// The connection is lost or an attempt failed. `reason` is logged as a warning when it is the first failure
    /// since the last success (`warn` decides instead when given); nil for a source whose owner reports it. The next attempt comes when `socket` appears, where it is given, absent and can be
    /// watched, else after the current delay, which then doubles.
    @discardableResult
    func failed(_ reason: String?, warn: Bool? = nil, socket: String? = nil) -> NextAttempt {
        let next: NextAttempt
        if let socket, watch(for: socket) {
            next = .whenSocketAppears(socket)
        } else {
            next = .after(delay)
            schedule()
        }
        guard let reason else { return next }
        if warn ?? !lossLogged {
            lossLogged = true
            Log.warning(reason)
        } else {
            Log.debug("\(name): still not connected; \(next)")
        }
        return next
    }

    /// An attempt now, from the loop, without waiting.
    func now() {
        unwatch()
        arm(after: .zero)
    }

    /// No attempt any more (the source stops).
    func cancel() {
        unwatch()
        timer?.cancel()
    }

    private func schedule() {
        arm(after: delay)
        delay = min(delay * 2, cap)
    }

    private func arm(after wait: Duration) {
        if timer == nil {
            do {
                timer = try LoopTimer(loop: loop) { [unowned self] in self.attempt() }
            } catch {
                return Log.error("Failed to create a reconnect timer: \(error); a server that went away is not reconnected")
            }
        }
        timer?.arm(after: wait)
    }

    /// Watches for `path` to appear: its directory for its name or, while that directory is missing, the nearest
    /// existing ancestor for the next directory on the way. True when the watch will say when to try again; false
    /// when `path` is there (a server that refused, or one bound just now) or cannot be watched: then the timer.
    private func watch(for path: String) -> Bool {
        unwatch()
        var target = path
        // A directory on the way that appears while the watch is set up is looked at again, a few times at most.
        var looks = 0
        while looks < 8 {
            guard target.hasPrefix("/"), let slash = target.lastIndex(of: "/") else { return false }
            let directory = slash == target.startIndex ? "/" : String(target[..<slash])
            let name = String(target[target.index(after: slash)...])
            guard !name.isEmpty else { return false }
            // Subscribed before the look, so that an appearance between the two is not missed.
            do {
                socketWatch = try watcher.subscribe(directory: directory, names: [name], mask: CS_IN_CREATE | CS_IN_MOVED_TO) {
                    [unowned self] _ in self.appeared()
                }
            } catch {
                guard error.errno == ENOENT, directory != "/" else { return false }
                target = directory
                continue
            }
            var status = stat()
            guard lstat(target, &status) == 0 else { return true }
            unwatch()
            if target == path { return false }
            target = path
            looks += 1
        }
        return false
    }

    private func appeared() {
        unwatch()
        timer?.cancel()
        attempt()
    }

    private func unwatch() {
        if let socketWatch { watcher.unsubscribe(socketWatch) }
        socketWatch = nil
    }
}
