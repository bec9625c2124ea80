// The scene rules (iOS 13's UIScene lifecycle) of the Supervisor. An app with `[Scenes]` moves its scenes;
// its own state is derived from them (AppState.derived(fromScenes:)), and its application-level callbacks
// are sent exactly when the derived state changes, right after the scene callback that changed it:
//
//   focus s1 of a background app:  sceneWillEnterForeground(s1) → willEnterForeground
//                                  → sceneDidBecomeActive(s1) → didBecomeActive
//   another app takes focus:       sceneWillResignActive(s1) → willResignActive
//                                  → sceneDidEnterBackground(s1) → didEnterBackground
//   focus moves from s1 to s2:     [s2 connects and] sceneWillEnterForeground(s2) → sceneWillResignActive(s1)
//                                  → sceneDidBecomeActive(s2)                  (the app stays active throughout)
//
// This is the order UIKit posts its application notifications in, after the scene's delegate call.
// Each message waits for its ack, as everywhere else, so the order on the wire is exact.

extension Supervisor {
    /// A request that names a scene (refused for an app without scenes). The app-level requests go through the
    /// rules' table for every app; these are judged against the session they name.
    mutating func handleSceneRequest(_ sceneRequest: SceneRequest, for name: String, origin: String,
                                     projected: AppState) throws(RequestError) {
        let request = Request.scene(sceneRequest)
        let app = table[name]
        func refuse(_ hint: String?) -> RequestError {
            RequestError(app: name, state: app.state, becoming: projected == app.state ? nil : projected,
                         request: request, reason: .notAllowed(hint: hint))
        }
        guard let scenes = app.policy.scenes else {
            throw RequestError(app: name, state: app.state, request: request, reason: .noScenes)
        }
        func session(_ scene: String) throws(RequestError) -> Int {
            // A session whose discard is queued is gone for every later request.
            guard let index = app.sessionIndex(scene), !app.pendingDiscards.contains(scene) else {
                throw RequestError(app: name, state: app.state, request: request, reason: .unknownScene(scene))
            }
            return index
        }
        /// What focusing the app takes first (a launch or a resume), from the rules' table.
        func wakeActions() throws(RequestError) -> [LifecycleRules.Action] {
            switch LifecycleRules.outcome(of: .focus, from: projected, stillRunning: app.state.isRunning) {
            case .refuse(let hint): throw refuse(hint)
            case .steps(let actions): return actions.filter { $0 != .takeFocus }
            }
        }

        switch sceneRequest {
        case .openScene(let role, let configuration, let options):
            let role = role ?? ScenePolicy.defaultRole
            guard options.encodedSizeBound <= SceneSession.optionsLimit else {
                throw refuse("its connection options are about \(options.encodedSizeBound) bytes of JSON, over the \(SceneSession.optionsLimit) a scene may carry")
            }
            guard scenes.defaultConfiguration(for: role) != nil else {
                throw refuse("it has no scene configuration for role '\(role)'; declare one in its [Scenes] section (Configuration=\(role):NAME)")
            }
            if let configuration, !scenes.offers(configuration, for: role) {
                let offered = scenes.effectiveConfigurations.filter { $0.role == role }.map(\.name)
                throw refuse("it has no configuration '\(configuration)' for role '\(role)' (it has: \(offered.joined(separator: ", ")))")
            }
            if !scenes.supportsMultipleScenes, let only = app.sessions.first {
                throw refuse("it supports one scene (SupportsMultipleScenes=no) and has \(only.id); focus that one, or discard it first")
            }
            // The bound on sessions (MaxSceneSessions=) is judged before anything changes: a refusal leaves all as it was.
            let states = app.projectedSceneStates
            let live = app.sessions.indices.filter { !app.pendingDiscards.contains(app.sessions[$0].id) }
            let bound = LifecycleRules.sessionBound(
                live.map { (id: app.sessions[$0].id, connected: states[$0] != nil, lastActivation: app.sessions[$0].lastActivation) },
                maxSessions: scenes.maxSessions)
            if bound == .refuse {
                throw refuse("it has \(live.count) scene sessions, all connected, and MaxSceneSessions=\(scenes.maxSessions) allows no more; close or discard one of them first")
            }
            let wake = try wakeActions()
            if case .discard(let oldest) = bound {
                emit(.note(app: name, .sceneSessionReclaimed(scene: oldest, limit: scenes.maxSessions)))
                discardDisconnected(name, oldest, projected: projected)
            }
            let scene = newSession(name, role: role, configuration: configuration, origin: origin, options: options)
            emit(.sceneOpened(app: name, scene: scene))
            for action in wake { perform(action, for: name, origin: origin) }
            takeSceneFocus(name, scene: scene, origin: origin)

        case .focusScene(let scene):
            _ = try session(scene)
            for action in try wakeActions() { perform(action, for: name, origin: origin) }
            takeSceneFocus(name, scene: scene, origin: origin)

        case .backgroundScene(let scene):
            let index = try session(scene)
            guard projected.isRunning else { throw refuse("it is not running") }
            guard let state = app.projectedSceneStates[index] else {
                throw refuse("scene \(scene) is not connected; `lifectl scene focus \(name) \(scene)` connects it again")
            }
            moveScene(name, scene, from: state, to: .background)

        case .closeScene(let scene):
            let index = try session(scene)
            guard app.projectedSceneStates[index] != nil, projected.isRunning else { break }
            guard projected != .suspended else {
                throw refuse("resume it first: scene \(scene) must hear sceneDidDisconnect, and a stopped process hears nothing")
            }
            moveScene(name, scene, from: app.projectedSceneStates[index], to: nil)

        case .discardScene(let scene):
            let index = try session(scene)
            let connected = app.projectedSceneStates[index] != nil
            guard connected else {
                discardDisconnected(name, scene, projected: projected)
                break
            }
            if !projected.isRunning {
                discardDisconnected(name, scene, projected: projected)
                break
            }
            guard projected != .suspended else {
                throw refuse("resume it first: scene \(scene) must hear sceneDidDisconnect, and a stopped process hears nothing")
            }
            moveScene(name, scene, from: app.projectedSceneStates[index], to: nil)
            append(name, .discardSessions([scene]))
        }
    }

