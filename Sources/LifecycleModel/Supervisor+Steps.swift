// The step runner: an app's Plan is run step by step until one has to wait (for a hello, an ack, the focus, or
// a stopped process), each message sent with its deadline, each state change emitted as a transition. Each input
// (`Supervisor.handle`) starts an event, lets the runner advance the apps it touched, and ends the event with its
// effects and one save per app whose saved state changed.

extension Supervisor {
    /// Empty lists of effects and touched apps for the next event.
    mutating func startEvent() {
        effects = []
        touched = []
        saves = []
    }

    /// The effects of the event, ending with one `save` per app whose saved state it changed.
    mutating func endEvent() -> [Effect] {
        for name in saves { effects.append(.save(app: name)) }
        saves = []
        return effects
    }

    /// Something the daemon persists for the app changed (AppSnapshot, or its process): it saves the app once
    /// the event is done.
    mutating func changedSavedState(_ name: String) {
        if !name.isEmpty, !saves.contains(name) { saves.append(name) }
    }

    /// Queued work of the app loses its meaning (exit, termination, watchdog): drop it, with its focus claims.
    mutating func dropPendingWork(_ name: String) {
        // A discard already granted stands: the sessions go now, and the app hears of it at its next launch.
        for case .discardSessions(let scenes) in table[name].plan.steps {
            table[name].sessions.removeAll { scenes.contains($0.id) }
            table[name].discardedUntold += scenes
        }
        table[name].plan.removeAll()
        focusQueue.removeAll { $0 == name }
    }

    /// The message in flight was acknowledged (or its deadline passed, or the client left: `reply` nil).
    mutating func complete(_ name: String, _ delivery: Delivery, reply: AckReply?, reason: String) {
        let slot = table.slot(name)
        let abandoned = table[slot].run.inFlight?.abandoned ?? false
        let caughtUp = table[slot].run.inFlight?.catchUp ?? false
        table[slot].awaiting = nil
        emit(.cancelTimer(app: name, .ack))
        // Stopped by someone else meanwhile: it stays suspended until continued, and what it was doing is abandoned.
        // A catch-up callback describes a transition already made.
        let stopped = table[slot].state == .suspended || abandoned || caughtUp
        switch delivery.message {
        case .app(let callback, _):
            if !callback.changesStateOnSend, let next = callback.resultingState, !stopped {
                setState(name, next, reason: reason)
            }
        case .scene(let callback, let scene, _):
            sceneAcknowledged(name, callback, scene: scene, reply: reply, stopped: stopped, reason: reason)
        case .configurationForConnecting(let scene, _, _, _):
            chooseConfiguration(name, scene: scene, answer: reply?.configuration)
        case .didDiscardSceneSessions:
            break
        case .performFetch:
            endWake(name, result: reply?.fetchResult, answered: reply != nil)
        }
    }

