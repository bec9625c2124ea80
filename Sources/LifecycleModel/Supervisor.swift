/// The lifecycle of every app and the one focus domain, as a pure state machine:
/// requests and events in, effects out. No I/O, no clock: time comes in with each call.
public struct Supervisor: Sendable {
    /// Every app's record, mutated in place.
    var table = AppTable()

    /// Every app's record by name (a fresh dictionary: for tests and rare reads; use `app(_:)` for one).
    public var apps: [String: AppRecord] {
        Dictionary(uniqueKeysWithValues: table.records.map { ($0.name, $0) })
    }

    /// One app's record.
    public func app(_ name: String) -> AppRecord? { table.record(name) }

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

    /// `body` with the app's record borrowed rather than copied out whole; nil for an unknown app.
    public func withApp<Result>(_ name: String, _ body: (borrowing AppRecord) -> Result) -> Result? {
        table.with(name, body)
    }

    /// The app's state (nil: unknown app), without a copy of its record.
    public func state(of name: String) -> AppState? { table.with(name, { $0.state }) }

    /// Every app's record, in the order they were added.
    public var records: [AppRecord] { table.records }

    /// The apps' names, in the order they were added.
    public var names: [String] { table.names }
    /// The app in state `active`, if any: exactly one app holds focus in the domain.
    public private(set) var activeApp: String?
    /// Apps waiting to become active, in request order.
    var focusQueue: [String] = []
    /// Apps in the foreground (inactive or active). One focus domain is one screen: when an app takes
    /// focus, every other foreground app goes to the background.
    private var foregroundApps: Set<String> = []
    /// The notification types that can be posted, with their coalescing.
    public var catalog = NotificationCatalog()
    /// Memory pressure that persists this long after the warnings terminates suspended apps.
    public var memoryWarningGrace: Duration = .seconds(5)
    /// Pressure events further apart than this start a new episode (with new warnings).
    public var memoryEpisodeGap: Duration = .seconds(30)
    private var lastPressure: MonotonicTime?
    private var episodeWarnedAt: MonotonicTime = .zero
    var effects: [Effect] = []
    /// Apps whose queue ran during the current call, in order: each is reported when settled.
    var touched: [String] = []
    /// Apps whose saved state the current event changed, in order.
    var saves: [String] = []
    var now: MonotonicTime = .zero

    public init() {}

    // MARK: Apps

    public mutating func add(_ name: String, policy: AppPolicy) {
        precondition(!table.contains(name), "app \(name) added twice")
        table.insert(AppRecord(name: name, policy: policy))
    }

    /// New settings take effect from the next step on; a running process is left alone.
    public mutating func setPolicy(_ policy: AppPolicy, for name: String) {
        if table.contains(name) { table[name].policy = policy }
    }

    /// Forget an app that is not running. Returns false if it is still running.
    @discardableResult
    public mutating func remove(_ name: String) -> Bool {
        guard let app = table.record(name), !app.state.isRunning else { return false }
        table.remove(name)
        return true
    }

    public func projectedState(of name: String) -> AppState? { table.with(name, { $0.projectedState }) }

    // MARK: Requests

    /// Apply a request. Throws when the model does not allow it from the app's (projected) state.
    /// `origin` is who asked; it becomes `launchedBy` when the request launches the app.
    public mutating func handle(_ request: Request, for name: String, origin: String = "lifectl",
                                now: MonotonicTime) throws(RequestError) -> [Effect] {
        guard let app = table.record(name) else {
            throw RequestError(app: name, state: nil, request: request, reason: .unknownApp)
        }
        self.now = now
        startEvent()
        let projected = app.projectedState
        func refuse(_ hint: String?) -> RequestError {
            RequestError(app: name, state: app.state, becoming: projected == app.state ? nil : projected,
                         request: request, reason: .notAllowed(hint: hint))
        }
        if request.isSceneRequest {
            if app.policy.external, !projected.isRunning { throw refuse(LifecycleRules.externalRefusal) }
            try handleSceneRequest(request, for: name, origin: origin, projected: projected)
            return finish(name)
        }
        switch LifecycleRules.outcome(of: request, from: projected, stillRunning: app.state.isRunning,
                                      external: app.policy.external) {
        case .refuse(let hint):
            throw refuse(hint)
        case .steps(let actions):
            for action in actions { perform(action, for: name, origin: origin) }
        }
        return finish(name)
    }

