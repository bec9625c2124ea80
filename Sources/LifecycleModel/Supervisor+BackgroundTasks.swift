// Background tasks and the background clocks: the task time's warning and deadline timers, and the suspension
// that waits for open tasks when the grace time ran out under them. Beginning and ending a task are events
// (Supervisor.swift); what their timers do when they fire is in Supervisor+Timers.swift.

extension Supervisor {
    /// The grace time ran out while tasks held the app up; now that none does, it is suspended.
    mutating func suspendIfGraceIsOver(_ name: String, reason: String) {
        let app = table[name]
        guard app.grace == .over, app.tasks.isEmpty, app.state == .background, app.isSettled else { return }
        table[name].grace = .idle
        append(name, .stop(reason: reason))
    }

    mutating func armTaskTimers(_ name: String) {
        let app = table[name]
        // Apps that are never suspended for their grace (no BackgroundTimeSec, or background modes) need no task time.
        guard case .open(let tasks) = app.run.tasks, app.policy.backgroundModes.isEmpty, app.policy.backgroundTime != nil,
              let remaining = app.backgroundTimeRemaining(now: now) else { return }
        table[name].run.tasks = .timed(tasks)
        emit(.armTimer(app: name, .taskWarning, after: max(.zero, remaining - app.policy.expirationWarning)))
        emit(.armTimer(app: name, .taskDeadline, after: remaining))
    }

    mutating func cancelTaskTimers(_ name: String) {
        guard case .timed(let tasks)? = table.with(name, { $0.run.tasks }) else { return }
        table[name].run.tasks = .open(tasks)
        emit(.cancelTimer(app: name, .taskWarning))
        emit(.cancelTimer(app: name, .taskDeadline))
    }
}
