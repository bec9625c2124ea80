import Glibc
import LifecycleModel

/// Where one app's processes live, and how the daemon counts, stops, continues, freezes, thaws, weighs, kills and
/// removes them there. Each app's place is chosen once, when the app is configured or adopted (`AppRuntime.place`):
/// a configured app's is the host's layout (its process group, a cgroup of the daemon's, or a systemd scope); an
/// adopted app's is the launcher's scope or the window process's tree (`AdoptedScope`, `AdoptedProcessTree`).
protocol AppPlace: AnyObject {
    /// Gets the app's place ready for a launch (made, or thawed if it was left frozen: the child joins it before it
    /// execs, while the daemon waits) and returns the cgroup.procs files the child joins.
    func prepareLaunch(_ app: AppRuntime) -> [String]
    /// Whether a launched child waits before execve until this place holds it (`AppRuntime.launchHold`), because the
    /// place takes it only once its pid is known: the place lets it go on (`AppRuntime.releaseLaunch`) in every case,
    /// within a bounded time.
    func holdsLaunch(_ app: AppRuntime) -> Bool
    /// A process became the app's (`AppRuntime.pid`: launched, re-adopted or attached): its place takes it.
    func began(_ app: AppRuntime)
    /// The place of a process a previous daemon started, as it finds it.
    func adopt(_ app: AppRuntime)
    /// An external process placed itself in one of the app's groups: the app's other groups take it too.
    func gather(_ app: AppRuntime)
    /// An external app stopped by its process group alone: a group left from an earlier configuration or from
    /// the strays check at start is not its own, and goes if it is empty.
    func dropUnused(_ app: AppRuntime)
    /// Every process of the app.
    func members(of app: AppRuntime) -> [pid_t]
    /// Every process of the app, as a stop needs them: nothing kept from an earlier reading.
    func members(of app: AppRuntime, fresh: Bool) -> [pid_t]
    /// The processes in the app's process group, which a signal to the group reaches.
    func processGroup(of app: AppRuntime) -> [pid_t]
    /// Whether the app's place can hold processes outside its process group (a child that called setsid()).
    func reachesBeyondProcessGroup(_ app: AppRuntime) -> Bool
    /// Whether `pid` is in the app's own place (beyond its process group).
    func contains(_ pid: pid_t, in app: AppRuntime) -> Bool
    /// The freezer the app's place offers, if any.
    func freezer(of app: AppRuntime) -> FreezerKind?
    func freeze(_ app: AppRuntime) throws(SystemError)
    func thaw(_ app: AppRuntime) throws(SystemError)
    /// Thaws the app's place if its freezer holds it frozen or freezing.
    func thawIfFrozen(_ app: AppRuntime)
    func isFrozen(_ app: AppRuntime) -> Bool
    /// Applies `priority` to the app's processes (weights where the place has them, else nice) and returns the
    /// class now known to be applied to the place.
    func apply(_ priority: PriorityClass, previous: PriorityClass?, to app: AppRuntime, leader: pid_t, members: [pid_t]) -> PriorityClass?
    /// SIGKILL to everything the app has: its place (thawed first) and its process group.
    func killAll(_ app: AppRuntime, leader: pid_t)
    /// The app is gone from the configuration, or the daemon stops: its place goes.
    func remove(_ app: AppRuntime)
    /// The place as a person reads it, for status.
    func displayPath(of app: AppRuntime) -> String?
}

extension AppPlace {
    /// A place that keeps nothing between readings reads the same either way.
    func members(of app: AppRuntime, fresh: Bool) -> [pid_t] { members(of: app) }
    func holdsLaunch(_ app: AppRuntime) -> Bool { false }
    func began(_ app: AppRuntime) {}
    func adopt(_ app: AppRuntime) {}
    func gather(_ app: AppRuntime) {}
    func dropUnused(_ app: AppRuntime) {}
}

