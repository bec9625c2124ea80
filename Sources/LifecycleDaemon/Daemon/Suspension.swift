import Glibc
import LifecycleModel

/// How an app is stopped: SIGSTOP to the process group by default; the cgroup freezer (`SuspendMethod=freezer`)
/// where the app's place has one.
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

/// Stopping and continuing apps, and the confirmation that a stop took: every process shows `T` in /proc, or
/// the cgroup reports frozen. Each app's `SuspensionState` says how far its stop has come, which tells the
/// kernel's stop and continue reports of the daemon's own signals from someone else's.
final class Suspension {
    private let loop: EventLoop
    private unowned let host: any DaemonHost
    /// Where each process stopped for an adopted app is written before its SIGSTOP.
    private let ledger: StopLedger?
    /// A stop is given this long to take before the daemon says some processes still run.
    static let confirmationLimit: Duration = .seconds(2)
    /// The longest wait between two checks of a stop.
    static let recheckLimit: Duration = .milliseconds(32)

    init(loop: EventLoop, host: any DaemonHost, ledger: StopLedger? = nil) {
        self.loop = loop
        self.host = host
        self.ledger = ledger
    }

    func suspend(_ app: AppRuntime) {
        guard let pid = app.pid else { return }
        let name = app.name
        var mechanism = SuspendMechanism.signal
        if app.config.suspendMethod == .freezer {
            if let kind = app.place.freezer(of: app) {
                do {
                    try app.place.freeze(app)
                    mechanism = .freezer(kind)
                } catch {
                    Log.warning("\(name): Failed to freeze its cgroup: \(error); using SIGSTOP")
                }
            } else {
                Log.notice("\(name): SuspendMethod=freezer, but it has no cgroup freezer here; using SIGSTOP")
            }
        }
        // Read afresh: a priority change reuses what the last stop found outside the app's tree.
        let members = app.membersForStop(iteration: loop.iteration)
        if mechanism == .signal {
            // An adopted app's processes are not the daemon's children and may leave its tree while stopped: each is
            // written down first, in one write, so that a next daemon or `resume --all` continues it.
            if app.config.policy.adopted { ledger?.record(name, pids: [pid] + members) }
            kill(-pid, SIGSTOP)
            // A child that left the group (setsid) is still in the app's cgroup: it is stopped too.
            for member in membersOutsideGroup(app, leader: pid) { kill(member, SIGSTOP) }
        }
        app.suspension = .stopping(mechanism, members: members, since: loop.now)
        if mechanism == .signal && app.pidfd == nil {
            // Our own child: the kernel reports its stop (CLD_STOPPED), which confirms it without a read of /proc,
            // and the other members are checked then. /proc read at once, before the signal has landed, mostly
            // shows it running. The recheck stays armed in case no report comes (someone's SIGCONT cut it short).
            armCheck(app)
        } else {
            confirm(name)
        }
    }

    /// The stop is confirmed when every process shows `T` in /proc (or the cgroup reports frozen). Signals are
    /// delivered asynchronously, so it is rechecked until `confirmationLimit`: after a millisecond at first, then
    /// after half the time it has taken so far (at most `recheckLimit`), so that a process slow to stop on a busy
    /// machine costs a few dozen reads of /proc, not one per millisecond.
    /// `leaderStopped`: the kernel reported the stop of the leader (our child), so only the other processes the
    /// suspension stopped are read in /proc, and none for an app of one process.
    func confirm(_ name: String, leaderStopped: Bool = false) {
        guard let app = host.runtime(name), let pid = app.pid,
              case .stopping(let mechanism, let stopMembers, let since) = app.suspension else { return }
        let members: [pid_t]
        let confirmed: Bool
        switch mechanism {
        case .signal where app.place.reachesBeyondProcessGroup(app):
            // Read afresh, once: a process forked since the last reading is stopped too.
            members = app.place.members(of: app)
            confirmed = stopNewcomers(app, members, leader: pid, leaderStopped: leaderStopped)
        case .signal:
            members = leaderStopped ? stopMembers : app.members(iteration: loop.iteration)
            confirmed = leaderStopped ? ProcessTable.noneRunning(members.filter { $0 != pid }) : ProcessTable.allStopped(members)
        case .freezer:
            // The cgroup answers for all of them; the members are read only for the count in the log.
            members = stopMembers
            confirmed = app.place.isFrozen(app)
        }
        let elapsed = loop.now - since
        if confirmed {
            app.suspension = .stopped(mechanism, members: stopMembers)
            app.stopCheck?.cancel()
            let count = max(members.count, 1)
            Log.info("\(name): suspended with \(mechanism.description): \(count) process\(count == 1 ? "" : "es") stopped, confirmed after \(Int(elapsed / .microseconds(1))) µs")
        } else if elapsed < Self.confirmationLimit {
            armCheck(app, after: max(.milliseconds(1), min(elapsed / 2, Self.recheckLimit)))
        } else {
            app.suspension = .stopped(mechanism, members: stopMembers)
            let running = members.filter { !ProcessTable.stoppedOrStopping($0) }
            let named = running.prefix(8).map { "\($0) (\(ProcessTable.state(of: $0).map(String.init) ?? "?"))" }
            Log.warning("\(name): Failed to confirm the suspension within 2s: some processes are still running"
                + (named.isEmpty ? "" : ": \(named.joined(separator: ", "))"))
        }
    }