    /// Carry out one action of the rules' table for this app.
    mutating func perform(_ action: LifecycleRules.Action, for name: String, origin: String) {
        switch action {
        case .launch(let background):
            launch(name, LaunchOptions(launchedBy: origin, background: background,
                                       terminatedInBackground: table[name].terminatedInBackground))
        case .resume:
            append(name, .resume)
        case .takeFocus:
            if table[name].usesScenes {
                takeSceneFocus(name, scene: nil, origin: origin)
            } else {
                demoteOthers(than: name)
                enqueueFocus(name, from: table[name].projectedState)
            }
        case .moveTo(let target):
            move(name, to: target, origin: origin)
        case .stop:
            append(name, .stop(reason: "suspend requested"))
        case .terminate:
            terminate(name)
        }
    }

    /// Take the app to `target` (inactive or background) from where its queued work leaves it. An app with scenes
    /// moves its scenes, and its own callbacks follow them; when no scene has to move (none is connected, as after
    /// a launch into the background), the app goes through the application callbacks itself.
    /// `origin`: who asks, for the options of a scene that connects.
    mutating func move(_ name: String, to target: AppState, origin: String) {
        let queued = table[name].plan.count
        if table[name].usesScenes {
            moveScenes(name, to: target, origin: origin)
            if table[name].plan.count != queued { return }
        }
        for callback in LifecycleRules.callbacks(from: table[name].projectedState, to: target) {
            append(name, .deliver(callback, nil))
        }
    }

    // MARK: Events

    public mutating func handle(_ event: Event, now: MonotonicTime) -> [Effect] {
        self.now = now
        startEvent()
        switch event {
        case .hello(let name):
            guard table.with(name, { $0.state.isRunning }) == true else { return [] }
            table[name].run.link = .connected
            emit(.cancelTimer(app: name, .hello))
            flushNotifications(name)
            return finish(name)

        case .ack(let name, let id, let reply):
            guard let awaiting = table.with(name, { $0.awaiting }) ?? nil, awaiting.id == id else { return [] }
            // A scene's saved state, or its chosen configuration, rides on the ack: kept with the session.
            if reply.configuration != nil || reply.savedState != nil { changedSavedState(name) }
            complete(name, awaiting, reply: reply, reason: "\(awaiting.name) acknowledged")
            return finish(name)

        case .timerFired(let name, let kind):
            guard table.contains(name) else { return [] }
            timerFired(name, kind)
            return finish(name)

        case .exited(let name, let status):
            guard table.with(name, { $0.state.isRunning }) == true else { return [] }
            exited(name, status)
            return finish(name)

        case .spawnFailed(let name, let reason):
            guard table.with(name, { $0.state.isRunning }) == true else { return [] }
            emit(.note(app: name, .spawnFailed(reason)))
            exited(name, .exited(127))
            return finish(name)

        case .processStopped(let name):
            guard let app = table.record(name), app.state.isRunning, app.state != .suspended,
                  app.run.termination != .signalled else { return [] }
            emit(.note(app: name, .stoppedExternally))
            setState(name, .suspended, reason: "stopped by someone else")
            // Its scenes leave the foreground with it, and one halfway through connecting stays connected in the
            // background (no callback: the process hears nothing while stopped), so that after a continue the
            // app's state, derived from them, is the background it is in.
            for session in table[name].sessions
            where session.state == .foregroundActive || session.state == .foregroundInactive || session.state == .unattached {
                setSceneState(name, session.id, .background, reason: "stopped by someone else")
            }
            // The transitions queued for it were planned for a running process: they are abandoned (a stopped app
            // cannot take focus, and the focus queue must not wait on a process nobody may ever continue). A
            // termination asked for still happens; a discard already granted stands.
            let terminationQueued = app.plan.contains(.terminate)
            dropPendingWork(name)
            table[name].run.inFlight?.abandoned = true
            if terminationQueued { terminate(name) }
            return finish(name)

        case .processContinued(let name):
            // Terminating a suspended app continues it on purpose, so that it can exit.
            guard let app = table.record(name), app.state == .suspended, app.run.termination != .signalled else { return [] }
            emit(.note(app: name, .continuedExternally))
            setState(name, .background, reason: "continued by someone else")
            flushNotifications(name)
            return finish(name)

        case .disconnected(let name):
            guard let app = table.record(name), app.state.isRunning else { return [] }
            table[name].run.link = .muted
            if let awaiting = app.awaiting {
                complete(name, awaiting, reply: nil, reason: "client disconnected")
            }
            // Nobody to deliver to any more; background tasks die with the connection.
            table[name].queue = NotificationQueue(limit: app.policy.queueLimit)
            table[name].tasks = []
            changedSavedState(name)
            cancelTaskTimers(name)
            suspendIfGraceIsOver(name, reason: "background tasks ended with the connection")
            return finish(name)

        case .observe(let name, let names):
            guard table.contains(name) else { return [] }
            table[name].observing = names
            changedSavedState(name)
            return finish(name)

        case .beginBackgroundTask(let name, let task):
            guard let app = table.record(name), app.state.isRunning, !app.tasks.contains(where: { $0.id == task.id }) else { return [] }
            table[name].tasks.append(task)
            changedSavedState(name)
            emit(.taskBegan(app: name, task: task, remaining: table[name].backgroundTimeRemaining(now: now)))
            if app.state == .background { armTaskTimers(name) }
            return finish(name)

        case .endBackgroundTask(let name, let id):
            guard let app = table.record(name), app.tasks.contains(where: { $0.id == id }) else { return [] }
            table[name].tasks.removeAll { $0.id == id }
            changedSavedState(name)
            if table[name].tasks.isEmpty {
                cancelTaskTimers(name)
                suspendIfGraceIsOver(name, reason: "background tasks ended after the background time")
            }
            return finish(name)

        case .memoryPressure(let residentBytes, let reading):
            return memoryPressure(residentBytes: residentBytes, reading: reading)
        }
    }

