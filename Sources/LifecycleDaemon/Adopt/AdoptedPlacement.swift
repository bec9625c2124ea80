import Glibc
import LifecycleModel

/// The placement of apps the desktop started (`[Adopt]`), in front of the daemon's own placement, which keeps
/// every configured app. An adopted app lives where the desktop put it: a launcher's scope (`AppRuntime.cgroup`,
/// a cgroup the daemon did not make and never removes), frozen through its `cgroup.freeze` and weighed through its
/// `cpu.weight`/`io.weight` where the hierarchy has them; or, for a window's process outside any scope, that process
/// and its descendants, stopped by signals.
final class AdoptedPlacement: ProcessPlacement {
    /// The daemon's placement for configured apps.
    let base: any ProcessPlacement

    init(_ base: any ProcessPlacement) {
        self.base = base
    }

    private func adopted(_ app: AppRuntime) -> Bool { app.config.policy.adopted }

    func prepareLaunch(_ app: AppRuntime) -> [String] { adopted(app) ? [] : base.prepareLaunch(app) }
    func adopt(_ app: AppRuntime) { if !adopted(app) { base.adopt(app) } }
    func isOwnProcess(_ pid: pid_t, of name: String, processGroupAlone: Bool, externalUser: uid_t?) -> Bool {
        base.isOwnProcess(pid, of: name, processGroupAlone: processGroupAlone, externalUser: externalUser)
    }
    var canPlaceInGroups: Bool { base.canPlaceInGroups }
    func prepareExternal(_ app: AppRuntime) throws(SystemError) -> AppCgroup? { try base.prepareExternal(app) }
    func gather(_ app: AppRuntime) { if !adopted(app) { base.gather(app) } }
    func dropUnused(_ app: AppRuntime) { if !adopted(app) { base.dropUnused(app) } }

    func members(of app: AppRuntime) -> [pid_t] {
        guard adopted(app) else { return base.members(of: app) }
        if let scope = app.cgroup { return scope.pids() }
        guard let pid = app.pid else { return [] }
        return ProcessTree.descendants(of: pid)
    }

    func processGroup(of app: AppRuntime) -> [pid_t] {
        guard adopted(app) else { return base.processGroup(of: app) }
        guard let pid = app.pid else { return [] }
        return members(of: app).filter { getpgid($0) == pid }
    }

    /// An adopted process rarely leads its own process group: the signals go to each member.
    func reachesBeyondProcessGroup(_ app: AppRuntime) -> Bool { adopted(app) || base.reachesBeyondProcessGroup(app) }
    func contains(_ pid: pid_t, in app: AppRuntime) -> Bool {
        adopted(app) ? members(of: app).contains(pid) : base.contains(pid, in: app)
    }
    func freezer(of app: AppRuntime) -> FreezerKind? { adopted(app) ? app.cgroup?.freezer : base.freezer(of: app) }
    var canFreeze: Bool { base.canFreeze }

    func freeze(_ app: AppRuntime) throws(SystemError) {
        guard adopted(app) else { return try base.freeze(app) }
        guard let scope = app.cgroup else { throw SystemError(operation: "freeze \(app.name) (no scope)", errno: EOPNOTSUPP) }
        try scope.freeze()
    }

    func thaw(_ app: AppRuntime) throws(SystemError) {
        guard adopted(app) else { return try base.thaw(app) }
        try app.cgroup?.thaw()
    }

    func thawIfFrozen(_ app: AppRuntime) {
        guard adopted(app) else { return base.thawIfFrozen(app) }
        guard let scope = app.cgroup, scope.isFreezing() else { return }
        do { try scope.thaw() } catch { Log.warning("\(app.name): Failed to thaw its scope: \(error)") }
    }

    func isFrozen(_ app: AppRuntime) -> Bool { adopted(app) ? app.cgroup?.isFrozen() ?? false : base.isFrozen(app) }