    /// Run the app's queued steps until one has to wait.
    mutating func advance(_ name: String) {
        if !touched.contains(name) { touched.append(name) }
        // The conditions read the record in place; it is copied only for a step to run. No step adds or removes an
        // app, so the slot found for the conditions holds for the step.
        while let slot = table.slotIfPresent(name), table[slot].awaiting == nil, !table[slot].run.termination.isUnderway,
              !table[slot].plan.isEmpty {
            let app = table[slot]
            let step = app.plan.steps[0]
            if step.talksToTheProcess {
                // No message to a stopped process, and no state change under it: the queue waits until the process
                // is continued (by a resume step, or by whoever stopped it).
                guard app.state != .suspended else { return }
                table[slot].plan.removeFirst()
            }
            switch step {
            case .awaitHello:
                guard app.connected || app.muted || !app.policy.speaksProtocol else { return }
                table[slot].plan.removeFirst()
            case .awaitFocus:
                guard focusQueue.first == name, activeApp == nil || activeApp == name else { return }
                table[slot].plan.removeFirst()
            case .endFocusClaim:
                table[slot].plan.removeFirst()
                if let claim = focusQueue.firstIndex(of: name) { focusQueue.remove(at: claim) }
            case .deliver(let callback, let options):
                switch LifecycleRules.repair(callback, in: app.state, holdsFocusClaim: app.holdsFocusClaim,
                                            usesScenes: app.usesScenes) {
                case .none: break
                case .skip: continue
                case .precede(let missing):
                    table[slot].plan.prepend([.deliver(missing, nil), step])
                    continue
                }
                guard app.canMessage else {
                    // No client to tell: the transition happens at once, and a late hello hears of it.
                    if callback == .didFinishLaunching, app.policy.speaksProtocol, app.run.told == nil {
                        setTold(name, .nothing(launch: options))
                    }
                    if let next = callback.resultingState { setState(name, next, reason: callback.rawValue) }
                    continue
                }
                if callback.changesStateOnSend, let next = callback.resultingState {
                    setState(name, next, reason: callback.rawValue)
                }
                let deadline = callback == .didFinishLaunching ? app.policy.launchTimeout : app.policy.ackTimeout
                deliver(name, .app(callback, options), deadline: deadline)
                return
            case .deliverScene(let callback, let scene):
                // Discarded meanwhile: skipped (a focus claim it belonged to still ends at its endFocusClaim step).
                guard let index = app.sessionIndex(scene) else { continue }
                // Focus is only ever taken through a claim, or moved inside an app that holds it. A move queued while
                // the app was active finds it no longer active (stopped and continued by someone else, or a
                // deadline or hang-up that let its resignation pass): the scene stays where it is, and so does the
                // resignation meant for it.
                if callback == .sceneDidBecomeActive, app.state != .active, !app.holdsFocusClaim { continue }
                if callback == .sceneWillResignActive, app.sessions[index].state != .foregroundActive { continue }
                guard app.canMessage else {
                    if let next = callback.resultingState { setSceneState(name, scene, next, reason: callback.rawValue) }
                    continue
                }
                var connection: SceneConnection?
                if callback == .sceneWillConnect, let session = app.sessions.first(where: { $0.id == scene }) {
                    connection = SceneConnection(role: session.role, configuration: session.configuration,
                                                 options: session.connectionOptions, savedState: session.savedState)
                }
                if callback.changesStateOnSend, let next = callback.resultingState {
                    setSceneState(name, scene, next, reason: callback.rawValue)
                }
                deliver(name, .scene(callback, scene: scene, connection: connection), deadline: app.policy.ackTimeout)
                return
            case .tell(let callback, let options):
                guard app.canMessage else { endCatchUpIfDone(name); continue }
                let deadline = callback == .didFinishLaunching ? app.policy.launchTimeout : app.policy.ackTimeout
                tell(name, .app(callback, options), deadline: deadline)
                return
            case .tellScene(let callback, let scene):
                guard app.canMessage, let session = app.sessions.first(where: { $0.id == scene }) else {
                    endCatchUpIfDone(name)
                    continue
                }
                let connection = callback != .sceneWillConnect ? nil
                    : SceneConnection(role: session.role, configuration: session.configuration,
                                      options: session.connectionOptions, savedState: session.savedState)
                tell(name, .scene(callback, scene: scene, connection: connection), deadline: app.policy.ackTimeout)
                return
            case .performFetch:
                beginWake(name)
                if table[slot].awaiting != nil { return }
            case .configureScene(let scene):
                guard let session = app.sessions.first(where: { $0.id == scene }) else { continue }
                guard app.canMessage else {
                    chooseConfiguration(name, scene: scene, answer: nil)
                    continue
                }
                deliver(name, .configurationForConnecting(scene: scene, role: session.role, proposed: session.configuration,
                                                          options: session.connectionOptions),
                        deadline: app.policy.ackTimeout)
                return
            case .discardSessions(let scenes):
                let forgotten = scenes.filter { app.sessionIndex($0) != nil }
                table[slot].sessions.removeAll { scenes.contains($0.id) }
                if !forgotten.isEmpty { emit(.note(app: name, .scenesDiscarded(forgotten))) }
                guard app.canMessage else {
                    // Nobody to tell now: told at the next launch.
                    table[slot].discardedUntold += scenes
                    continue
                }
                deliver(name, .didDiscardSceneSessions(scenes), deadline: app.policy.ackTimeout)
                return
            case .stop(let reason):
                // Only a process in the background is stopped. One still in the foreground (its scenes were moved
                // otherwise than planned) first goes through the callbacks that take it there.
                if app.state == .inactive || app.state == .active {
                    let rest = table[slot].plan.removeAll()
                    move(name, to: .background, origin: reason)
                    table[slot].plan.append(contentsOf: rest)
                    continue
                }
                table[slot].plan.removeFirst()
                guard app.state == .background else { continue }  // already stopped
                setState(name, .suspended, reason: reason)
                emit(.stopProcess(app: name))
            case .resume:
                table[slot].plan.removeFirst()
                guard app.state == .suspended else { continue }  // continued meanwhile by someone else
                setState(name, .background, reason: "resumed")
                emit(.continueProcess(app: name))
                // First the process runs again, then it hears what it missed, then the lifecycle goes on.
                flushNotifications(name)
                catchUp(name)
                if !table[slot].discardedUntold.isEmpty {
                    table[slot].plan.prepend([.discardSessions(table[slot].discardedUntold)])
                    table[slot].discardedUntold = []
                }
            case .terminate:
                table[slot].plan.removeFirst()
                table[slot].run.termination = .signalled
                emit(.signal(app: name, .terminate))
                if app.state == .suspended { emit(.continueProcess(app: name)) }
                emit(.armTimer(app: name, .kill, after: app.policy.stopTimeout))
                return
            }
        }
    }

