// The Supervisor's state and its entry points: the apps it knows, the focus domain, and the two ways in (a request
// from a client or lifectl, judged against LifecycleRules' table; an event from the daemon). Each entry point hands
// the work to the file that owns its concern and lets the step runner (Supervisor+Steps.swift) carry it out.

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
    public internal(set) var activeApp: String?
    /// Apps waiting to become active, in request order.
    var focusQueue: [String] = []
    /// Apps in the foreground (inactive or active). One focus domain is one screen: when an app takes
    /// focus, every other foreground app goes to the background.
    var foregroundApps: Set<String> = []
    /// What the display server shows (Supervisor+Display.swift); empty without a display source.
    var display = DisplayState()
    /// The sound server's and the power supply's facts (Supervisor+RunConditions.swift).
    var conditions = RunConditions()
    /// The notification types that can be posted, with their coalescing (`Input.settings`).
    public internal(set) var catalog = NotificationCatalog()
    /// Memory pressure that persists this long after the warnings terminates suspended apps.
    public internal(set) var memoryWarningGrace: Duration = .seconds(5)
    /// Pressure events further apart than this start a new episode (with new warnings).
    public internal(set) var memoryEpisodeGap: Duration = .seconds(30)
    var lastPressure: MonotonicTime?
    var episodeWarnedAt: MonotonicTime = .zero
    var effects: [Effect] = []
    /// Apps whose queue ran during the current call, in order: each is reported when settled.
    var touched: [String] = []
    /// Apps whose saved state the current event changed, in order.
    var saves: [String] = []
    /// The time of the input the model took last: time never goes back for it.
    public internal(set) var now: MonotonicTime = .zero
    /// The request of the last input, when it launched its app: until the next input, a failed spawn undoes it
    /// (`Supervisor+Runs.swift`).
    var pendingLaunch: PendingLaunch?

    public init() {}

    // MARK: Apps

    /// `Input.add`: the registry never adds a name twice.
    mutating func add(_ name: String, policy: AppPolicy) {
        if pendingLaunch != nil { launchStands() }
        precondition(!table.contains(name), "app \(name) added twice")
        table.insert(AppRecord(name: name, policy: policy))
    }

    /// `Input.configure`: new settings take effect from the next step on; a running process is left alone.
    mutating func setPolicy(_ policy: AppPolicy, for name: String) {
        if table.contains(name) { table[name].policy = policy }
    }

    /// `Input.remove`: forget an app that is not running. Returns false if it is still running.
    @discardableResult
    mutating func remove(_ name: String) -> Bool {
        guard let app = table.record(name), !app.state.isRunning else { return false }
        if pendingLaunch != nil { launchStands() }
        table.remove(name)
        return true
    }

    public func projectedState(of name: String) -> AppState? { table.with(name, { $0.projectedState }) }

    // MARK: Requests

    /// Apply a request. Throws when the model does not allow it from the app's (projected) state.
    /// `origin` is who asked; it becomes `launchedBy` when the request launches the app.
    mutating func take(_ request: Request, for name: String, origin: String) throws(RequestError) -> [Effect] {
        guard let app = table.record(name) else {
            throw RequestError(app: name, state: nil, request: request, reason: .unknownApp)
        }
        let projected = app.projectedState
        func refuse(_ hint: String?) -> RequestError {
            RequestError(app: name, state: app.state, becoming: projected == app.state ? nil : projected,
                         request: request, reason: .notAllowed(hint: hint))
        }
        let appRequest: AppRequest
        switch request {
        case .scene(let sceneRequest):
            if app.policy.external, !projected.isRunning { throw refuse(LifecycleRules.externalRefusal) }
            try handleSceneRequest(sceneRequest, for: name, origin: origin, projected: projected)
            return finish(name)
        case .app(let request):
            appRequest = request
        }
        switch LifecycleRules.outcome(of: appRequest, from: projected, stillRunning: app.state.isRunning,
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

    mutating func take(_ event: Event) -> [Effect] {
        switch event {
        case .hello(let name):
            guard table.with(name, { $0.state.isRunning }) == true else { return [] }
            table[name].run.link = .connected
            emit(.cancelTimer(app: name, .hello))
            flushNotifications(name)
            catchUp(name)
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
            setState(name, .suspended, reason: Self.stoppedExternallyReason)
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
            // Terminating a suspended app continues it on purpose, so that it can exit. A termination that is only
            // requested still waits for the process to run (its willTerminate cannot reach a stopped process).
            guard let app = table.record(name), app.state == .suspended, app.run.termination != .signalled else { return [] }
            emit(.note(app: name, .continuedExternally))
            setState(name, .background, reason: "continued by someone else")
            flushNotifications(name)
            catchUp(name)
            return finish(name)

        case .disconnected(let name):
            guard let app = table.record(name), app.state.isRunning else { return [] }
            table[name].run.link = .muted
            if let awaiting = app.awaiting {
                complete(name, awaiting, reply: nil, reason: "client disconnected")
            }
            rememberToldState(name)
            // Nobody to deliver to any more; background tasks die with the connection.
            table[name].queue = NotificationQueue(limit: app.policy.queueLimit)
            cancelTaskTimers(name)
            table[name].tasks = []
            changedSavedState(name)
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
            let left = app.tasks.filter { $0.id != id }
            // The timers go while the list still says they run: an empty list holds none.
            if left.isEmpty { cancelTaskTimers(name) }
            table[name].tasks = left
            changedSavedState(name)
            if left.isEmpty { suspendIfGraceIsOver(name, reason: "background tasks ended after the background time") }
            return finish(name)

        case .memoryPressure(let residentBytes, let reading):
            return memoryPressure(residentBytes: residentBytes, reading: reading)
        }
    }
}
