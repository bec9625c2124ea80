import Testing
@testable import LifecycleModel

/// `BackgroundTimeSec=`: an app settled in the background runs for a grace time, then is suspended;
/// iOS likewise suspends an app shortly after didEnterBackground returns.
@Suite("Background grace and suspension")
struct BackgroundGraceTests {
    @Test("settling in the background arms the grace timer with BackgroundTimeSec, after the didEnterBackground ack")
    func settlingArmsGrace() throws {
        var h = Harness("a", policy: .with { $0.backgroundTime = .seconds(3) })
        try h.request(.launch(background: true), "a")
        h.hello("a")

        let launchAcked = h.ack("a")
        #expect(launchAcked.sentCallbacks == [.didEnterBackground])
        #expect(launchAcked.armed(.grace) == [], "didEnterBackground is still running")

        let backgroundAcked = h.ack("a")
        #expect(backgroundAcked == [.cancelTimer(app: "a", .ack), .armTimer(app: "a", .grace, after: .seconds(3)),
                                    .settled(app: "a")])
    }

    @Test("when the grace time is over the app is stopped and suspended")
    func graceOverSuspends() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.advance(by: .seconds(10))

        let fired = h.fire(.grace, "a")

        #expect(fired == [.armTimer(app: "a", .reclaim, after: .seconds(30)),
                          .transition(app: "a", from: .background, to: .suspended, reason: "background time over"),
                          .stopProcess(app: "a"), .settled(app: "a")])
        #expect(h.record(of: "a").stateSince == .seconds(10))
    }

    @Test("leaving the background cancels the grace timer", arguments: [Request.focus, .suspend, .terminate])
    func leavingBackgroundCancelsGrace(_ request: Request) throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        let start = h.log.count

        try h.cooperating { h throws in try h.request(request, "a") }

        let left = try #require(h.log[start...].firstIndex {
            if case .transition("a", .background, _, _) = $0 { true } else { false }
        })
        // The suspension arms its reclaim between the two.
        #expect(h.log[left - 1] == .cancelTimer(app: "a", .grace)
                || (h.log[left - 2] == .cancelTimer(app: "a", .grace) && h.log[left - 1] == .armTimer(app: "a", .reclaim, after: .seconds(30))))
        #expect(h.log[start...].filter { $0 == .cancelTimer(app: "a", .grace) }.count == 1)
    }

    @Test("every settling in the background arms the grace timer anew")
    func graceRearmedOnReturn() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)

        try h.cooperating { h throws in
            try h.request(.focus, "a")
            try h.request(.background, "a")
        }

        #expect(h.log.armed(.grace) == [.seconds(10), .seconds(10)])
        #expect(h.state("a") == .background)
    }

    @Test("BackgroundTimeSec unset: the grace timer is never armed")
    func noBackgroundTime() throws {
        var h = Harness("a", policy: .with { $0.backgroundTime = nil })

        try h.bring("a", to: .background)
        try h.cooperating { h throws in
            try h.request(.focus, "a")
            try h.request(.background, "a")
            try h.request(.suspend, "a")
            try h.request(.resume, "a")
        }

        #expect(h.log.armed(.grace) == [])
        #expect(h.state("a") == .background)
    }

    @Test("a grace timer that is not armed is ignored")
    func unarmedGraceIgnored() throws {
        var h = Harness("a", policy: .with { $0.backgroundTime = nil })
        try h.bring("a", to: .background)
        h.advance(by: .seconds(3600))

        let fired = h.fire(.grace, "a")

        #expect(!fired.contains(.stopProcess(app: "a")))
        #expect(h.state("a") == .background)
    }

    @Test("a suspend request stops the process only after didEnterBackground is acknowledged")
    func suspendWaitsForBackgroundAck() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        let start = h.log.count

        try h.request(.suspend, "a")
        h.ack("a")
        #expect(h.inFlight("a")?.callback == .didEnterBackground)
        #expect(h.state("a") == .background)
        #expect(!h.log[start...].contains(.stopProcess(app: "a")))
        #expect(h.log[start...].armed(.grace) == [], "no grace while didEnterBackground runs")

        let acked = h.ack("a")
        #expect(acked.contains(.stopProcess(app: "a")))
        #expect(h.state("a") == .suspended)
    }

    @Test("the grace timer firing while work is in flight does not suspend")
    func graceDuringWork() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        try h.request(.focus, "a")
        #expect(h.inFlight("a")?.callback == .willEnterForeground)

        let fired = h.fire(.grace, "a")

        #expect(!fired.contains(.stopProcess(app: "a")))
        h.cooperating { h in h.ack("a") }
        #expect(h.state("a") == .active)
    }

    @Test("a stray grace timer for a foreground app does nothing", arguments: [AppState.inactive, .active])
    func graceInForeground(_ state: AppState) throws {
        var h = Harness("a")
        try h.bring("a", to: state)

        let fired = h.fire(.grace, "a")

        #expect(fired == [.settled(app: "a")])
        #expect(h.state("a") == state)
    }

    @Test("a suspension the user asked for is logged as requested", arguments: [AppState.active, .inactive, .background])
    func suspendReason(_ state: AppState) throws {
        var h = Harness("a", policy: .with { $0.backgroundTime = nil })
        try h.bring("a", to: state)
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.suspend, "a") }

        #expect(h.log[start...].contains(.transition(app: "a", from: .background, to: .suspended,
                                                     reason: "suspend requested")))
    }

    @Test("resume continues a suspended app into the background, where the grace time runs again")
    func resume() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)

        let resumed = try h.request(.resume, "a")
        #expect(resumed == [.cancelTimer(app: "a", .reclaim),
                            .transition(app: "a", from: .suspended, to: .background, reason: "resumed"),
                            .continueProcess(app: "a"), .armTimer(app: "a", .grace, after: .seconds(10)),
                            .settled(app: "a")])

        let fired = h.fire(.grace, "a")
        #expect(fired.contains(.stopProcess(app: "a")))
    }
}
