/// How a connection to an outside server (a display server, the bus, the sound server) comes back: the next attempt
/// after a delay that doubles up to a cap, from a timer, so that nothing polls while the server is away.
final class Reconnection {
    private let first: Duration
    private let cap: Duration
    private(set) var delay: Duration
    private var timer: LoopTimer?

    /// `attempt` runs on the loop when a scheduled delay has passed.
    init(loop: EventLoop, first: Duration, cap: Duration, attempt: @escaping () -> Void) throws(SystemError) {
        self.first = first
        self.cap = cap
        delay = first
        timer = try LoopTimer(loop: loop, attempt)
    }

    /// No attempt failed since the last success: a loss worth a log line, where later failures are not.
    var isFirstFailure: Bool { delay == first }

    /// The next attempt after the current delay, which then doubles; returns the delay used.
    @discardableResult
    func schedule() -> Duration {
        let used = delay
        timer?.arm(after: used)
        delay = min(delay * 2, cap)
        return used
    }

    /// An attempt now, from the loop, without waiting.
    func now() { timer?.arm(after: .zero) }

    /// The connection is up: the next loss starts again from the first delay.
    func succeeded() { delay = first }

    func cancel() { timer?.cancel() }
}
