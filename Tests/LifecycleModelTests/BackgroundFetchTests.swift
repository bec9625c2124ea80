import Testing
@testable import LifecycleModel

/// `ResumeEverySec=`/`ResumeForSec=`: a suspended app wakes into the background at intervals and sleeps again;
/// for a protocol app the wake is UIKit's background fetch (`performFetch`, suspended after its ack).
@Suite("Background wakes and fetch")
struct BackgroundFetchTests {
    static let every = AppPolicy.with {
        $0.resumeEvery = .seconds(60)
        $0.resumeFor = .seconds(5)
    }

    @Test("a suspension arms the next wake")
    func suspensionArmsWake() throws {
        var h = Harness("a", policy: Self.every)
        try h.bring("a", to: .background)

        let fired = h.fire(.grace, "a")

        #expect(fired.contains(.armTimer(app: "a", .resumeEvery, after: .seconds(60))))
    }

    @Test("without ResumeEverySec no wake is armed")
    func noWakeByDefault() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        #expect(h.log.allSatisfy { if case .armTimer(_, .resumeEvery, _) = $0 { false } else { true } })
    }

    @Test("an app without a client wakes for ResumeForSec, then is suspended and the next wake armed")
    func unawareAppWakesAndSleeps() throws {
        var h = Harness("a", policy: .with {
            $0.speaksProtocol = false
            $0.resumeEvery = .seconds(60)
            $0.resumeFor = .seconds(5)
        })
        try h.bring("a", to: .suspended)

        let woke = h.fire(.resumeEvery, "a")
        #expect(woke == [.note(app: "a", .backgroundWake(for: .seconds(5))),
                         .cancelTimer(app: "a", .resumeEvery), .cancelTimer(app: "a", .reclaim),
                         .transition(app: "a", from: .suspended, to: .background, reason: "resumed"),
                         .continueProcess(app: "a"),
                         .armTimer(app: "a", .fetchWindow, after: .seconds(5)),
                         .settled(app: "a")])
        #expect(h.armed(.grace, "a", in: woke).isEmpty, "the wake ends on its own clock")

        let slept = h.fire(.fetchWindow, "a")
        #expect(slept == [.armTimer(app: "a", .resumeEvery, after: .seconds(60)), .armTimer(app: "a", .reclaim, after: .seconds(30)),
                          .transition(app: "a", from: .background, to: .suspended, reason: "background wake over"),
                          .stopProcess(app: "a"), .settled(app: "a")])
    }

    @Test("a protocol app gets performFetch with ResumeForSec as deadline and is suspended after its ack",
          arguments: [FetchResult.newData, .noData, .failed])
    func protocolAppFetches(_ result: FetchResult) throws {
        var h = Harness("a", policy: Self.every)
        try h.bring("a", to: .suspended)

        let woke = h.fire(.resumeEvery, "a")
        let delivery = try #require(h.inFlight("a"))
        #expect(delivery.message == .performFetch)
        #expect(delivery.deadline == .seconds(5))
        #expect(woke.contains(.send(app: "a", delivery)))
        #expect(h.state("a") == .background)

        let acked = h.event(.ack(app: "a", id: delivery.id, reply: AckReply(fetchResult: result)))
        #expect(acked.contains(.note(app: "a", .fetchCompleted(result))))
        #expect(acked.contains(.stopProcess(app: "a")))
        #expect(h.state("a") == .suspended)
    }

    @Test("a performFetch not acknowledged by its deadline ends the wake anyway")
    func fetchDeadlineSuspends() throws {
        var h = Harness("a", policy: Self.every)
        try h.bring("a", to: .suspended)
        h.fire(.resumeEvery, "a")
        h.advance(by: .seconds(5))

        let missed = h.fire(.ack, "a")

        #expect(missed.contains(.stopProcess(app: "a")))
        #expect(h.state("a") == .suspended)
    }

    @Test("focus during a wake ends the wake: the app comes forward and stays")
    func focusEndsWake() throws {
        var h = Harness("a", policy: Self.every)
        try h.bring("a", to: .suspended)
        h.fire(.resumeEvery, "a")

        try h.request(.focus, "a")
        h.cooperating { h in h.ack("a") }

        #expect(h.state("a") == .active)
        #expect(!h.record(of: "a").run.waking)
    }

    @Test("an app stopped by someone else gets no wake: the stop is theirs")
    func externalStopArmsNoWake() throws {
        var h = Harness("a", policy: Self.every)
        try h.bring("a", to: .background)

        let stopped = h.event(.processStopped(app: "a"))

        #expect(h.state("a") == .suspended)
        #expect(h.armed(.resumeEvery, "a", in: stopped).isEmpty)
    }

    @Test("a suspended app taken back by the next daemon has its wake armed again")
    func readoptedSuspendedAppWakes() throws {
        var h = Harness("a", policy: Self.every)
        try h.bring("a", to: .suspended)
        let snapshot = try #require(h.model.snapshot(of: "a"))

        var next = Supervisor()
        next.add("a", policy: Self.every)
        let effects = next.adopt("a", snapshot, running: true, processesStopped: true, now: .seconds(100))

        #expect(next.app("a")?.state == .suspended)
        #expect(effects.contains(.armTimer(app: "a", .resumeEvery, after: .seconds(60))))
    }

    @Test("a wake that fires after the app was resumed otherwise does nothing")
    func staleWakeIgnored() throws {
        var h = Harness("a", policy: Self.every)
        try h.bring("a", to: .suspended)
        try h.request(.resume, "a")

        #expect(h.fire(.resumeEvery, "a") == [.settled(app: "a")])
        #expect(h.state("a") == .background)
    }
}
