// Where UIKit's lifecycle rules live: the order of the callbacks between two states, for apps and for scenes;
// what each request does from each state an app can be in (or why it is refused); and which queued callback
// still makes sense when the app turns out to be elsewhere than planned; what follows an exit (restart, backoff,
// start limit), the end of the grace time, and which requests wait for their spawn. The Supervisor asks these functions and
// never spells an order out itself: Supervisor.swift judges each request by the table and, with Supervisor+Focus.swift
// and Supervisor+Scenes.swift, queues the callbacks these orders name; Supervisor+Steps.swift runs them. How posts
// to a sleeping app fold together (the third kind of rule) is `Coalescing`, in Notifications.swift.

/// UIKit's lifecycle rules, as data the Supervisor reads.
public enum LifecycleRules {
    /// The application-delegate callbacks that take an app from `from` to `to`, in UIKit's order: leaving focus is
    /// willResignActive then didEnterBackground; coming back is willEnterForeground then didBecomeActive. Empty when
    /// no callback connects the two (the same state, or a state only a launch, a stop or an exit reaches).
    public static func callbacks(from: AppState, to: AppState) -> [LifecycleCallback] {
        switch (from, to) {
        case (.active, .inactive): [.willResignActive]
        case (.active, .background): [.willResignActive, .didEnterBackground]
        case (.inactive, .background): [.didEnterBackground]
        case (.inactive, .active): [.didBecomeActive]
        case (.background, .inactive): [.willEnterForeground]
        case (.background, .active): [.willEnterForeground, .didBecomeActive]
        default: []
        }
    }

    /// The scene-delegate callbacks that take one scene from `from` to `to` (nil: disconnected), in UIKit's order:
    /// a scene connects, enters the foreground, then becomes active; it resigns, enters the background, then
    /// disconnects. A scene already in the foreground is not sent back through willEnterForeground.
    public static func sceneCallbacks(from: SceneActivationState?, to: SceneActivationState?) -> [SceneCallback] {
        switch (from, to) {
        case (nil, nil): []
        case (_, nil): sceneCallbacks(from: from, to: .background) + [.sceneDidDisconnect]
        case (nil, _): [.sceneWillConnect] + sceneCallbacks(from: .unattached, to: to)
        case (.foregroundActive?, .foregroundInactive?): [.sceneWillResignActive]
        case (.foregroundActive?, .background?): [.sceneWillResignActive, .sceneDidEnterBackground]
        case (.foregroundInactive?, .background?), (.unattached?, .background?): [.sceneDidEnterBackground]
        case (.foregroundInactive?, .foregroundActive?): [.sceneDidBecomeActive]
        case (.unattached?, .foregroundInactive?), (.background?, .foregroundInactive?): [.sceneWillEnterForeground]
        case (.unattached?, .foregroundActive?), (.background?, .foregroundActive?):
            [.sceneWillEnterForeground, .sceneDidBecomeActive]
        default: []
        }
    }

    /// What a new scene session does to an app that already has `maxSessions` of them (`[Scenes] MaxSceneSessions=`).
    public enum SessionBound: Sendable, Equatable {
        /// Below the bound: the session is added.
        case room
        /// At the bound: the least recently used disconnected session is discarded first, as UIKit discards
        /// sessions the system reclaims (the app hears `didDiscardSceneSessions`).
        case discard(String)
        /// At the bound with every session connected: nothing may be reclaimed without taking a scene from the
        /// person using it, so the request is refused.
        case refuse
    }

    /// The session rule: `sessions` in creation order with their projected state (nil: disconnected) and the order
    /// of their last activation (0: never active). The least recently used is the one activated longest ago, and
    /// among those never activated the oldest.
    public static func sessionBound(_ sessions: [(id: String, connected: Bool, lastActivation: Int)],
                                    maxSessions: Int) -> SessionBound {
        guard sessions.count >= max(1, maxSessions) else { return .room }
        let disconnected = sessions.enumerated().filter { !$0.element.connected }
        guard let oldest = disconnected.min(by: { ($0.element.lastActivation, $0.offset) < ($1.element.lastActivation, $1.offset) })
        else { return .refuse }
        return .discard(oldest.element.id)
    }

    /// One thing a request asks for. The Supervisor carries each out for the kind of app at hand: an app with
    /// scenes moves its scenes, and its own callbacks follow them.
    public enum Action: Sendable, Equatable {
        /// Start the process; `background`: straight into the background (no scene connects).
        case launch(background: Bool)
        /// Continue a stopped process.
        case resume
        /// Join the focus queue; every other app leaves the foreground.
        case takeFocus
        /// Go through the callbacks to this state (inactive: resign focus; background: leave the foreground).
        case moveTo(AppState)
        /// Stop the process once it is in the background.
        case stop
        /// willTerminate (unless suspended), then SIGTERM.
        case terminate
    }

    /// Nothing but terminate reaches an external app that is not running: only its own process can start it.
    static let externalRefusal =
        "it is an external app (External=yes): lifecycled does not start it, its process attaches on the app socket"

    /// What a request does from a state.
    public enum Outcome: Sendable, Equatable {
        case refuse(String)
        case steps([Action])
    }

    /// Whether a request that finds its app in `projected` takes effect only once the app's process runs: a
    /// request that may launch its app is held until the spawn, and a spawn that fails leaves everything as it was
    /// (no other app left the foreground, nobody was told anything) and is the request's refusal. Only such a
    /// request can launch (the table below).
    public static func launchWaitsForSpawn(from projected: AppState) -> Bool { !projected.isRunning }

