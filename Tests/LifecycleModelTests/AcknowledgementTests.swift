import Testing
@testable import LifecycleModel

/// Nothing moves before the ack or its deadline: UIKit does not move an app on while its delegate method runs.
@Suite("Acknowledgements and deadlines")
struct AcknowledgementTests {
    /// "a" active and settled; its next message id is 3.
    static func active() throws -> Harness {
        var h = Harness("a")
        try h.bring("a", to: .active)
        return h
    }

    @Test("a will callback moves the app when acknowledged, not when sent")
    func willMovesOnAck() throws {
        var h = try Self.active()

        let sent = try h.request(.deactivate, "a")
        #expect(sent == sendAndArm("a", .willResignActive, id: 3))
        #expect(h.state("a") == .active)

        let acked = h.ack("a")
        #expect(acked == [.cancelTimer(app: "a", .ack),
                          .transition(app: "a", from: .active, to: .inactive, reason: "willResignActive acknowledged"),
                          .settled(app: "a")])
    }

    @Test("a did callback moves the app when sent, before the message")
    func didMovesOnSend() throws {
        var h = Harness("a")
        try h.bring("a", to: .inactive)

        let sent = try h.request(.background, "a")

        #expect(sent == [.transition(app: "a", from: .inactive, to: .background, reason: "didEnterBackground")]
                + sendAndArm("a", .didEnterBackground, id: 2))
    }

    @Test("with an ack outstanding, further requests queue behind it")
    func requestsQueueBehindAck() throws {
        var h = try Self.active()
        try h.request(.deactivate, "a")

        let queued = try h.request(.background, "a")
        #expect(queued == [], "nothing is sent or moved while willResignActive is unacknowledged")
        #expect(h.state("a") == .active)

        let acked = h.ack("a")
        #expect(acked == [.cancelTimer(app: "a", .ack),
                          .transition(app: "a", from: .active, to: .inactive, reason: "willResignActive acknowledged"),
                          .transition(app: "a", from: .inactive, to: .background, reason: "didEnterBackground")]
                + sendAndArm("a", .didEnterBackground, id: 4))
    }

    @Test("a request is judged against the state queued work leads to")
    func requestsJudgedAgainstProjectedState() throws {
        var h = try Self.active()
        let start = h.log.count
        try h.request(.background, "a")
        #expect(h.model.projectedState(of: "a") == .background)

        // The error names the state now and the state the queued work leads to.
        #expect(throws: RequestError(app: "a", state: .active, becoming: .background, request: .deactivate,
                                     reason: .notAllowed(hint: "only an active app can be interrupted"))) {
            try h.request(.deactivate, "a")
        }
        try h.request(.focus, "a")
        #expect(h.model.projectedState(of: "a") == .active)

        h.cooperating { h in h.ack("a") }
        #expect(h.sends(from: start).map(\.callback)
                == [.willResignActive, .didEnterBackground, .willEnterForeground, .didBecomeActive])
        #expect(h.state("a") == .active)
    }

    @Test("a missed deadline completes the callback, counts the miss and notes it")
    func deadlineMissed() throws {
        var h = try Self.active()
        try h.request(.deactivate, "a")
        h.advance(by: .seconds(5))

        let fired = h.fire(.ack, "a")

        #expect(fired == [.note(app: "a", .deadlineMissed(.willResignActive, id: 3, after: .seconds(5), misses: 1)),
                          .cancelTimer(app: "a", .ack),
                          .transition(app: "a", from: .active, to: .inactive,
                                      reason: "willResignActive deadline passed"),
                          .settled(app: "a")])
        #expect(h.record(of: "a").deadlineMisses == 1)
    }

    @Test("a missed deadline lets queued work go on")
    func deadlineMissedThenQueuedWork() throws {
        var h = try Self.active()
        try h.request(.background, "a")

        let fired = h.fire(.ack, "a")

        #expect(fired.sentCallbacks == [.didEnterBackground])
        #expect(h.state("a") == .background)
    }

    @Test("an ack arriving after its deadline is ignored")
    func lateAckIgnored() throws {
        var h = try Self.active()
        try h.request(.deactivate, "a")
        h.fire(.ack, "a")

        let late = h.event(.ack(app: "a", id: 3))

        #expect(late == [])
        #expect(h.state("a") == .inactive)
    }

    @Test("a missed didFinishLaunching kills the app, as iOS's launch watchdog does")
    func launchWatchdog() throws {
        var h = Harness("a")
        try h.request(.focus, "a")
        h.hello("a")
        h.advance(by: .seconds(20))

        let fired = h.fire(.ack, "a")

        #expect(fired.notes == [.deadlineMissed(.didFinishLaunching, id: 1, after: .seconds(20), misses: 1),
                                .launchWatchdog(after: .seconds(20))])
        #expect(fired.signals == [.kill])
        #expect(!fired.containsSend, "the queued didBecomeActive is dropped")
        #expect(h.record(of: "a").deadlineMisses == 1)

        let exited = h.exit("a", .signaled(9))
        #expect(!exited.containsSend)
        #expect(h.state("a") == .notRunning)
        #expect(h.model.activeApp == nil)
    }

    @Test("an app killed by the launch watchdog is restarted as a crash under Restart=on-failure")
    func launchWatchdogRestart() throws {
        var h = Harness("a", policy: .with { $0.restart = .onFailure })
        try h.request(.launch(background: false), "a")
        h.hello("a")
        h.fire(.ack, "a")

        let exited = h.exit("a", .signaled(9))

        #expect(exited.armed(.restart) == [.milliseconds(100)])
    }

    @Test("didFinishLaunching has the launch timeout as deadline, other callbacks the ack timeout")
    func deadlines() throws {
        var h = Harness("a", policy: .with {
            $0.launchTimeout = .seconds(7)
            $0.ackTimeout = .seconds(2)
        })
        try h.request(.focus, "a")

        let launching = h.hello("a")
        #expect(h.inFlight("a")?.deadline == .seconds(7))
        #expect(launching.armed(.ack) == [.seconds(7)])

        let activating = h.ack("a")
        #expect(h.inFlight("a")?.deadline == .seconds(2))
        #expect(activating.armed(.ack) == [.seconds(2)])
    }

    @Test("an ack with a stale or unknown id is ignored", arguments: [0, 1, 2, 4, 99])
    func staleAckIgnored(id: Int) throws {
        var h = try Self.active()
        try h.request(.deactivate, "a")

        let effects = h.event(.ack(app: "a", id: id))

        #expect(effects == [])
        #expect(h.inFlight("a")?.id == 3)
        #expect(h.state("a") == .active)
    }

    @Test("an ack names its app: the same id for another app is ignored")
    func ackForOtherAppIgnored() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .active)
        try h.bring("b", to: .inactive)
        try h.request(.deactivate, "a")

        let effects = h.event(.ack(app: "b", id: 3))

        #expect(effects == [])
        #expect(h.inFlight("a")?.id == 3)
    }

    @Test("an ack timer with no callback in flight does nothing")
    func strayAckTimer() throws {
        var h = try Self.active()

        let effects = h.fire(.ack, "a")

        #expect(effects == [.settled(app: "a")])
        #expect(h.record(of: "a").deadlineMisses == 0)
    }

    @Test("message ids count from 1 on every launch, one per delivery")
    func messageIDs() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        try h.cooperating { h throws in try h.request(.terminate, "a") }

        try h.request(.launch(background: false), "a")
        h.hello("a")

        let ids = h.log.compactMap { if case .send(_, let delivery) = $0 { delivery.id } else { nil } }
        #expect(ids == [1, 2, 3, 1])
    }
}
