import Testing
@testable import LifecycleModel

/// Terminate: willTerminate (UIKit's last callback), then SIGTERM, then SIGKILL after `TimeoutStopSec=`.
@Suite("Termination")
struct TerminationTests {
    @Test("terminate: willTerminate, SIGTERM after its ack, SIGKILL when the stop timeout passes, then not running")
    func terminateSequence() throws {
        var h = Harness("a", policy: .with { $0.stopTimeout = .seconds(3) })
        try h.bring("a", to: .active)

        let asked = try h.request(.terminate, "a")
        #expect(asked == sendAndArm("a", .willTerminate, id: 3))

        let acked = h.ack("a")
        #expect(acked == [.cancelTimer(app: "a", .ack), .signal(app: "a", .terminate),
                          .armTimer(app: "a", .kill, after: .seconds(3))])

        h.advance(by: .seconds(3))
        let killed = h.fire(.kill, "a")
        #expect(killed == [.note(app: "a", .killTimeout(after: .seconds(3))), .signal(app: "a", .kill)])

        let exited = h.exit("a", .signaled(9))
        #expect(exited == [.cancelTimer(app: "a", .ack), .cancelTimer(app: "a", .hello), .cancelTimer(app: "a", .kill),
                           .transition(app: "a", from: .active, to: .notRunning,
                                       reason: "terminated, killed by signal 9"),
                           .settled(app: "a")])
        #expect(h.model.activeApp == nil)
    }

    @Test("a willTerminate deadline passing does not hold the SIGTERM back")
    func willTerminateDeadline() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        try h.request(.terminate, "a")

        let fired = h.fire(.ack, "a")

        #expect(fired.notes == [.deadlineMissed(.willTerminate, id: 3, after: .seconds(5), misses: 1)])
        #expect(fired.signals == [.terminate])
    }

    @Test("a suspended app gets no willTerminate: SIGTERM, then SIGCONT so it can act on it")
    func terminateSuspended() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)

        let effects = try h.request(.terminate, "a")
        #expect(effects == [.signal(app: "a", .terminate), .continueProcess(app: "a"),
                            .armTimer(app: "a", .kill, after: .seconds(5))])

        h.exit("a", .exited(0))
        #expect(h.state("a") == .notRunning)
    }

    @Test("a requested terminate is never followed by a restart",
          arguments: RestartPolicy.allCases, [ExitStatus.exited(0), .exited(1), .signaled(15)])
    func noRestartAfterTerminate(_ restart: RestartPolicy, _ status: ExitStatus) throws {
        var h = Harness("a", policy: .with { $0.restart = restart })
        try h.bring("a", to: .active)
        try h.request(.terminate, "a")
        h.ack("a")

        let exited = h.exit("a", status)

        #expect(exited.armed(.restart) == [])
        #expect(h.state("a") == .notRunning)
    }

    @Test("an app that exits on its own during willTerminate is not restarted",
          arguments: [(RestartPolicy.always, ExitStatus.exited(0)), (.onFailure, .exited(1))])
    func exitDuringWillTerminate(_ restart: RestartPolicy, _ status: ExitStatus) throws {
        var h = Harness("a", policy: .with { $0.restart = restart })
        try h.bring("a", to: .active)
        try h.request(.terminate, "a")
        #expect(h.inFlight("a")?.callback == .willTerminate)

        let exited = h.exit("a", status)

        #expect(exited.armed(.restart) == [])
        #expect(h.state("a") == .notRunning)
    }

    @Test("terminate supersedes queued steps; the callback in flight still gets its ack")
    func terminateSupersedesQueue() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        try h.request(.suspend, "a")
        #expect(h.inFlight("a")?.callback == .willResignActive)

        let asked = try h.request(.terminate, "a")
        #expect(asked == [])
        #expect(h.model.projectedState(of: "a") == .notRunning)

        let acked = h.ack("a")
        #expect(acked == [.cancelTimer(app: "a", .ack),
                          .transition(app: "a", from: .active, to: .inactive, reason: "willResignActive acknowledged")]
                + sendAndArm("a", .willTerminate, id: 4))
        h.cooperating { h in h.ack("a") }
        #expect(!h.log.contains(.stopProcess(app: "a")))
        #expect(h.state("a") == .notRunning)
    }

    @Test("terminate of an app waiting for focus takes it out of the focus queue")
    func terminateLeavesFocusQueue() throws {
        var h = Harness("a", "b", "c")
        try h.bring("a", to: .active)
        try h.bring("b", to: .background)
        try h.bring("c", to: .background)
        h.unresponsive = ["a"]
        try h.request(.focus, "b")
        try h.request(.focus, "c")

        try h.cooperating { h throws in try h.request(.terminate, "b") }
        h.runOutDeadlines()

        #expect(h.state("b") == .notRunning)
        #expect(h.state("c") == .active)
        #expect(!h.log.contains { if case .send("b", let d) = $0 { d.callback == .didBecomeActive } else { false } })
    }

    @Test("terminating twice sends willTerminate once")
    func terminateTwice() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        try h.request(.terminate, "a")

        let again = try h.request(.terminate, "a")
        h.cooperating { h in h.ack("a") }

        #expect(again == [])
        #expect(h.log.sentCallbacks.filter { $0 == .willTerminate }.count == 1)
        #expect(h.log.signals == [.terminate])
    }

    @Test("terminating twice after SIGTERM changes nothing")
    func terminateTwiceAfterSignal() throws {
        var h = Harness("a")
        try h.bring("a", to: .inactive)
        try h.request(.terminate, "a")
        h.ack("a")

        let again = try h.request(.terminate, "a")

        #expect(again == [])
    }

    @Test("a launch or focus while terminating is refused until the process has exited",
          arguments: [Request.launch(background: false), .launch(background: true), .focus])
    func launchWhileTerminating(_ request: Request) throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        try h.request(.terminate, "a")
        h.ack("a")

        #expect(throws: RequestError(app: "a", state: .active, becoming: .notRunning, request: request,
                                     reason: .notAllowed(hint: "it is still terminating"))) {
            try h.request(request, "a")
        }

        h.exit("a")
        try h.request(request, "a")
        #expect(h.state("a") == .inactive)
    }

    @Test("the kill timer after the exit does nothing")
    func killTimerAfterExit() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        try h.cooperating { h throws in try h.request(.terminate, "a") }

        let fired = h.fire(.kill, "a")

        #expect(fired.signals == [])
        #expect(h.state("a") == .notRunning)
    }

    @Test("terminate before hello: no willTerminate, SIGTERM at once")
    func terminateBeforeHello() throws {
        var h = Harness("a")
        try h.request(.focus, "a")

        let effects = try h.request(.terminate, "a")

        #expect(effects == [.signal(app: "a", .terminate), .armTimer(app: "a", .kill, after: .seconds(5))])
    }
}

@Suite("Daemon shutdown")
struct ShutdownTests {
    @Test("shutdown: running apps get willTerminate; suspended ones are continued first and told too")
    func shutdownWakesSuspendedAppsToTellThem() throws {
        var h = Harness("a", "s", "off")
        try h.bring("a", to: .active)
        try h.bring("s", to: .suspended)

        let effects = h.model.shutdown(now: h.now)

        let sIndex = try #require(effects.firstIndex(of: .continueProcess(app: "s")))
        let told = try #require(effects.firstIndex { if case .send(app: "s", let d) = $0 { d.callback == .willTerminate } else { false } })
        #expect(sIndex < told, "continued before it is told")
        #expect(effects.contains { if case .send(app: "a", let d) = $0 { d.callback == .willTerminate } else { false } })
        #expect(!effects.contains { if case .spawn = $0 { true } else { false } })
        #expect(effects.contains(.settled(app: "off")), "an app that is not running is done at once")
    }
}
