// An app's queued work: the steps the rules plan for it, which Supervisor+Steps.swift runs in order.

/// One step of an app's ordered work. Steps run one at a time; a step that sends a callback holds the queue until
/// the client's ack or the message's deadline, so the daemon moves an app on, or stops it, only once its handler
/// has returned or its time is up.
enum Step: Sendable, Equatable {
    /// Wait for the client's hello (or the launch timeout, after which it is managed without messages).
    case awaitHello
    case deliver(LifecycleCallback, LaunchOptions?)
    /// A scene-delegate callback to one scene (its session may be discarded meanwhile: then skipped).
    case deliverScene(SceneCallback, scene: String)
    /// Ask the app which configuration the connecting scene uses (configurationForConnecting).
    case configureScene(String)
    /// Forget these sessions and tell the app (didDiscardSceneSessions).
    case discardSessions([String])
    /// Wait until this app is first in the focus queue and no other app is active.
    case awaitFocus
    /// The focus claim that `awaitFocus` began ends here, after the activation it asked for (sent, skipped because
    /// its scene was discarded, or not needed): the next claim in the focus queue may go. A claim ends only at its
    /// own step, so a scene activation inside an app that already holds focus never ends another claim.
    case endFocusClaim
    case stop(reason: String)
    case resume
    /// SIGTERM, then wait for the exit (SIGKILL when the stop timeout fires).
    case terminate
    /// A callback of the catch-up (Supervisor+CatchUp.swift): tells a client of a transition that happened without it.
    case tell(LifecycleCallback, LaunchOptions?)
    /// A scene callback of the catch-up.
    case tellScene(SceneCallback, scene: String)
    /// Send `performFetch` for a background wake (Supervisor+BackgroundFetch.swift).
    case performFetch

    var isCatchUp: Bool {
        switch self {
        case .tell, .tellScene: true
        default: false
        }
    }

    /// A step that messages the process or moves its state, which waits while the process is stopped.
    var talksToTheProcess: Bool {
        switch self {
        case .deliver, .deliverScene, .tell, .tellScene, .performFetch, .configureScene, .discardSessions: true
        case .awaitHello, .awaitFocus, .endFocusClaim, .stop, .resume, .terminate: false
        }
    }
}

/// An app's pending steps, in order, and what they lead to: the state the app will be in, the scene states, whether
/// it holds the focus claim, and which sessions it will discard. Requests are judged against these projections, so
/// the Plan is the one place that reads the queue. When a step comes up and the app is elsewhere than planned (someone
/// else stopped it, a scene moved by force), `LifecycleRules.repair` says what becomes of it.
struct Plan: Sendable, Equatable {
    private(set) var steps: [Step] = []
    /// The sessions the queued `discardSessions` steps name, with how many steps name each (kept as steps come and go).
    private var discarding: [String: Int] = [:]

    var isEmpty: Bool { steps.isEmpty }
    var count: Int { steps.count }
    var first: Step? { steps.first }
    func contains(_ step: Step) -> Bool { steps.contains(step) }

    mutating func append(_ step: Step) {
        steps.append(step)
        counted(step, by: 1)
    }

    mutating func append(contentsOf more: [Step]) {
        for step in more { append(step) }
    }

    /// Put steps ahead of everything queued (what must happen before the next step can).
    mutating func prepend(_ more: [Step]) {
        steps.insert(contentsOf: more, at: 0)
        for step in more { counted(step, by: 1) }
    }

    @discardableResult
    mutating func removeFirst() -> Step {
        let step = steps.removeFirst()
        counted(step, by: -1)
        return step
    }

    /// Empty the plan; returns what it held.
    @discardableResult
    mutating func removeAll() -> [Step] {
        defer {
            steps = []
            discarding = [:]
        }
        return steps
    }

    /// Drop the steps that match.
    mutating func removeAll(where drop: (Step) -> Bool) {
        for step in steps where drop(step) { counted(step, by: -1) }
        steps.removeAll(where: drop)
    }

    private mutating func counted(_ step: Step, by change: Int) {
        guard case .discardSessions(let scenes) = step else { return }
        for scene in scenes {
            let count = discarding[scene, default: 0] + change
            discarding[scene] = count > 0 ? count : nil
        }
    }

    /// Sessions that queued work will discard.
    var discards: Set<String> { Set(discarding.keys) }

    /// Between its `awaitFocus` and its `endFocusClaim`: the app's claim is the one the focus queue serves (the
    /// next of the two in the plan is the claim's end).
    var holdsFocusClaim: Bool {
        for step in steps {
            if step == .awaitFocus { return false }
            if step == .endFocusClaim { return true }
        }
        return false
    }

    /// Focus moves between two scenes of the app: the one that holds it resigns, then the other activates
    /// (a pending activation not behind a wait for focus). The app stays active through the move.
    var focusHandingOver: Bool {
        for step in steps {
            switch step {
            case .awaitFocus: return false
            case .deliverScene(.sceneDidBecomeActive, _): return true
            default: continue
            }
        }
        return false
    }

    /// The state the steps lead to from `state`, after the message in flight. A scene app's state follows its
    /// scenes (once none is half-connected).
    func projectedState(from state: AppState, sessions: [SceneSession], inFlight: Delivery?) -> AppState {
        var state = state
        var scenes = sessions.map(\.state)
        func follow(_ callback: SceneCallback, _ scene: String) {
            guard let index = sessions.firstIndex(where: { $0.id == scene }), let next = callback.resultingState else { return }
            scenes[index] = next
            guard state == .inactive || state == .active || state == .background,
                  !scenes.contains(.unattached) else { return }
            state = AppState.derived(fromScenes: scenes.compactMap { $0 })
        }
        switch inFlight?.message {
        case .app(let callback, _)? where !callback.changesStateOnSend:
            if let next = callback.resultingState { state = next }
        case .scene(let callback, let scene, _)? where !callback.changesStateOnSend:
            follow(callback, scene)
        default: break
        }
        for step in steps {
            switch step {
            case .deliver(let callback, _): if let next = callback.resultingState { state = next }
            case .deliverScene(let callback, let scene): follow(callback, scene)
            case .stop: state = .suspended
            case .resume: state = .background
            case .terminate: return .notRunning
            case .awaitHello, .awaitFocus, .endFocusClaim, .configureScene, .discardSessions, .tell, .tellScene, .performFetch: break
            }
        }
        return state
    }

    /// Each session's scene state once the steps are done (nil: disconnected), in `sessions` order.
    func projectedSceneStates(sessions: [SceneSession], inFlight: Delivery?) -> [SceneActivationState?] {
        var states = sessions.map(\.state)
        func apply(_ callback: SceneCallback, _ scene: String) {
            if let index = sessions.firstIndex(where: { $0.id == scene }), let next = callback.resultingState {
                states[index] = next
            }
        }
        if case .scene(let callback, let scene, _)? = inFlight?.message, !callback.changesStateOnSend { apply(callback, scene) }
        for case .deliverScene(let callback, let scene) in steps { apply(callback, scene) }
        return states
    }
}
