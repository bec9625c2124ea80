import Glibc

/// Which running app a process belongs to (a window's, a sound stream's), found once per process and kept until
/// the apps change, so that a display or audio event costs what it touched rather than a read of every app's
/// processes. A process is the app's when it sits in the app's cgroup, in the session or process group the app's
/// leader leads, or below the leader in the process tree; one read of its /proc/PID/stat and /proc/PID/cgroup,
/// then of each ancestor's stat until a known process or init, decides it.
final class ProcessOwners {
    /// One running app, as the rule needs it.
    struct App: Equatable {
        var name: String
        var leader: pid_t
        /// The app's cgroup2 group relative to the hierarchy's root (as /proc/PID/cgroup writes it), when it has one.
        var cgroup: String?
        /// An app with only v1 groups: its members, read when a process is not found otherwise.
        var v1Group: AppCgroup?

        init(name: String, leader: pid_t, cgroup: String? = nil, v1Group: AppCgroup? = nil) {
            self.name = name
            self.leader = leader
            self.cgroup = cgroup
            self.v1Group = v1Group
        }
    }

    private let procRoot: String
    /// Where the cgroup2 hierarchy is mounted, to turn an app group's path into the form /proc/PID/cgroup uses.
    private let unifiedMount: String?
    private var apps: [App] = []
    private var byLeader: [pid_t: String] = [:]
    private var byCgroup: [String: String] = [:]
    /// What each process looked up so far belongs to, and for one that belongs to no app the cgroup it was in then.
    private var known: [pid_t: Known] = [:]
    /// Processes looked up since the apps last changed, so that the cache stays bounded on a long-lived desktop.
    static let cacheLimit = 4096
    /// How many ancestors a lookup reads at most (a deeper tree is not a desktop's).
    static let depthLimit = 64

    init(procRoot: String = "/proc", unifiedMount: String?) {
        self.procRoot = procRoot
        self.unifiedMount = unifiedMount
    }

    /// For this machine: the cgroup2 mount from /proc/self/mountinfo.
    convenience init() {
        self.init(unifiedMount: AppSlice.unifiedMount(mountinfo: (try? readKernelFile("/proc/self/mountinfo")) ?? ""))
    }

    /// The running apps as `host` has them now, read from memory alone.
    func update(from host: any DaemonHost) {
        var running: [App] = []
        for name in host.appNames {
            guard let runtime = host.runtime(name), let leader = runtime.pid,
                  host.withRecord(name, { $0.state.isRunning }) == true else { continue }
            let cgroup = runtime.cgroup
            let relative = relative(cgroup?.unifiedPath)
            running.append(App(name: name, leader: leader, cgroup: relative, v1Group: relative == nil && cgroup != nil ? cgroup : nil))
        }
        update(running)
    }

    /// The apps as they run now. The cache holds as long as they are the same apps with the same leaders and groups.
    func update(_ apps: [App]) {
        guard apps != self.apps else { return }
        self.apps = apps
        byLeader = [:]
        byCgroup = [:]
        for app in apps {
            byLeader[app.leader] = app.name
            if let cgroup = app.cgroup { byCgroup[cgroup] = app.name }
        }
        known = [:]
    }

    /// The running apps' names, in the order `update` had them.
    var names: [String] { apps.map(\.name) }

    /// The relative form of an absolute cgroup2 directory, nil when it is not under the mount.
    func relative(_ path: String?) -> String? {
        guard let path, let unifiedMount else { return nil }
        let mount = unifiedMount.hasSuffix("/") ? String(unifiedMount.dropLast()) : unifiedMount
        guard path.hasPrefix(mount + "/") else { return nil }
        return String(path.dropFirst(mount.count))
    }

    /// The app `pid` belongs to, if any. A process found to be no app's is asked for its cgroup again each time
    /// while an app has one: a launcher may move it into an app's cgroup after it was first seen (its window maps
    /// before the launcher's scope takes it), and nothing announces that move.
    func owner(of pid: pid_t) -> String? {
        var cgroup: String??
        if let cached = known[pid] {
            guard cached.name == nil, !byCgroup.isEmpty else { return cached.name }
            cgroup = .some(cgroupOf(pid))
            if cached.cgroup == cgroup { return nil }
        }
        if known.count >= Self.cacheLimit { known = [:] }
        return lookUp(pid, cgroup: cgroup)
    }

    /// `cgroup`: the process's cgroup when the caller has read it already.
    private func lookUp(_ pid: pid_t, cgroup read: String?? = nil) -> String? {
        if let name = byLeader[pid] { return remember([pid], name) }
        guard let stat = Self.stat(of: pid, procRoot: procRoot) else { return remember([pid], nil) }
        // The process's own place: its cgroup (inherited by everything the app forks), its session or its group.
        let cgroup = byCgroup.isEmpty ? nil : read ?? cgroupOf(pid)
        if let cgroup, let name = cgroupOwner(cgroup) { return remember([pid], name) }
        if let name = byLeader[stat.session] ?? byLeader[stat.group] { return remember([pid], name) }
        for app in apps where app.v1Group?.pids().contains(pid) == true { return remember([pid], app.name) }
        // Else the first ancestor that is a leader or whose owner is known; everything on the way shares it.
        var chain = [pid]
        var parent = stat.parent
        while parent > 1, chain.count < Self.depthLimit {
            if let name = byLeader[parent] { return remember(chain, name) }
            if let cached = known[parent] { return remember(chain, cached.name, cgroup: cgroup) }
            chain.append(parent)
            guard let next = Self.stat(of: parent, procRoot: procRoot) else { break }
            parent = next.parent
        }
        return remember(chain, nil, cgroup: cgroup)
    }

    /// The process's cgroup2 group as /proc/PID/cgroup writes it, nil when it has none (or is gone).
    private func cgroupOf(_ pid: pid_t) -> String? {
        (try? readKernelFile("\(procRoot)/\(pid)/cgroup")).flatMap { AppSlice.unifiedCgroup(procSelfCgroup: $0) }
    }

    private func cgroupOwner(_ cgroup: String) -> String? {
        var path = Substring(cgroup)
        while !path.isEmpty, path != "/" {
            if let name = byCgroup[String(path)] { return name }
            guard let slash = path.lastIndex(of: "/") else { break }
            path = path[..<slash]
        }
        return nil
    }

    /// `cgroup`: that of `pids[0]`, the process asked about; the ancestors on its way are remembered without one,
    /// so that asked about themselves they are looked up again.
    private func remember(_ pids: [pid_t], _ name: String?, cgroup: String? = nil) -> String? {
        for (index, pid) in pids.enumerated() { known[pid] = Known(name: name, cgroup: index == 0 ? .some(cgroup) : .none) }
        return name
    }

    /// One process's answer. `cgroup` is `.none` where the cgroup was not read, so that it never equals a read one.
    private struct Known {
        var name: String?
        var cgroup: String??
    }

    struct Stat {
        var parent: pid_t
        var group: pid_t
        var session: pid_t
    }

    /// Fields 4, 5 and 6 of /proc/PID/stat.
    static func stat(of pid: pid_t, procRoot: String = "/proc") -> Stat? {
        guard let fields = ProcessTable.statFields(of: pid, procRoot: procRoot), fields.count > 3,
              let parent = pid_t(fields[1]), let group = pid_t(fields[2]), let session = pid_t(fields[3]) else { return nil }
        return Stat(parent: parent, group: group, session: session)
    }
}
