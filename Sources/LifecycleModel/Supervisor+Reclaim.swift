// Memory reclaim of suspended apps (`Reclaim=`, `ReclaimAfterSec=`): the model decides when, the daemon does it.
// A suspension of the daemon's own arms the timer; leaving the suspension before it fires cancels it, and one
// after it needs nothing (the app faults its pages back in). A stop by someone else is theirs, and no reclaim
// follows it, as no wake does.

extension Supervisor {
    /// The app's state changed: a suspension of ours arms its reclaim, and leaving the suspension cancels it.
    mutating func reclaimFollows(_ name: String, from: AppState, to: AppState, reason: String) {
        let slot = table.slot(name)
        guard table[slot].policy.reclaim else { return }
        if to == .suspended, reason != Self.stoppedExternallyReason {
            emit(.armTimer(app: name, .reclaim, after: table[slot].policy.reclaimAfter))
        } else if from == .suspended {
            emit(.cancelTimer(app: name, .reclaim))
        }
    }

    /// `ReclaimAfterSec=` passed: reclaim the app's memory if it is still suspended.
    mutating func reclaimDue(_ name: String) {
        let slot = table.slot(name)
        guard table[slot].state == .suspended, table[slot].policy.reclaim else { return }
        emit(.reclaimMemory(app: name))
    }
}
