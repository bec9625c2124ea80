import Glibc

/// The rest of an adopted process's launch session: what the launch forked that is no longer below the process (a
/// worker it double-forked). Such a process is orphaned to the nearest subreaper above the process, or to init, so it
/// is a child of one of the process's ancestors. Each ancestor's children are listed from its children files, and only
/// a child not seen before is read: the cost grows with what started, not with the number of processes on the machine.
final class LaunchSessions {
    /// What one child of an ancestor is: read once, kept while the ancestor's children file lists it.
    private struct Child {
        var session: pid_t
        var uid: uid_t
        var started: UInt64
    }

    private let procRoot: String
    /// Per ancestor, its children as last listed; nil for a child that was gone before it was read. A pid that exits
    /// and comes back as a child of the same ancestor between two listings keeps its old reading: a pid comes back only
    /// once the kernel has handed out the others up to pid_max.
    private var children: [pid_t: [pid_t: Child?]] = [:]
    /// The daemon's own line, which is never an app's.
    private let ownLine: Set<pid_t>

    init(procRoot: String = "/proc", ownLine: Set<pid_t> = AdoptRails.ownLine()) {
        self.procRoot = procRoot
        self.ownLine = ownLine
    }

    /// The processes of `pid`'s user in its launch session (`launchSession`) that `known` does not hold: the children
    /// of `pid`'s ancestors started no earlier than `pid` (a session whose leader exited may hold older processes
    /// that are not the app's), with their descendants; never `pid`'s ancestors (a launcher's `sh -c` that waits for
    /// it) nor the daemon's own line.
    func rest(of pid: pid_t, besides known: [pid_t]) -> [pid_t] {
        guard let session = AdoptedProcessTree.launchSession(of: pid, procRoot: procRoot),
              let uid = ProcessIdentity.realUID(of: pid, procRoot: procRoot),
              let started = ProcessTable.startTime(of: pid, procRoot: procRoot) else { return [] }
        let ancestors = ProcessTree.ancestors(of: pid, procRoot: procRoot)
        var excluded = Set(known).union(ownLine).union(ancestors)
        excluded.insert(pid)
        var found: [pid_t] = []
        for ancestor in ancestors {
            for (child, what) in listed(ancestor) where !excluded.contains(child) {
                guard let what, what.session == session, what.uid == uid, what.started >= started else { continue }
                for member in ProcessTree.descendants(of: child, procRoot: procRoot) where excluded.insert(member).inserted {
                    found.append(member)
                }
            }
        }
        forget(besides: Set(ancestors))
        return found.sorted()
    }

    /// `ancestor`'s children, the new ones read.
    private func listed(_ ancestor: pid_t) -> [pid_t: Child?] {
        let before = children[ancestor] ?? [:]
        var now: [pid_t: Child?] = [:]
        for child in ProcessTree.children(of: ancestor, procRoot: procRoot) {
            now[child] = before[child] ?? read(child)
        }
        children[ancestor] = now
        return now
    }

    private func read(_ pid: pid_t) -> Child? {
        guard let session = ProcessOwners.stat(of: pid, procRoot: procRoot)?.session,
              let uid = ProcessIdentity.realUID(of: pid, procRoot: procRoot),
              let started = ProcessTable.startTime(of: pid, procRoot: procRoot) else { return nil }
        return Child(session: session, uid: uid, started: started)
    }

    /// Keeps the lists of the ancestors of the apps asked about, so that the cache stays as small as their children.
    private func forget(besides ancestors: Set<pid_t>) {
        guard children.count > 64 else { return }
        children = children.filter { ancestors.contains($0.key) }
    }
}