    func resume(_ name: String) {
        guard let app = host.runtime(name), let pid = app.pid else { return }
        app.stopCheck?.cancel()
        switch app.suspension.mechanism {
        case .freezer:
            do { try app.place.thaw(app) } catch { Log.error("\(name): Failed to thaw its cgroup: \(error)") }
            // What was stopped and has left the app's tree since (its parent died) is reached through the ledger.
            ledger?.continueAll(of: name)
        case .signal, nil:
            // An adopted app's stopped processes are each in the ledger, written before its SIGSTOP: the ledger
            // continues them without a walk of the tree (which, for a tree that takes in its launch session, reads
            // the children of that session's reaper), and no process that someone else stopped, nor one that has
            // left the app's tree since. It goes first, as it reads /proc before it signals: so all the signals go
            // out before a continued process takes the CPU.
            let outside = app.config.policy.adopted && ledger != nil ? [] : membersOutsideGroup(app, leader: pid)
            ledger?.continueAll(of: name)
            kill(-pid, SIGCONT)
            for member in outside { kill(member, SIGCONT) }
        }
        app.suspension = .running
    }

    func signal(_ app: AppRuntime, _ signal: TerminationSignal) {
        guard let pid = app.pid else {
            // A held launch whose child has not told its pid yet: the signal waits for it (`ProcessSupervisor.heard`).
            if let hold = app.launchHold, hold.pid == nil { hold.pendingSignal = signal }
            return
        }
        switch signal {
        case .terminate:
            // Each process the group signal misses (an adopted process, a child that called setsid()) is asked
            // too, so that it ends on its own terms rather than at the SIGKILL after the stop timeout.
            kill(-pid, SIGTERM)
            for member in membersOutsideGroup(app, leader: pid) { kill(member, SIGTERM) }
        case .kill: app.place.killAll(app, leader: pid)
        }
        Log.info("\(app.name): sent \(signal.rawValue) to process group \(pid)")
    }

    /// The members of the app's place outside its process group (a child that called setsid()), which the signal
    /// to the group does not reach. None where the process group is all there is. The process the daemon spawned
    /// leads its group for good (a session leader cannot change its group): no getpgid for it.
    private func membersOutsideGroup(_ app: AppRuntime, leader pid: pid_t) -> [pid_t] {
        guard app.place.reachesBeyondProcessGroup(app) else { return [] }
        return app.members(iteration: loop.iteration).filter { member in
            !(member == pid && app.pidfd == nil) && getpgid(member) != pid
        }
    }

    /// The stop as the app's cgroup holds it now, not as it was listed before the signals: a process that a child
    /// outside the process group (setsid) forked meanwhile is stopped too, and the stop is confirmed only once no
    /// process in the cgroup runs. A process outside any cgroup of the app is beyond reach: the process group
    /// placement's limit (docs/RELIABILITY.md).
    private func stopNewcomers(_ app: AppRuntime, _ members: [pid_t], leader pid: pid_t, leaderStopped: Bool) -> Bool {
        let others = leaderStopped ? members.filter { $0 != pid } : members
        let running = others.filter { !ProcessTable.stoppedOrStopping($0) }
        if app.config.policy.adopted, !running.isEmpty { ledger?.record(app.name, pids: running) }
        for member in running { kill(member, SIGSTOP) }
        return running.isEmpty && (leaderStopped || members.contains { ProcessTable.state(of: $0) == "T" })
    }

    private func armCheck(_ app: AppRuntime, after delay: Duration = .milliseconds(1)) {
        let name = app.name
        if app.stopCheck == nil {
            app.stopCheck = try? LoopTimer(loop: loop, lazyCancel: true) { [unowned self] in self.confirm(name) }
        }
        app.stopCheck?.arm(after: delay)
    }
}