    // MARK: Notifications

    /// Post a notification: delivered at once to apps that can receive it, queued (coalesced) for the ones
    /// that are suspended or not connected yet, dropped for the others (not running, not observing the type,
    /// or not speaking the protocol). `app` nil: every app.
    public mutating func post(_ type: String, payload: JSONValue, to app: String?,
                              now: MonotonicTime) throws(PostError) -> PostOutcome {
        guard let coalescing = catalog.coalescing(of: type) else {
            throw PostError(type: type, reason: .unknownType(known: catalog.types.keys.sorted()))
        }
        if let app, !table.contains(app) { throw PostError(type: type, reason: .unknownApp(app)) }
        // Whatever is queued must still fit in one protocol line when it is delivered.
        let size = payload.encodedSizeBound
        guard size <= NotificationQueue.payloadBudget else {
            throw PostError(type: type, reason: .payloadTooLarge(size: size, limit: NotificationQueue.payloadBudget))
        }
        self.now = now
        startEvent()
        var outcome = PostOutcome()
        func count(_ offer: Offer) {
            switch offer {
            case .delivered: outcome.delivered += 1
            case .queued: outcome.queued += 1
            case .dropped: break
            }
        }
        if let app {
            count(offer(type, payload: payload, size: size, coalescing: coalescing, to: table.slot(app)))
        } else {
            for slot in table.records.indices { count(offer(type, payload: payload, size: size, coalescing: coalescing, to: slot)) }
        }
        outcome.effects = endEvent()
        return outcome
    }

    enum Offer { case delivered, queued, dropped }

    private mutating func offer(_ type: String, payload: JSONValue, size: Int, coalescing: Coalescing, to slot: Int) -> Offer {
        // The record is read and written in place, never copied out: a live copy would make the queue's add copy
        // its storage.
        let name = table[slot].name
        // A memory warning goes to every app, as UIKit's applicationDidReceiveMemoryWarning does.
        let receives = table[slot].state.isRunning && table[slot].policy.speaksProtocol
            && !table[slot].muted && !table[slot].isTerminating
            && (!table[slot].connected || type == memoryWarningType || table[slot].observing.contains(type))
        let connected = table[slot].connected
        let suspended = table[slot].state == .suspended
        let limit = table[slot].policy.queueLimit
        // Before its hello the client has not said what it observes: hold everything, filter at delivery.
        guard receives else { return .dropped }
        if connected && !suspended {
            var single = NotificationQueue(limit: limit)
            single.add(type, payload: payload, size: size, coalescing: coalescing)
            for delivery in single.drain() { emit(.notify(app: name, delivery)) }
            return .delivered
        }
        table[slot].queue.add(type, payload: payload, size: size, coalescing: coalescing)
        changedSavedState(name)
        return .queued
    }

    /// The app can receive again (connected, or continued): one message per queued type, in first-post order.
    private mutating func flushNotifications(_ name: String) {
        guard let app = table.record(name), app.canMessage, app.state != .suspended, !app.queue.isEmpty else { return }
        let observing = app.observing
        for delivery in table[name].queue.drain(accepting: { $0 == memoryWarningType || observing.contains($0) }) {
            emit(.notify(app: name, delivery))
        }
    }