    /// The scope's weights where the hierarchy has them; nice on each process otherwise (never on a process group:
    /// the group of an adopted process may hold processes that are not the app's).
    func apply(_ priority: PriorityClass, previous: PriorityClass?, to app: AppRuntime, leader: pid_t, members: [pid_t]) -> PriorityClass? {
        guard adopted(app) else { return base.apply(priority, previous: previous, to: app, leader: leader, members: members) }
        var byWeights = false
        if let scope = app.cgroup, scope.controlsCPU {
            do {
                if previous?.weightClass != priority.weightClass { try scope.setPriority(priority) }
                byWeights = true
            } catch {
                Log.debug("\(app.name): Failed to set its scope's weights: \(error)")
            }
        }
        var failures = ProcessPriority.apply(priority, from: previous, processGroup: leader, members: members, useNice: false)
        if !byWeights && previous?.niceValue != priority.niceValue {
            for pid in members where setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(pid), priority.niceValue) != 0 && errno != ESRCH {
                failures.append(SystemError(operation: "set nice \(priority.niceValue) on \(pid)", errno: errno))
            }
        }
        for failure in failures { Log.debug("\(app.name): \(failure), ignoring") }
        return priority
    }

    func killAll(_ app: AppRuntime, leader: pid_t) {
        guard adopted(app) else { return base.killAll(app, leader: leader) }
        if let scope = app.cgroup {
            thawIfFrozen(app)
            scope.killAll()
        } else {
            for pid in members(of: app) { kill(pid, SIGKILL) }
        }
    }

    /// The scope is the desktop's: it stays.
    func remove(_ app: AppRuntime) {
        if adopted(app) { app.cgroup = nil } else { base.remove(app) }
    }

    func displayPath(of app: AppRuntime) -> String? { adopted(app) ? app.cgroup?.displayPath : base.displayPath(of: app) }
    func leftoverNames() -> Set<String> { base.leftoverNames() }
    func leftover(_ name: String) -> AppCgroup? { base.leftover(name) }
    func removeAll() { base.removeAll() }
}

/// Every process's parent, read once from /proc: the descendants of a process, and its ancestors. The static
/// readers find the same for one process without reading every process on the machine.
struct ProcessTree {
    var parents: [pid_t: pid_t]

    static func read(procRoot: String = "/proc") -> ProcessTree {
        var parents: [pid_t: pid_t] = [:]
        guard let directory = opendir(procRoot) else { return ProcessTree(parents: [:]) }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            guard let pid = pid_t(directoryEntryName(entry)),
                  let fields = ProcessTable.statFields(of: pid, procRoot: procRoot), fields.count > 1,
                  let parent = pid_t(fields[1]) else { continue }
            parents[pid] = parent
        }
        return ProcessTree(parents: parents)
    }

    /// `pid` and every process below it, sorted.
    func subtree(of pid: pid_t) -> [pid_t] {
        guard parents[pid] != nil else { return [] }
        var children: [pid_t: [pid_t]] = [:]
        for (child, parent) in parents { children[parent, default: []].append(child) }
        var found: [pid_t] = []
        var next = [pid]
        while let current = next.popLast() {
            found.append(current)
            next += children[current] ?? []
        }
        return found.sorted()
    }

    /// `pid` and every process below it, sorted, from each process's /proc/PID/task/TID/children: the cost grows
    /// with the subtree, not with the machine. Where the kernel has no children files, from the whole tree.
    static func descendants(of pid: pid_t, procRoot: String = "/proc") -> [pid_t] {
        guard hasChildrenFiles else { return read(procRoot: procRoot).subtree(of: pid) }
        guard access("\(procRoot)/\(pid)/stat", F_OK) == 0 else { return [] }
        var found: [pid_t] = []
        var seen: Set<pid_t> = []
        var next = [pid]
        while let current = next.popLast() {
            guard seen.insert(current).inserted else { continue }
            found.append(current)
            next += children(of: current, procRoot: procRoot)
        }
        return found.sorted()
    }

    /// The children of every thread of `pid`: a thread's children file lists only what that thread forked.
    static func children(of pid: pid_t, procRoot: String = "/proc") -> [pid_t] {
        guard let directory = opendir("\(procRoot)/\(pid)/task") else { return [] }
        defer { closedir(directory) }
        var children: [pid_t] = []
        while let entry = readdir(directory) {
            guard let task = pid_t(directoryEntryName(entry)),
                  let text = try? readKernelFile("\(procRoot)/\(pid)/task/\(task)/children") else { continue }
            children += text.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { pid_t($0) }
        }
        return children
    }

    /// Whether this kernel has /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN).
    static let hasChildrenFiles: Bool = access("/proc/self/task/\(getpid())/children", F_OK) == 0

    /// The parents of `pid` up to init, one read of /proc/PID/stat each.
    static func ancestors(of pid: pid_t, procRoot: String = "/proc") -> [pid_t] {
        var found: [pid_t] = []
        var current = pid
        while let parent = ProcessOwners.stat(of: current, procRoot: procRoot)?.parent, parent > 0, !found.contains(parent),
              found.count < ProcessOwners.depthLimit {
            found.append(parent)
            current = parent
        }
        return found
    }

    /// The parents of `pid` up to init.
    func ancestors(of pid: pid_t) -> [pid_t] {
        var found: [pid_t] = []
        var current = pid
        while let parent = parents[current], parent > 0, !found.contains(parent) {
            found.append(parent)
            current = parent
        }
        return found
    }
}
