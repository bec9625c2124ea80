import Glibc

/// What an app's launch left outside the app's process tree: a worker it double-forked, which is no descendant once
/// its parent exits. Such a process is orphaned to the nearest subreaper above the app, or to init, so it is a child
/// of one of the app's ancestors. Each ancestor's children are listed from its children files, and only a child not
/// seen before is read: the cost grows with what started, not with the number of processes on the machine.
final class Orphans {
    /// What one child of an ancestor is: read once, kept while the ancestor's children file lists it.
    private struct Child {
        var group: pid_t
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

    /// The processes of `pid`'s user in its launch session (`AdoptedProcessTree.launchSession`) that `known` does
    /// not hold: the children of `pid`'s ancestors started no earlier than `pid` (a session whose leader exited may
    /// hold older processes that are not the app's), with their descendants; never `pid`'s ancestors (a launcher's
    /// `sh -c` that waits for it) nor the daemon's own line.
    func rest(of pid: pid_t, besides known: [pid_t]) -> [pid_t] {
        guard let session = AdoptedProcessTree.launchSession(of: pid, procRoot: procRoot),
              let uid = ProcessIdentity.realUID(of: pid, procRoot: procRoot) else { return [] }
        return orphans(of: pid, besides: known) { $0.session == session && $0.uid == uid }
    }

    /// The members of the process group `leader` leads: its descendants in the group, and the group's processes
    /// orphaned to its ancestors with theirs. A member moved to another group is not one, as `kill(-leader)` does
    /// not reach it.
    func processGroup(of leader: pid_t) -> [pid_t] {
        let tree = ProcessTree.descendants(of: leader, procRoot: procRoot)
        let orphans = orphans(of: leader, besides: tree) { $0.group == leader }
        return (tree + orphans).filter { getpgid($0) == leader }.sorted()
    }

    /// The children of `pid`'s ancestors that `matches` takes, started no earlier than `pid`, with their descendants
    /// that it takes too, besides `known`, the ancestors and the daemon's own line.
    private func orphans(of pid: pid_t, besides known: [pid_t], matching matches: (Child) -> Bool) -> [pid_t] {
        guard let started = ProcessTable.startTime(of: pid, procRoot: procRoot) else { return [] }
        let ancestors = ProcessTree.ancestors(of: pid, procRoot: procRoot)
        var excluded = Set(known).union(ownLine).union(ancestors)
        excluded.insert(pid)
        var found: [pid_t] = []
        for ancestor in ancestors {
            for (child, what) in listed(ancestor) where !excluded.contains(child) {
                guard let what, what.started >= started, matches(what) else { continue }
                // Its descendants as far as they are the same launch's: a process of another user or session below
                // it is not the app's.
                for member in ProcessTree.descendants(of: child, procRoot: procRoot)
                where !excluded.contains(member) && (member == child || read(member).map(matches) == true) {
                    excluded.insert(member)
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
        guard let stat = ProcessOwners.stat(of: pid, procRoot: procRoot),
              let uid = ProcessIdentity.realUID(of: pid, procRoot: procRoot),
              let started = ProcessTable.startTime(of: pid, procRoot: procRoot) else { return nil }
        return Child(group: stat.group, session: stat.session, uid: uid, started: started)
    }

    /// Keeps the lists of the ancestors of the apps asked about, so that the cache stays as small as their children.
    private func forget(besides ancestors: Set<pid_t>) {
        guard children.count > 64 else { return }
        children = children.filter { ancestors.contains($0.key) }
    }
}