    // MARK: Memory pressure (jetsam)

    /// The first pressure event of an episode warns the running apps; pressure that is still there
    /// `memoryWarningGrace` later terminates one suspended app per event, least recently used first
    /// (ties: the largest resident memory), without waking it. The active app is never a candidate.
    private mutating func memoryPressure(residentBytes: [String: UInt64], reading: JSONValue) -> [Effect] {
        defer { lastPressure = now }
        if lastPressure == nil || now - lastPressure! > memoryEpisodeGap {
            episodeWarnedAt = now
            var warned = 0
            for name in table.names.sorted() {
                if offer(memoryWarningType, payload: reading, size: reading.encodedSizeBound,
                         coalescing: catalog.coalescing(of: memoryWarningType) ?? .latest, to: table.slot(name)) != .dropped { warned += 1 }
            }
            emit(.note(app: "", .memoryWarning(apps: warned)))
            return endEvent()
        }
        guard now - episodeWarnedAt >= memoryWarningGrace else { return endEvent() }
        let victims = Self.jetsamOrder(table.records.filter { $0.state == .suspended && !$0.isTerminating },
                                       residentBytes: residentBytes)
        guard let victim = victims.first else {
            emit(.note(app: "", .nothingToTerminate))
            return endEvent()
        }
        // Like the launch watchdog's kill: nothing more runs for it, and requests wait for the exit.
        table[victim].run.termination = .killed(requested: true)
        table[victim].memoryTerminations += 1
        emit(.note(app: victim, .terminatedForMemory(residentBytes: residentBytes[victim])))
        emit(.signal(app: victim, .kill))
        return endEvent()
    }

    /// Suspended apps in the order jetsam terminates them: least recently in the foreground first,
    /// then the largest resident memory, then by name (so that the order is stable).
    public static func jetsamOrder(_ candidates: [AppRecord], residentBytes: [String: UInt64]) -> [String] {
        candidates.sorted { a, b in
            if a.lastForeground != b.lastForeground { return a.lastForeground < b.lastForeground }
            let (ra, rb) = (residentBytes[a.name] ?? 0, residentBytes[b.name] ?? 0)
            if ra != rb { return ra > rb }
            return a.name < b.name
        }.map(\.name)
    }

    // MARK: Background tasks

    /// The grace time ran out while tasks held the app up; now that none does, it is suspended.
    private mutating func suspendIfGraceIsOver(_ name: String, reason: String) {
        let app = table[name]
        guard app.grace == .over, app.tasks.isEmpty, app.state == .background, app.isSettled else { return }
        table[name].grace = .idle
        append(name, .stop(reason: reason))
    }

    mutating func armTaskTimers(_ name: String) {
        let app = table[name]
        // Apps that are never suspended for their grace (no BackgroundTimeSec, or background modes) need no task time.
        guard !app.run.taskTimersArmed, !app.tasks.isEmpty, app.policy.backgroundModes.isEmpty, app.policy.backgroundTime != nil,
              let remaining = app.backgroundTimeRemaining(now: now) else { return }
        table[name].run.taskTimersArmed = true
        emit(.armTimer(app: name, .taskWarning, after: max(.zero, remaining - app.policy.expirationWarning)))
        emit(.armTimer(app: name, .taskDeadline, after: remaining))
    }

    private mutating func cancelTaskTimers(_ name: String) {
        guard table.with(name, { $0.run.taskTimersArmed }) == true else { return }
        table[name].run.taskTimersArmed = false
        emit(.cancelTimer(app: name, .taskWarning))
        emit(.cancelTimer(app: name, .taskDeadline))
    }

    // MARK: The rules

