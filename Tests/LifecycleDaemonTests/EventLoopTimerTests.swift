import Glibc
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

/// LoopTimer's lazy cancel (the ack deadline): a cancel leaves the sd-event source armed, so the source fires once
/// more for nothing; the handler must run only at what is due, never at a time a cancelled arming had.
@Suite struct LoopTimerTests {
    /// Runs the loop until `exit` is called, or 5 s pass (then the expectation fails).
    private func run(_ loop: EventLoop) throws {
        let guardTimer = try loop.timer { loop.exit(code: 1) }
        guardTimer.arm(after: .seconds(5))
        #expect(loop.run() == 0, "the loop ran into the 5 s guard")
    }

    /// A new timer, given to `arm`, and the loop run until its handler ran: how long after the start it did.
    private func firedAt(lazyCancel: Bool, _ arm: (LoopTimer) -> Void) throws -> Duration? {
        let loop = try EventLoop()
        let start = loop.now
        var ranAt: Duration?
        let timer = try LoopTimer(loop: loop, lazyCancel: lazyCancel) {
            ranAt = loop.now - start
            loop.exit()
        }
        arm(timer)
        try run(loop)
        return ranAt
    }

    @Test func aLazilyCancelledTimerDoesNotRunItsHandler() throws {
        let loop = try EventLoop()
        var ran = 0
        let timer = try LoopTimer(loop: loop, lazyCancel: true) { ran += 1 }
        timer.arm(after: .milliseconds(20))
        timer.cancel()
        #expect(!timer.isArmed)
        // Past the cancelled time: the stale source has fired by then.
        let end = try loop.timer { loop.exit() }
        end.arm(after: .milliseconds(120))
        try run(loop)
        #expect(ran == 0)
    }

    /// Armed again after a cancel for a later time: the source still fires at the earlier time, and must arm itself
    /// for the later one instead of running the handler early.
    @Test func aLaterArmingAfterALazyCancelRunsAtTheLaterTime() throws {
        let at = try #require(try firedAt(lazyCancel: true) { timer in
            timer.arm(after: .milliseconds(20))
            timer.cancel()
            timer.arm(after: .milliseconds(150))
        })
        #expect(at >= .milliseconds(150), "ran after \(at), before its due time")
    }

    /// Arming for an earlier time than before moves the source, lazy or not.
    @Test func anEarlierArmingMovesTheSource() throws {
        for lazy in [false, true] {
            let at = try #require(try firedAt(lazyCancel: lazy) { timer in
                timer.arm(after: .seconds(3))
                timer.arm(after: .milliseconds(30))
            }, "lazy: \(lazy)")
            #expect(at >= .milliseconds(30) && at < .seconds(3), "lazy: \(lazy), ran after \(at)")
        }
    }
}

/// `EventLoop.afterCallback`: work queued by a callback runs when it returns, in the same iteration and in order
/// (work it queues included); queued outside any callback, at the next iteration.
@Suite struct EventLoopAfterCallbackTests {
    @Test func queuedWorkRunsAfterTheCallbackInTheSameIteration() throws {
        let loop = try EventLoop()
        var order: [String] = []
        var iterations: [UInt64] = []
        let timer = try loop.timer {
            iterations.append(loop.iteration)
            loop.afterCallback {
                order.append("first")
                iterations.append(loop.iteration)
                loop.afterCallback { order.append("queued by first") }
            }
            loop.afterCallback { order.append("second") }
            order.append("callback")
        }
        timer.arm(after: .milliseconds(1))
        let end = try loop.timer { loop.exit() }
        end.arm(after: .milliseconds(50))
        #expect(loop.run() == 0)
        #expect(order == ["callback", "first", "second", "queued by first"])
        #expect(iterations.count == 2 && iterations[0] == iterations[1], "\(iterations)")
    }

    @Test func workQueuedOutsideACallbackRunsAtTheNextIteration() throws {
        let loop = try EventLoop()
        var ran = false
        loop.afterCallback {
            ran = true
            loop.exit()
        }
        let guardTimer = try loop.timer { loop.exit(code: 1) }
        guardTimer.arm(after: .seconds(5))
        #expect(loop.run() == 0)
        #expect(ran)
    }
}

/// `LoopTimer.arm(at:)`, which the daemon uses for the timers the model arms from a display event.
@Suite struct LoopTimerDueTimeTests {
    /// A grace counts from the event that started it, not from when the loop got round to arming it: each case arms
    /// the timer at a time counted from an "event", after a busy pass, beside a probe armed after a delay from the
    /// arming; which runs first tells the two apart whatever the machine's load.
    @Test(arguments: [
        // (busy pass, the timer's due time after the event, the probe's delay after the arming)
        (Duration.milliseconds(120), Duration.milliseconds(100), Duration.milliseconds(10)),
        (Duration.milliseconds(60), Duration.milliseconds(100), Duration.milliseconds(70)),
    ])
    func aTimerArmedAtATimeCountsFromThatTime(busy: Duration, due: Duration, probeDelay: Duration) throws {
        let loop = try EventLoop()
        var order: [String] = []
        let timer = try LoopTimer(loop: loop) { order.append("timer") }
        let probe = try LoopTimer(loop: loop) { order.append("probe") }
        let end = try LoopTimer(loop: loop) { loop.exit() }
        let event = loop.now
        usleep(UInt32(busy / .microseconds(1)))
        timer.arm(at: event + due)
        probe.arm(after: probeDelay)
        end.arm(after: .milliseconds(400))
        #expect(loop.run() == 0)
        #expect(order == ["timer", "probe"], "due \(due) after the event, which was \(busy) before the arming")
    }
}
