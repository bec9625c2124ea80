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

extension Request {
    /// A request that names scenes; only apps with `[Scenes]` take it.
    public var isSceneRequest: Bool {
        switch self {
        case .openScene, .focusScene, .backgroundScene, .closeScene, .discardScene: true
        default: false
        }
    }
}

extension Supervisor {
    /// Every request to an app with scenes (and scene requests to one without, which are refused).
    mutating func handleScenes(_ request: Request, for name: String, origin: String,
                               projected: AppState) throws(RequestError) {
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

        switch request {
        case .launch(let background):
            guard !projected.isRunning else { throw refuse("it is already running") }
            guard !app.state.isRunning else { throw refuse("it is still terminating") }
            launch(name, LaunchOptions(launchedBy: origin, background: background,
                                       terminatedInBackground: app.terminatedInBackground))
            if background {
                // UIKit connects no scene for a launch into the background.
                append(name, .deliver(.didEnterBackground, nil))
            } else {
                bringSceneForward(name, preferredScene(name) ?? newSession(name, role: nil, configuration: nil, origin: origin),
                                  activate: false, origin: origin)
            }

        case .focus:
            try focus(name, scene: nil, origin: origin, projected: projected, request: request)

        case .deactivate:
            switch projected {
            case .active:
                if let index = app.projectedSceneStates.firstIndex(of: .foregroundActive) {
                    append(name, .deliverScene(.sceneWillResignActive, scene: app.sessions[index].id))
                }
            case .inactive: break
            default: throw refuse("only an active app can be interrupted")
            }

        case .background:
            switch projected {
            case .active, .inactive: sendScenesToBackground(name)
            case .background: break
            case .suspended: throw refuse("it is already stopped in the background; resume it to let it run")
            case .notRunning, .failed: throw refuse("launch it with --background")
            }

        case .suspend:
            switch projected {
            case .active, .inactive, .background:
                sendScenesToBackground(name)
                append(name, .stop(reason: "suspend requested"))
            case .suspended: break
            case .notRunning, .failed: throw refuse("it is not running")
            }

        case .resume:
            guard projected == .suspended else { throw refuse("only a suspended app can be resumed") }
            append(name, .resume)

        case .terminate:
            terminate(name)

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
            let scene = newSession(name, role: role, configuration: configuration, origin: origin, options: options)
            try focus(name, scene: scene, origin: origin, projected: projected, request: request)

        case .focusScene(let scene):
            _ = try session(scene)
            try focus(name, scene: scene, origin: origin, projected: projected, request: request)

        case .backgroundScene(let scene):
            let index = try session(scene)
            guard projected.isRunning else { throw refuse("it is not running") }
            switch app.projectedSceneStates[index] {
            case nil: throw refuse("scene \(scene) is not connected; `lifectl scene focus \(name) \(scene)` connects it again")
            case .foregroundActive?:
                append(name, .deliverScene(.sceneWillResignActive, scene: scene))
                append(name, .deliverScene(.sceneDidEnterBackground, scene: scene))
            case .foregroundInactive?, .unattached?:
                append(name, .deliverScene(.sceneDidEnterBackground, scene: scene))
            case .background?: break
            }

        case .closeScene(let scene):
            let index = try session(scene)
            guard app.projectedSceneStates[index] != nil, projected.isRunning else { break }
            guard projected != .suspended else {
                throw refuse("resume it first: scene \(scene) must hear sceneDidDisconnect, and a stopped process hears nothing")
            }
            disconnect(name, scene, state: app.projectedSceneStates[index])

        case .discardScene(let scene):
            let index = try session(scene)
            let connected = app.projectedSceneStates[index] != nil
            if !projected.isRunning || (!connected && projected == .suspended) {
                // Nobody to tell now (UIKit tells the app shortly after its next launch).
                table[name].sessions.remove(at: index)
                table[name].discardedUntold.append(scene)
                emit(.note(app: name, .scenesDiscarded([scene])))
                break
            }
            guard projected != .suspended else {
                throw refuse("resume it first: scene \(scene) must hear sceneDidDisconnect, and a stopped process hears nothing")
            }
            if connected { disconnect(name, scene, state: app.projectedSceneStates[index]) }
            append(name, .discardSessions([scene]))
        }
    }

