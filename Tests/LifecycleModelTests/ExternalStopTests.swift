import Testing
@testable import LifecycleModel

/// Someone else's `kill -STOP` / `kill -CONT`: the model reconciles its state with the process's.
@Suite("External stop and continue")
struct ExternalStopTests {
    @Test("an app stopped by someone else is suspended", arguments: [AppState.inactive, .active, .background])
    func stoppedExternally(_ state: AppState) throws {
        var h = Harness("a")
        try h.bring("a", to: state)

        let effects = h.event(.processStopped(app: "a"))

        let graceCancel: [Effect] = state == .background ? [.cancelTimer(app: "a", .grace)] : []
        #expect(effects == [.note(app: "a", .stoppedExternally)] + graceCancel
                + [.transition(app: "a", from: state, to: .suspended, reason: "stopped by someone else"),
                   .settled(app: "a")])
        #expect(h.model.activeApp == nil)
    }

    @Test("a stop of an app that is already suspended is ignored")
    func stopOfSuspendedIgnored() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)

        #expect(h.event(.processStopped(app: "a")) == [])
    }

    @Test("an app continued by someone else is in the background, and its grace time runs")
    func continuedExternally() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)

        let effects = h.event(.processContinued(app: "a"))

        #expect(effects == [.note(app: "a", .continuedExternally), .cancelTimer(app: "a", .reclaim),
                            .transition(app: "a", from: .suspended, to: .background,
                                        reason: "continued by someone else"),
                            .armTimer(app: "a", .grace, after: .seconds(10)),
                            .settled(app: "a")])
    }

    @Test("a continue of an app that is not suspended is ignored", arguments: [AppState.inactive, .active, .background])
    func continueOfRunningIgnored(_ state: AppState) throws {
        var h = Harness("a")
        try h.bring("a", to: state)

        #expect(h.event(.processContinued(app: "a")) == [])
        #expect(h.state("a") == state)
    }

    @Test("while a suspended app is terminated, the SIGCONT is the daemon's own, not someone else's")
    func continueWhileTerminating() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        try h.request(.terminate, "a")

        #expect(h.event(.processContinued(app: "a")) == [])
        #expect(h.event(.processStopped(app: "a")) == [])
        #expect(h.state("a") == .suspended)
    }

    @Test("an app stopped by someone else can be resumed, or focused", arguments: [Request.resume, .focus])
    func resumeAfterExternalStop(_ request: Request) throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        h.event(.processStopped(app: "a"))

        let effects = try h.cooperating { h throws in try h.request(request, "a") }

        #expect(effects.prefix(3) == [.cancelTimer(app: "a", .reclaim),
                                      .transition(app: "a", from: .suspended, to: .background, reason: "resumed"),
                                      .continueProcess(app: "a")])
        #expect(h.state("a") == (request == .focus ? .active : .background))
    }

    @Test("the active app stopped by someone else lets the app waiting for focus become active")
    func externalStopFreesFocus() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .active)
        try h.bring("b", to: .background)
        h.unresponsive = ["a"]
        try h.cooperating { h throws in try h.request(.focus, "b") }
        #expect(h.state("b") == .background)

        h.cooperating { h in h.event(.processStopped(app: "a")) }

        #expect(h.state("b") == .active)
        #expect(h.state("a") == .suspended)
    }

    @Test("a callback's deadline passing on an app stopped by someone else leaves it suspended")
    func deadlineOnStoppedApp() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        try h.request(.deactivate, "a")
        h.event(.processStopped(app: "a"))

        h.fire(.ack, "a")

        #expect(h.state("a") == .suspended)
    }
}
