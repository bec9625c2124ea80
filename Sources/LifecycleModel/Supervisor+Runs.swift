// One run of an app's process, from launch to exit: the launch (and its start limit) and the request that waits
// for its spawn, termination (one app, or every app when the daemon stops), and the exit with the restart that may
// follow it, with its backoff.

/// A request that launched its app, until the next input: what it changed outside the apps' records (which keep
/// their own originals, `AppTable.keepOriginals`), for a failed spawn to put back.
struct PendingLaunch: Sendable {
    var app: String
    var request: Request
    var state: AppState?
    var now: MonotonicTime
    var activeApp: String?
    var focusQueue: [String]
    var foregroundApps: Set<String>
    var display: DisplayState
}

extension Supervisor {
    mutating func exited(_ name: String, _ status: ExitStatus) {
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
        let windowStart = now - policy.startLimitInterval
        table[name].recentStarts.removeAll { $0 < windowStart }
        switch LifecycleRules.afterExit(status, requested: requested, policy: policy, starts: table[name].recentStarts.count) {
        case .stayDown:
            return
        case .fail(let starts):
            emit(.note(app: name, .startLimitHit(starts: starts, within: policy.startLimitInterval)))
            setState(name, .failed, reason: "start limit hit: \(starts) starts within \(policy.startLimitInterval)")
        case .restart(let delay, let attempt):
            table[name].restart = .scheduled(refocus: heldFocus)
            emit(.note(app: name, .restartScheduled(after: delay, attempt: attempt, limit: policy.startLimitBurst,
                                                    within: policy.startLimitInterval)))
            emit(.armTimer(app: name, .restart, after: delay))
        }
    }

    /// A request from outside (`Input.request`). One that may launch its app (`LifecycleRules.launchWaitsForSpawn`)
    /// keeps what it changes, until the next input, for `launchFailed` to undo. `previousNow`: the model's time
    /// before this input.
    mutating func launchingRequest(_ request: Request, for name: String, origin: String, previousNow: MonotonicTime) -> Outcome {
        let before = table.with(name) { (state: $0.state, projected: $0.projectedState) }
        guard let before, LifecycleRules.launchWaitsForSpawn(from: before.projected) else {
            do throws(RequestError) {
                return Outcome(effects: try take(request, for: name, origin: origin))
            } catch {
                return Outcome(refusal: .request(error))
            }
        }
        let pending = PendingLaunch(app: name, request: request, state: before.state, now: previousNow, activeApp: activeApp,
                                    focusQueue: focusQueue, foregroundApps: foregroundApps, display: display)
        table.keepOriginals()
        do throws(RequestError) {
            let effects = try take(request, for: name, origin: origin)
            if effects.contains(where: { if case .spawn(name, _) = $0 { true } else { false } }) {
                pendingLaunch = pending
            } else {
                table.keepNoOriginals()
            }
            return Outcome(effects: effects)
        } catch {
            table.keepNoOriginals()
            return Outcome(refusal: .request(error))
        }
    }

    /// The last input was a request that launched `name`: its spawn is for the daemon to carry out first.
    public func launchIsPending(_ name: String) -> Bool { pendingLaunch?.app == name }

    /// The spawn of the pending launch went through: what the request did stands.
    mutating func launchStands() {
        pendingLaunch = nil
        table.keepNoOriginals()
    }

    /// The pending launch's process could not be started: every record the request wrote, the focus and the
    /// clock are as they were before it, and the request is refused with the reason.
    mutating func launchFailed(_ name: String, reason: String) -> Outcome {
        guard let pending = pendingLaunch, pending.app == name else { return Outcome() }
        pendingLaunch = nil
        table.restoreOriginals()
        now = pending.now
        activeApp = pending.activeApp
        focusQueue = pending.focusQueue
        foregroundApps = pending.foregroundApps
        display = pending.display
        return Outcome(refusal: .request(RequestError(app: name, state: pending.state, request: pending.request,
                                                      reason: .spawnFailed(reason))))
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
        display.forget(name)
        // Message ids count per connection, and each launch brings a new one.
        table[name].nextMessageID = 1
        table[name].messageIDBound = 1
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
    mutating func shutdown() -> [Effect] {
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
}
