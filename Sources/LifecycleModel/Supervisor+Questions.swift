// What the daemon asks of the model to answer a client, where the answer is a rule of the protocol rather than
// state the daemon keeps.

extension Supervisor {
    /// Whether `app` has a background task `id` open: beginning it again is a protocol violation
    /// (docs/PROTOCOL.md, section 7b and the violations table).
    public func hasOpenTask(app name: String, id: Int) -> Bool {
        withApp(name) { $0.tasks.contains { $0.id == id } } ?? false
    }
}
