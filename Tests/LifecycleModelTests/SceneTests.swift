import Testing
@testable import LifecycleModel

/// Scenes (iOS 13): each scene moves on its own, the app's state is derived from its scenes, and the app's
/// callbacks come right after the scene callback that changed the derived state.
@Suite("Scenes")
struct SceneTests {
    static let multi = AppPolicy.with {
        $0.scenes = ScenePolicy(supportsMultipleScenes: true, configurations: [
            SceneConfiguration(role: "window", name: "Main"), SceneConfiguration(role: "window", name: "Editor"),
            SceneConfiguration(role: "externalDisplay", name: "Slides"),
        ])
    }
    static let single = AppPolicy.with {
        $0.scenes = ScenePolicy(supportsMultipleScenes: false, configurations: [SceneConfiguration(role: "window", name: "Main")])
    }

    /// "w" (scenes) active with scene s1, "p" (plain) in the background; settled.
    static func focusedSceneApp() throws -> Harness {
        var h = Harness(["w": multi, "p": AppPolicy()])
        try h.cooperating { h throws in try h.request(.focus, "w") }
        try h.bring("p", to: .background)
        return h
    }

    /// "w" active with s1 and s2 in the foreground, s2 active.
    static func twoScenes() throws -> Harness {
        var h = try focusedSceneApp()
        try h.cooperating { h throws in try h.request(.openScene(role: nil, configuration: nil, options: [:]), "w") }
        return h
    }

    func scene(_ h: Harness, _ app: String, _ id: String) -> SceneSession? {
        h.model.app(app)?.sessions.first { $0.id == id }
    }

    func sent(_ h: Harness, from start: Int) -> [String] { h.log[start...].sentMessages }

