import Testing
@testable import LifecycleModel

/// The catch-up rule: a client that says hello after its app moved on without it hears the callbacks from the state
/// it last heard of to the current one, in UIKit's order, each acknowledged; the acks move nothing.
@Suite("Catch-up on hello")
struct CatchUpTests {
    @Test("re-adopted in the background and focused before its client reconnects: willEnterForeground, didBecomeActive on hello")
    func reAdoptedThenFocused() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        let snapshot = try #require(h.model.snapshot(of: "a"))

        var next = Harness("a")
        _ = next.model.adopt("a", snapshot, running: true, now: next.now)
        try next.request(.focus, "a")
        #expect(next.state("a") == .active, "no client to tell: the focus happens at once")
        let start = next.log.count
        next.cooperating { $0.hello("a") }
        #expect(next.sends(from: start) == [Sent("a", .willEnterForeground), Sent("a", .didBecomeActive)])
        #expect(next.transitions(of: "a", from: start).isEmpty, "the acks move nothing: the app is active already")
        #expect(next.state("a") == .active && next.record(of: "a").isSettled)
    }

    @Test("a client that hung up while active and says hello again after a background: willResignActive, didEnterBackground")
    func hungUpThenBackground() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        h.event(.disconnected(app: "a"))
        try h.request(.background, "a")
        #expect(h.state("a") == .background)
        let start = h.log.count
        h.cooperating { $0.hello("a") }
        #expect(h.sends(from: start) == [Sent("a", .willResignActive), Sent("a", .didEnterBackground)])
        #expect(h.state("a") == .background && h.record(of: "a").isSettled)
    }

    @Test("nothing to catch up: a re-adopted app whose client reconnects where it left it hears nothing new")
    func nothingMissed() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        let snapshot = try #require(h.model.snapshot(of: "a"))
        var next = Harness("a")
        _ = next.model.adopt("a", snapshot, running: true, now: next.now)
        let start = next.log.count
        next.cooperating { $0.hello("a") }
        #expect(next.sends(from: start).isEmpty)
        #expect(next.state("a") == .active)
    }
}
