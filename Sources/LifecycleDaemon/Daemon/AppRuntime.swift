import Glibc
import LifecycleModel
import LifecycleProtocol

/// The daemon's own stop of an app's process.
enum SuspensionState: Equatable {
    case running
    /// Signalled or frozen, not confirmed yet: the processes it stopped (read as it began) and when it began.
    case stopping(SuspendMechanism, members: [pid_t], since: Duration)
    case stopped(SuspendMechanism, members: [pid_t])

    /// How the process is held, while it is.
    var mechanism: SuspendMechanism? {
        switch self {
        case .running: nil
        case .stopping(let mechanism, _, _), .stopped(let mechanism, _): mechanism
        }
    }

    var members: [pid_t] {
        switch self {
        case .running: []
        case .stopping(_, let members, _), .stopped(_, let members): members
        }
    }

    /// A stop the daemon started awaits its confirmation.
    var isStopping: Bool { if case .stopping = self { true } else { false } }
}

/// The I/O side of one app: its process, its client connection, its timers and its cgroup.
/// The model (`Supervisor`) decides; this holds what the decisions act on.
final class AppRuntime {
    let name: String
    var config: AppConfig
    /// Where its processes live, chosen once, when the app is configured or adopted.
    let place: any AppPlace
    /// The process group leader (pgid == pid: every app runs in its own session).
    var pid: pid_t?
    var child: EventSource?
    /// The service manager keeps a copy of the client connection (FDSTORE=1, FDNAME=app-NAME).
    var fdStored = false
    /// The service manager keeps a pidfd of its process too (FDNAME=pidfd-NAME): the next daemon watches the very
    /// process it started, not whatever holds its pid by then.
    var pidfdStored = false
    /// For a process re-adopted from a previous daemon or attached (not our child): its pidfd, watched for the exit.
    var pidfd: FileDescriptor?
    var connection: Connection?
    /// The app's stdout and stderr, when they come through the daemon (no journal).
    var output: OutputReader?
    /// Where that output is written, rate-limited: kept across launches, so a relaunch starts no new burst.
    var outputLog: AppOutputLog?
    var helloed = false
    /// The secret a client presents to reconnect on the app socket after a restart of the daemon.
    var token: String?
    var timers: [TimerKind: LoopTimer] = [:]
    var cgroup: AppCgroup?
    /// The launch whose child waits before execve until the app's place holds it (`AppPlace.holdsLaunch`), until
    /// the child has exec'd or ended.
    var launchHold: LaunchHold?
    /// The priority class applied to the running process.
    var priority: PriorityClass?
    /// Wall-clock time of the last transition (seconds since the epoch), for `since`.
    var sinceWall: Double = wallClockNow()
    /// lifectl connections and D-Bus calls waiting for this app to settle.
    var waiters: [any RequestWaiter] = []
    /// The daemon's own stop of the process: running, stopping, or stopped, and how, so that resume undoes the
    /// same thing.
    var suspension: SuspensionState = .running
    /// The recheck of a stop not yet confirmed, made once per app. Its cancel is lazy (`LoopTimer`): a suspend
    /// confirmed by the kernel's report, and its resume, touch no timer.
    var stopCheck: LoopTimer?
    /// Its state file is to be saved when the callback returns (it is on `Persistence`'s list).
    var dirty = false
    /// `members()` as read in one loop iteration (`members(iteration:)`).
    private var membersRead: (iteration: UInt64, leader: pid_t?, pids: [pid_t])?
    /// Removed from the config while running: forget it once it has exited.
    var removeWhenStopped = false
    /// For an app adopted from the desktop (`[Adopt]`): what it is, as status shows it (`scope UNIT`, `process PID`).
    var adoptedAs: String?
    /// Its process's last memory reclaim (`MemoryReclaimer`), for status.
    var reclaim: ReclaimRecord?

    init(name: String, config: AppConfig, place: any AppPlace) {
        self.name = name
        self.config = config
        self.place = place
    }

    /// A process became the app's (launched, re-adopted, or attached): nothing of the previous one's client or
    /// priority applies to it. `pidfd`: the process's, for one that is not the daemon's child.
    func began(pid: pid_t, pidfd: FileDescriptor? = nil, token: String?) {
        self.pid = pid
        self.pidfd = pidfd
        self.token = token
        helloed = false
        priority = nil
        suspension = .running
        reclaim = nil
    }

    /// The process is the app's no more (it exited, was let go, or never became the app): nothing of its stop,
    /// priority or identity is left. Returns the processes its stop had stopped, for the caller to continue any
    /// that outlive it.
    @discardableResult
    func processEnded() -> [pid_t] {
        let stopped = suspension.members
        // A child still held ends with its hold (it reads an end of file).
        launchHold = nil
        stopCheck?.cancel()
        suspension = .running
        pid = nil
        pidfd = nil
        token = nil
        priority = nil
        membersRead = nil
        return stopped
    }

    /// The app's processes as its place finds them, read at most once per loop iteration: a suspend (or resume)
    /// writes each member's oom_score_adj, signals the members outside the process group and checks the stop, all
    /// in one callback. A later callback reads them again (`EventLoop.iteration`).
    func members(iteration: UInt64) -> [pid_t] {
        if let read = membersRead, read.iteration == iteration, read.leader == pid { return read.pids }
        let pids = place.members(of: self)
        membersRead = (iteration, pid, pids)
        return pids
    }

    /// The members as a stop needs them, read afresh (`AppPlace.members(of:fresh:)`), and kept for the rest of
    /// this iteration.
    func membersForStop(iteration: UInt64) -> [pid_t] {
        let pids = place.members(of: self, fresh: true)
        membersRead = (iteration, pid, pids)
        return pids
    }

    /// Lets the held child `leader` exec, if it is this app's and still waits. Returns whether it did.
    @discardableResult
    func releaseLaunch(of leader: pid_t) -> Bool {
        guard let hold = launchHold, hold.pid == leader, !hold.spawn.isReleased else { return false }
        hold.spawn.release()
        return true
    }

    /// An external app with `ExternalFrom=process-group`: stopped and killed by its process group alone. It gets no
    /// cgroup of the daemon's, whose freezer would freeze an empty group and take the app for suspended.
    var usesProcessGroupAlone: Bool { config.external && config.externalFrom == .processGroup }
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
