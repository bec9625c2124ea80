// Apps adopted from the desktop (`[Adopt]`): processes someone else started, attached like external apps
// (`attach(_:launchedBy:now:)`), never launched or restarted, and let go as they are when the daemon stops adopting
// them.

extension Supervisor {
    /// The daemon lets an adopted app go (it stops, or a reload stops adopting it): the app is forgotten in
    /// whatever state it is, without a message or an exit, and its processes are the desktop's again (the daemon
    /// thaws them first). Returns false for an app that is not adopted.
    @discardableResult
    mutating func release(_ name: String) -> Bool {
        guard let app = table.record(name), app.policy.adopted else { return false }
        if activeApp == name { activeApp = nil }
        focusQueue.removeAll { $0 == name }
        foregroundApps.remove(name)
        display.forget(name)
        if pendingLaunch != nil { launchStands() }
        table.remove(name)
        return true
    }
}