    /// Discards a session no scene is connected to (or one of an app that does not run): a running app hears
    /// didDiscardSceneSessions in turn; a stopped or absent one hears it after its next resume or launch, as UIKit
    /// tells an app shortly after it next launches.
    mutating func discardDisconnected(_ name: String, _ scene: String, projected: AppState) {
        guard let index = table[name].sessionIndex(scene) else { return }
        if !projected.isRunning || projected == .suspended {
            table[name].sessions.remove(at: index)
            table[name].discardedUntold.append(scene)
            emit(.note(app: name, .scenesDiscarded([scene])))
        } else {
            append(name, .discardSessions([scene]))
        }
    }

    /// `scene` (nil: the one the app would show first) takes focus, once the app is launched or resumed as the
    /// rules ask. Other apps leave the foreground; in this app, the scene that holds focus resigns it first.
    mutating func takeSceneFocus(_ name: String, scene requested: String?, origin: String) {
        let projected = table[name].projectedState
        let scene = requested ?? preferredScene(name) ?? newSession(name, role: nil, configuration: nil, origin: origin)
        let states = table[name].projectedSceneStates
        let current = states.firstIndex(of: .foregroundActive).map { table[name].sessions[$0].id }
        if projected == .active, current == scene { return }
        demoteOthers(than: name)
        if projected == .active, let current {
            // Focus moves inside the app, which stays active: the scene comes forward (connecting if it
            // must), the one in focus resigns, and it takes focus.
            bringSceneForward(name, scene, activate: false, origin: origin)
            moveScene(name, current, from: .foregroundActive, to: .foregroundInactive)
            moveScene(name, scene, from: .foregroundInactive, to: .foregroundActive)
        } else {
            focusQueue.append(name)
            append(name, .awaitFocus)
            bringSceneForward(name, scene, activate: true, origin: origin)
            append(name, .endFocusClaim)
        }
    }

