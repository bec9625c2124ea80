import Testing
@testable import LifecycleModel

/// Inputs that must not move anything: unknown apps, stray events, apps that are not running.
@Suite("Edge cases")
struct EdgeCaseTests {
    static let requests: [Request] = [.launch(background: false), .launch(background: true), .focus, .deactivate,
                                      .background, .suspend, .resume, .terminate]

    @Test("a request for an unknown app is refused as such", arguments: requests)
    func unknownAppRequest(_ request: Request) {
        var h = Harness("a")

        let error = #expect(throws: RequestError.self) { try h.request(request, "ghost") }

        #expect(error == RequestError(app: "ghost", state: nil, request: request, reason: .unknownApp))
        #expect(error?.description == "cannot \(request) 'ghost': no such app")
        #expect(h.log.isEmpty)
    }

    static func events(for app: String) -> [Event] {
        [.hello(app: app), .ack(app: app, id: 1), .exited(app: app, .exited(1)),
         .spawnFailed(app: app, reason: "gone"), .processStopped(app: app), .processContinued(app: app),
         .disconnected(app: app)]
        + TimerKind.allCases.map { .timerFired(app: app, $0) }
    }

    @Test("an event for an unknown app is ignored", arguments: events(for: "ghost"))
    func unknownAppEvent(_ event: Event) {
        var h = Harness("a")

        #expect(h.event(event) == [])
    }

    @Test("an event from the world for an app that is not running is ignored",
          arguments: [AppState.notRunning, .failed], events(for: "a").filter {
              if case .timerFired = $0 { false } else { true }
          })
    func eventForStoppedApp(_ state: AppState, _ event: Event) throws {
        var h = Harness("a", policy: .crashOnceFails)
        try h.bring("a", to: .inactive)
        h.exit("a", state == .failed ? .exited(1) : .exited(0))
        try #require(h.state("a") == state)

        #expect(h.event(event) == [])
        #expect(h.state("a") == state)
    }

    @Test("a stray timer for an app that is not running changes nothing",
          arguments: [AppState.notRunning, .failed], [TimerKind.ack, .hello, .grace, .kill])
    func timerForStoppedApp(_ state: AppState, _ timer: TimerKind) throws {
        var h = Harness("a", policy: .crashOnceFails)
        try h.bring("a", to: .inactive)
        h.exit("a", state == .failed ? .exited(1) : .exited(0))

        let effects = h.fire(timer, "a")

        #expect(effects.allSatisfy { if case .settled = $0 { true } else { false } }, "\(effects)")
        #expect(h.state("a") == state)
    }

    @Test("a second hello changes nothing but the hello timer")
    func secondHello() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)

        let effects = h.hello("a")

        #expect(effects == [.cancelTimer(app: "a", .hello), .settled(app: "a")])
    }

    @Test("requests and events for one app leave the others alone")
    func appsAreIndependent() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .background)
        let start = h.log.count

        try h.cooperating { h throws in
            try h.request(.launch(background: false), "b")
            try h.request(.suspend, "b")
            h.exit("b", .signaled(9))
        }

        #expect(h.log[start...].allSatisfy { $0.app == "b" })
        #expect(h.state("a") == .background)
    }

    @Test("an app can be removed only when it is not running")
    func remove() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .suspended)
        var model = h.model

        #expect(model.remove("a") == false)
        #expect(model.remove("b") == true)
        #expect(model.apps["b"] == nil)
        #expect(model.apps["a"] != nil)
    }

    @Test("a new policy takes effect from the next step")
    func setPolicy() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        var model = h.model
        model.setPolicy(.with { $0.ackTimeout = .seconds(1) }, for: "a")

        let effects = try model.handle(.focus, for: "a", now: .seconds(1))

        #expect(effects.armed(.ack) == [.seconds(1)])
    }
}
