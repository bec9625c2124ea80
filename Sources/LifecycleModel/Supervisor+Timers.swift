// What each of an app's deadlines does when it passes: an unacknowledged message (and the launch watchdog), a
// missing hello, the background grace and task times, a scheduled restart, and the kill after SIGTERM. The
// daemon arms and cancels the timers as effects and reports each firing as an event.

extension Supervisor {
    mutating func timerFired(_ name: String, _ kind: TimerKind) {
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
            // A catch-up's didFinishLaunching is told to an app that is running already: no watchdog.
            if awaiting.callback == .didFinishLaunching, app.run.inFlight?.catchUp != true {
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
            switch LifecycleRules.graceOver(state: app.state, settled: app.isSettled, openTasks: app.tasks.count) {
            case .nothing: return
            case .runOnForTasks: table[name].grace = .over
            case .suspend: append(name, .stop(reason: "background time over"))
            }
        case .taskWarning:
            guard app.state == .background, !app.tasks.isEmpty, let remaining = app.backgroundTimeRemaining(now: now) else { return }
            emit(.taskExpiring(app: name, tasks: app.tasks, remaining: remaining))
        case .taskDeadline:
            if case .timed(let tasks) = app.run.tasks { table[name].run.tasks = .open(tasks) }
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
        case .resumeEvery:
            wakeForFetch(name)
        case .fetchWindow:
            endWake(name, result: nil, answered: false)
        case .reclaim:
            reclaimDue(name)
        case .kill:
            guard app.run.termination == .signalled, app.state.isRunning else { return }
            emit(.note(app: name, .killTimeout(after: app.policy.stopTimeout)))
            emit(.signal(app: name, .kill))
        }
    }
}