/// The host's layout: the place of every configured app, and what is asked of the layout as a whole (the strays
/// check at start, external apps' groups, the daemon's own parent group).
protocol ProcessPlacement: AppPlace {
    /// Whether `pid`, which a state file names as app `name`'s, is in the app's own place, so that the daemon may
    /// take it back and signal it: in the app's cgroup where one is left from the previous daemon; else leading its
    /// own session and process group with `LIFECYCLE_APP=name` in its environment, as a spawn leaves it (an external
    /// app with `externalUser`: leading a group that holds processes of that user alone). Never a process only
    /// the file names.
    func isOwnProcess(_ pid: pid_t, of name: String, processGroupAlone: Bool, externalUser: uid_t?) -> Bool
    /// Whether apps can have a group of their own here (`ExternalFrom=cgroup` needs one).
    var canPlaceInGroups: Bool { get }
    /// The place of an app configured as external with `ExternalFrom=cgroup`, made for whoever starts it; nil
    /// where apps cannot have a group of their own.
    func prepareExternal(_ app: AppRuntime) throws(SystemError) -> AppCgroup?
    /// Whether a suspension of this app by freezer is possible (for status, before there is a place).
    var canFreeze: Bool { get }
    /// Names of apps whose place exists from an earlier run, and the place of one, for the strays check at start.
    func leftoverNames() -> Set<String>
    func leftover(_ name: String) -> AppCgroup?
    /// The daemon stops: what holds the apps' places goes.
    func removeAll()
}

/// Apps in their process group alone: no cgroup, priority by nice, suspension by signal.
final class ProcessGroupPlacement: ProcessPlacement {
    /// The `oom_score_adj` files of the apps' processes, kept open between transitions.
    let kept: KeptKernelFiles
    /// A group's members outside the leader's tree (a double-forked worker), found without reading every process.
    private let orphans: Orphans

    init(kept: KeptKernelFiles = KeptKernelFiles(), orphans: Orphans = Orphans()) {
        self.kept = kept
        self.orphans = orphans
    }

    func prepareLaunch(_ app: AppRuntime) -> [String] { [] }
    func adopt(_ app: AppRuntime) {}

    func isOwnProcess(_ pid: pid_t, of name: String, processGroupAlone: Bool, externalUser: uid_t?) -> Bool {
        if let externalUser {
            guard getpgid(pid) == pid, getpgid(0) != pid else { return false }
            return ProcessTable.members(ofProcessGroup: pid).allSatisfy { ProcessIdentity.realUID(of: $0).map { $0 == externalUser } ?? true }
        }
        return ProcessIdentity.leadsSessionAndGroup(pid) && ProcessIdentity.environment(of: pid, contains: "LIFECYCLE_APP=\(name)")
    }
    var canPlaceInGroups: Bool { false }
    func prepareExternal(_ app: AppRuntime) throws(SystemError) -> AppCgroup? { nil }
    func gather(_ app: AppRuntime) {}
    func dropUnused(_ app: AppRuntime) {}

    func members(of app: AppRuntime) -> [pid_t] {
        guard let pid = app.pid else { return [] }
        return orphans.processGroup(of: pid)
    }

    func processGroup(of app: AppRuntime) -> [pid_t] { members(of: app) }
    func reachesBeyondProcessGroup(_ app: AppRuntime) -> Bool { false }
    func contains(_ pid: pid_t, in app: AppRuntime) -> Bool { false }
    func freezer(of app: AppRuntime) -> FreezerKind? { nil }
    var canFreeze: Bool { false }
    func freeze(_ app: AppRuntime) throws(SystemError) { throw SystemError(operation: "freeze \(app.name)", errno: EOPNOTSUPP) }
    func thaw(_ app: AppRuntime) throws(SystemError) {}
    func thawIfFrozen(_ app: AppRuntime) {}
    func isFrozen(_ app: AppRuntime) -> Bool { false }

    func apply(_ priority: PriorityClass, previous: PriorityClass?, to app: AppRuntime, leader: pid_t, members: [pid_t]) -> PriorityClass? {
        let failures = ProcessPriority.apply(priority, from: previous, processGroup: leader, members: members, useNice: true,
                                             kept: kept)
        for failure in failures { Log.debug("\(app.name): \(failure), ignoring") }
        return priority
    }

