import Testing
@testable import LifecycleModel

/// External apps (`External=yes`): started by someone else, attached on the app socket, then supervised like any app;
/// never launched by a request and never restarted.
@Suite("External apps")
struct ExternalAppTests {
    static let external = AppPolicy.with { $0.external = true; $0.restart = .always }

    @Test("attaching goes notRunning → inactive without a spawn; didFinishLaunching (launchedBy external) follows the hello")
    func attachLaunchesWithoutSpawn() throws {
        var h = Harness("x", policy: Self.external)
        let attached = try h.model.attach("x", now: h.now)
        #expect(!attached.contains { if case .spawn = $0 { true } else { false } }, "nothing is spawned: \(attached)")
        #expect(attached.contains(.transition(app: "x", from: .notRunning, to: .inactive, reason: "attached (external)")))
        #expect(attached.armed(.hello) == [AppPolicy().launchTimeout])
        #expect(h.sends() == [], "nothing is sent before the hello")

        h.hello("x")
        #expect(h.sends() == [Sent("x", .didFinishLaunching)])
        #expect(h.inFlight("x")?.launchOptions?.launchedBy == "external")
        h.ack("x")
        #expect(h.state("x") == .inactive)
        #expect(h.record(of: "x").launches == 1)
    }

    @Test("once attached it is focused, backgrounded, suspended, resumed and terminated like any app")
    func attachedAppIsSupervised() throws {
        var h = Harness("x", policy: Self.external)
        _ = try h.model.attach("x", now: h.now)
        h.cooperative = true
        h.hello("x")
        try h.request(.focus, "x")
        #expect(h.state("x") == .active)
        try h.request(.suspend, "x")
        #expect(h.state("x") == .suspended)
        #expect(h.log.contains(.stopProcess(app: "x")))
        try h.request(.resume, "x")
        #expect(h.state("x") == .background)
        try h.request(.terminate, "x")
        #expect(h.state("x") == .notRunning)
        #expect(h.log.contains(.signal(app: "x", .terminate)))
    }

    @Test("requests that would start an external app are refused; terminate of a stopped one is not",
          arguments: [Request.launch(background: false), .launch(background: true), .focus, .background, .suspend, .resume])
    func launchingRequestsAreRefused(_ request: Request) throws {
        var h = Harness("x", policy: Self.external)
        #expect(throws: RequestError.self) { try h.request(request, "x") }
        do {
            try h.request(request, "x")
        } catch {
            #expect(error.description.contains("External=yes"), "\(error)")
        }
        #expect(h.state("x") == .notRunning)
        #expect(h.log == [])
        try h.request(.terminate, "x")
    }

    @Test("an external app's exit is never followed by a restart, whatever Restart= says",
          arguments: [ExitStatus.exited(0), .exited(1), .signaled(9)])
    func exitDoesNotRestart(_ status: ExitStatus) throws {
        var h = Harness("x", policy: Self.external)
        _ = try h.model.attach("x", now: h.now)
        let exited = h.exit("x", status)
        #expect(h.state("x") == .notRunning)
        #expect(exited.armed(.restart) == [])
        #expect(exited.notes == [])
    }

    @Test("a second attach while running, an app that is not external, and an unknown app are refused")
    func attachRefusals() throws {
        var h = Harness(["x": Self.external, "plain": AppPolicy()])
        _ = try h.model.attach("x", now: h.now)
        #expect(throws: RequestError.self) { _ = try h.model.attach("x", now: h.now) }
        #expect(throws: RequestError.self) { _ = try h.model.attach("plain", now: h.now) }
        #expect(throws: RequestError.self) { _ = try h.model.attach("nope", now: h.now) }
        #expect(h.state("plain") == .notRunning)
        // Once it exited, it may attach again.
        h.exit("x")
        _ = try h.model.attach("x", now: h.now)
        #expect(h.state("x") == .inactive)
        #expect(h.record(of: "x").launches == 2)
    }
}