    /// Queue the scene callbacks that take `scene` from `from` to `to` (nil: disconnected), in the rules' order.
    mutating func moveScene(_ name: String, _ scene: String, from: SceneActivationState?, to: SceneActivationState?) {
        for callback in LifecycleRules.sceneCallbacks(from: from, to: to) {
            append(name, .deliverScene(callback, scene: scene))
        }
    }

    /// The scenes' part of `move(_:to:)`: to the background, every scene in (or on its way to) the foreground
    /// goes; to inactive, the scene in focus resigns, or without one the scene the app would show comes forward.
    mutating func moveScenes(_ name: String, to target: AppState, origin: String) {
        guard target == .inactive else { return sendScenesToBackground(name) }
        let states = table[name].projectedSceneStates
        if let active = states.firstIndex(of: .foregroundActive) {
            moveScene(name, table[name].sessions[active].id, from: .foregroundActive, to: .foregroundInactive)
        } else if !states.contains(where: { $0 == .foregroundInactive || $0 == .unattached }) {
            bringSceneForward(name, preferredScene(name) ?? newSession(name, role: nil, configuration: nil, origin: origin),
                              activate: false, origin: origin)
        }
    }

    /// The steps that take a scene from where its queued work leaves it to the foreground (and focus).
    /// `origin`: who asks, for the options of a (re)connection; a new session's own options are kept.
    mutating func bringSceneForward(_ name: String, _ scene: String, activate: Bool, origin: String) {
        guard let index = table[name].sessionIndex(scene) else { return }
        let state = table[name].projectedSceneStates[index]
        if state == nil, table[name].sessions[index].connectionOptions == .object([:]) {
            table[name].sessions[index].connectionOptions = ["origin": .string(origin)]
        }
        // configurationForConnecting is asked before the scene connects.
        if state == nil { append(name, .configureScene(scene)) }
        // A scene in focus stays there when it is only brought forward.
        moveScene(name, scene, from: state, to: activate || state == .foregroundActive ? .foregroundActive : .foregroundInactive)
    }

    /// Every scene in (or on its way to) the foreground goes to the background, the active one resigning first.
    mutating func sendScenesToBackground(_ name: String) {
        let app = table[name]
        let states = app.projectedSceneStates
        if let active = states.firstIndex(of: .foregroundActive) {
            moveScene(name, app.sessions[active].id, from: .foregroundActive, to: .background)
        }
        for (index, state) in states.enumerated() where state == .foregroundInactive || state == .unattached {
            moveScene(name, app.sessions[index].id, from: state, to: .background)
        }
    }

    /// The scene to show when the app is focused without naming one: the one in front (active first),
    /// then the most recently active connected one, then the most recently active session (reconnected
    /// with its saved state). nil: the app has no session.
    func preferredScene(_ name: String) -> String? {
        let app = table[name]
        let states = app.projectedSceneStates
        func rank(_ state: SceneActivationState?) -> Int {
            switch state {
            case .foregroundActive?: 4
            case .foregroundInactive?, .unattached?: 3
            case .background?: 2
            case nil: 1
            }
        }
        let discarding = app.pendingDiscards
        return app.sessions.indices.filter { !discarding.contains(app.sessions[$0].id) }.max { a, b in
            (rank(states[a]), app.sessions[a].lastActivation, -a) < (rank(states[b]), app.sessions[b].lastActivation, -b)
        }.map { app.sessions[$0].id }
    }

