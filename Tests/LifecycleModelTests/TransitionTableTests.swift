import Testing
@testable import LifecycleModel

/// The model as a table of app state × request: every cell is either allowed, with the request's exact effects,
/// the callbacks a cooperative client then receives and the state the app settles in, or refused.
@Suite("Transition table: every request from every state")
struct TransitionTableTests {
    enum Outcome: Sendable {
        case refused(hint: String)
        /// `effects`: what the request itself returns. `callbacks`: every callback the app gets until it settles,
        /// the client acknowledging each at once (and exiting on SIGTERM). `settlesIn`: the final state.
        case allowed(effects: [Effect], callbacks: [LifecycleCallback], settlesIn: AppState)
    }

    struct Cell: Sendable, CustomTestStringConvertible {
        let from: AppState
        let request: Request
        let outcome: Outcome
        init(_ from: AppState, _ request: Request, _ outcome: Outcome) {
            self.from = from
            self.request = request
            self.outcome = outcome
        }
        var testDescription: String { "\(request) from \(from)" }
    }

    // The app under test, "a", is brought to each state by `Harness.bring`, so the next message id is known:
    // inactive got didFinishLaunching (1); active and background also got didBecomeActive/didEnterBackground (2);
    // failed got didFinishLaunching (1) before crashing.
    static let cells: [Cell] = [
        Cell(.notRunning, .launch(background: false),
             .allowed(effects: launch(from: .notRunning), callbacks: [.didFinishLaunching], settlesIn: .inactive)),
        Cell(.notRunning, .launch(background: true),
             .allowed(effects: launch(from: .notRunning, background: true),
                      callbacks: [.didFinishLaunching, .didEnterBackground], settlesIn: .background)),
        Cell(.notRunning, .focus,
             .allowed(effects: launch(from: .notRunning), callbacks: [.didFinishLaunching, .didBecomeActive],
                      settlesIn: .active)),
        Cell(.notRunning, .deactivate, .refused(hint: "only an active app can be interrupted")),
        Cell(.notRunning, .background, .refused(hint: "launch it with --background")),
        Cell(.notRunning, .suspend, .refused(hint: "it is not running")),
        Cell(.notRunning, .resume, .refused(hint: "only a suspended app can be resumed")),
        Cell(.notRunning, .terminate, .allowed(effects: [.settled(app: "a")], callbacks: [], settlesIn: .notRunning)),

        Cell(.inactive, .launch(background: false), .refused(hint: "it is already running")),
        Cell(.inactive, .launch(background: true), .refused(hint: "it is already running")),
        Cell(.inactive, .focus,
             .allowed(effects: [.transition(app: "a", from: .inactive, to: .active, reason: "didBecomeActive")]
                         + sendAndArm("a", .didBecomeActive, id: 2),
                      callbacks: [.didBecomeActive], settlesIn: .active)),
        Cell(.inactive, .deactivate, .allowed(effects: [.settled(app: "a")], callbacks: [], settlesIn: .inactive)),
        Cell(.inactive, .background,
             .allowed(effects: [.transition(app: "a", from: .inactive, to: .background, reason: "didEnterBackground")]
                         + sendAndArm("a", .didEnterBackground, id: 2),
                      callbacks: [.didEnterBackground], settlesIn: .background)),
        Cell(.inactive, .suspend,
             .allowed(effects: [.transition(app: "a", from: .inactive, to: .background, reason: "didEnterBackground")]
                         + sendAndArm("a", .didEnterBackground, id: 2),
                      callbacks: [.didEnterBackground], settlesIn: .suspended)),
        Cell(.inactive, .resume, .refused(hint: "only a suspended app can be resumed")),
        Cell(.inactive, .terminate,
             .allowed(effects: sendAndArm("a", .willTerminate, id: 2), callbacks: [.willTerminate],
                      settlesIn: .notRunning)),

        Cell(.active, .launch(background: false), .refused(hint: "it is already running")),
        Cell(.active, .launch(background: true), .refused(hint: "it is already running")),
        Cell(.active, .focus, .allowed(effects: [.settled(app: "a")], callbacks: [], settlesIn: .active)),
        Cell(.active, .deactivate,
             .allowed(effects: sendAndArm("a", .willResignActive, id: 3), callbacks: [.willResignActive],
                      settlesIn: .inactive)),
        Cell(.active, .background,
             .allowed(effects: sendAndArm("a", .willResignActive, id: 3),
                      callbacks: [.willResignActive, .didEnterBackground], settlesIn: .background)),
        Cell(.active, .suspend,
             .allowed(effects: sendAndArm("a", .willResignActive, id: 3),
                      callbacks: [.willResignActive, .didEnterBackground], settlesIn: .suspended)),
        Cell(.active, .resume, .refused(hint: "only a suspended app can be resumed")),
        Cell(.active, .terminate,
             .allowed(effects: sendAndArm("a", .willTerminate, id: 3), callbacks: [.willTerminate],
                      settlesIn: .notRunning)),

        Cell(.background, .launch(background: false), .refused(hint: "it is already running")),
        Cell(.background, .launch(background: true), .refused(hint: "it is already running")),
        Cell(.background, .focus,
             .allowed(effects: sendAndArm("a", .willEnterForeground, id: 3),
                      callbacks: [.willEnterForeground, .didBecomeActive], settlesIn: .active)),
        Cell(.background, .deactivate, .refused(hint: "only an active app can be interrupted")),
        Cell(.background, .background, .allowed(effects: [.settled(app: "a")], callbacks: [], settlesIn: .background)),
        Cell(.background, .suspend,
             .allowed(effects: [.cancelTimer(app: "a", .grace), .armTimer(app: "a", .reclaim, after: AppPolicy().reclaimAfter),
                                .transition(app: "a", from: .background, to: .suspended, reason: "suspend requested"),
                                .stopProcess(app: "a"), .settled(app: "a")],
                      callbacks: [], settlesIn: .suspended)),
        Cell(.background, .resume, .refused(hint: "only a suspended app can be resumed")),
        Cell(.background, .terminate,
             .allowed(effects: sendAndArm("a", .willTerminate, id: 3), callbacks: [.willTerminate],
                      settlesIn: .notRunning)),

        Cell(.suspended, .launch(background: false), .refused(hint: "it is already running")),
        Cell(.suspended, .launch(background: true), .refused(hint: "it is already running")),
        Cell(.suspended, .focus,
             .allowed(effects: [.cancelTimer(app: "a", .reclaim), .transition(app: "a", from: .suspended, to: .background, reason: "resumed"),
                                .continueProcess(app: "a")] + sendAndArm("a", .willEnterForeground, id: 3),
                      callbacks: [.willEnterForeground, .didBecomeActive], settlesIn: .active)),
        Cell(.suspended, .deactivate, .refused(hint: "only an active app can be interrupted")),
        Cell(.suspended, .background,
             .refused(hint: "it is already stopped in the background; resume it to let it run")),
        Cell(.suspended, .suspend, .allowed(effects: [.settled(app: "a")], callbacks: [], settlesIn: .suspended)),
        Cell(.suspended, .resume,
             .allowed(effects: [.cancelTimer(app: "a", .reclaim), .transition(app: "a", from: .suspended, to: .background, reason: "resumed"),
                                .continueProcess(app: "a"),
                                .armTimer(app: "a", .grace, after: AppPolicy().backgroundTime!),
                                .settled(app: "a")],
                      callbacks: [], settlesIn: .background)),
        // UIKit: a suspended app is terminated without notice; SIGCONT lets it see the SIGTERM.
        Cell(.suspended, .terminate,
             .allowed(effects: [.signal(app: "a", .terminate), .continueProcess(app: "a"),
                                .armTimer(app: "a", .kill, after: AppPolicy().stopTimeout)],
                      callbacks: [], settlesIn: .notRunning)),

        Cell(.failed, .launch(background: false),
             .allowed(effects: launch(from: .failed), callbacks: [.didFinishLaunching], settlesIn: .inactive)),
        Cell(.failed, .launch(background: true),
             .allowed(effects: launch(from: .failed, background: true),
                      callbacks: [.didFinishLaunching, .didEnterBackground], settlesIn: .background)),
        Cell(.failed, .focus,
             .allowed(effects: launch(from: .failed), callbacks: [.didFinishLaunching, .didBecomeActive],
                      settlesIn: .active)),
        Cell(.failed, .deactivate, .refused(hint: "only an active app can be interrupted")),
        Cell(.failed, .background, .refused(hint: "launch it with --background")),
        Cell(.failed, .suspend, .refused(hint: "it is not running")),
        Cell(.failed, .resume, .refused(hint: "only a suspended app can be resumed")),
        Cell(.failed, .terminate,
             .allowed(effects: [.transition(app: "a", from: .failed, to: .notRunning, reason: "reset by terminate"),
                                .settled(app: "a")],
                      callbacks: [], settlesIn: .notRunning)),
    ]