    /// The action table: what `request` does to an app whose queued work leads to `projected`. `stillRunning`: its
    /// process has not exited yet although its queued work ends it (a launch waits for that exit). `external`: the
    /// daemon never starts the app (External=yes). Only the app-level requests are in the table; the scene requests
    /// name a session, and Supervisor+Scenes.swift judges them against it.
    public static func outcome(of request: AppRequest, from projected: AppState, stillRunning: Bool = false,
                               external: Bool = false) -> Outcome {
        if external, !projected.isRunning, request != .terminate { return .refuse(externalRefusal) }
        switch (request, projected) {
        case (.launch, .inactive), (.launch, .active), (.launch, .background), (.launch, .suspended):
            return .refuse("it is already running")
        case (.launch, .notRunning), (.launch, .failed), (.focus, .notRunning), (.focus, .failed):
            if stillRunning { return .refuse("it is still terminating") }
            if case .launch(let background) = request {
                return .steps([.launch(background: background), .moveTo(background ? .background : .inactive)])
            }
            return .steps([.launch(background: false), .takeFocus])

        case (.focus, .inactive), (.focus, .background): return .steps([.takeFocus])
        case (.focus, .active): return .steps([])
        case (.focus, .suspended): return .steps([.resume, .takeFocus])

        case (.deactivate, .active): return .steps([.moveTo(.inactive)])
        case (.deactivate, .inactive): return .steps([])
        case (.deactivate, _): return .refuse("only an active app can be interrupted")

        case (.background, .active), (.background, .inactive): return .steps([.moveTo(.background)])
        case (.background, .background): return .steps([])
        case (.background, .suspended): return .refuse("it is already stopped in the background; resume it to let it run")
        case (.background, .notRunning), (.background, .failed): return .refuse("launch it with --background")

        case (.suspend, .active), (.suspend, .inactive), (.suspend, .background):
            return .steps([.moveTo(.background), .stop])
        case (.suspend, .suspended): return .steps([])
        case (.suspend, .notRunning), (.suspend, .failed): return .refuse("it is not running")

        case (.resume, .suspended): return .steps([.resume])
        case (.resume, _): return .refuse("only a suspended app can be resumed")

        case (.terminate, _): return .steps([.terminate])
        }
    }

    /// What becomes of a queued application callback when it comes up to be sent.
    public enum Repair: Sendable, Equatable {
        /// Send it.
        case none
        /// It no longer leads anywhere: dropped.
        case skip
        /// It skips a step: that callback goes first.
        case precede(LifecycleCallback)
    }

    /// A transition callback is queued for the state the app would be in by then. Someone else stopping and
    /// continuing it (it comes back in the background), or a scene moved by force, can leave the app elsewhere:
    /// a callback that no longer leads anywhere is skipped, one that skips a step gets that step first, and an
    /// activation without the focus claim it was queued under is dropped (focus is only taken through a claim).
    /// A scene app's callbacks follow its scenes, whose own steps bring it forward first.
    public static func repair(_ callback: LifecycleCallback, in state: AppState, holdsFocusClaim: Bool,
                              usesScenes: Bool) -> Repair {
        switch (callback, state) {
        case (.willEnterForeground, .background), (.willResignActive, .active), (.didEnterBackground, .inactive):
            return .none
        case (.didBecomeActive, .inactive):
            return holdsFocusClaim || usesScenes ? .none : .skip
        case (.didBecomeActive, .background):
            return holdsFocusClaim && !usesScenes ? .precede(.willEnterForeground) : .skip
        case (.didEnterBackground, .active):
            return usesScenes ? .skip : .precede(.willResignActive)
        case (.willEnterForeground, _), (.didBecomeActive, _), (.willResignActive, _), (.didEnterBackground, _):
            return .skip
        case (.didFinishLaunching, _), (.willTerminate, _):
            return .none
        }
    }

    // MARK: Runs: after an exit, and when the grace time ends

    /// What follows an app's exit, as systemd's `Restart=` with its start limit, and a backoff that doubles.
    public enum AfterExit: Sendable, Equatable {
        case stayDown
        /// Started again after `delay`; `attempt` counts the starts inside the start-limit window.
        case restart(after: Duration, attempt: Int)
        /// `starts` within the window reached the limit: the app is failed until someone launches it.
        case fail(starts: Int)
    }

    /// `requested`: someone asked for the exit (terminate, stop); `starts`: the launches inside the start-limit
    /// window. The daemon never restarts what it did not start (external and adopted apps).
    public static func afterExit(_ status: ExitStatus, requested: Bool, policy: AppPolicy, starts: Int) -> AfterExit {
        let restart = !requested && !policy.external && !policy.adopted
            && (policy.restart == .always || (policy.restart == .onFailure && !status.isSuccess))
        guard restart else { return .stayDown }
        if starts >= policy.startLimitBurst { return .fail(starts: starts) }
        var delay = policy.restartDelay
        for _ in 1..<max(starts, 1) where delay < policy.restartMaxDelay { delay *= 2 }
        return .restart(after: min(delay, policy.restartMaxDelay), attempt: starts + 1)
    }

    /// What the end of the grace time does to an app in the background.
    public enum GraceOver: Sendable, Equatable {
        /// Nothing now: it is not settled in the background (work in flight wins), or it is not there any more.
        case nothing
        /// UIKit: an app that holds background tasks runs on until they end or their time runs out.
        case runOnForTasks
        case suspend
    }

    public static func graceOver(state: AppState, settled: Bool, openTasks: Int) -> GraceOver {
        guard state == .background, settled else { return .nothing }
        return openTasks > 0 ? .runOnForTasks : .suspend
    }
}