    private mutating func timerFired(_ name: String, _ kind: TimerKind) {
        let app = table[name]
        switch kind {
        case .ack:
            guard let awaiting = app.awaiting else { return }
            table[name].deadlineMisses += 1
            if let callback = awaiting.callback {
                emit(.note(app: name, .deadlineMissed(callback, id: awaiting.id, after: awaiting.deadline,
                                                      misses: table[name].deadlineMisses)))
            } else {
                emit(.note(app: name, .messageDeadlineMissed(awaiting.name, id: awaiting.id, after: awaiting.deadline,
                                                             misses: table[name].deadlineMisses)))
            }
            if awaiting.callback == .didFinishLaunching {
                // iOS's launch watchdog: an app that does not finish launching in time is killed.
                // Its queue stays until the exit, which judges the crash (and whether it held focus).
                emit(.note(app: name, .launchWatchdog(after: awaiting.deadline)))
                table[name].awaiting = nil
                table[name].run.termination = .killed(requested: app.run.termination.isRequested)
                emit(.signal(app: name, .kill))
            } else {
                complete(name, awaiting, reply: nil, reason: "\(awaiting.name) deadline passed")
            }
        case .hello:
            guard app.state.isRunning, app.run.link == .awaitingHello else { return }
            table[name].run.link = .muted
            // Silent from now on: what was held for it will never be delivered.
            table[name].queue = NotificationQueue(limit: app.policy.queueLimit)
            emit(.note(app: name, .noHello(after: app.policy.launchTimeout)))
        case .grace:
            guard app.grace == .armed else { return }
            table[name].grace = .idle
            // Grace over and nothing else to do: suspend. Work in flight (a transition) wins.
            guard app.state == .background, app.isSettled else { return }
            // UIKit: an app holding background tasks runs on until they end or their time runs out.
            guard app.tasks.isEmpty else {
                table[name].grace = .over
                return
            }
            append(name, .stop(reason: "background time over"))
        case .taskWarning:
            guard app.state == .background, !app.tasks.isEmpty, let remaining = app.backgroundTimeRemaining(now: now) else { return }
            emit(.taskExpiring(app: name, tasks: app.tasks, remaining: remaining))
        case .taskDeadline:
            table[name].run.taskTimersArmed = false
            guard app.state == .background, !app.tasks.isEmpty else { return }
            table[name].taskOverruns += 1
            table[name].tasks = []
            emit(.note(app: name, .taskOverrun(app.tasks.map(\.name), after: app.policy.backgroundTaskTime,
                                                 overruns: table[name].taskOverruns)))
            // UIKit: tasks not ended by the deadline do not keep the app running: suspended anyway.
            if app.isSettled {
                if app.grace == .over { table[name].grace = .idle }
                append(name, .stop(reason: "background task time over"))
            }
        case .restart:
            guard case .scheduled(let refocus) = app.restart else { return }
            table[name].restart = .none
            guard app.state == .notRunning else { return }
            launch(name, LaunchOptions(launchedBy: "restart", terminatedInBackground: app.terminatedInBackground))
            if refocus && activeApp == nil && focusQueue.isEmpty {
                enqueueFocus(name, from: .inactive)
            } else if app.usesScenes {
                // Like a plain launch: a scene comes to the foreground, so the app is not inactive with nothing shown.
                bringSceneForward(name, preferredScene(name) ?? newSession(name, role: nil, configuration: nil, origin: "restart"),
                                  activate: false, origin: "restart")
            }
        case .kill:
            guard app.run.termination == .signalled, app.state.isRunning else { return }
            emit(.note(app: name, .killTimeout(after: app.policy.stopTimeout)))
            emit(.signal(app: name, .kill))
        }
    }

    private mutating func exited(_ name: String, _ status: ExitStatus) {
        let app = table[name]
        let requested = app.run.termination.isRequested
        let heldFocus = activeApp == name || focusQueue.contains(name)
        for kind in [TimerKind.ack, .hello, .kill] { emit(.cancelTimer(app: name, kind)) }
        dropPendingWork(name)
        cancelTaskTimers(name)
        table[name].run = Run(queueLimit: app.policy.queueLimit)
        table[name].terminatedInBackground = app.state == .background || app.state == .suspended
        setState(name, .notRunning, reason: requested ? "terminated, \(status)" : "\(status)")
        // Its scenes go with the process; their sessions (and saved states) stay for the next launch.
        for session in app.sessions where session.isConnected {
            setSceneState(name, session.id, nil, reason: "process ended")
        }

        let policy = app.policy
        let restart = !requested && !policy.external && (policy.restart == .always || (policy.restart == .onFailure && !status.isSuccess))
        guard restart else { return }
        let windowStart = now - policy.startLimitInterval
        table[name].recentStarts.removeAll { $0 < windowStart }
        let starts = table[name].recentStarts.count
        if starts >= policy.startLimitBurst {
            emit(.note(app: name, .startLimitHit(starts: starts, within: policy.startLimitInterval)))
            setState(name, .failed, reason: "start limit hit: \(starts) starts within \(policy.startLimitInterval)")
            return
        }
        // Exponential backoff: the delay doubles with every start inside the start-limit window.
        var delay = policy.restartDelay
        for _ in 1..<max(starts, 1) where delay < policy.restartMaxDelay { delay *= 2 }
        delay = min(delay, policy.restartMaxDelay)
        table[name].restart = .scheduled(refocus: heldFocus)
        emit(.note(app: name, .restartScheduled(after: delay, attempt: starts + 1, limit: policy.startLimitBurst,
                                                within: policy.startLimitInterval)))
        emit(.armTimer(app: name, .restart, after: delay))
    }