    /// Bring `scene` (nil: the one the app would show first) to focus: launch, resume and reconnect as
    /// needed. Other apps leave the foreground; in this app, the scene that holds focus resigns it first.
    private mutating func focus(_ name: String, scene requested: String?, origin: String,
                                projected: AppState, request: Request) throws(RequestError) {
        let app = table[name]
        switch projected {
        case .notRunning, .failed:
            guard !app.state.isRunning else {
                throw RequestError(app: name, state: app.state, becoming: projected, request: request,
                                   reason: .notAllowed(hint: "it is still terminating"))
            }
            launch(name, LaunchOptions(launchedBy: origin, terminatedInBackground: app.terminatedInBackground))
        case .suspended:
            append(name, .resume)
        case .inactive, .active, .background:
            break
        }
        let scene = requested ?? preferredScene(name) ?? newSession(name, role: nil, configuration: nil, origin: origin)
        let states = table[name].projectedSceneStates
        let current = states.firstIndex(of: .foregroundActive).map { table[name].sessions[$0].id }
        if projected == .active, current == scene { return }
        demoteOthers(than: name)
        if projected == .active, let current {
            // Focus moves inside the app, which stays active: the scene comes forward (connecting if it
            // must), the one in focus resigns, and it takes focus.
            bringSceneForward(name, scene, activate: false, origin: origin)
            append(name, .deliverScene(.sceneWillResignActive, scene: current))
            append(name, .deliverScene(.sceneDidBecomeActive, scene: scene))
        } else {
            focusQueue.append(name)
            append(name, .awaitFocus)
            bringSceneForward(name, scene, activate: true, origin: origin)
            append(name, .endFocusClaim)
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
        if state == nil {
            append(name, .configureScene(scene))
            append(name, .deliverScene(.sceneWillConnect, scene: scene))
        }
        if state == nil || state == .unattached || state == .background {
            append(name, .deliverScene(.sceneWillEnterForeground, scene: scene))
        }
        if activate && state != .foregroundActive {
            append(name, .deliverScene(.sceneDidBecomeActive, scene: scene))
        }
    }

    /// Every scene in (or on its way to) the foreground goes to the background, the active one resigning first.
    mutating func sendScenesToBackground(_ name: String) {
        let app = table[name]
        let states = app.projectedSceneStates
        if let active = states.firstIndex(of: .foregroundActive) {
            append(name, .deliverScene(.sceneWillResignActive, scene: app.sessions[active].id))
            append(name, .deliverScene(.sceneDidEnterBackground, scene: app.sessions[active].id))
        }
        for (index, state) in states.enumerated() where state == .foregroundInactive || state == .unattached {
            append(name, .deliverScene(.sceneDidEnterBackground, scene: app.sessions[index].id))
        }
    }

    /// UIKit moves a scene to the background before it disconnects it.
    private mutating func disconnect(_ name: String, _ scene: String, state: SceneActivationState?) {
        switch state {
        case .foregroundActive?:
            append(name, .deliverScene(.sceneWillResignActive, scene: scene))
            append(name, .deliverScene(.sceneDidEnterBackground, scene: scene))
        case .foregroundInactive?, .unattached?:
            append(name, .deliverScene(.sceneDidEnterBackground, scene: scene))
        case .background?, nil:
            break
        }
        append(name, .deliverScene(.sceneDidDisconnect, scene: scene))
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
        let callbacks: [LifecycleCallback] = switch (app.state, target) {
        case (.active, .inactive): [.willResignActive]
        case (.active, .background): [.willResignActive, .didEnterBackground]
        case (.inactive, .background): [.didEnterBackground]
        case (.inactive, .active): [.didBecomeActive]
        case (.background, .inactive): [.willEnterForeground]
        case (.background, .active): [.willEnterForeground, .didBecomeActive]
        default: []
        }
        table[name].pending.insert(contentsOf: callbacks.map { .deliver($0, nil) }, at: 0)
    }

    /// Sessions discarded while the app was not running: told right after it finishes launching.
    mutating func announceDiscardedSessions(_ name: String) {
        guard !table[name].discardedUntold.isEmpty else { return }
        append(name, .discardSessions(table[name].discardedUntold))
        table[name].discardedUntold = []
    }
}
