import Glibc
import LifecycleModel

/// An adopted app in a launcher's scope (`AppRuntime.cgroup`, a cgroup the daemon did not make and never removes):
/// frozen through its `cgroup.freeze` and weighed through its `cpu.weight`/`io.weight` where the hierarchy has
/// them, else nice on each of its processes; protected through its `memory.low` in the foreground where it has one.
final class AdoptedScope: AppPlace {
    /// Where what the scope and its processes had is kept, to be given back.
    private let originals: OriginalPriorities?

    init(originals: OriginalPriorities? = nil) {
        self.originals = originals
    }

    func prepareLaunch(_ app: AppRuntime) -> [String] { [] }
    func members(of app: AppRuntime) -> [pid_t] { app.cgroup?.pids() ?? [] }
    func processGroup(of app: AppRuntime) -> [pid_t] {
        guard let pid = app.pid else { return [] }
        return members(of: app).filter { getpgid($0) == pid }
    }
    /// An adopted process rarely leads its own process group: the signals go to each member.
    func reachesBeyondProcessGroup(_ app: AppRuntime) -> Bool { true }
    func contains(_ pid: pid_t, in app: AppRuntime) -> Bool { members(of: app).contains(pid) }
    func freezer(of app: AppRuntime) -> FreezerKind? { app.cgroup?.freezer }

    func freeze(_ app: AppRuntime) throws(SystemError) {
        guard let scope = app.cgroup else { throw SystemError(operation: "freeze \(app.name) (no scope)", errno: EOPNOTSUPP) }
        try scope.freeze()
    }

    func thaw(_ app: AppRuntime) throws(SystemError) { try app.cgroup?.thaw() }

    func thawIfFrozen(_ app: AppRuntime) {
        guard let scope = app.cgroup, scope.isFreezing() else { return }
        do { try scope.thaw() } catch { Log.warning("\(app.name): Failed to thaw its scope: \(error)") }
    }

    func isFrozen(_ app: AppRuntime) -> Bool { app.cgroup?.isFrozen() ?? false }

    func apply(_ priority: PriorityClass, previous: PriorityClass?, to app: AppRuntime, leader: pid_t, members: [pid_t]) -> PriorityClass? {
        var byWeights = false
        if let scope = app.cgroup, scope.controlsCPU {
            do {
                if previous?.weightClass != priority.weightClass {
                    originals?.record(app.name, files: scope.weightFiles)
                    try scope.setPriority(priority)
                }
                byWeights = true
            } catch {
                Log.debug("\(app.name): Failed to set its scope's weights: \(error)")
            }
        }
        if let scope = app.cgroup, let memoryLow = scope.memoryLowFile, previous?.weightClass != priority.weightClass {
            originals?.record(app.name, files: [memoryLow])
            do { try scope.protectMemory(priority, app.config.memoryLow) } catch {
                Log.debug("\(app.name): Failed to set its scope's memory protection: \(error), ignoring")
            }
        }
        originals?.record(app.name, pids: members)
        return AdoptedProcessTree.applyPerProcess(priority, previous: previous, to: app, leader: leader, members: members,
                                                  nice: !byWeights)
    }

    func killAll(_ app: AppRuntime, leader: pid_t) {
        guard let scope = app.cgroup else { return }
        thawIfFrozen(app)
        scope.killAll()
    }

    /// The scope is the desktop's: it stays.
    func remove(_ app: AppRuntime) { app.cgroup = nil }
    func displayPath(of app: AppRuntime) -> String? { app.cgroup?.displayPath }
}

/// An adopted window's process outside any scope: that process and its descendants, with the rest of the session its
/// launch made (`launchSession`), stopped by signals to each, weighed by nice on each (never on a process group: the
/// group of an adopted process may hold processes that are not the app's). A worker the app double-forks is no
/// descendant once its parent exits, but keeps the session unless it calls setsid(); one that does is not followed.
/// With a scope of its own (`TreeScopes`, in `AppRuntime.cgroup`), once its process is there: the scope's processes
/// as well, frozen through the scope's `cgroup.freeze`, so that a worker that left the session is followed too.
final class AdoptedProcessTree: AppPlace {
    /// Where what the processes had is kept, to be given back.
    private let originals: OriginalPriorities?
    private let orphans: Orphans
    /// The freezer of its scope, once it has one, is an adopted scope's.
    private let asScope = AdoptedScope()

    init(originals: OriginalPriorities? = nil, orphans: Orphans = Orphans()) {
        self.originals = originals
        self.orphans = orphans
    }

    func prepareLaunch(_ app: AppRuntime) -> [String] { [] }

    /// Each app's launch-session rest as its last stop read it (`members(of:fresh:)`), for its leader.
    private var rests: [String: (leader: pid_t, processes: [RecordedProcess])] = [:]