    /// A new, disconnected session: `s1`, `s2`, … (never reused in the daemon's life).
    mutating func newSession(_ name: String, role: String?, configuration: String?, origin: String,
                             options: JSONValue = .object([:])) -> String {
        let policy = table[name].policy.scenes ?? ScenePolicy()
        // No role named: `window`, unless the app offers no window configuration (then its first role).
        let configurations = policy.effectiveConfigurations
        let role = role ?? (configurations.contains { $0.role == ScenePolicy.defaultRole } ? ScenePolicy.defaultRole
                            : configurations.first?.role ?? ScenePolicy.defaultRole)
        let id = "s\(table[name].nextSceneNumber)"
        table[name].nextSceneNumber += 1
        var connectionOptions: [String: JSONValue] = ["origin": .string(origin)]
        if case .object(let extra) = options { connectionOptions.merge(extra) { _, given in given } }
        if let configuration { connectionOptions["requestedConfiguration"] = .string(configuration) }
        table[name].sessions.append(SceneSession(
            id: id, role: role, configuration: configuration ?? policy.defaultConfiguration(for: role) ?? "Default",
            state: nil, savedState: nil, connectionOptions: .object(connectionOptions)))
        emit(.note(app: name, .sceneSessionCreated(scene: id, role: role)))
        return id
    }

    /// configurationForConnecting was answered (or not): the app's choice if it offers it for the role,
    /// else the configuration asked for, else the role's default.
    mutating func chooseConfiguration(_ name: String, scene: String, answer: String?) {
        guard let index = table[name].sessionIndex(scene), let policy = table[name].policy.scenes else { return }
        let session = table[name].sessions[index]
        // What was proposed: asked for, else used last time, else the role's default.
        let fallback = session.configuration
        var chosen = fallback
        if let answer {
            if policy.offers(answer, for: session.role) {
                chosen = answer
            } else {
                emit(.note(app: name, .unknownSceneConfiguration(scene: scene, asked: answer, used: fallback)))
            }
        }
        table[name].sessions[index].configuration = chosen
    }

    /// A scene message was acknowledged (or gave up on): "will" callbacks move the scene now, and
    /// sceneDidEnterBackground's ack hands over the state to keep with the session.
    mutating func sceneAcknowledged(_ name: String, _ callback: SceneCallback, scene: String, reply: AckReply?,
                                    stopped: Bool, reason: String) {
        guard let index = table[name].sessionIndex(scene) else { return }
        if callback == .sceneDidEnterBackground, let saved = reply?.savedState {
            let size = saved.encodedSizeBound
            if size <= SceneSession.savedStateLimit {
                table[name].sessions[index].savedState = saved
            } else {
                emit(.note(app: name, .savedStateTooLarge(scene: scene, size: size, limit: SceneSession.savedStateLimit)))
            }
        }
        if !callback.changesStateOnSend, !stopped, let next = callback.resultingState {
            setSceneState(name, scene, next, reason: reason)
        }
    }

    /// Move one scene, then let the app follow: when its derived state differs, the application callbacks
    /// that get it there run next, ahead of the following scene step.
    mutating func setSceneState(_ name: String, _ scene: String, _ state: SceneActivationState?, reason: String) {
        guard let index = table[name].sessionIndex(scene) else { return }
        let from = table[name].sessions[index].state
        guard from != state else { return }
        table[name].sessions[index].state = state
        if state == .foregroundActive {
            table[name].activations += 1
            table[name].sessions[index].lastActivation = table[name].activations
        }
        if state == nil { table[name].sessions[index].connectionOptions = .object([:]) }
        emit(.note(app: name, .sceneTransition(scene: scene, from: from, to: state, reason: reason)))
        followScenes(name)
    }

    private mutating func followScenes(_ name: String) {
        let app = table[name]
        guard app.usesScenes, !app.isTerminating,
              app.state == .inactive || app.state == .active || app.state == .background else { return }
        let scenes = app.sessions.compactMap(\.state)
        // A scene that is connecting is not anywhere yet; the step after its connection places it.
        guard !scenes.contains(.unattached) else { return }
        var target = AppState.derived(fromScenes: scenes)
        if app.state == .active, target != .active, app.focusHandingOver { target = .active }
        let callbacks = LifecycleRules.callbacks(from: app.state, to: target)
        table[name].plan.prepend(callbacks.map { .deliver($0, nil) })
    }

    /// Sessions discarded while the app was not running: told right after it finishes launching.
    mutating func announceDiscardedSessions(_ name: String) {
        guard !table[name].discardedUntold.isEmpty else { return }
        append(name, .discardSessions(table[name].discardedUntold))
        table[name].discardedUntold = []
    }
}
