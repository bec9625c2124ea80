import Testing
@testable import LifecycleModel

/// Apps managed without messages: `Protocol=none`, a client that never said hello, or one that hung up.
/// They go through the same states, only with no callback to wait for (like macOS App Nap for any program).
@Suite("Apps without messages")
struct SilentAppTests {
    static let script: [Request] = [.focus, .deactivate, .focus, .background, .focus, .suspend, .resume,
                                    .focus, .suspend, .terminate, .launch(background: true), .terminate]

    /// Runs `script` on "a" with a cooperative client, returning the harness.
    static func run(_ policy: AppPolicy) throws -> Harness {
        var h = Harness("a", policy: policy)
        try h.cooperating { h throws in
            for request in script { try h.request(request, "a") }
        }
        return h
    }

    @Test("a Protocol=none app goes through the same states as a protocol app, without any message")
    func sameStatesWithoutMessages() throws {
        let speaking = try Self.run(AppPolicy())
        let silent = try Self.run(.silent)

        #expect(silent.transitions(of: "a") == speaking.transitions(of: "a"))
        #expect(!silent.log.containsSend)
        #expect(silent.log.armed(.ack) == [] && silent.log.armed(.hello) == [])
        #expect(silent.log.signals == [.terminate, .terminate])
    }

    @Test("a Protocol=none app launched into focus is active at once")
    func silentLaunch() throws {
        var h = Harness("a", policy: .silent)

        let effects = try h.request(.focus, "a")

        #expect(effects == [.spawn(app: "a", options: LaunchOptions(launchedBy: "lifectl")),
                            .transition(app: "a", from: .notRunning, to: .inactive, reason: "launched by lifectl"),
                            .transition(app: "a", from: .inactive, to: .active, reason: "didBecomeActive"),
                            .settled(app: "a")])
    }

    @Test("a Protocol=none app is terminated with SIGTERM alone")
    func silentTerminate() throws {
        var h = Harness("a", policy: .silent)
        try h.bring("a", to: .background)

        let effects = try h.request(.terminate, "a")

        #expect(effects == [.signal(app: "a", .terminate), .armTimer(app: "a", .kill, after: .seconds(5))])
    }

    @Test("no hello within the launch timeout: noted, then managed without messages")
    func noHello() throws {
        var h = Harness("a")
        try h.request(.focus, "a")
        h.advance(by: .seconds(20))

        let fired = h.fire(.hello, "a")

        #expect(fired == [.note(app: "a", .noHello(after: .seconds(20))),
                          .transition(app: "a", from: .inactive, to: .active, reason: "didBecomeActive"),
                          .settled(app: "a")])
        #expect(h.record(of: "a").muted)

        try h.cooperating { h throws in
            try h.request(.background, "a")
            try h.request(.focus, "a")
            try h.request(.terminate, "a")
        }
        #expect(!h.log.containsSend)
        #expect(h.state("a") == .notRunning)
    }

    @Test("a hello in time cancels the hello timer; the timer firing late changes nothing")
    func helloInTime() throws {
        var h = Harness("a")
        try h.request(.launch(background: false), "a")

        let helloed = h.hello("a")
        #expect(helloed.first == .cancelTimer(app: "a", .hello))
        #expect(h.inFlight("a")?.callback == .didFinishLaunching)

        let fired = h.fire(.hello, "a")
        #expect(fired == [])
        #expect(!h.record(of: "a").muted)
    }

    @Test("a client that disconnects with a callback in flight completes it", arguments: [
        (AppState.active, Request.deactivate, AppState.inactive),
        (.background, .focus, .active),
        (.active, .background, .background),
    ])
    func disconnectCompletesCallback(from state: AppState, request: Request, settlesIn: AppState) throws {
        var h = Harness("a")
        try h.bring("a", to: state)
        try h.request(request, "a")
        let start = h.log.count

        let effects = h.event(.disconnected(app: "a"))

        #expect(effects.first == .cancelTimer(app: "a", .ack))
        #expect(h.inFlight("a") == nil)
        #expect(h.state("a") == settlesIn)
        #expect(h.record(of: "a").isSettled)
        #expect(!h.log[start...].containsSend, "the rest happens without messages")
        #expect(h.record(of: "a").deadlineMisses == 0)
    }

    @Test("a client that disconnects during didFinishLaunching: the launch goes on without messages")
    func disconnectDuringLaunch() throws {
        var h = Harness("a")
        try h.request(.focus, "a")
        h.hello("a")

        let effects = h.event(.disconnected(app: "a"))

        #expect(effects == [.cancelTimer(app: "a", .ack),
                            .transition(app: "a", from: .inactive, to: .active, reason: "didBecomeActive"),
                            .settled(app: "a")])
    }

    @Test("a Protocol=none app sent to the background by another app's focus gets its grace time")
    func silentDemotedAppGetsGrace() throws {
        var h = Harness(["a": .silent, "b": AppPolicy()])
        try h.bring("a", to: .active)
        try h.bring("b", to: .background)
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.focus, "b") }

        #expect(h.state("a") == .background)
        #expect(h.log[start...].contains(.armTimer(app: "a", .grace, after: .seconds(10))))
        #expect(h.log[start...].contains(.settled(app: "a")))
    }

    @Test("a Protocol=none app activated when another app resigns is reported settled")
    func silentActivatedAppSettles() throws {
        var h = Harness(["a": AppPolicy(), "b": .silent])
        try h.bring("a", to: .active)
        try h.bring("b", to: .background)
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.focus, "b") }

        #expect(h.state("b") == .active)
        #expect(h.log[start...].contains(.settled(app: "b")), "a lifectl focus waiting for b must be answered")
    }
}
