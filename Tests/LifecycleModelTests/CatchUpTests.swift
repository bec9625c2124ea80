import FoundationEssentials
import LifecycleProtocol
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

    // MARK: A late first hello

    /// "a" launched by lifectl with no hello within its launch timeout: managed without messages from then on.
    static func silentSinceLaunch() throws -> Harness {
        var h = Harness("a")
        try h.request(.launch(background: false), "a")
        h.fire(.hello, "a")
        #expect(h.record(of: "a").muted)
        return h
    }

    @Test("a late first hello after a focus: didFinishLaunching with its launch options, then didBecomeActive")
    func lateHelloAfterFocus() throws {
        var h = try Self.silentSinceLaunch()
        try h.request(.focus, "a")
        #expect(h.state("a") == .active)
        let start = h.log.count
        h.cooperating { $0.hello("a") }
        #expect(h.sends(from: start) == [Sent("a", .didFinishLaunching), Sent("a", .didBecomeActive)])
        let launch = h.log[start...].compactMap { effect -> LaunchOptions? in
            if case .send(_, let delivery) = effect { delivery.launchOptions } else { nil }
        }
        #expect(launch.map(\.launchedBy) == ["lifectl"], "the launch options are those of the launch it missed")
        #expect(h.transitions(of: "a", from: start).isEmpty)
        #expect(h.state("a") == .active && h.record(of: "a").isSettled)
    }

    @Test("a late first hello after a background: didFinishLaunching, didEnterBackground")
    func lateHelloAfterBackground() throws {
        var h = try Self.silentSinceLaunch()
        try h.request(.focus, "a")
        try h.request(.background, "a")
        let start = h.log.count
        h.cooperating { $0.hello("a") }
        #expect(h.sends(from: start) == [Sent("a", .didFinishLaunching), Sent("a", .didEnterBackground)])
        #expect(h.state("a") == .background && h.record(of: "a").isSettled)
    }

    @Test("the catch-up's didFinishLaunching has no launch watchdog: its deadline passing does not kill the running app")
    func lateDidFinishLaunchingDeadline() throws {
        var h = try Self.silentSinceLaunch()
        h.hello("a")
        #expect(h.inFlight("a")?.callback == .didFinishLaunching)
        let effects = h.fire(.ack, "a")
        #expect(effects.signals.isEmpty)
        #expect(h.state("a") == .inactive && h.record(of: "a").isSettled)
    }

    @Test("a hello on time is no catch-up: didFinishLaunching once")
    func helloOnTime() throws {
        var h = Harness("a")
        try h.cooperating { h throws in try h.request(.focus, "a") }
        #expect(h.sends() == [Sent("a", .didFinishLaunching), Sent("a", .didBecomeActive)])
    }

    @Test("a hang-up in the middle of a catch-up: the next hello goes on from what was told")
    func hangUpDuringCatchUp() throws {
        var h = try Self.silentSinceLaunch()
        try h.request(.focus, "a")
        try h.request(.background, "a")
        h.hello("a")
        #expect(h.inFlight("a")?.callback == .didFinishLaunching)
        h.event(.disconnected(app: "a"))
        let start = h.log.count
        h.cooperating { $0.hello("a") }
        #expect(h.sends(from: start) == [Sent("a", .didEnterBackground)], "didFinishLaunching in flight counts as heard")
        #expect(h.record(of: "a").isSettled)
        h.event(.disconnected(app: "a"))
        let again = h.log.count
        h.cooperating { $0.hello("a") }
        #expect(h.sends(from: again).isEmpty, "caught up: nothing more to tell")
    }

    @Test("a hello read while suspended: the catch-up waits until the app runs again")
    func helloWhileSuspended() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        h.event(.disconnected(app: "a"))
        try h.request(.background, "a")
        try h.request(.suspend, "a")
        #expect(h.state("a") == .suspended)
        let start = h.log.count
        h.cooperating { $0.hello("a") }
        #expect(h.sends(from: start).isEmpty)
        try h.cooperating { h throws in try h.request(.resume, "a") }
        #expect(h.sends(from: start) == [Sent("a", .willResignActive), Sent("a", .didEnterBackground)])
    }

    // MARK: Scenes

    @Test("a scene app re-adopted with its scene in focus, focused elsewhere before its client reconnects: the scene resigns and enters the background, the app follows")
    func sceneAppFocusedElsewhere() throws {
        let h = try SceneTests.focusedSceneApp()
        let snapshot = try #require(h.model.snapshot(of: "w"))
        var next = Harness(["w": SceneTests.multi, "p": AppPolicy()])
        _ = next.model.adopt("w", snapshot, running: true, now: next.now)
        try next.cooperating { h throws in try h.request(.focus, "p") }
        #expect(next.state("w") == .background)
        let start = next.log.count
        next.cooperating { $0.hello("w") }
        #expect(next.log[start...].sentMessages == ["w.s1.sceneWillResignActive", "w.willResignActive",
                                                    "w.s1.sceneDidEnterBackground", "w.didEnterBackground"])
        #expect(next.transitions(of: "w", from: start).isEmpty)
        #expect(next.model.app("w")?.sessions.first?.state == .background && next.record(of: "w").isSettled)
    }

    @Test("a scene that connected while the client was away: sceneWillConnect with its session, then into focus")
    func sceneConnectedMeanwhile() throws {
        var h = try SceneTests.focusedSceneApp()
        h.event(.disconnected(app: "w"))
        try h.request(.openScene(role: nil, configuration: "Editor", options: [:]), "w")
        #expect(h.model.app("w")?.sessions.map(\.state) == [.foregroundInactive, .foregroundActive])
        let start = h.log.count
        h.cooperating { $0.hello("w") }
        #expect(h.log[start...].sentMessages == ["w.s1.sceneWillResignActive", "w.willResignActive",
                                                 "w.s2.sceneWillConnect", "w.s2.sceneWillEnterForeground",
                                                 "w.s2.sceneDidBecomeActive", "w.didBecomeActive"])
        let connection = h.log[start...].compactMap { effect -> SceneConnection? in
            if case .send(_, let delivery) = effect, case .scene(.sceneWillConnect, _, let connection) = delivery.message {
                connection
            } else { nil }
        }
        #expect(connection.map(\.configuration) == ["Editor"])
        #expect(h.state("w") == .active && h.record(of: "w").isSettled)
    }

    @Test("a scene app's late first hello: didFinishLaunching, then its scene connects, enters the foreground and takes focus")
    func sceneAppLateHello() throws {
        var h = Harness(["w": SceneTests.multi])
        try h.request(.focus, "w")
        h.fire(.hello, "w")
        #expect(h.state("w") == .active)
        let start = h.log.count
        h.cooperating { $0.hello("w") }
        #expect(h.log[start...].sentMessages == ["w.didFinishLaunching", "w.s1.sceneWillConnect",
                                                 "w.s1.sceneWillEnterForeground", "w.s1.sceneDidBecomeActive",
                                                 "w.didBecomeActive"])
        #expect(h.state("w") == .active && h.record(of: "w").isSettled)
    }

    @Test("a scene closed while the client was away: it enters the background and disconnects")
    func sceneClosedMeanwhile() throws {
        var h = try SceneTests.twoScenes()
        h.event(.disconnected(app: "w"))
        try h.request(.closeScene("s1"), "w")
        let start = h.log.count
        h.cooperating { $0.hello("w") }
        #expect(h.log[start...].sentMessages == ["w.s1.sceneDidEnterBackground", "w.s1.sceneDidDisconnect"])
        #expect(h.record(of: "w").isSettled)
    }

    // MARK: Across the daemon's restart

    /// The state file of `h`'s app "a", through JSON as the daemon writes and reads it, taken back by a new daemon.
    static func restarted(_ h: Harness) throws -> Harness {
        let saved = try #require(h.model.snapshot(of: "a"))
        let file = try LineCoder().decode(AppSnapshot.self, from: LineCoder().encode(saved))
        var next = Harness("a")
        _ = next.model.adopt("a", file, running: true, now: next.now)
        return next
    }

    @Test("re-adopted before its client's first hello: that hello hears didFinishLaunching with its launch options, then the way to where the app is")
    func firstHelloAfterRestart() throws {
        var h = try Self.silentSinceLaunch()
        try h.request(.focus, "a")
        #expect(h.model.snapshot(of: "a")?.told == Told(state: .notRunning, launch: LaunchOptions(launchedBy: "lifectl")))
        var next = try Self.restarted(h)
        let start = next.log.count, savesStart = next.saves.count
        next.cooperating { $0.hello("a") }
        #expect(next.sends(from: start) == [Sent("a", .didFinishLaunching), Sent("a", .didBecomeActive)])
        let launch = next.log[start...].compactMap { effect -> LaunchOptions? in
            if case .send(_, let delivery) = effect { delivery.launchOptions } else { nil }
        }
        #expect(launch.map(\.launchedBy) == ["lifectl"], "the launch options are those of the launch it missed")
        #expect(next.transitions(of: "a", from: start).isEmpty)
        #expect(next.state("a") == .active && next.record(of: "a").isSettled)
        #expect(next.model.snapshot(of: "a")?.told == nil, "caught up: the file no longer holds a catch-up")
        #expect(next.saves[savesStart...].filter { $0 == ["a"] }.count >= 2, "each catch-up message sent is saved")
    }

    @Test("re-adopted after its client hung up while active and the app went to the background: the next hello hears willResignActive, didEnterBackground")
    func hungUpBeforeRestart() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        let before = h.saves.count
        h.event(.disconnected(app: "a"))
        #expect(h.saves[before...].contains(["a"]), "what the client heard is saved at its hang-up")
        try h.request(.background, "a")
        var next = try Self.restarted(h)
        let start = next.log.count
        next.cooperating { $0.hello("a") }
        #expect(next.sends(from: start) == [Sent("a", .willResignActive), Sent("a", .didEnterBackground)])
        #expect(next.state("a") == .background && next.record(of: "a").isSettled)
    }

    @Test("re-adopted in the middle of a catch-up: the next hello goes on from what the previous daemon told")
    func restartDuringCatchUp() throws {
        var h = try Self.silentSinceLaunch()
        try h.request(.focus, "a")
        try h.request(.background, "a")
        h.hello("a")
        #expect(h.inFlight("a")?.callback == .didFinishLaunching)
        #expect(h.model.snapshot(of: "a")?.told?.state == .inactive, "a catch-up message sent is saved as heard")
        var next = try Self.restarted(h)
        let start = next.log.count
        next.cooperating { $0.hello("a") }
        #expect(next.sends(from: start) == [Sent("a", .didEnterBackground)])
    }
}