    /// The group's kept files go with the next sweep of the gone processes' files (`forgetProcesses`): finding the
    /// group's members would read every process on the machine at each exit.
    func killAll(_ app: AppRuntime, leader: pid_t) {
        kill(-leader, SIGKILL)
        kept.forgetProcesses([leader])
    }
    func remove(_ app: AppRuntime) {}
    func displayPath(of app: AppRuntime) -> String? { nil }
    func leftoverNames() -> Set<String> { [] }
    func leftover(_ name: String) -> AppCgroup? { nil }
    func removeAll() {}
}

/// Apps in cgroups under the daemon's group (`CgroupSupport`): weights, the freezer, and a kill of the whole
/// group. An app without a cgroup (one could not be made, or an external app stopped by its process group) is
/// placed as by `ProcessGroupPlacement`.
final class CgroupPlacement: ProcessPlacement {
    private let cgroups: CgroupSupport
    /// The weight, cgroup.procs and `oom_score_adj` files of the apps, kept open between transitions.
    private let kept = KeptKernelFiles()
    private lazy var processGroups = ProcessGroupPlacement(kept: kept)

    init(_ cgroups: CgroupSupport) {
        self.cgroups = cgroups
    }

    func prepareLaunch(_ app: AppRuntime) -> [String] {
        if app.cgroup == nil {
            do {
                app.cgroup = try cgroups.makeAppCgroup(app: app.name)
            } catch {
                Log.warning("Failed to create the cgroup of \(app.name): \(error); using its process group alone")
            }
        }
        // The child joins the cgroup before it execs, while this daemon waits for that exec (CLONE_VFORK): in a
        // cgroup left frozen (a frozen app killed by jetsam, someone else's freeze) it would freeze there and the
        // daemon with it. A group made just now cannot be frozen; any other is thawed first.
        if app.cgroup?.isNew == true {
            app.cgroup?.isNew = false
        } else {
            thawIfFrozen(app)
        }
        return app.cgroup?.procsFiles ?? []
    }

    func adopt(_ app: AppRuntime) {
        if !app.usesProcessGroupAlone { app.cgroup = try? cgroups.makeAppCgroup(app: app.name) }
    }

    /// An app whose cgroup is left from the previous daemon is taken back only with a process in it; one without
    /// (the previous daemon could not make it, or the app is stopped by its process group alone) as without cgroups.
    func isOwnProcess(_ pid: pid_t, of name: String, processGroupAlone: Bool, externalUser: uid_t?) -> Bool {
        if !processGroupAlone, leftoverNames().contains(name), let cgroup = leftover(name) { return cgroup.pids().contains(pid) }
        return processGroups.isOwnProcess(pid, of: name, processGroupAlone: processGroupAlone, externalUser: externalUser)
    }

    var canPlaceInGroups: Bool { true }

    func prepareExternal(_ app: AppRuntime) throws(SystemError) -> AppCgroup? {
        let cgroup = try cgroups.makeAppCgroup(app: app.name)
        app.cgroup = cgroup
        return cgroup
    }

    /// Placed in one hierarchy (the one shown); the daemon's other ones (v1 cpu, freezer) follow here.
    func gather(_ app: AppRuntime) {
        guard let cgroup = app.cgroup else { return }
        for file in cgroup.procsFiles {
            for member in cgroup.pids() { try? writeKernelFile(file, String(member)) }
        }
    }

    func dropUnused(_ app: AppRuntime) {
        guard let cgroup = app.cgroup else { return }
        if cgroup.pids().isEmpty { _ = cgroup.remove() }
        app.cgroup = nil
    }

    func members(of app: AppRuntime) -> [pid_t] {
        if let cgroup = app.cgroup, app.pid != nil {
            let pids = cgroup.pids(kept: kept)
            if !pids.isEmpty { return pids }
        }
        return processGroups.members(of: app)
    }

    /// Taken from the app's cgroup (a getpgid per member) rather than from a scan of all of /proc, which costs
    /// tens of milliseconds with a thousand apps.
    func processGroup(of app: AppRuntime) -> [pid_t] {
        if let cgroup = app.cgroup, let pid = app.pid {
            let pids = cgroup.pids(kept: kept)
            if !pids.isEmpty { return pids.filter { getpgid($0) == pid } }
        }
        return processGroups.processGroup(of: app)
    }

