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

/// Takes suspended apps' memory out of RAM when the model asks (`Effect.reclaimMemory`). The kernel's work (a write
/// of at most `stepBytes` to the app's memory.reclaim, or a process_madvise over at most `stepBytes` of one process's
/// private mappings, step after step) runs on `ReclaimWorkers`' threads, one per CPU at the lowest priority, apps
/// taken in the order they were suspended; the loop queues a job, reads the app's memory before and after (a
/// /proc/PID/status per process, cheap) and records the outcome when the job's end comes back, never waiting on a
/// thread. A hundred apps suspended at once cost the loop a hundred queued jobs, never a stall. An app that runs
/// again or ends leaves the queue at once, and its job stops within one step.
final class MemoryReclaimer {
    private let loop: EventLoop
    private unowned let host: any DaemonHost
    private let observers: AppObservers
    /// The most one step asks of the kernel. Paging out costs the kernel time in proportion to the pages it walks
    /// and compresses, so a step stays in the order of milliseconds and a cancelled job ends soon (docs/BENCHMARKS.md).
    static let stepBytes: UInt = 4 << 20

    private struct Job {
        let id: UInt64
        let name: String
        /// The process the app was when the work began: another one (a restart) is not this job's.
        let pid: pid_t
        let began: MonotonicTime
    }

    /// Jobs queued or under way on a thread, in the order they were queued.
    private var jobs: [Job] = []
    private var nextID: UInt64 = 0
    /// Nil when no eventfd could be had: then every reclaim fails at once, and the log says why.
    private let workers: ReclaimWorkers?
    /// Watches the workers' eventfd for jobs that ended.
    private var ended: EventSource?
    /// Told once in the log: with no swap, only file pages can leave RAM.
    private var toldNoSwap = false
    /// Told once: process_madvise over another process needs CAP_SYS_NICE, which a user's daemon lacks.
    private var toldNoPermission = false

    init(loop: EventLoop, host: any DaemonHost, observers: AppObservers) {
        self.loop = loop
        self.host = host
        self.observers = observers
        do {
            workers = try ReclaimWorkers(stepBytes: Self.stepBytes)
        } catch {
            Log.warning("reclaim: Failed to set up the reclaim threads: \(error): suspended apps keep their memory")
            workers = nil
        }
        if let workers {
            do {
                ended = try loop.watch(fd: workers.finishedDescriptor, events: IOEvents.readable) { [unowned self] _ in
                    self.collect()
                }
            } catch {
                // Without the watch no end would come back: the jobs are not queued (see `start`).
                Log.warning("reclaim: Failed to watch the reclaim threads: \(error): suspended apps keep their memory")
            }
        }
    }

    deinit {
        // The source goes before the eventfd it watches can close (the threads hold it until they end).
        ended?.cancel()
        workers?.shutDown()
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
        let work: ReclaimWorkers.Work
        if let path = app.cgroup?.unifiedPath, fileExists(path + "/memory.reclaim"), let charged = cgroupMemoryCurrent(path) {
            work = .cgroup(path: path, bytes: charged)
        } else {
            work = .pageOut(pids: members.isEmpty ? [pid] : members)
        }
        let method: ReclaimRecord.Method = if case .cgroup = work { .cgroup } else { .pageOut }
        app.reclaim = ReclaimRecord(method: method, outcome: .running, swap: swap, before: Self.memory(of: members),
                                    beganWall: wallClockNow())
        let job = Job(id: nextID, name: app.name, pid: pid, began: loop.now)
        nextID += 1
        guard let workers, ended != nil else {
            finish(job, app, outcome: .failed)
            return
        }
        jobs.append(job)
        workers.submit(job.id, work)
    }

    /// The app left its suspension (resumed, continued by someone else, or ended): its reclaim, if any is under
    /// way, stops where it is.
    func stop(_ name: String, outcome: ReclaimRecord.Outcome = .stopped) {
        guard let index = jobs.firstIndex(where: { $0.name == name }) else { return }
        let job = jobs.remove(at: index)
        workers?.cancel(job.id)
        if let app = host.runtime(name) { finish(job, app, outcome: outcome) }
    }

    /// Jobs waiting or under way, for tests and status.
    var pending: Int { jobs.count }

    /// The jobs the threads ended: each app's record gets its outcome, unless the app is no longer the one that
    /// was suspended.
    private func collect() {
        guard let workers else { return }
        for ended in workers.takeFinished() {
            // A job stopped by the loop meanwhile is no longer listed: its end is old news.
            guard let index = jobs.firstIndex(where: { $0.id == ended.id }) else { continue }
            let job = jobs.remove(at: index)
            guard let app = host.runtime(job.name) else { continue }
            guard app.pid == job.pid, app.suspension != .running else {
                finish(job, app, outcome: .stopped)
                continue
            }
            switch ended.outcome {
            case .done:
                finish(job, app, outcome: .done)
            case .failed(let error):
                if error.errno == EPERM {
                    if !toldNoPermission {
                        toldNoPermission = true
                        Log.notice("reclaim: \(error): paging out an app's memory needs CAP_SYS_NICE; suspended apps keep their memory")
                    }
                } else {
                    Log.warning("\(job.name): Failed to reclaim its memory: \(error), ignoring")
                }
                finish(job, app, outcome: .failed)
            }
        }
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
