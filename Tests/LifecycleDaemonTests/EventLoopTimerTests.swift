import Testing
@testable import LifecycleDaemon

/// sd-event fires a timer up to its accuracy late (to coalesce wakeups); created with 0 it takes its default, 250 ms,
/// which made a 1 ms recheck fire up to 251 ms late. `arm(after:)` sets 5% of the delay, at least 1 µs, at most 250 ms.
@Suite struct EventLoopTimerTests {
    @Test func aTimerMayBeLateByAFewPercentOfItsDelayAtMost() throws {
        let loop = try EventLoop()
        let timer = try loop.timer {}
        let expected: [(Duration, UInt64)] = [
            (.milliseconds(1), 50), (.milliseconds(200), 10_000), (.seconds(2), 100_000),
            (.seconds(30), 250_000), (.microseconds(10), 1), (.zero, 1),
        ]
        for (delay, accuracy) in expected {
            timer.arm(after: delay)
            #expect(timer.timeAccuracy == accuracy, "armed after \(delay)")
        }
    }
}