    func reachesBeyondProcessGroup(_ app: AppRuntime) -> Bool { app.cgroup != nil }
    func contains(_ pid: pid_t, in app: AppRuntime) -> Bool { app.cgroup?.pids().contains(pid) == true }
    func freezer(of app: AppRuntime) -> FreezerKind? { app.cgroup?.freezer }
    var canFreeze: Bool { cgroups.canFreeze }

    func freeze(_ app: AppRuntime) throws(SystemError) {
        guard let cgroup = app.cgroup else { return try processGroups.freeze(app) }
        try cgroup.freeze()
    }

    func thaw(_ app: AppRuntime) throws(SystemError) { try app.cgroup?.thaw() }

    func thawIfFrozen(_ app: AppRuntime) {
        guard let cgroup = app.cgroup, cgroup.isFreezing() else { return }
        do { try cgroup.thaw() } catch { Log.warning("\(app.name): Failed to thaw its cgroup: \(error)") }
    }

    func isFrozen(_ app: AppRuntime) -> Bool { app.cgroup?.isFrozen() ?? false }

    func apply(_ priority: PriorityClass, previous: PriorityClass?, to app: AppRuntime, leader: pid_t, members: [pid_t]) -> PriorityClass? {
        guard let cgroup = app.cgroup else { return processGroups.apply(priority, previous: previous, to: app, leader: leader, members: members) }
        var previous = previous
        var applied: PriorityClass? = priority
        var cpuByCgroup = false
        do {
            // Background and suspended weigh the same (PriorityClass.weightClass): between them nothing is written.
            if previous?.weightClass != priority.weightClass { try cgroup.setPriority(priority, kept: kept) }
            cpuByCgroup = cgroup.controlsCPU
        } catch {
            Log.debug("\(app.name): Failed to set the cgroup priority: \(error)")
            // Nice instead, now and (nothing known to be applied) at the next transition too.
            previous = nil
            applied = nil
        }
        if previous?.weightClass != priority.weightClass {
            do { try cgroup.protectMemory(priority, app.config.memoryLow, kept: kept) } catch {
                Log.debug("\(app.name): Failed to set its memory protection: \(error), ignoring")
            }
        }
        let failures = ProcessPriority.apply(priority, from: previous, processGroup: leader, members: members,
                                             useNice: !cpuByCgroup, kept: kept)
        for failure in failures { Log.debug("\(app.name): \(failure), ignoring") }
        return applied
    }

    /// A v1-frozen task is unkillable until thawed; after SIGKILL no code of the app runs anyway.
    func killAll(_ app: AppRuntime, leader: pid_t) {
        if let cgroup = app.cgroup {
            kept.forgetProcesses(cgroup.pids())
            thawIfFrozen(app)
            cgroup.killAll()
        }
        processGroups.killAll(app, leader: leader)
    }

    /// Called once the app runs no more (it is removed, or the daemon stops), when what was killed last may not
    /// have been reaped yet: a short wait for that, so that no empty group stays behind.
    func remove(_ app: AppRuntime) {
        guard let cgroup = app.cgroup else { return }
        for path in [cgroup.unifiedPath, cgroup.cpuPath, cgroup.freezerPath].compactMap({ $0 }) { kept.forget(under: path) }
        if !cgroup.removeOnceEmpty(within: Self.removalWait) {
            Log.warning("\(app.name): Failed to remove its cgroup \(cgroup.displayPath): processes are still in it")
        }
        app.cgroup = nil
    }

    /// How long a removal waits for killed processes to be reaped.
    static let removalWait: Duration = .seconds(1)
    func displayPath(of app: AppRuntime) -> String? { app.cgroup?.displayPath }
    func leftoverNames() -> Set<String> { cgroups.existingAppCgroupNames() }
    func leftover(_ name: String) -> AppCgroup? { try? cgroups.makeAppCgroup(app: name) }
    func removeAll() {
        kept.forget(under: "/")
        cgroups.removeParent()
    }
}
