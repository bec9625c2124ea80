import Glibc
import LifecycleModel
import LifecycleProtocol

/// An app's last reclaim, as status and the bus show it.
struct ReclaimRecord: Equatable {
    enum Method: String {
        /// The app's cgroup2 group, where the memory controller is there.
        case cgroup = "memory.reclaim"
        /// Each member process's private mappings.
        case pageOut = "process_madvise"
    }

    enum Outcome: String {
        case running
        case done
        /// The app ran again or ended before the work was over.
        case stopped
        /// The kernel refused (no process_madvise, no right to another user's process).
        case failed
    }

    var method: Method
    var outcome: Outcome
    /// Whether the machine had swap: without it only file pages can leave RAM.
    var swap: Bool
    var before: ProcessMemory
    var after: ProcessMemory?
    /// Wall-clock seconds when it began.
    var beganWall: Double
    var duration: Duration?

    func status() -> ReclaimStatus {
        ReclaimStatus(method: method.rawValue, outcome: outcome.rawValue, swap: swap, began: rfc3339(beganWall),
                      residentBefore: before.resident, swappedBefore: before.swapped,
                      residentAfter: after?.resident, swappedAfter: after?.swapped,
                      anonymousBefore: before.residentAnonymous, anonymousAfter: after?.residentAnonymous,
                      seconds: duration.map { Double($0 / .microseconds(1)) / 1e6 })
    }
}

/// Takes suspended apps' memory out of RAM when the model asks (`Effect.reclaimMemory`), on the loop, one bounded
/// step per turn of it: a write of `stepBytes` to the app's memory.reclaim, or a process_madvise over at most
/// `stepBytes` of one process's private mappings. Apps wait their turn in a queue, each done before the next, so
/// that the first ones give their memory back soonest; a hundred apps suspended at once cost the loop a hundred
/// queued jobs, never a stall. An app that runs again or ends leaves the queue at once.
final class MemoryReclaimer {
    private let loop: EventLoop
    private unowned let host: any DaemonHost
    private let observers: AppObservers
    /// The most one step asks of the kernel. Paging out costs the kernel time in proportion to the pages it walks
    /// and compresses, so a step stays in the order of milliseconds (docs/BENCHMARKS.md).
    static let stepBytes: UInt = 4 << 20

    private struct Job {
        let name: String
        /// The process the app was when the work began: another one (a restart) is not this job's.
        let pid: pid_t
        let began: MonotonicTime
        var work: Work
    }

    private enum Work {
        /// memory.reclaim on the group at `path`, until `left` bytes were asked or the kernel found no more.
        case cgroup(path: String, left: UInt64)
        /// The processes still to page out, and the one being paged out.
        case pageOut(waiting: [pid_t], current: PageOut?)
    }

    private var queue: [Job] = []
    /// The deferred source that runs one step per loop turn while the queue holds work, made once.
    private var stepper: EventSource?
    /// Told once in the log: with no swap, only file pages can leave RAM.
    private var toldNoSwap = false
    /// Told once: process_madvise over another process needs CAP_SYS_NICE, which a user's daemon lacks.
    private var toldNoPermission = false

    init(loop: EventLoop, host: any DaemonHost, observers: AppObservers) {
        self.loop = loop
        self.host = host
        self.observers = observers
    }

    /// Whether anonymous memory can leave RAM here, for the daemon's status.
    var description: String {
        swapIsOn() ? "reclaim: swap on" : "reclaim: no swap: only file pages leave RAM, anonymous memory stays"
    }

    /// The model's `reclaimMemory`: queue the app's reclaim, measured first.
    func start(_ app: AppRuntime) {
        guard let pid = app.pid, app.suspension != .running else { return }
        stop(app.name, outcome: .stopped)
        let members = app.members(iteration: loop.iteration)
        let swap = swapIsOn()
        if !swap, !toldNoSwap {
            toldNoSwap = true
            Log.notice("reclaim: the machine has no swap: only file pages of suspended apps leave RAM, their anonymous memory stays (docs/CONFIG.md says how to add compressed swap)")
        }
        let work: Work
        if let path = app.cgroup?.unifiedPath, fileExists(path + "/memory.reclaim"), let charged = cgroupMemoryCurrent(path) {
            work = .cgroup(path: path, left: charged)
        } else {
            work = .pageOut(waiting: members.isEmpty ? [pid] : members, current: nil)
        }
        let method: ReclaimRecord.Method = if case .cgroup = work { .cgroup } else { .pageOut }
        app.reclaim = ReclaimRecord(method: method, outcome: .running, swap: swap, before: Self.memory(of: members),
                                    beganWall: wallClockNow())
        queue.append(Job(name: app.name, pid: pid, began: loop.now, work: work))
        armStepper()
    }