    /// Advance the app, then whoever waits for focus, and report every app that ran and is now settled.
    mutating func finish(_ name: String) -> [Effect] {
        advance(name)
        // The head of the focus queue changes as apps run (an activation leaves the queue, an exit drops a claim):
        // each new head gets its turn at once, or it would wait for an input that never comes.
        var lastHead: String? = name
        while let head = focusQueue.first, head != lastHead {
            advance(head)
            lastHead = head
        }
        for name in touched {
            guard let slot = table.slotIfPresent(name), table[slot].isSettled else { continue }
            // Sitting in the background with nothing to do: the grace time runs.
            if graceMayRun(slot), let grace = table[slot].policy.backgroundTime {
                table[slot].grace = .armed
                emit(.armTimer(app: name, .grace, after: grace))
            }
            emit(.settled(app: name))
        }
        return endEvent()
    }

    mutating func append(_ name: String, _ step: Step) {
        table[name].plan.append(step)
    }

    /// How many message ids one save of the state file reserves: the bound it records moves this far past the id
    /// just sent, so that most messages need no write.
    static let messageIDBlock = 100

    /// Send one message and arm its deadline; the queue waits for the ack.
    mutating func deliver(_ name: String, _ message: Delivery.Message, deadline: Duration) {
        let slot = table.slot(name)
        let delivery = Delivery(id: table[slot].nextMessageID, message: message, deadline: deadline)
        table[slot].nextMessageID += 1
        if table[slot].nextMessageID > table[slot].messageIDBound {
            table[slot].messageIDBound = table[slot].nextMessageID + Self.messageIDBlock
            changedSavedState(name)
        }
        table[slot].awaiting = delivery
        emit(.send(app: name, delivery))
        emit(.armTimer(app: name, .ack, after: deadline))
    }

    mutating func setState(_ name: String, _ state: AppState, reason: String) {
        // The slot is found once: a transition reads and writes the record a dozen times.
        let slot = table.slot(name)
        let from = table[slot].state
        guard from != state else { return }
        table[slot].state = state
        table[slot].stateSince = now
        if from.isRunning != state.isRunning { display.forget(name) }
        if from == .background, table[slot].grace == .armed {
            table[slot].grace = .idle
            emit(.cancelTimer(app: name, .grace))
        }
        if from == .background { cancelTaskTimers(name) }
        if from.isForeground && !state.isForeground { table[slot].lastForeground = now }
        if state == .background {
            table[slot].enteredBackgroundAt = now
            if table[slot].grace == .over { table[slot].grace = .idle }
            armTaskTimers(name)
        }
        if state == .suspended, !table[slot].tasks.isEmpty {
            emit(.note(app: name, .tasksAbandoned(table[slot].tasks.map(\.name))))
            table[slot].tasks = []
        }
        backgroundWakeFollows(name, from: from, to: state, reason: reason)
        reclaimFollows(name, from: from, to: state, reason: reason)
        if state == .active { activeApp = name } else if activeApp == name { activeApp = nil }
        if state.isForeground { foregroundApps.insert(name) } else { foregroundApps.remove(name) }
        emit(.transition(app: name, from: from, to: state, reason: reason))
    }

    mutating func emit(_ effect: Effect) {
        if effect.changesSavedState, let name = effect.app { changedSavedState(name) }
        effects.append(effect)
    }
}