    /// A launch by lifectl: spawn, inactive at once (UIKit's launching app is inactive), and the hello deadline.
    static func launch(from state: AppState, background: Bool = false) -> [Effect] {
        [.spawn(app: "a", options: LaunchOptions(launchedBy: "lifectl", background: background)),
         .transition(app: "a", from: state, to: .inactive, reason: "launched by lifectl"),
         .armTimer(app: "a", .hello, after: AppPolicy().launchTimeout)]
    }

    @Test("the table covers every state × request")
    func tableIsComplete() {
        let requests: [Request] = [.launch(background: false), .launch(background: true), .focus, .deactivate,
                                   .background, .suspend, .resume, .terminate]
        for state in AppState.allCases {
            for request in requests {
                #expect(Self.cells.count { $0.from == state && $0.request == request } == 1,
                        "\(request) from \(state)")
            }
        }
    }

    @Test("request from state", arguments: cells)
    func request(_ cell: Cell) throws {
        var h = Harness(["a": .crashOnceFails])
        try h.bring("a", to: cell.from)

        switch cell.outcome {
        case .refused(let hint):
            let error = #expect(throws: RequestError.self) { try h.request(cell.request, "a") }
            #expect(error == RequestError(app: "a", state: cell.from, request: cell.request,
                                          reason: .notAllowed(hint: hint)))
            let message = error?.description ?? ""
            #expect(message.contains("'a'") && message.contains(cell.from.rawValue)
                    && message.contains(cell.request.description) && message.contains(hint), "\(message)")
            #expect(h.state("a") == cell.from)
            #expect(h.record(of: "a").isSettled, "a refused request leaves no work behind")

        case .allowed(let expectedEffects, let callbacks, let settlesIn):
            let start = h.log.count
            let effects = try h.request(cell.request, "a")
            #expect(effects == expectedEffects)
            #expect(h.model.projectedState(of: "a") == settlesIn, "requests are judged against the projected state")

            h.cooperate(after: effects)
            #expect(h.sends(from: start).map(\.callback) == callbacks)
            #expect(h.state("a") == settlesIn)
            #expect(h.record(of: "a").isSettled)
            #expect(h.model.activeApp == (settlesIn == .active ? "a" : nil))
        }
    }

    @Test("the rules' table refuses exactly the cells this table refuses, with the same words")
    func rulesTableMatches() {
        for cell in Self.cells {
            guard case .app(let request) = cell.request else {
                Issue.record("\(cell.testDescription): the table holds application requests only")
                continue
            }
            switch (LifecycleRules.outcome(of: request, from: cell.from), cell.outcome) {
            case (.refuse(let reason), .refused(let hint)): #expect(reason == hint, "\(cell.testDescription)")
            case (.steps, .allowed): break
            case (let rule, _): Issue.record("\(cell.testDescription): the rules say \(rule)")
            }
        }
    }

    /// The rows where an app with `[Scenes]` differs from the table above: its scene moves first and the app's own
    /// callbacks follow the scene's (UIKit posts the application notifications after the scene delegate's call).
    /// Refusals, terminations and a launch into the background (no scene connects) read as in the table above.
    struct SceneRow: Sendable, CustomTestStringConvertible {
        let from: AppState
        let request: Request
        /// Every message the app gets until it settles, the client acknowledging each at once.
        let messages: [String]
        let settlesIn: AppState
        /// Where its one scene, s1, ends up.
        let scene: SceneActivationState
        init(_ from: AppState, _ request: Request, _ messages: [String], settlesIn: AppState, scene: SceneActivationState) {
            self.from = from
            self.request = request
            self.messages = messages
            self.settlesIn = settlesIn
            self.scene = scene
        }
        var testDescription: String { "\(request) from \(from), with scenes" }
    }

    static let connectToForeground = ["a.configurationForConnecting", "a.s1.sceneWillConnect", "a.s1.sceneWillEnterForeground"]
    static let resignToBackground = ["a.s1.sceneWillResignActive", "a.willResignActive",
                                     "a.s1.sceneDidEnterBackground", "a.didEnterBackground"]

    static let sceneRows: [SceneRow] = [
        SceneRow(.notRunning, .launch(background: false), ["a.didFinishLaunching"] + connectToForeground,
                 settlesIn: .inactive, scene: .foregroundInactive),
        SceneRow(.notRunning, .focus,
                 ["a.didFinishLaunching"] + connectToForeground + ["a.s1.sceneDidBecomeActive", "a.didBecomeActive"],
                 settlesIn: .active, scene: .foregroundActive),

        SceneRow(.inactive, .focus, ["a.s1.sceneDidBecomeActive", "a.didBecomeActive"],
                 settlesIn: .active, scene: .foregroundActive),
        SceneRow(.inactive, .background, ["a.s1.sceneDidEnterBackground", "a.didEnterBackground"],
                 settlesIn: .background, scene: .background),
        SceneRow(.inactive, .suspend, ["a.s1.sceneDidEnterBackground", "a.didEnterBackground"],
                 settlesIn: .suspended, scene: .background),

        SceneRow(.active, .deactivate, ["a.s1.sceneWillResignActive", "a.willResignActive"],
                 settlesIn: .inactive, scene: .foregroundInactive),
        SceneRow(.active, .background, resignToBackground, settlesIn: .background, scene: .background),
        SceneRow(.active, .suspend, resignToBackground, settlesIn: .suspended, scene: .background),

        // Launched into the background, it has no scene yet: focus connects one.
        SceneRow(.background, .focus,
                 connectToForeground + ["a.willEnterForeground", "a.s1.sceneDidBecomeActive", "a.didBecomeActive"],
                 settlesIn: .active, scene: .foregroundActive),
        SceneRow(.suspended, .focus,
                 connectToForeground + ["a.willEnterForeground", "a.s1.sceneDidBecomeActive", "a.didBecomeActive"],
                 settlesIn: .active, scene: .foregroundActive),

        SceneRow(.failed, .launch(background: false), ["a.didFinishLaunching"] + connectToForeground,
                 settlesIn: .inactive, scene: .foregroundInactive),
        SceneRow(.failed, .focus,
                 ["a.didFinishLaunching"] + connectToForeground + ["a.s1.sceneDidBecomeActive", "a.didBecomeActive"],
                 settlesIn: .active, scene: .foregroundActive),
    ]

    static let sceneApp = AppPolicy.with {
        $0.scenes = ScenePolicy(supportsMultipleScenes: false, configurations: [SceneConfiguration(role: "window", name: "Main")])
        $0.restart = .onFailure
        $0.startLimitBurst = 1
    }

    @Test("request from state, for an app with scenes", arguments: sceneRows)
    func sceneRequest(_ row: SceneRow) throws {
        var h = Harness(["a": Self.sceneApp])
        try h.bring("a", to: row.from)
        let start = h.log.count

        h.cooperate(after: try h.request(row.request, "a"))

        #expect(h.log[start...].sentMessages == row.messages)
        #expect(h.state("a") == row.settlesIn)
        #expect(h.model.app("a")?.sessions.map(\.state) == [row.scene])
        #expect(h.record(of: "a").isSettled)
    }

    @Test("an app with scenes is refused exactly where a plain app is, with the same words")
    func sceneAppRefusals() throws {
        for cell in Self.cells {
            guard case .refused(let hint) = cell.outcome else { continue }
            var h = Harness(["a": Self.sceneApp])
            try h.bring("a", to: cell.from)
            let error = #expect(throws: RequestError.self, "\(cell.testDescription)") { try h.request(cell.request, "a") }
            #expect(error == RequestError(app: "a", state: cell.from, request: cell.request, reason: .notAllowed(hint: hint)))
        }
    }

    @Test("an app with scenes gets the plain table's callbacks where no scene moves: terminations and a launch into the background")
    func sceneAppWhereNoSceneMoves() throws {
        for cell in Self.cells {
            guard case .allowed(_, let callbacks, let settlesIn) = cell.outcome,
                  !Self.sceneRows.contains(where: { $0.from == cell.from && $0.request == cell.request }) else { continue }
            var h = Harness(["a": Self.sceneApp])
            try h.bring("a", to: cell.from)
            let start = h.log.count

            h.cooperate(after: try h.request(cell.request, "a"))

            #expect(h.log[start...].sentMessages == callbacks.map { "a.\($0.rawValue)" }, "\(cell.testDescription)")
            #expect(h.state("a") == settlesIn, "\(cell.testDescription)")
        }
    }

    /// UIKit's app-switch and return orders, and nothing else: every pair of states the callbacks connect.
    static let uikitOrders: [AppState: [AppState: [LifecycleCallback]]] = [
        .active: [.inactive: [.willResignActive], .background: [.willResignActive, .didEnterBackground]],
        .inactive: [.active: [.didBecomeActive], .background: [.didEnterBackground]],
        .background: [.inactive: [.willEnterForeground], .active: [.willEnterForeground, .didBecomeActive]],
    ]

    @Test("callbacks(from:to:) gives UIKit's order between every pair of states, and no callback elsewhere")
    func callbackOrdersAreUIKits() {
        for from in AppState.allCases {
            for to in AppState.allCases {
                #expect(LifecycleRules.callbacks(from: from, to: to) == Self.uikitOrders[from]?[to] ?? [],
                        "\(from) → \(to)")
            }
        }
    }

    @Test("every path through the callbacks walks UIKit's ladder one rung at a time: each callback leads to the state the next one starts from")
    func callbackOrdersChain() {
        for from in AppState.allCases {
            for to in AppState.allCases where from != to {
                var state = from
                for callback in LifecycleRules.callbacks(from: from, to: to) {
                    let next = callback.resultingState!
                    #expect(LifecycleRules.callbacks(from: state, to: next) == [callback], "\(from) → \(to) at \(callback)")
                    state = next
                }
                if !LifecycleRules.callbacks(from: from, to: to).isEmpty { #expect(state == to, "\(from) → \(to)") }
            }
        }
    }

    @Test("scene callbacks go connect, foreground, active on the way up and resign, background, disconnect on the way down")
    func sceneCallbackOrders() {
        #expect(LifecycleRules.sceneCallbacks(from: nil, to: .foregroundActive)
                == [.sceneWillConnect, .sceneWillEnterForeground, .sceneDidBecomeActive])
        #expect(LifecycleRules.sceneCallbacks(from: .background, to: .foregroundInactive) == [.sceneWillEnterForeground])
        #expect(LifecycleRules.sceneCallbacks(from: .foregroundActive, to: .foregroundInactive) == [.sceneWillResignActive])
        #expect(LifecycleRules.sceneCallbacks(from: .foregroundActive, to: nil)
                == [.sceneWillResignActive, .sceneDidEnterBackground, .sceneDidDisconnect])
        #expect(LifecycleRules.sceneCallbacks(from: .unattached, to: .background) == [.sceneDidEnterBackground])
        #expect(LifecycleRules.sceneCallbacks(from: .foregroundInactive, to: .foregroundInactive) == [])
        #expect(LifecycleRules.sceneCallbacks(from: .background, to: .background) == [])
        #expect(LifecycleRules.sceneCallbacks(from: nil, to: nil) == [])
    }
}

