// The catch-up rule: a client never misses a transition. An app can move on while its client cannot hear: launched
// and moved before a late first hello, re-adopted by a restarted daemon and focused before its client reconnected,
// or left running after its client hung up. When that client says hello, it is told the callbacks that take it from
// what it last heard of to where the app and its scenes are, in UIKit's order, each acknowledged as usual; the acks
// move nothing, the app is there already.

/// What a client has heard of its app, kept while the app may move on without it. The state file keeps it too, so
/// that a daemon that takes the app back tells the client what it missed under the previous daemon.
public struct Told: Sendable, Equatable {
    /// The app's state as the client knows it; notRunning: nothing yet, not even didFinishLaunching.
    public var state: AppState
    /// Each connected scene's state as the client knows it, by session id.
    public var scenes: [String: SceneActivationState] = [:]
    /// The options of a didFinishLaunching the client missed.
    public var launch: LaunchOptions?

    /// A client that heard nothing of this run.
    static func nothing(launch: LaunchOptions?) -> Told { Told(state: .notRunning, launch: launch) }

    /// What a client heard when it followed every transition of this app up to now.
    init(everythingOf app: borrowing AppRecord) {
        self.init(state: app.state, sessions: app.sessions)
    }

    init(state: AppState, sessions: [SceneSession]) {
        self.state = state
        for session in sessions { if let scene = session.state { scenes[session.id] = scene } }
    }

    public init(state: AppState, scenes: [String: SceneActivationState] = [:], launch: LaunchOptions? = nil) {
        self.state = state
        self.scenes = scenes
        self.launch = launch
    }
}

extension Supervisor {
    /// The client can no longer hear: remember what it heard last (a message in flight counted as acknowledged). A
    /// catch-up under way stops where it is: what it had not told yet is told at the next hello.
    mutating func rememberToldState(_ name: String) {
        if table[name].run.told == nil { setTold(name, Told(everythingOf: table[name])) }
        table[name].plan.removeAll(where: \.isCatchUp)
    }

    /// On hello, or when a stopped app whose client said hello runs again: queue the way from what the client last
    /// heard of, before anything else queued. A stopped process hears nothing: its catch-up waits for it to run.
    mutating func catchUp(_ name: String) {
        guard let told = table[name].run.told, table[name].connected, table[name].state != .suspended else { return }
        let steps = Self.catchUpSteps(from: told, to: table[name])
        if steps.isEmpty { setTold(name, nil) }
        table[name].plan.prepend(steps)
    }

    /// Send one catch-up message: its ack moves nothing.
    mutating func tell(_ name: String, _ message: Delivery.Message, deadline: Duration) {
        deliver(name, message, deadline: deadline)
        table[name].run.inFlight?.catchUp = true
        heard(name, message)
    }

    /// A catch-up message went out: the client has heard it (counted so from the send, as at a hang-up), and once
    /// the last one is out it follows the app again.
    mutating func heard(_ name: String, _ message: Delivery.Message) {
        guard var told = table[name].run.told else { return }
        switch message {
        case .app(let callback, _):
            if callback == .didFinishLaunching { told.state = .inactive }
            if let next = callback.resultingState { told.state = next }
        case .scene(let callback, let scene, _):
            if let next = callback.resultingState { told.scenes[scene] = next }
        case .configurationForConnecting, .didDiscardSceneSessions, .performFetch:
            break
        }
        setTold(name, told)
        endCatchUpIfDone(name)
    }

    /// Once no catch-up step is left, the client follows the app again.
    mutating func endCatchUpIfDone(_ name: String) {
        if !table[name].plan.steps.contains(where: \.isCatchUp) { setTold(name, nil) }
    }

    /// What the client heard is in the state file: a change is saved, so that the next daemon goes on from there.
    mutating func setTold(_ name: String, _ told: Told?) {
        guard table[name].run.told != told else { return }
        table[name].run.told = told
        changedSavedState(name)
    }

    /// The callbacks from `told` to where `app` is; a suspended app counts as in the background. Scenes move in the
    /// order the daemon itself moves them when focus changes: the scene in focus resigns, scenes come forward, others
    /// leave the foreground or disconnect, then the scene in focus becomes active; the application callbacks follow
    /// the scenes as the app's derived state changes.
    static func catchUpSteps(from told: Told, to app: borrowing AppRecord) -> [Step] {
        guard app.state.isRunning else { return [] }
        var steps: [Step] = []
        var heard = told.state == .suspended ? .background : told.state
        let target: AppState = app.state == .suspended ? .background : app.state
        if heard == .notRunning {
            steps.append(.tell(.didFinishLaunching, told.launch))
            heard = .inactive
        }
        func tellApp(to state: AppState) {
            steps += LifecycleRules.callbacks(from: heard, to: state).map { .tell($0, nil) }
            heard = state
        }
        guard app.usesScenes else {
            tellApp(to: target)
            return steps
        }
        let current = Dictionary(uniqueKeysWithValues: app.sessions.map { ($0.id, $0.state) })
        var scenes = told.scenes.filter { current[$0.key] != nil }
        func move(_ id: String, to state: SceneActivationState?) {
            for callback in LifecycleRules.sceneCallbacks(from: scenes[id], to: state) {
                steps.append(.tellScene(callback, scene: id))
                scenes[id] = callback.resultingState ?? nil
                // A scene that is connecting is not anywhere yet (as when the daemon moves scenes).
                if !scenes.values.contains(.unattached) { tellApp(to: AppState.derived(fromScenes: scenes.values)) }
            }
        }
        let ids = app.sessions.map(\.id)
        func isForeground(_ state: SceneActivationState??) -> Bool { state == .foregroundInactive || state == .foregroundActive }
        for id in ids where scenes[id] == .foregroundActive && current[id] != .foregroundActive {
            move(id, to: .foregroundInactive)
        }
        for id in ids where isForeground(current[id]) && !isForeground(scenes[id]) { move(id, to: .foregroundInactive) }
        for id in ids where current[id] == .unattached && scenes[id] == nil { move(id, to: .unattached) }
        for id in ids where !isForeground(current[id]) && current[id] != .unattached && scenes[id] != current[id] ?? nil {
            move(id, to: current[id] ?? nil)
        }
        for id in ids where current[id] == .foregroundActive && scenes[id] != .foregroundActive { move(id, to: .foregroundActive) }
        // Whatever the app's own state adds to its scenes' (a hand-over of focus keeps it active).
        tellApp(to: target)
        return steps
    }
}
