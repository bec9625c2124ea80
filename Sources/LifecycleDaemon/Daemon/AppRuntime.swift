import Glibc
import LifecycleModel
import LifecycleProtocol

/// The I/O side of one app: its process, its client connection, its timers and its cgroup.
/// The model (`Supervisor`) decides; this holds what the decisions act on.
final class AppRuntime {
    let name: String
    var config: AppConfig
    /// The process group leader (pgid == pid: every app runs in its own session).
    var pid: pid_t?
    var child: EventSource?
    /// The service manager keeps a copy of the client connection (FDSTORE=1, FDNAME=app-NAME).
    var fdStored = false
    /// The service manager keeps a pidfd of its process too (FDNAME=pidfd-NAME): the next daemon watches the very
    /// process it started, not whatever holds its pid by then.
    var pidfdStored = false
    /// For a process re-adopted from a previous daemon (not our child): its pidfd, watched for the exit.
    var pidfd: Int32?
    var connection: Connection?
    /// The app's stdout and stderr, when they come through the daemon (no journal).
    var output: OutputReader?
    var helloed = false
    /// The secret a client presents to reconnect on the app socket after a restart of the daemon.
    var token: String?
    var timers: [TimerKind: LoopTimer] = [:]
    var cgroup: AppCgroup?
    /// The priority class applied to the running process.
    var priority: PriorityClass?
    /// Wall-clock time of the last transition (seconds since the epoch), for `since`.
    var sinceWall: Double = wallClockNow()
    /// lifectl connections waiting for this app to settle.
    var waiters: [ControlClient] = []
    /// How the current suspension was done, so that resume undoes the same thing.
    var suspendedWith: SuspendMechanism?
    /// The 1 ms recheck of a stop not yet confirmed. Its cancel is lazy (`LoopTimer`): a suspend confirmed by the
    /// kernel's report, and its resume, touch no timer; the source may fire once, for nothing, up to 1 ms later.
    var stopCheck: LoopTimer?
    var stopCheckStarted: Duration = .zero
    /// Its state file is to be saved when the callback returns (it is in `Daemon.dirtyApps`).
    var dirty = false
    /// The processes the current suspension stopped (read as it began), which the leader's stop report confirms.
    var stopMembers: [pid_t] = []
    /// `members()` as read in one loop iteration (`members(iteration:)`).
    private var membersRead: (iteration: UInt64, leader: pid_t?, pids: [pid_t])?
    /// Removed from the config while running: forget it once it has exited.
    var removeWhenStopped = false

    init(name: String, config: AppConfig) {
        self.name = name
        self.config = config
    }

    /// The processes that make up the app: its cgroup if it has one, else its process group.
    func members() -> [pid_t] {
        guard let pid else { return [] }
        if let cgroup {
            let pids = cgroup.pids()
            if !pids.isEmpty { return pids }
        }
        return ProcessTable.members(ofProcessGroup: pid)
    }

    /// `members()`, read once per loop iteration: a suspend (or resume) writes each member's oom_score_adj, signals
    /// the members outside the process group and checks the stop, all in one callback, and read cgroup.procs three
    /// times for it. A later callback reads it again (`EventLoop.iteration`).
    func members(iteration: UInt64) -> [pid_t] {
        if let read = membersRead, read.iteration == iteration, read.leader == pid { return read.pids }
        let pids = members()
        membersRead = (iteration, pid, pids)
        return pids
    }

    /// The processes of the last `members(iteration:)` read (empty before the first).
    var lastMembersRead: [pid_t] { membersRead?.pids ?? [] }

    /// The processes SIGSTOP reached: the app's process group. Taken from the app's cgroup where it has one
    /// (a getpgid per member), since scanning all of /proc costs tens of milliseconds with a thousand apps
    /// (measured in bench/run.sh: it made `lifectl suspend` 70 ms at N=1000).
    func processGroup() -> [pid_t] {
        guard let pid else { return [] }
        if let cgroup {
            let pids = cgroup.pids()
            if !pids.isEmpty { return pids.filter { getpgid($0) == pid } }
        }
        return ProcessTable.members(ofProcessGroup: pid)
    }
}

/// How an app is stopped: the default is SIGSTOP to the process group; the cgroup freezer
/// (`SuspendMethod=freezer`) is used where the app has a cgroup with one.
enum SuspendMechanism: Equatable {
    case signal
    case freezer(FreezerKind)

    var description: String {
        switch self {
        case .signal: "signal"
        case .freezer(let kind): "freezer (\(kind))"
        }
    }
}

/// Seconds since the epoch, from CLOCK_REALTIME.
func wallClockNow() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// RFC 3339 in UTC with milliseconds, e.g. 2026-12-02T14:33:10.125Z.
func rfc3339(_ seconds: Double) -> String {
    let whole = seconds.rounded(.down)
    var time = time_t(whole)
    var parts = tm()
    gmtime_r(&time, &parts)
    let millis = Int32((seconds - whole) * 1000)
    let year = parts.tm_year + 1900
    guard (0...9999).contains(year), (0...999).contains(millis) else {
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(millis, 3))Z"
    }
    // Digits written into one buffer: the interpolation of seven padded strings was 7k instructions of a status
    // reply (an app switch's reply carries one), this is a few hundred.
    var text: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
               UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
        (0, 0, 0, 0, 0x2D, 0, 0, 0x2D, 0, 0, 0x54, 0, 0, 0x3A, 0, 0, 0x3A, 0, 0, 0x2E, 0, 0, 0, 0x5A)  // "    -  -  T  :  :  .   Z"
    return withUnsafeMutableBytes(of: &text) { bytes in
        func put(_ value: Int32, at offset: Int, width: Int) {
            var rest = value
            for position in stride(from: offset + width - 1, through: offset, by: -1) {
                bytes[position] = UInt8(truncatingIfNeeded: 0x30 + rest % 10)
                rest /= 10
            }
        }
        put(year, at: 0, width: 4)
        put(parts.tm_mon + 1, at: 5, width: 2)
        put(parts.tm_mday, at: 8, width: 2)
        put(parts.tm_hour, at: 11, width: 2)
        put(parts.tm_min, at: 14, width: 2)
        put(parts.tm_sec, at: 17, width: 2)
        put(millis, at: 20, width: 3)
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// "1.5s", "200ms", "infinity" — for log lines.
func describe(_ duration: Duration?) -> String {
    guard let duration else { return "infinity" }
    let (seconds, attoseconds) = duration.components
    let millis = seconds * 1000 + attoseconds / 1_000_000_000_000_000
    if millis % 1000 == 0 { return "\(millis / 1000)s" }
    if millis < 1000 { return "\(millis)ms" }
    return "\(Double(millis) / 1000)s"
}

extension ProcessTable {
    /// The resident memory of these processes together (VmRSS from /proc/PID/statm), 0 for the vanished.
    static func residentBytes(of pids: [pid_t], procRoot: String = "/proc") -> UInt64 {
        let pageSize = UInt64(sysconf(Int32(_SC_PAGESIZE)))
        var total: UInt64 = 0
        for pid in pids {
            guard let text = try? readKernelFile("\(procRoot)/\(pid)/statm") else { continue }
            let fields = text.split(separator: " ")
            if fields.count > 1, let pages = UInt64(fields[1]) { total += pages * pageSize }
        }
        return total
    }
}