/// The Plan keeps its projections as steps come and go.
@Suite("The plan of pending steps")
struct PlanTests {
    @Test("the sessions a plan discards follow its discard steps as they are added, run and dropped")
    func discardsFollowTheSteps() {
        var plan = Plan()
        plan.append(.discardSessions(["s1", "s2"]))
        plan.append(.discardSessions(["s2"]))
        #expect(plan.discards == ["s1", "s2"])
        plan.removeFirst()
        #expect(plan.discards == ["s2"], "s2 is still named by the second step")
        plan.prepend([.discardSessions(["s3"])])
        #expect(plan.discards == ["s2", "s3"])
        plan.removeAll()
        #expect(plan.discards.isEmpty)
    }

    @Test("the focus claim is held between awaitFocus and endFocusClaim, not before")
    func focusClaim() {
        var plan = Plan()
        plan.append(.awaitFocus)
        plan.append(.deliver(.didBecomeActive, nil))
        plan.append(.endFocusClaim)
        #expect(!plan.holdsFocusClaim)
        plan.removeFirst()
        #expect(plan.holdsFocusClaim)
        plan.removeFirst()
        plan.removeFirst()
        #expect(!plan.holdsFocusClaim)
    }

    @Test("the projected state follows the callbacks, a stop, a resume and a termination in order")
    func projectedState() {
        var plan = Plan()
        plan.append(contentsOf: LifecycleRules.callbacks(from: .active, to: .background).map { .deliver($0, nil) })
        #expect(plan.projectedState(from: .active, sessions: [], inFlight: nil) == .background)
        plan.append(.stop(reason: "test"))
        #expect(plan.projectedState(from: .active, sessions: [], inFlight: nil) == .suspended)
        plan.append(.resume)
        #expect(plan.projectedState(from: .active, sessions: [], inFlight: nil) == .background)
        plan.append(.terminate)
        #expect(plan.projectedState(from: .active, sessions: [], inFlight: nil) == .notRunning)
    }
}