    /// `spawn` false: the process is there already (an external app that attached); everything else is a launch.
    mutating func launch(_ name: String, _ options: LaunchOptions, spawn: Bool = true) {
        let app = table[name]
        if app.restart != .none {
            table[name].restart = .none
            emit(.cancelTimer(app: name, .restart))
        }
        // Someone acting on a failed app resets its start limit, as `systemctl reset-failed` does.
        if app.state == .failed { table[name].recentStarts = [] }
        table[name].recentStarts.append(now)
        table[name].launches += 1
        // Message ids count per connection, and each launch brings a new one.
        table[name].nextMessageID = 1
        table[name].run.link = .awaitingHello
        if spawn { emit(.spawn(app: name, options: options)) }
        setState(name, .inactive, reason: spawn ? "launched by \(options.launchedBy)" : "attached (\(options.launchedBy))")
        if app.policy.speaksProtocol { emit(.armTimer(app: name, .hello, after: app.policy.launchTimeout)) }
        append(name, .awaitHello)
        append(name, .deliver(.didFinishLaunching, options))
        announceDiscardedSessions(name)
    }

    /// The daemon is stopping: every running app is terminated, and every one gets willTerminate with its
    /// deadline — suspended apps are continued first so that they can hear it and exit (unlike a single
    /// `terminate` of a suspended app, which UIKit does without notice).
    public mutating func shutdown(now: MonotonicTime) -> [Effect] {
        self.now = now
        startEvent()
        for name in table.names {
            terminate(name, wakeSuspended: true)
            advance(name)
        }
        for name in touched where table.with(name, { $0.isSettled }) == true { emit(.settled(app: name)) }
        return endEvent()
    }

    mutating func terminate(_ name: String, wakeSuspended: Bool = false) {
        let app = table[name]
        guard !app.isTerminating else { return }
        guard app.state.isRunning else {
            if app.restart != .none {
                table[name].restart = .none
                emit(.cancelTimer(app: name, .restart))
            }
            if app.state == .failed && !wakeSuspended {
                // Like `systemctl reset-failed`: the start limit starts over.
                table[name].recentStarts = []
                setState(name, .notRunning, reason: "reset by terminate")
            }
            return
        }
        // Termination supersedes queued work; a callback already in flight still gets its ack or deadline.
        dropPendingWork(name)
        table[name].run.termination = .requested
        var stateAfterInFlight = app.state
        if let callback = app.awaitingCallback, !callback.changesStateOnSend, let next = callback.resultingState {
            stateAfterInFlight = next
        }
        // A suspended app is terminated without a message (UIKit: suspended apps get no notice), except when
        // the daemon stops: then it is continued first and told like the others.
        if stateAfterInFlight == .suspended && wakeSuspended { append(name, .resume) }
        if stateAfterInFlight != .suspended || wakeSuspended { append(name, .deliver(.willTerminate, nil)) }
        append(name, .terminate)
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

    /// Every other app in (or on its way to) the foreground leaves it: an active one resigns, then
    /// enters the background; an inactive one enters the background.
    mutating func demoteOthers(than name: String) {
        for other in Set(focusQueue).union(foregroundApps).sorted() where other != name {
            if table[other].usesScenes {
                sendScenesToBackground(other)
                advance(other)
                continue
            }
            let callbacks = LifecycleRules.callbacks(from: table[other].projectedState, to: .background)
            guard !callbacks.isEmpty else { continue }
            for callback in callbacks { append(other, .deliver(callback, nil)) }
            advance(other)
        }
    }

    /// The app joins the focus queue. It comes to the foreground only once the previous holder has
    /// resigned (so the daemon sends: A willResignActive, A didEnterBackground, B willEnterForeground,
    /// B didBecomeActive), and leaves the queue when didBecomeActive is sent.
    mutating func enqueueFocus(_ name: String, from state: AppState) {
        focusQueue.append(name)
        append(name, .awaitFocus)
        if table[name].usesScenes {
            // The app comes forward with its scene; its own callbacks follow the scene's.
            bringSceneForward(name, preferredScene(name) ?? newSession(name, role: nil, configuration: nil, origin: "restart"),
                              activate: true, origin: "restart")
            append(name, .endFocusClaim)
            return
        }
        // A launching app is inactive already; a suspended one is continued into the background first.
        for callback in LifecycleRules.callbacks(from: state == .inactive ? .inactive : .background, to: .active) {
            append(name, .deliver(callback, nil))
        }
        append(name, .endFocusClaim)
    }

    /// The message in flight was acknowledged (or its deadline passed, or the client left: `reply` nil).
    mutating func complete(_ name: String, _ delivery: Delivery, reply: AckReply?, reason: String) {
        let abandoned = table[name].run.inFlight?.abandoned ?? false
        table[name].awaiting = nil
        emit(.cancelTimer(app: name, .ack))
        // Stopped by someone else meanwhile: it stays suspended until continued, and what it was doing is abandoned.
        let stopped = table[name].state == .suspended || abandoned
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
        }
    }

