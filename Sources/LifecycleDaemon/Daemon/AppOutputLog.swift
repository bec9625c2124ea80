/// One app's share of the daemon's log for its own output (no journal): its lines go to stderr, prefixed with its
/// name, within `OutputRateLimit.standard`; the lines over it are counted and the count is logged once when the
/// interval ends, or when the app closes its output. Kept by the app's runtime across launches, so that an app
/// that floods and is started again gets no new burst.
final class AppOutputLog {
    private let app: String
    private let prefix: [UInt8]
    private unowned let loop: EventLoop
    private var limit: OutputRateLimit
    private var reportTimer: LoopTimer?

    init(app: String, loop: EventLoop, limit: OutputRateLimit = .standard) {
        self.app = app
        prefix = Array((app + ": ").utf8)
        self.loop = loop
        self.limit = limit
    }

    /// One line (or piece of a long one) the app wrote.
    func write(_ line: UnsafeBufferPointer<UInt8>) {
        let verdict = limit.admit(size: line.count, at: loop.now)
        if verdict.endedWithDrops > 0 { report(verdict.endedWithDrops) }
        if verdict.write { Log.writeOutput(prefix: prefix, line) }
        if verdict.armTimer, let end = limit.intervalEnd { armReport(at: end) }
    }

    /// The app closed its output: what it had dropped is reported now, not left to a timer the daemon's exit
    /// may not wait for.
    func outputClosed() {
        reportTimer?.cancel()
        report(limit.takeDropped())
    }

    private func armReport(at end: Duration) {
        if reportTimer == nil {
            reportTimer = try? LoopTimer(loop: loop) { [unowned self] in self.report(self.limit.expire(at: self.loop.now)) }
        }
        reportTimer?.arm(after: max(.zero, end - loop.now))
    }

    private func report(_ count: Int) {
        guard count > 0 else { return }
        Log.warning("\(app): \(count) line\(count == 1 ? "" : "s") of output dropped (more than \(limit.burstLines) lines or \(limit.burstBytes / 1024) KiB within \(describe(limit.interval)))")
    }
}