    func members(of app: AppRuntime) -> [pid_t] { members(of: app, fresh: false) }

    /// The tree is read each time; the rest of the launch session (`Orphans.rest`, which lists the children of
    /// every ancestor's threads) only when `fresh` (a stop) or when none was read for this leader yet, and
    /// otherwise taken from that reading, less what has exited since. A worker double-forked since then took its
    /// parent's priority with the fork, and the next stop finds it.
    func members(of app: AppRuntime, fresh: Bool) -> [pid_t] {
        guard let pid = app.pid else { return [] }
        let tree = ProcessTree.descendants(of: pid)
        let others: [pid_t]
        if !fresh, let rest = rests[app.name], rest.leader == pid {
            others = rest.processes.filter { $0.isRunning() }.map(\.pid).filter { !tree.contains($0) }
        } else {
            others = orphans.rest(of: pid, besides: tree)
            rests[app.name] = (pid, others.compactMap { RecordedProcess(running: $0) })
        }
        let members = others.isEmpty ? tree : (tree + others).sorted()
        guard let scope = self.scope(of: app) else { return members }
        return Set(members).union(scope.pids()).sorted()
    }

    /// The scope the tree was moved into, once its process is there: systemd moves the processes after it answers,
    /// and a scope it could not make leaves the tree as it was.
    private func scope(of app: AppRuntime) -> AppCgroup? {
        guard let scope = app.cgroup, let pid = app.pid, scope.pids().contains(pid) else { return nil }
        return scope
    }

    /// The session whose processes all came from the launch of `pid`: one it leads, or one whose leader has exited
    /// (a launcher's fork, setsid() and fork leave an app so). A session another live process leads (a terminal's
    /// shell) holds processes that are not the app's: nil then.
    static func launchSession(of pid: pid_t, procRoot: String = "/proc") -> pid_t? {
        guard let session = ProcessOwners.stat(of: pid, procRoot: procRoot)?.session, session > 1 else { return nil }
        if session == pid { return session }
        return kill(session, 0) != 0 && errno == ESRCH ? session : nil
    }

    func processGroup(of app: AppRuntime) -> [pid_t] {
        guard let pid = app.pid else { return [] }
        return members(of: app).filter { getpgid($0) == pid }
    }

    func reachesBeyondProcessGroup(_ app: AppRuntime) -> Bool { true }
    func contains(_ pid: pid_t, in app: AppRuntime) -> Bool { members(of: app).contains(pid) }
    func freezer(of app: AppRuntime) -> FreezerKind? { scope(of: app)?.freezer }
    func freeze(_ app: AppRuntime) throws(SystemError) {
        guard let scope = self.scope(of: app) else {
            throw SystemError(operation: "freeze \(app.name) (a process tree has no freezer)", errno: EOPNOTSUPP)
        }
        try scope.freeze()
    }
    /// Through the scope whether or not its process is still there, as an adopted scope: what was frozen is thawed.
    func thaw(_ app: AppRuntime) throws(SystemError) { try asScope.thaw(app) }
    func thawIfFrozen(_ app: AppRuntime) { asScope.thawIfFrozen(app) }
    func isFrozen(_ app: AppRuntime) -> Bool { asScope.isFrozen(app) }

    func apply(_ priority: PriorityClass, previous: PriorityClass?, to app: AppRuntime, leader: pid_t, members: [pid_t]) -> PriorityClass? {
        originals?.record(app.name, pids: members)
        return Self.applyPerProcess(priority, previous: previous, to: app, leader: leader, members: members, nice: true)
    }

    /// `oom_score_adj` on each member, and nice on each where no weights hold the CPU.
    static func applyPerProcess(_ priority: PriorityClass, previous: PriorityClass?, to app: AppRuntime, leader: pid_t,
                                members: [pid_t], nice: Bool) -> PriorityClass? {
        var failures = ProcessPriority.apply(priority, from: previous, processGroup: leader, members: members, useNice: false)
        if nice && previous?.niceValue != priority.niceValue {
            for pid in members where setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(pid), priority.niceValue) != 0 && errno != ESRCH {
                failures.append(SystemError(operation: "set nice \(priority.niceValue) on \(pid)", errno: errno))
            }
        }
        for failure in failures { Log.debug("\(app.name): \(failure), ignoring") }
        return priority
    }

    func killAll(_ app: AppRuntime, leader: pid_t) {
        let scope = self.scope(of: app)
        for pid in members(of: app) { kill(pid, SIGKILL) }
        _ = scope?.killAll()
    }

    /// The scope is systemd's, collected once empty: the daemon cannot move its processes back.
    func remove(_ app: AppRuntime) {
        app.cgroup = nil
        rests[app.name] = nil
    }
    func displayPath(of app: AppRuntime) -> String? { scope(of: app)?.displayPath }
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