    /// Run the app's queued steps until one has to wait.
    mutating func advance(_ name: String) {
        if !touched.contains(name) { touched.append(name) }
        // The conditions read the record in place; it is copied only for a step to run.
        while let slot = table.slotIfPresent(name), table[slot].awaiting == nil, !table[slot].run.termination.isUnderway,
              !table[slot].plan.isEmpty {
            let app = table[slot]
            let step = app.plan.steps[0]
            switch step {
            case .awaitHello:
                guard app.connected || app.muted || !app.policy.speaksProtocol else { return }
                table[name].plan.removeFirst()
            case .awaitFocus:
                guard focusQueue.first == name, activeApp == nil || activeApp == name else { return }
                table[name].plan.removeFirst()
            case .endFocusClaim:
                table[name].plan.removeFirst()
                if let claim = focusQueue.firstIndex(of: name) { focusQueue.remove(at: claim) }
            case .deliver(let callback, let options):
                // No message to a stopped process, and no state change under it: the queue waits
                // until the process is continued (by a resume step, or by whoever stopped it).
                guard app.state != .suspended else { return }
                table[name].plan.removeFirst()
                switch LifecycleRules.repair(callback, in: app.state, holdsFocusClaim: app.holdsFocusClaim,
                                            usesScenes: app.usesScenes) {
                case .none: break
                case .skip: continue
                case .precede(let missing):
                    table[name].plan.prepend([.deliver(missing, nil), step])
                    continue
                }
                guard app.canMessage else {
                    // No client to tell: the transition happens at once.
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
                guard app.state != .suspended else { return }
                table[name].plan.removeFirst()
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
            case .configureScene(let scene):
                guard app.state != .suspended else { return }
                table[name].plan.removeFirst()
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
                guard app.state != .suspended else { return }
                table[name].plan.removeFirst()
                let forgotten = scenes.filter { app.sessionIndex($0) != nil }
                table[name].sessions.removeAll { scenes.contains($0.id) }
                if !forgotten.isEmpty { emit(.note(app: name, .scenesDiscarded(forgotten))) }
                guard app.canMessage else {
                    // Nobody to tell now: told at the next launch.
                    table[name].discardedUntold += scenes
                    continue
                }
                deliver(name, .didDiscardSceneSessions(scenes), deadline: app.policy.ackTimeout)
                return
            case .stop(let reason):
                // Only a process in the background is stopped. One still in the foreground (its scenes were moved
                // otherwise than planned) first goes through the callbacks that take it there.
                if app.state == .inactive || app.state == .active {
                    let rest = table[name].plan.removeAll()
                    move(name, to: .background, origin: reason)
                    table[name].plan.append(contentsOf: rest)
                    continue
                }
                table[name].plan.removeFirst()
                guard app.state == .background else { continue }  // already stopped
                setState(name, .suspended, reason: reason)
                emit(.stopProcess(app: name))
            case .resume:
                table[name].plan.removeFirst()
                guard app.state == .suspended else { continue }  // continued meanwhile by someone else
                setState(name, .background, reason: "resumed")
                emit(.continueProcess(app: name))
                // First the process runs again, then it hears what it missed, then the lifecycle goes on.
                flushNotifications(name)
                if !table[name].discardedUntold.isEmpty {
                    table[name].plan.prepend([.discardSessions(table[name].discardedUntold)])
                    table[name].discardedUntold = []
                }
            case .terminate:
                table[name].plan.removeFirst()
                table[name].run.termination = .signalled
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
            guard let app = table.record(name), app.isSettled else { continue }
            // Sitting in the background with nothing to do: the grace time runs.
            if app.state == .background, app.grace == .idle, app.policy.backgroundModes.isEmpty,
               let grace = app.policy.backgroundTime {
                table[name].grace = .armed
                emit(.armTimer(app: name, .grace, after: grace))
            }
            emit(.settled(app: name))
        }
        return endEvent()
    }

    mutating func append(_ name: String, _ step: Step) {
        table[name].plan.append(step)
    }

    /// Send one message and arm its deadline; the queue waits for the ack.
    mutating func deliver(_ name: String, _ message: Delivery.Message, deadline: Duration) {
        let delivery = Delivery(id: table[name].nextMessageID, message: message, deadline: deadline)
        table[name].nextMessageID += 1
        table[name].awaiting = delivery
        emit(.send(app: name, delivery))
        emit(.armTimer(app: name, .ack, after: deadline))
    }

    mutating func setState(_ name: String, _ state: AppState, reason: String) {
        let from = table[name].state
        guard from != state else { return }
        table[name].state = state
        table[name].stateSince = now
        if from == .background, table[name].grace == .armed {
            table[name].grace = .idle
            emit(.cancelTimer(app: name, .grace))
        }
        if from == .background { cancelTaskTimers(name) }
        if from.isForeground && !state.isForeground { table[name].lastForeground = now }
        if state == .background {
            table[name].enteredBackgroundAt = now
            if table[name].grace == .over { table[name].grace = .idle }
            armTaskTimers(name)
        }
        if state == .suspended, !table[name].tasks.isEmpty {
            emit(.note(app: name, .tasksAbandoned(table[name].tasks.map(\.name))))
            table[name].tasks = []
        }
        if state == .active { activeApp = name } else if activeApp == name { activeApp = nil }
        if state.isForeground { foregroundApps.insert(name) } else { foregroundApps.remove(name) }
        emit(.transition(app: name, from: from, to: state, reason: reason))
    }

    mutating func emit(_ effect: Effect) {
        if effect.changesSavedState, let name = effect.app { changedSavedState(name) }
        effects.append(effect)
    }
}

/// The notification type of memory warnings, which every app gets without observing it.
public let memoryWarningType = "didReceiveMemoryWarning"

/// What a post did.
public struct PostOutcome: Sendable, Equatable {
    public var delivered = 0
    public var queued = 0
    public var effects: [Effect] = []
    public init() {}
}

/// A post the model cannot take.
public struct PostError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        case unknownType(known: [String])
        case unknownApp(String)
        case payloadTooLarge(size: Int, limit: Int)
    }
    public var type: String
    public var reason: Reason

