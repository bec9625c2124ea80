// Background wakes (`ResumeEverySec=`, `ResumeForSec=`): a suspended app is resumed into the background at
// intervals and suspended again when the wake is over, so that messaging apps keep their connections. A protocol
// app's wake is UIKit's background fetch: it gets `performFetch` with the wake's length as deadline, and is
// suspended again after its ack; an app without a client runs for the wake's length. Anything else that moves the
// app (focus, a request, an exit) ends the wake without a suspension.

extension Supervisor {
    /// Why an app stopped by someone else (a `kill -STOP`, another tool) is suspended: such a stop is theirs, and no
    /// wake continues it.
    static let stoppedExternallyReason = "stopped by someone else"

    /// The app's state changed: a suspension of ours arms its next wake, and leaving the suspension cancels it; a
    /// wake ends when the app leaves the background for anything but the suspension that closes it.
    mutating func backgroundWakeFollows(_ name: String, from: AppState, to: AppState, reason: String) {
        let slot = table.slot(name)
        if to == .suspended, reason != Self.stoppedExternallyReason, let every = table[slot].policy.resumeEvery {
            emit(.armTimer(app: name, .resumeEvery, after: every))
        } else if from == .suspended, table[slot].policy.resumeEvery != nil {
            emit(.cancelTimer(app: name, .resumeEvery))
        }
        if from == .background, table[slot].run.waking {
            table[slot].run.waking = false
            emit(.cancelTimer(app: name, .fetchWindow))
        }
    }

    /// `ResumeEverySec=` passed: resume the app for a wake, unless something else already moved it.
    mutating func wakeForFetch(_ name: String) {
        let slot = table.slot(name)
        guard table[slot].state == .suspended, table[slot].isSettled, table[slot].policy.resumeEvery != nil else { return }
        emit(.note(app: name, .backgroundWake(for: table[slot].policy.resumeFor)))
        append(name, .resume)
        append(name, .performFetch)
    }

    /// The `.performFetch` step, once the app runs again in the background: the wake begins, with a message to a
    /// client that listens, or on the clock alone.
    mutating func beginWake(_ name: String) {
        let slot = table.slot(name)
        guard table[slot].state == .background else { return }
        table[slot].run.waking = true
        if table[slot].canMessage {
            deliver(name, .performFetch, deadline: table[slot].policy.resumeFor)
        } else {
            emit(.armTimer(app: name, .fetchWindow, after: table[slot].policy.resumeFor))
        }
    }

    /// The wake is over (the ack of `performFetch`, its deadline, the client's hang-up, or `ResumeForSec=` for an
    /// app without a client): back to sleep, unless other work came meanwhile (a focus request, say).
    mutating func endWake(_ name: String, result: FetchResult?, answered: Bool) {
        let slot = table.slot(name)
        if answered { emit(.note(app: name, .fetchCompleted(result))) }
        guard table[slot].run.waking else { return }
        table[slot].run.waking = false
        guard table[slot].state == .background, table[slot].plan.isEmpty else { return }
        append(name, .stop(reason: "background wake over"))
    }
}
