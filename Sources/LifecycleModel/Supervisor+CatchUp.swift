// The catch-up rule: a client never misses a transition. An app can move on while its client cannot hear: re-adopted
// by a restarted daemon and focused before its client reconnected, or left running after its client hung up. When
// that client says hello again, it is told the callbacks that take it from the state it last heard of to the one the
// app is in, in UIKit's order, each acknowledged as usual; the acks move nothing, the app is there already.

extension Supervisor {
    /// The client can no longer hear: remember what it heard last (a message in flight counted as acknowledged).
    mutating func rememberToldState(_ name: String) {
        table[name].run.toldState = table[name].state
    }

    /// On hello: queue the way from the state the client last heard of, before anything else queued.
    mutating func catchUp(_ name: String) {
        guard let told = table[name].run.toldState else { return }
        table[name].run.toldState = nil
        let current = table[name].state
        // A stopped process hears nothing: a suspended app is in the background as far as its client knows.
        let from: AppState = told == .suspended ? .background : told
        guard current.isRunning, current != .suspended, from != current else { return }
        let callbacks = LifecycleRules.callbacks(from: from, to: current)
        guard !callbacks.isEmpty else { return }
        table[name].plan.prepend(callbacks.map { .tell($0) })
    }
}
