import CSupport
import Glibc
import Synchronization

/// The threads that page suspended apps' memory out for `MemoryReclaimer`, off the loop: the kernel's page-out
/// (compressing every page into swap) is the cost of a reclaim, and on the loop it would hold one CPU and the loop
/// with it while the others idle. One thread per online CPU, at most `maximumThreads`, started at the first job;
/// each runs at nice 19 so that the loop and the apps in front come first, takes the first job nobody has taken (the
/// first suspended is the first paged out), and does it in steps of at most `stepBytes`, looking between two steps
/// whether the job was cancelled: a cancelled job stops within one step. The loop never waits on a thread: a job's
/// end is posted on an eventfd the loop watches (`finishedDescriptor`), and `takeFinished` collects it there.
final class ReclaimWorkers: Sendable {
    /// What a job asks of the kernel.
    enum Work: Sendable, Equatable {
        /// memory.reclaim on the group at `path`, until `bytes` were asked or the kernel found no more.
        case cgroup(path: String, bytes: UInt64)
        /// The private mappings of these processes, one after the other.
        case pageOut(pids: [pid_t])
    }

    enum Outcome: Sendable, Equatable {
        case done
        case failed(SystemError)
    }

    struct Finished: Sendable, Equatable {
        let id: UInt64
        let outcome: Outcome
    }

    static let maximumThreads = 4

    private struct State {
        /// Jobs nobody has taken yet, first submitted first.
        var waiting: [(id: UInt64, work: Work)] = []
        var running: Set<UInt64> = []
        /// Jobs cancelled while a thread runs them: it drops them at its next look.
        var cancelled: Set<UInt64> = []
        var finished: [Finished] = []
        var threads = 0
        var closing = false
    }

    private let state = Mutex(State())
    /// Counts the jobs submitted (semaphore mode): an idle thread blocks in read(2) on it.
    private let wake: Int32
    /// Counts the jobs ended; the loop watches it.
    private let finished: Int32
    let stepBytes: UInt
    let threadLimit: Int

    /// Throws when no eventfd can be had (out of descriptors).
    init(stepBytes: UInt, threads: Int = ReclaimWorkers.onlineCPUs) throws(SystemError) {
        self.stepBytes = stepBytes
        threadLimit = max(1, min(threads, Self.maximumThreads))
        let wake = cs_eventfd(1, 0)
        guard wake >= 0 else { throw SystemError(operation: "eventfd", errno: errno) }
        let finished = cs_eventfd(0, 1)
        guard finished >= 0 else {
            let error = errno
            close(wake)
            throw SystemError(operation: "eventfd", errno: error)
        }
        self.wake = wake
        self.finished = finished
    }

    deinit {
        close(wake)
        close(finished)
    }

    static var onlineCPUs: Int { max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

    /// Readable when jobs have ended; `takeFinished` resets it.
    var finishedDescriptor: Int32 { finished }

    /// Queues a job behind the others; the first idle thread takes it.
    func submit(_ id: UInt64, _ work: Work) {
        let start = state.withLock { state -> Int in
            state.waiting.append((id, work))
            let start = state.closing ? 0 : threadLimit - state.threads
            state.threads += start
            return start
        }
        if start > 0 { startThreads(start) }
        post(wake)
    }

    /// The job stops: taken out of the queue, or dropped by its thread after the step under way. No `Finished` of
    /// it is posted afterwards, though one posted just before may still be collected.
    func cancel(_ id: UInt64) {
        state.withLock { state in
            if let index = state.waiting.firstIndex(where: { $0.id == id }) {
                state.waiting.remove(at: index)
            } else if state.running.contains(id) {
                state.cancelled.insert(id)
            }
        }
    }

    /// The jobs that ended since the last call, in the order they ended; for the loop, when `finishedDescriptor`
    /// is readable.
    func takeFinished() -> [Finished] {
        var count: UInt64 = 0
        _ = read(finished, &count, 8)
        return state.withLock { state in
            defer { state.finished = [] }
            return state.finished
        }
    }

    /// The threads end after their step under way; the jobs left are dropped.
    func shutDown() {
        let threads = state.withLock { state in
            state.closing = true
            state.waiting = []
            state.cancelled.formUnion(state.running)
            return state.threads
        }
        for _ in 0..<threads { post(wake) }
    }

    private func post(_ descriptor: Int32) {
        var one: UInt64 = 1
        _ = write(descriptor, &one, 8)
    }

    private func startThreads(_ count: Int) {
        var started = 0
        for _ in 0..<count {
            // The thread holds the workers until it ends.
            let context = Unmanaged.passRetained(self).toOpaque()
            let result = cs_start_detached_thread({ context in
                Unmanaged<ReclaimWorkers>.fromOpaque(context!).takeRetainedValue().run()
                return nil
            }, context, 512 << 10)
            guard result == 0 else {
                Unmanaged<ReclaimWorkers>.fromOpaque(context).release()
                break
            }
            started += 1
        }
        if started < count {
            // At least one thread is needed for the jobs to end; with none, the next submit tries again.
            state.withLock { $0.threads -= count - started }
        }
    }

    private enum Next {
        case job(UInt64, Work)
        case idle
        case exit
    }

    /// The reclaim threads' name, as ps, top and /proc show them.
    static let threadName = "reclaim"

    private func run() {
        _ = cs_lower_thread_priority()
        _ = Self.threadName.withCString { cs_set_thread_name($0) }
        while true {
            let next = state.withLock { state -> Next in
                if state.closing {
                    state.threads -= 1
                    return .exit
                }
                guard !state.waiting.isEmpty else { return .idle }
                let job = state.waiting.removeFirst()
                state.running.insert(job.id)
                return .job(job.id, job.work)
            }
            switch next {
            case .exit:
                return
            case .idle:
                var count: UInt64 = 0
                _ = read(wake, &count, 8)
            case .job(let id, let work):
                let outcome = perform(id, work)
                let posted = state.withLock { state -> Bool in
                    state.running.remove(id)
                    guard state.cancelled.remove(id) == nil, let outcome else { return false }
                    state.finished.append(Finished(id: id, outcome: outcome))
                    return true
                }
                if posted { post(finished) }
            }
        }
    }

    private func isCancelled(_ id: UInt64) -> Bool {
        state.withLock { $0.cancelled.contains(id) }
    }

    /// The job, step by step; nil when it was cancelled between two steps.
    private func perform(_ id: UInt64, _ work: Work) -> Outcome? {
        switch work {
        case .cgroup(let path, var left):
            while left > 0 {
                if isCancelled(id) { return nil }
                let asked = min(left, UInt64(stepBytes))
                do {
                    if try !reclaimCgroupMemory(path, bytes: asked) { return .done }
                } catch {
                    return .failed(error)
                }
                left -= asked
            }
            return .done
        case .pageOut(let pids):
            for pid in pids {
                if isCancelled(id) { return nil }
                // A member that ended since the list was read has nothing left to page out.
                guard var pageOut = try? PageOut(pid: pid) else { continue }
                while !pageOut.done {
                    if isCancelled(id) { return nil }
                    do {
                        try pageOut.step(budget: stepBytes)
                    } catch where error.errno == ESRCH {
                        break
                    } catch {
                        return .failed(error)
                    }
                }
            }
            return .done
        }
    }
}