    /// The app left its suspension (resumed, continued by someone else, or ended): its reclaim, if any is under
    /// way, stops where it is.
    func stop(_ name: String, outcome: ReclaimRecord.Outcome = .stopped) {
        guard let index = queue.firstIndex(where: { $0.name == name }) else { return }
        let job = queue.remove(at: index)
        if let app = host.runtime(name) { finish(job, app, outcome: outcome) }
    }

    /// Jobs waiting or under way, for tests and status.
    var pending: Int { queue.count }

    /// sd-event's SD_EVENT_PRIORITY_IDLE: dispatched only when no source of a smaller value is pending.
    static let idlePriority: Int64 = 100

    private func armStepper() {
        if stepper == nil {
            stepper = try? loop.deferred { [unowned self] in self.step() }
            // A deferred source stays pending while it is on, from the iteration it was first enabled, so at an equal
            // priority it would always be the one pending longest and take every turn of the loop. At the idle
            // priority every other pending source (a request, a stop's check, a client) goes first, one step between
            // them.
            stepper?.setPriority(Self.idlePriority)
        }
        stepper?.enable()
    }

    private func step() {
        guard !queue.isEmpty else {
            stepper?.disarm()
            return
        }
        var job = queue[0]
        guard let app = host.runtime(job.name), app.pid == job.pid, app.suspension != .running else {
            queue.removeFirst()
            if let app = host.runtime(job.name) { finish(job, app, outcome: .stopped) }
            return
        }
        var over = false
        do {
            switch job.work {
            case .cgroup(let path, let left):
                let asked = min(left, UInt64(Self.stepBytes))
                let complete = try reclaimCgroupMemory(path, bytes: asked)
                over = !complete || asked >= left
                job.work = .cgroup(path: path, left: left - asked)
            case .pageOut(var waiting, var current):
                if current == nil, !waiting.isEmpty {
                    let pid = waiting.removeFirst()
                    // A member that ended since the list was read has nothing left to page out.
                    current = try? PageOut(pid: pid)
                }
                if var pageOut = current {
                    do {
                        try pageOut.step(budget: Self.stepBytes)
                        current = pageOut.done ? nil : pageOut
                    } catch where error.errno == ESRCH {
                        current = nil
                    }
                }
                over = current == nil && waiting.isEmpty
                job.work = .pageOut(waiting: waiting, current: current)
            }
        } catch {
            if error.errno == EPERM {
                if !toldNoPermission {
                    toldNoPermission = true
                    Log.notice("reclaim: \(error): paging out an app's memory needs CAP_SYS_NICE; suspended apps keep their memory")
                }
            } else {
                Log.warning("\(job.name): Failed to reclaim its memory: \(error), ignoring")
            }
            queue.removeFirst()
            finish(job, app, outcome: .failed)
            return
        }
        if over {
            queue.removeFirst()
            finish(job, app, outcome: .done)
        } else {
            queue[0] = job
        }
        if queue.isEmpty { stepper?.disarm() }
    }

    private func finish(_ job: Job, _ app: AppRuntime, outcome: ReclaimRecord.Outcome) {
        guard var record = app.reclaim, record.outcome == .running else { return }
        record.outcome = outcome
        record.duration = loop.now - job.began
        record.after = app.pid == job.pid ? Self.memory(of: app.members(iteration: loop.iteration)) : nil
        app.reclaim = record
        let took = describe(record.duration)
        switch outcome {
        case .done:
            let after = record.after ?? ProcessMemory()
            Log.info("\(job.name): memory reclaimed with \(record.method.rawValue) in \(took): resident \(Self.mebibytes(record.before.resident)) → \(Self.mebibytes(after.resident)), swapped \(Self.mebibytes(record.before.swapped)) → \(Self.mebibytes(after.swapped))"
                     + (record.swap ? "" : " (no swap: only file pages leave RAM)"))
        case .stopped:
            Log.debug("\(job.name): memory reclaim stopped after \(took): the app runs again or ended")
        case .failed, .running:
            break
        }
        observers.tell(.details(job.name))
    }

    /// What the processes hold together, from /proc/PID/status.
    static func memory(of pids: [pid_t]) -> ProcessMemory {
        pids.reduce(ProcessMemory()) { total, pid in total + (ProcessMemory.of(pid) ?? ProcessMemory()) }
    }

    static func mebibytes(_ bytes: UInt64) -> String {
        let tenths = (bytes * 10 + (1 << 19)) >> 20
        return "\(tenths / 10).\(tenths % 10) MiB"
    }
}
