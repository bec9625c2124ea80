import Glibc

/// Held children that never became an app's, however their launch went (the watch on their hold could not be made,
/// the app went or was launched again, the child watch failed): each is told to end and is reaped on the loop. The
/// hold's write side shuts, so a child still held reads an end of file and exits (`CS_HOLD_DROPPED_STATUS`), while
/// its report, with its pid, can still be read. A timer with a growing delay reads the reports and reaps with
/// `waitpid(WNOHANG)`: it needs no descriptor of its own, where the failure that brought a child here is often the
/// loop's want of one.
final class AbandonedHolds {
    private struct Entry {
        /// The hold, whose reports give the pid and whose end of file says the spawn's thread let go; nil where only
        /// the pid is left.
        var spawn: HeldSpawn?
        var pid: pid_t?
    }

    private let loop: EventLoop
    private var entries: [Entry] = []
    private var timer: LoopTimer?
    private var delay: Duration = .zero
    static let firstDelay: Duration = .milliseconds(10)
    static let longestDelay: Duration = .seconds(1)

    init(loop: EventLoop) {
        self.loop = loop
    }

    /// How many children are still to be reaped, or their pids learned.
    var count: Int { entries.count }

    /// Ends `spawn`'s child if it is still held and reaps it: `pid` where it is known already, else from its report.
    func take(_ spawn: HeldSpawn?, pid: pid_t?) {
        spawn?.drop()
        entries.append(Entry(spawn: spawn, pid: pid))
        delay = Self.firstDelay
        sweep()
    }

    private func sweep() {
        var left: [Entry] = []
        for var entry in entries where pending(&entry) { left.append(entry) }
        entries = left
        guard !entries.isEmpty else { timer?.cancel(); return }
        if timer == nil {
            do {
                timer = try LoopTimer(loop: loop) { [unowned self] in self.sweep() }
            } catch {
                // The next child taken tries again; until then these wait as zombies, or as children still setting up.
                return Log.error("Failed to make the timer that reaps abandoned launches: \(error); \(entries.count) wait for the next")
            }
        }
        timer?.arm(after: delay)
        delay = min(delay * 2, Self.longestDelay)
    }

    /// Reads what the entry's hold says and reaps its child if it ended; whether anything is left to wait for.
    private func pending(_ entry: inout Entry) -> Bool {
        var ended = entry.spawn == nil
        reading: while let spawn = entry.spawn {
            switch spawn.nextReport() {
            case .held(let pid): entry.pid = pid
            case .failed(let pid, _): if let pid { entry.pid = pid }
            case .ended: ended = true; entry.spawn = nil
            case .nothing: break reading
            }
        }
        guard let pid = entry.pid else { return !ended }
        var status: Int32 = 0
        let reaped = waitpid(pid, &status, WNOHANG)
        return !(reaped == pid || (reaped < 0 && errno == ECHILD))
    }
}
