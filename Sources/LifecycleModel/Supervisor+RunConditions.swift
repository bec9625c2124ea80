// The keep-running rails: the sound server and the power supply change what keeps apps from suspension
// (RunConditions.swift). An app that starts being kept has its grace timer cancelled; one that stops being kept
// gets its grace time again from now, as if it had just settled in the background; plugging in resumes the apps
// that are only suspended on battery.

extension Supervisor {
    /// The facts the keep-running rules last read.
    public var runConditions: RunConditions { conditions }

    /// Why the app runs on in the background now (nil: its grace time runs as usual).
    public func keepRunningReason(of name: String) -> KeepRunningReason? {
        table.with(name) { LifecycleRules.keepRunning(name, policy: $0.policy, conditions: conditions) } ?? nil
    }

    /// The background modes the app has now (declared, and audio while it plays).
    public func backgroundModes(of name: String) -> Set<String> {
        table.with(name) { LifecycleRules.effectiveBackgroundModes(name, policy: $0.policy, conditions: conditions) } ?? []
    }

    /// The sound server's or the power supply's facts changed: each app whose background modes change moves.
    mutating func conditionsChanged(to next: RunConditions) -> [Effect] {
        let old = conditions
        conditions = next
        var moved: [String] = []
        for name in table.names {
            let app = table[name]
            guard app.state.isRunning, !app.run.termination.isUnderway else { continue }
            let before = LifecycleRules.keepRunning(name, policy: app.policy, conditions: old)
            let after = LifecycleRules.keepRunning(name, policy: app.policy, conditions: next)
            if (before == nil) != (after == nil) { emit(.note(app: name, .keptRunning(after))) }
            if after != nil, before == nil, app.grace == .armed {
                table[name].grace = .idle
                emit(.cancelTimer(app: name, .grace))
            }
            if app.projectedState == .suspended, LifecycleRules.resumes(app.policy, from: old, to: next) {
                append(name, .resume)
                moved.append(name)
            } else if after == nil, before != nil {
                // Settled in the background, it gets its grace time (finish arms it).
                moved.append(name)
            }
        }
        guard let first = moved.first else { return endEvent() }
        for name in moved { advance(name) }
        return finish(first)
    }

    /// The grace time may run for this app now: it sits in the background with nothing keeping it, outside a
    /// background wake (which ends on its own clock).
    func graceMayRun(_ slot: Int) -> Bool {
        table[slot].state == .background && table[slot].grace == .idle && table[slot].policy.backgroundTime != nil
            && !table[slot].run.waking
            && LifecycleRules.keepRunning(table[slot].name, policy: table[slot].policy, conditions: conditions) == nil
    }
}
