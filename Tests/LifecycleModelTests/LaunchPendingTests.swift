import Testing
@testable import LifecycleModel

/// A request that launches its app waits for the spawn (`LifecycleRules.launchWaitsForSpawn`): a failed spawn
/// (`Input.launchFailed`) undoes exactly what the request did, and any other input lets it stand.
@Suite struct LaunchPendingTests {
    /// What an app is to the model, for comparing before and after.
    struct Seen: Equatable {
        var state: AppState
        var steps: Int
        var awaiting: Delivery?
        var launches: Int
        var starts: [MonotonicTime]
        var nextMessageID: Int
    }

    func seen(_ h: Harness, _ name: String) -> Seen {
        let app = h.model.apps[name]!
        return Seen(state: app.state, steps: app.plan.count, awaiting: app.awaiting, launches: app.launches,
                    starts: app.recentStarts, nextMessageID: app.nextMessageID)
    }

    @Test func aFailedSpawnOfAFocusLeavesTheActiveAppActiveAndUntold() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .active)
        h.advance(by: .seconds(5))
        let before = (a: seen(h, "a"), b: seen(h, "b"), active: h.model.activeApp, now: h.model.now)

        let focus = h.model.handle(.request(.focus, app: "b", origin: "lifectl"), now: h.now)
        #expect(focus.effects.contains(.spawn(app: "b", options: LaunchOptions(launchedBy: "lifectl"))))
        #expect(h.model.launchIsPending("b"))
        #expect(h.model.apps["a"]!.awaiting?.name == "willResignActive", "the request ran as far as it goes")

        let failed = h.model.handle(.launchFailed(app: "b", reason: "no such file"), now: h.now)
        #expect(failed.effects.isEmpty)
        #expect(failed.refusal == .request(RequestError(app: "b", state: .notRunning, request: .focus,
                                                        reason: .spawnFailed("no such file"))))
        #expect(seen(h, "a") == before.a)
        #expect(seen(h, "b") == before.b)
        #expect(h.model.activeApp == before.active)
        #expect(h.model.now == before.now)
        #expect(!h.model.launchIsPending("b"))
        #expect(h.model.handle(.launchFailed(app: "b", reason: "again"), now: h.now) == Outcome(), "undone once")
    }

    @Test func anotherInputLetsTheLaunchStand() throws {
        var h = Harness("b")
        let launch = h.model.handle(.request(.launch(background: false), app: "b", origin: "lifectl"), now: h.now)
        #expect(launch.effects.contains { if case .spawn("b", _) = $0 { true } else { false } })
        _ = h.model.handle(.event(.hello(app: "b")), now: h.now)
        #expect(!h.model.launchIsPending("b"))
        #expect(h.model.handle(.launchFailed(app: "b", reason: "late"), now: h.now) == Outcome())
        #expect(h.model.apps["b"]!.state == .inactive)
        #expect(h.model.apps["b"]!.launches == 1)
    }

    @Test func aRequestThatFindsItsAppRunningLeavesNothingPending() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        _ = h.model.handle(.request(.focus, app: "a", origin: "lifectl"), now: h.now)
        #expect(!h.model.launchIsPending("a"))
        #expect(h.model.handle(.launchFailed(app: "a", reason: "none"), now: h.now) == Outcome())
        #expect(h.model.apps["a"]!.state == .background, "the focus goes on: willEnterForeground is in flight")
        #expect(h.model.apps["a"]!.awaiting?.name == "willEnterForeground")
    }
}