    @Test("focus launches the app and connects a scene: launch, configuration, connection, foreground, activation")
    func focusConnectsAScene() throws {
        var h = Harness(["w": Self.multi])

        try h.cooperating { h throws in try h.request(.focus, "w") }

        #expect(sent(h, from: 0) == ["w.didFinishLaunching", "w.configurationForConnecting", "w.s1.sceneWillConnect",
                                     "w.s1.sceneWillEnterForeground", "w.s1.sceneDidBecomeActive", "w.didBecomeActive"])
        #expect(h.state("w") == .active && h.model.activeApp == "w")
        #expect(scene(h, "w", "s1") == SceneSession(id: "s1", role: "window", configuration: "Main", state: .foregroundActive,
                                                    connectionOptions: ["origin": "lifectl"], lastActivation: 1))
        #expect(h.transitions(of: "w") == [.inactive, .active], "the app was inactive from launch until its scene was active")
    }

    @Test("a second scene: it connects and comes forward, the first resigns, the second activates; the app stays active")
    func focusMovesBetweenScenesOfOneApp() throws {
        var h = try Self.focusedSceneApp()
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.openScene(role: nil, configuration: "Editor", options: [:]), "w") }

        #expect(sent(h, from: start) == ["w.configurationForConnecting", "w.s2.sceneWillConnect", "w.s2.sceneWillEnterForeground",
                                         "w.s1.sceneWillResignActive", "w.s2.sceneDidBecomeActive"])
        #expect(h.transitions(of: "w", from: start).isEmpty, "no app-level change: the app held focus throughout")
        #expect(scene(h, "w", "s1")?.state == .foregroundInactive && scene(h, "w", "s2")?.state == .foregroundActive)
        #expect(scene(h, "w", "s2")?.configuration == "Editor")

        let back = h.log.count
        try h.cooperating { h throws in try h.request(.focusScene("s1"), "w") }
        #expect(sent(h, from: back) == ["w.s2.sceneWillResignActive", "w.s1.sceneDidBecomeActive"])
        #expect(h.state("w") == .active)
    }

    @Test("focus to another app: the active scene resigns, then the app; each scene goes back, then the app; then the other app")
    func focusMovesToAnotherApp() throws {
        var h = try Self.twoScenes()
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.focus, "p") }

        let w = sent(h, from: start).filter { $0.hasPrefix("w.") }
        #expect(w == ["w.s2.sceneWillResignActive", "w.willResignActive", "w.s2.sceneDidEnterBackground",
                      "w.s1.sceneDidEnterBackground", "w.didEnterBackground"])
        let all = sent(h, from: start)
        let resigned = try #require(all.firstIndex(of: "w.willResignActive"))
        let foreground = try #require(all.firstIndex(of: "p.willEnterForeground"))
        #expect(resigned < foreground, "p comes forward only after w has resigned")
        #expect(all.filter { $0.hasPrefix("p.") } == ["p.willEnterForeground", "p.didBecomeActive"])
        #expect(h.transitions(of: "w", from: start) == [.inactive, .background])
        #expect(h.state("p") == .active && h.momentsWithSeveralActiveApps().isEmpty)
    }

    @Test("focus back to a scene app from another app: scene first, then the app, on the way up")
    func focusReturnsToSceneApp() throws {
        var h = try Self.twoScenes()
        try h.cooperating { h throws in try h.request(.focus, "p") }
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.focusScene("s1"), "w") }

        let all = sent(h, from: start)
        #expect(all.filter { $0.hasPrefix("w.") } == ["w.s1.sceneWillEnterForeground", "w.willEnterForeground",
                                                      "w.s1.sceneDidBecomeActive", "w.didBecomeActive"])
        #expect(all.filter { $0.hasPrefix("p.") } == ["p.willResignActive", "p.didEnterBackground"])
        #expect(h.transitions(of: "w", from: start) == [.inactive, .active])
        #expect(scene(h, "w", "s2")?.state == .background, "the other scene stays in the background")
    }

    @Test("the app's state (and so its priority class) follows its scenes at each step")
    func derivedStateAtEachStep() throws {
        var h = try Self.twoScenes()
        #expect(PriorityClass(h.state("w")) == .foreground)

        try h.cooperating { h throws in try h.request(.backgroundScene("s2"), "w") }
        #expect(h.state("w") == .inactive, "s1 is still in the foreground, inactive")
        #expect(scene(h, "w", "s2")?.state == .background)

        try h.cooperating { h throws in try h.request(.backgroundScene("s1"), "w") }
        #expect(h.state("w") == .background, "the last foreground scene left")
        #expect(PriorityClass(h.state("w")) == .background)
        #expect(h.log.contains(.armTimer(app: "w", .grace, after: AppPolicy().backgroundTime!)), "the grace time runs")

        h.cooperating { h in h.fire(.grace, "w") }
        #expect(h.state("w") == .suspended && PriorityClass(h.state("w")) == .suspended)
        #expect(scene(h, "w", "s1")?.state == .background, "suspension is app-level; the scenes stay in the background")
    }

    @Test("close disconnects and keeps the session; focus reconnects it with the state it saved")
    func closeAndReconnectGiveBackSavedState() throws {
        var h = try Self.focusedSceneApp()
        h.savedStates["s1"] = ["draft": "hello", "cursor": 5]
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.closeScene("s1"), "w") }

        #expect(sent(h, from: start) == ["w.s1.sceneWillResignActive", "w.willResignActive", "w.s1.sceneDidEnterBackground",
                                         "w.didEnterBackground", "w.s1.sceneDidDisconnect"])
        #expect(scene(h, "w", "s1")?.state == nil)
        #expect(scene(h, "w", "s1")?.savedState == ["draft": "hello", "cursor": 5])
        #expect(h.state("w") == .background)

        let again = h.log.count
        try h.cooperating { h throws in try h.request(.focusScene("s1"), "w") }
        let connection = h.log[again...].compactMap { effect -> SceneConnection? in
            if case .send("w", let delivery) = effect, case .scene(.sceneWillConnect, "s1", let connection) = delivery.message {
                return connection
            }
            return nil
        }
        #expect(connection.first?.savedState == ["draft": "hello", "cursor": 5])
        #expect(h.state("w") == .active)
    }

    @Test("discard of a connected scene disconnects it, forgets the session and tells the app")
    func discardTellsTheApp() throws {
        var h = try Self.twoScenes()
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.discardScene("s1"), "w") }

        #expect(sent(h, from: start) == ["w.s1.sceneDidEnterBackground", "w.s1.sceneDidDisconnect", "w.didDiscardSceneSessions"])
        #expect(h.log[start...].contains { effect in
            if case .send("w", let delivery) = effect { delivery.message == .didDiscardSceneSessions(["s1"]) } else { false }
        })
        #expect(h.model.app("w")?.sessions.map(\.id) == ["s2"])
        #expect(h.state("w") == .active, "s2 still holds focus")
        #expect(throws: RequestError.self) { try h.request(.focusScene("s1"), "w") }
    }

    @Test("sessions outlive the process: after a relaunch focus reconnects the last active one, and a discard while not running is told after launch")
    func sessionsSurviveRelaunch() throws {
        var h = try Self.twoScenes()
        h.savedStates["s2"] = ["page": 3]
        try h.cooperating { h throws in try h.request(.background, "w") }
        try h.cooperating { h throws in try h.request(.terminate, "w") }
        #expect(h.state("w") == .notRunning)
        #expect(h.model.app("w")?.sessions.map(\.id) == ["s1", "s2"])
        #expect(h.model.app("w")?.sessions.allSatisfy { $0.state == nil } == true)

        try h.request(.discardScene("s1"), "w")
        #expect(h.model.app("w")?.sessions.map(\.id) == ["s2"], "forgotten at once: nobody runs to disconnect")

        let start = h.log.count
        try h.cooperating { h throws in try h.request(.focus, "w") }

        #expect(sent(h, from: start) == ["w.didFinishLaunching", "w.didDiscardSceneSessions", "w.configurationForConnecting",
                                         "w.s2.sceneWillConnect", "w.s2.sceneWillEnterForeground", "w.s2.sceneDidBecomeActive",
                                         "w.didBecomeActive"])
        let connection = h.log[start...].compactMap { effect -> SceneConnection? in
            if case .send("w", let delivery) = effect, case .scene(.sceneWillConnect, _, let connection) = delivery.message { connection } else { nil }
        }
        #expect(connection.first?.savedState == ["page": 3])
    }

    @Test("a discard granted but not yet carried out stands when the app is terminated meanwhile, and is told at the next launch")
    func discardSurvivesTermination() throws {
        var h = try Self.twoScenes()
        h.unresponsive = ["w"]
        try h.request(.discardScene("s1"), "w")
        try h.request(.terminate, "w")
        #expect(h.model.app("w")?.sessions.map(\.id) == ["s2"])
        h.runOutDeadlines()
        #expect(h.state("w") == .notRunning)

        h.unresponsive = []
        let start = h.log.count
        try h.cooperating { h throws in try h.request(.launch(background: true), "w") }
        #expect(h.log[start...].contains { effect in
            if case .send("w", let delivery) = effect { delivery.message == .didDiscardSceneSessions(["s1"]) } else { false }
        })
    }

    @Test("a focus claim whose scene is discarded before it activates is released: other apps can take focus")
    func discardedFocusTargetReleasesTheQueue() throws {
        var h = Harness(["w": Self.multi, "p": AppPolicy()])
        h.unresponsive = ["w"]
        try h.request(.focus, "w")
        try h.request(.discardScene("s1"), "w")
        try h.request(.focus, "w")
        h.unresponsive = []
        h.runOutDeadlines()
        try h.cooperating { h throws in try h.request(.focus, "p") }
        #expect(h.state("p") == .active)
        #expect(h.momentsWithSeveralActiveApps().isEmpty)
    }

    @Test("the client's configuration answer is used when the app declares it, else the proposed one")
    func configurationAnswer() throws {
        var h = try Self.focusedSceneApp()
        h.configurationAnswers = ["s2": "Editor", "s3": "Nonsense"]

        try h.cooperating { h throws in try h.request(.openScene(role: nil, configuration: nil, options: [:]), "w", origin: "w") }
        try h.cooperating { h throws in try h.request(.openScene(role: nil, configuration: nil, options: [:]), "w", origin: "w") }

        #expect(scene(h, "w", "s2")?.configuration == "Editor")
        #expect(scene(h, "w", "s3")?.configuration == "Main")
        #expect(h.log.notes.contains(.unknownSceneConfiguration(scene: "s3", asked: "Nonsense", used: "Main")))
        #expect(scene(h, "w", "s2")?.connectionOptions == ["origin": "w"], "a client's own request names it as the origin")
    }

    @Test("the options of a request reach sceneWillConnect with its origin; a reconnection says who asked")
    func connectionOptions() throws {
        var h = try Self.focusedSceneApp()
        let start = h.log.count
        try h.cooperating { h throws in
            try h.request(.openScene(role: nil, configuration: "Editor", options: ["reason": "compose"]), "w", origin: "w")
        }
        let options = h.log[start...].compactMap { effect -> JSONValue? in
            if case .send("w", let delivery) = effect, case .scene(.sceneWillConnect, _, let connection?) = delivery.message {
                return connection.options
            }
            return nil
        }
        #expect(options == [["origin": "w", "reason": "compose", "requestedConfiguration": "Editor"]])

        try h.cooperating { h throws in try h.request(.closeScene("s2"), "w") }
        #expect(scene(h, "w", "s2")?.connectionOptions == [:], "a disconnected session keeps no options")
        try h.cooperating { h throws in try h.request(.focusScene("s2"), "w") }
        #expect(scene(h, "w", "s2")?.connectionOptions == ["origin": "lifectl"])
    }

    @Test("a scene app restarted without focus connects a scene in the foreground, as a plain launch does")
    func restartWithoutFocusConnectsAScene() throws {
        var h = Harness(["w": AppPolicy.with {
            $0.scenes = Self.multi.scenes
            $0.restart = .always
        }])
        try h.cooperating { h throws in try h.request(.launch(background: false), "w") }
        h.exit("w", .exited(1))
        h.cooperating { h in h.fire(.restart, "w") }

        #expect(h.state("w") == .inactive)
        #expect(scene(h, "w", "s1")?.state == .foregroundInactive)
        #expect(scene(h, "w", "s1")?.connectionOptions == ["origin": "restart"])
    }

    @Test("requests the app's [Scenes] cannot take are refused, saying why")
    func refusals() throws {
        var h = Harness(["one": Self.single, "plain": AppPolicy(), "w": Self.multi])
        try h.cooperating { h throws in try h.request(.focus, "one") }

        #expect(throws: RequestError(app: "one", state: .active, request: .openScene(role: nil, configuration: nil, options: [:]),
                                     reason: .notAllowed(hint: "it supports one scene (SupportsMultipleScenes=no) and has s1; focus that one, or discard it first"))) {
            try h.request(.openScene(role: nil, configuration: nil, options: [:]), "one")
        }
        #expect(throws: RequestError(app: "plain", state: .notRunning, request: .focusScene("s1"), reason: .noScenes)) {
            try h.request(.focusScene("s1"), "plain")
        }
        #expect(throws: RequestError(app: "w", state: .notRunning, request: .closeScene("s9"), reason: .unknownScene("s9"))) {
            try h.request(.closeScene("s9"), "w")
        }
        #expect(throws: RequestError.self) { try h.request(.openScene(role: "carPlay", configuration: nil, options: [:]), "w") }
        #expect(throws: RequestError.self) { try h.request(.openScene(role: "window", configuration: "Slides", options: [:]), "w") }
    }

    @Test("a suspended app's connected scene is not closed under it: resume first")
    func closeWhileSuspendedIsRefused() throws {
        var h = try Self.focusedSceneApp()
        try h.cooperating { h throws in try h.request(.suspend, "w") }
        #expect(h.state("w") == .suspended)

        #expect(throws: RequestError.self) { try h.request(.closeScene("s1"), "w") }
        try h.cooperating { h throws in try h.request(.resume, "w") }
        try h.cooperating { h throws in try h.request(.closeScene("s1"), "w") }
        #expect(scene(h, "w", "s1")?.state == nil)
    }

    @Test("a launch into the background connects no scene; a plain launch brings one to the foreground, inactive")
    func launches() throws {
        var h = Harness(["a": Self.multi, "b": Self.multi])
        try h.cooperating { h throws in
            try h.request(.launch(background: true), "a")
            try h.request(.launch(background: false), "b")
        }
        #expect(h.state("a") == .background && h.model.app("a")?.sessions.isEmpty == true)
        #expect(sent(h, from: 0).filter { $0.hasPrefix("a.") } == ["a.didFinishLaunching", "a.didEnterBackground"])
        #expect(h.state("b") == .inactive && scene(h, "b", "s1")?.state == .foregroundInactive)
    }

    @Test("while its messages are in flight, the app's projected state is where its scenes will take it")
    func projectedStateFollowsQueuedSceneWork() throws {
        var h = try Self.focusedSceneApp()
        try h.request(.backgroundScene("s1"), "w")
        #expect(h.state("w") == .active)
        #expect(h.model.projectedState(of: "w") == .background)
        #expect(throws: RequestError.self, "a resume is judged against where w is going, not where it is") {
            try h.request(.resume, "w")
        }
    }

    @Test("a scene app that hung up moves on without messages, its scenes too")
    func silentSceneAppMovesAtOnce() throws {
        var h = try Self.focusedSceneApp()
        h.event(.disconnected(app: "w"))
        let start = h.log.count

        try h.request(.background, "w")

        #expect(sent(h, from: start).isEmpty)
        #expect(h.state("w") == .background && scene(h, "w", "s1")?.state == .background)
    }

    // MARK: The bound on sessions (MaxSceneSessions=)

    static func bounded(_ limit: Int) -> AppPolicy {
        AppPolicy.with { $0.scenes = ScenePolicy(supportsMultipleScenes: true, maxSessions: limit) }
    }

    @Test("at MaxSceneSessions=, a new session discards the least recently used disconnected one, and the app hears didDiscardSceneSessions")
    func newSessionAtTheBoundDiscardsTheLeastRecentlyUsedDisconnectedOne() throws {
        var h = Harness(["w": Self.bounded(3)])
        try h.cooperating { h throws in try h.request(.focus, "w") }
        for _ in 0..<2 { try h.cooperating { h throws in try h.request(.openScene(role: nil, configuration: nil, options: [:]), "w") } }
        // s1 was active first, then s2, then s3; s2 and s1 are closed (disconnected, kept).
        try h.cooperating { h throws in try h.request(.closeScene("s2"), "w") }
        try h.cooperating { h throws in try h.request(.closeScene("s1"), "w") }
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.openScene(role: nil, configuration: nil, options: [:]), "w") }

        #expect(h.model.app("w")?.sessions.map(\.id) == ["s2", "s3", "s4"])
        #expect(sent(h, from: start).first == "w.didDiscardSceneSessions", "the app hears of the discard before the new scene connects")
        #expect(h.log[start...].contains { effect in
            if case .send("w", let delivery) = effect { delivery.message == .didDiscardSceneSessions(["s1"]) } else { false }
        })
        #expect(h.log[start...].contains(.note(app: "w", .sceneSessionReclaimed(scene: "s1", limit: 3))))
        #expect(scene(h, "w", "s4")?.state == .foregroundActive)
    }

    @Test("at MaxSceneSessions= with every session connected, a new session is refused, naming the app and the bound; nothing changes")
    func newSessionAtTheBoundWithAllConnectedIsRefused() throws {
        var h = Harness(["w": Self.bounded(2)])
        try h.cooperating { h throws in try h.request(.focus, "w") }
        try h.cooperating { h throws in try h.request(.openScene(role: nil, configuration: nil, options: [:]), "w") }
        let start = h.log.count

        do {
            try h.request(.openScene(role: nil, configuration: nil, options: [:]), "w")
            Issue.record("a third session was granted")
        } catch {
            #expect(error.app == "w")
            #expect(error.reason == .notAllowed(hint: "it has 2 scene sessions, all connected, and MaxSceneSessions=2 allows no more; close or discard one of them first"))
        }
        #expect(h.log.count == start, "a refusal has no effect")
        #expect(h.model.app("w")?.sessions.map(\.id) == ["s1", "s2"])
    }

    @Test("a burst of requests for new sessions, none of them acknowledged yet, stops at the bound: the queued connections count as connected")
    func burstOfNewSessionsStopsAtTheBound() throws {
        var h = Harness(["w": Self.bounded(4)])
        try h.cooperating { h throws in try h.request(.focus, "w") }
        var refused = 0
        for _ in 0..<100 {
            do { try h.request(.openScene(role: nil, configuration: nil, options: [:]), "w") } catch { refused += 1 }
        }
        #expect(refused == 97)
        #expect(h.model.app("w")?.sessions.count == 4)
    }

    @Test("the session rule: below the bound there is room; at it the disconnected session activated longest ago goes, the oldest first among the never active; all connected is a refusal")
    func sessionBoundRule() {
        let sessions: [(id: String, connected: Bool, lastActivation: Int)] = [
            (id: "s1", connected: true, lastActivation: 1), (id: "s2", connected: false, lastActivation: 0),
            (id: "s3", connected: false, lastActivation: 0), (id: "s4", connected: false, lastActivation: 2),
        ]
        #expect(LifecycleRules.sessionBound(sessions, maxSessions: 5) == .room)
        #expect(LifecycleRules.sessionBound(sessions, maxSessions: 4) == .discard("s2"))
        #expect(LifecycleRules.sessionBound(Array(sessions.dropFirst(3)), maxSessions: 1) == .discard("s4"))
        #expect(LifecycleRules.sessionBound(Array(sessions.prefix(1)), maxSessions: 1) == .refuse)
    }
}