    public var description: String {
        switch reason {
        case .unknownType(let known):
            "cannot post '\(type)': no such notification type (declare it in lifecycled.conf [NotificationTypes]; known: \(known.joined(separator: ", ")))"
        case .unknownApp(let app):
            "cannot post '\(type)' to '\(app)': no such app"
        case .payloadTooLarge(let size, let limit):
            "cannot post '\(type)': its payload is about \(size) bytes of JSON, over the \(limit) bytes one notification may carry"
        }
    }
}

/// The apps' records in an array, found by name through an index: reads borrow and writes mutate in place
/// (a dictionary of structs would copy a record out on every read through its subscript).
struct AppTable: Sendable {
    private(set) var records: [AppRecord] = []
    private var slots: [String: Int] = [:]

    var names: [String] { records.map(\.name) }

    private func find(_ name: String) -> Int? { slots[name] }

    func record(_ name: String) -> AppRecord? { find(name).map { records[$0] } }

    func slot(_ name: String) -> Int { find(name)! }

    func slotIfPresent(_ name: String) -> Int? { find(name) }

    func contains(_ name: String) -> Bool { find(name) != nil }

    /// `body` with the record borrowed (`record(_:)` copies it whole); nil for an unknown app.
    func with<Result>(_ name: String, _ body: (borrowing AppRecord) -> Result) -> Result? {
        guard let slot = find(name) else { return nil }
        return body(records[slot])
    }

    /// The record of an app that exists (a programmer error otherwise).
    subscript(name: String) -> AppRecord {
        _read { yield records[find(name)!] }
        _modify { yield &records[find(name)!] }
    }

    subscript(slot: Int) -> AppRecord {
        _read { yield records[slot] }
        _modify { yield &records[slot] }
    }

    mutating func insert(_ record: AppRecord) {
        slots[record.name] = records.count
        records.append(record)
    }

    mutating func remove(_ name: String) {
        guard let slot = slots.removeValue(forKey: name) else { return }
        let last = records.count - 1
        if slot != last {
            records.swapAt(slot, last)
            slots[records[slot].name] = slot
        }
        records.removeLast()
    }
}