/// sceneWillConnect carries a session's saved state and options back in one protocol line: both are bounded.
@Suite("Scene payload bounds")
struct ScenePayloadBoundTests {
    @Test("a saved state over the limit is not kept: the one saved before stays, and the daemon is told why")
    func oversizedSavedStateNotKept() throws {
        var h = try SceneTests.focusedSceneApp()
        h.savedStates["s1"] = ["draft": "small"]
        try h.cooperating { h throws in try h.request(.background, "w") }
        #expect(h.record(of: "w").sessions.first?.savedState == ["draft": "small"])

        try h.cooperating { h throws in try h.request(.focus, "w") }
        let big: JSONValue = ["draft": .string(String(repeating: "x", count: SceneSession.savedStateLimit))]
        h.savedStates["s1"] = big
        let start = h.log.count
        try h.cooperating { h throws in try h.request(.background, "w") }
        #expect(h.record(of: "w").sessions.first?.savedState == ["draft": "small"])
        #expect(h.log[start...].contains(.note(app: "w", .savedStateTooLarge(scene: "s1", size: big.encodedSizeBound,
                                                                             limit: SceneSession.savedStateLimit))))
    }

    @Test("scene open with connection options over the limit is refused, saying why")
    func oversizedOptionsRefused() throws {
        var h = try SceneTests.focusedSceneApp()
        let options: JSONValue = ["blob": .string(String(repeating: "x", count: SceneSession.optionsLimit))]
        do {
            try h.request(.openScene(role: nil, configuration: nil, options: options), "w")
            Issue.record("the request was taken")
        } catch {
            #expect(error.description.contains("over the \(SceneSession.optionsLimit) a scene may carry"))
        }
        #expect(h.record(of: "w").sessions.count == 1)
    }
}

