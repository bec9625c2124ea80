import Glibc
import LifecycleModel

/// Apps in transient scope units of systemd's (`ScopeUnits`), where systemd is PID 1 and the daemon runs as one
/// of its services. systemd owns each app's cgroup: the daemon asks over the bus to start the scope with the app's
/// process, to set its weights and to freeze and thaw it, and reads the scope's cgroup.procs and cgroup.events
/// itself. The daemon's own service cgroup stays a leaf that holds the daemon alone, so systemd can always start
/// the next daemon there after a crash, and a crash or restart of the daemon never touches an app.
///
/// A child is spawned in the daemon's cgroup, held before execve (`holdsLaunch`), and its scope started with the pid
/// it reports. It runs its program only once the kernel shows it in the scope (`sweep`), as `systemd-run --scope`
/// does: cgroup2 charges each page to the cgroup its process was in when it touched it, and never moves the charge,
/// so an app that ran first would stay charged to the daemon's service. When the scope fails, or never holds the
/// child within the sweep's looks, the child runs where it is, placed by its process group alone.
final class ScopePlacement: ProcessPlacement {
    let bus: SystemdManagerBus
    private let loop: EventLoop
    /// Where the manager's units have their cgroups: the cgroup2 mount, then a user manager's own cgroup.
    private let mount: String
    private let kept = KeptKernelFiles()
    private lazy var processGroups = ProcessGroupPlacement(kept: kept)
    /// The leader each app's scope was started for: a new process needs a new scope.
    private var started: [String: pid_t] = [:]
    /// Apps whose scope systemd has not filled yet, looked at again until their leader is there.
    private var sweeps: [String: PendingSweep] = [:]
    /// How often, and how far apart, the sweep looks for the scope's cgroup before it gives up.
    static let sweepTries = 100
    static let sweepInterval: Duration = .milliseconds(20)

    init(bus: SystemdManagerBus, loop: EventLoop, mount: String = "/sys/fs/cgroup") {
        self.bus = bus
        self.loop = loop
        self.mount = mount
    }

    /// The scope placement where it can serve, else nil and why not (for the log): systemd is PID 1 and the daemon
    /// one of its services (of systemd's, or as a user's service of that user's manager) on a pure cgroup2 host,
    /// and the manager answers on its private socket with a version that has FreezeUnit (246).
    static func make(loop: EventLoop, environment: [String: String], mount: String = "/sys/fs/cgroup") -> (ScopePlacement?, String) {
        if environment["LIFECYCLED_PLACEMENT"] == "cgroupfs" { return (nil, "LIFECYCLED_PLACEMENT=cgroupfs") }
        guard access("/run/systemd/system", F_OK) == 0 else { return (nil, "systemd is not PID 1") }
        guard environment["INVOCATION_ID"] != nil else { return (nil, "not started as a systemd service (no INVOCATION_ID)") }
        guard FilesystemKind(statfsOf: mount) == .cgroup2 else { return (nil, "\(mount) is not a pure cgroup2 hierarchy") }
        let own = (try? readKernelFile("/proc/self/cgroup")) ?? ""
        guard let root = ScopeUnits.managerRoot(procSelfCgroup: own, euid: geteuid()) else {
            return (nil, "not root, and not in a user's service manager (no user@UID.service in /proc/self/cgroup)")
        }
        do {
            let bus = try SystemdManagerBus.connect(loop: loop, environment: environment)
            guard bus.version >= 246 else { return (nil, "systemd \(bus.version) has no FreezeUnit (246 and later)") }
            return (ScopePlacement(bus: bus, loop: loop, mount: mount + root), "systemd \(bus.version) on \(bus.name)")
        } catch {
            return (nil, "\(error)")
        }
    }

    /// Lines for the log and `lifectl status`, in place of the cgroupfs layout's.
    var mechanisms: [String] {
        let (fg, bg) = (PriorityClass.foreground, PriorityClass.background)
        return ["app cgroups: systemd scopes \(ScopeUnits.prefix)NAME\(ScopeUnits.suffix) in \(ScopeUnits.slice) (systemd \(bus.version))",
                "background priority: CPUWeight= and IOWeight= \(fg.cgroupWeight) → \(bg.cgroupWeight), kept while suspended",
                "foreground memory protection: MemoryLow= (the app's MemoryLow=), none in the background or suspended",
                "suspend (freezer): FreezeUnit/ThawUnit"]
    }

    private func scopeCgroup(_ name: String) -> AppCgroup {
        var files = AppCgroup.Files(unifiedPath: nil, cpuPath: nil)
        files.hasFreeze = true
        return AppCgroup(app: name, unifiedPath: ScopeUnits.cgroupPath(app: name, mount: mount), cpuPath: nil, freezerPath: nil,
                         files: files)
    }

    // MARK: Launch and adoption

    /// The child starts in the daemon's cgroup (no files to join); its scope is started once its pid is known
    /// (`began`).
    func prepareLaunch(_ app: AppRuntime) -> [String] {
        thawIfFrozen(app)
        return []
    }

    /// Every launched child waits for its scope but an external app's (which the daemon does not launch).
    func holdsLaunch(_ app: AppRuntime) -> Bool { !app.usesProcessGroupAlone }

    /// A new process of the app gets a scope of its own, started now; one already in the app's scope (re-adopted
    /// after a restart of the daemon) keeps it. An external app stopped by its process group alone gets none.
    func began(_ app: AppRuntime) {
        guard let leader = app.pid else { return }
        guard started[app.name] != leader, !app.usesProcessGroupAlone else {
            app.releaseLaunch(of: leader)
            return
        }
        if let scope = app.cgroup, scope.pids().contains(leader) {
            started[app.name] = leader
            app.releaseLaunch(of: leader)
        } else {
            startScope(app, leader: leader)
        }
    }

    private func startScope(_ app: AppRuntime, leader: pid_t) {
        let name = app.name, unit = ScopeUnits.unitName(app: name)
        started[name] = leader
        app.cgroup = scopeCgroup(name)
        bus.startTransientUnit(unit, properties: UnitProperty.scope(app: name, pid: leader)) { [weak self] error, errorName in
            guard let self else { return }
            if errorName == "org.freedesktop.systemd1.UnitExists" {
                // The scope of an earlier process of the app still holds something (a child that outlived it).
                self.bus.attachProcesses(unit, pids: [leader]) { error, _ in
                    if let error { Log.warning("\(name): Failed to move pid \(leader) into \(unit): \(error)") }
                }
            } else if errorName == SystemdManagerBus.noReply {
                // No answer is not a refusal: systemd carries out one connection's calls in order, so a late start
                // still comes before the weights and freezes sent after it. The kernel says whether the scope came:
                // the sweep waits for the leader in it as long again, and gives the scope up only if it never does.
                Log.notice("\(name): systemd did not answer the start of its scope \(unit) in time (\(error ?? "")); waiting for the process to be in it")
                self.sweep(app, leader: leader, tries: self.unansweredSweepTries, unanswered: true)
                return
            } else if let error {
                Log.warning("\(name): Failed to start its scope \(unit): \(error); using its process group alone")
                self.giveUpScope(app, leader: leader)
                return
            }
            self.sweep(app, leader: leader, tries: Self.sweepTries)
        }
    }

    /// How many looks for the leader a start that systemd did not answer gets: as long again as the call waited.
    private var unansweredSweepTries: Int {
        max(Self.sweepTries, Int(bus.callTimeout / Self.sweepInterval))
    }

    /// The app's process stays outside any scope: it is placed by its process group alone.
    private func giveUpScope(_ app: AppRuntime, leader: pid_t) {
        app.releaseLaunch(of: leader)
        guard started[app.name] == leader else { return }
        started[app.name] = nil
        sweeps[app.name] = nil
        app.cgroup = nil
    }

    /// Lets the held leader run once the kernel shows it in the scope, and moves into the scope what an app that
    /// was not held (re-adopted, or attached) forked before systemd moved its leader: the rest of its process group.
    /// `unanswered`: systemd did not answer the start, so a leader that never shows up in the scope means there is
    /// none.
    private func sweep(_ app: AppRuntime, leader: pid_t, tries: Int, unanswered: Bool = false) {
        let name = app.name
        guard started[name] == leader, app.pid == leader, let cgroup = app.cgroup else {
            app.releaseLaunch(of: leader)
            return
        }
        let inside = Set(cgroup.pids())
        guard inside.contains(leader) else {
            // systemd answers before its job has moved the process: look again shortly.
            guard tries > 0 else {
                if unanswered {
                    Log.warning("\(name): its scope \(ScopeUnits.unitName(app: name)) never held its process; using its process group alone")
                    giveUpScope(app, leader: leader)
                } else {
                    Log.warning("\(name): its scope \(ScopeUnits.unitName(app: name)) does not hold its process yet; letting it run where it is")
                }
                app.releaseLaunch(of: leader)
                return
            }
            let pending = sweeps[name].flatMap { $0.leader == leader ? $0 : nil } ?? PendingSweep(app: app, leader: leader)
            pending.tries = tries - 1
            pending.unanswered = unanswered
            if pending.timer == nil {
                pending.timer = try? LoopTimer(loop: loop) { [weak self, weak pending] in
                    guard let self, let pending, let app = pending.app else { return }
                    self.sweep(app, leader: pending.leader, tries: pending.tries, unanswered: pending.unanswered)
                }
            }
            guard let timer = pending.timer else {
                // No look again: a held child is not left waiting for one.
                app.releaseLaunch(of: leader)
                return
            }
            sweeps[name] = pending
            timer.arm(after: Self.sweepInterval)
            return
        }
        sweeps[name] = nil
        // A child held until now has forked nothing yet.
        if app.releaseLaunch(of: leader) { return }
        let outside = ProcessTable.members(ofProcessGroup: leader).filter { !inside.contains($0) }
        guard !outside.isEmpty else { return }
        bus.attachProcesses(ScopeUnits.unitName(app: name), pids: outside) { error, _ in
            if let error { Log.warning("\(name): Failed to move its processes \(outside) into its scope: \(error)") }
        }
    }

    /// The scope outlived the previous daemon: its cgroup is the app's place. The first `apply` finds the process
    /// there and starts no new scope.
    func adopt(_ app: AppRuntime) {
        if let scope = leftover(app.name) { app.cgroup = scope }
    }

    /// A process a state file names is the app's when it is in the app's scope; an app whose scope is gone (or was
    /// never made) is judged as without cgroups.
    func isOwnProcess(_ pid: pid_t, of name: String, processGroupAlone: Bool, externalUser: uid_t?) -> Bool {
        if let scope = leftover(name) { return scope.pids().contains(pid) }
        return processGroups.isOwnProcess(pid, of: name, processGroupAlone: processGroupAlone, externalUser: externalUser)
    }

    /// `ExternalFrom=cgroup` groups are the daemon's own cgroupfs groups, which a scope placement does not make.
    var canPlaceInGroups: Bool { false }
    func prepareExternal(_ app: AppRuntime) throws(SystemError) -> AppCgroup? { nil }
    func gather(_ app: AppRuntime) {}
    func dropUnused(_ app: AppRuntime) { app.cgroup = nil }

    // MARK: Members

    func members(of app: AppRuntime) -> [pid_t] {
        if let cgroup = app.cgroup, app.pid != nil {
            let pids = cgroup.pids(kept: kept)
            if !pids.isEmpty { return pids }
        }
        return processGroups.members(of: app)
    }

    func processGroup(of app: AppRuntime) -> [pid_t] {
        guard let pid = app.pid else { return [] }
        return members(of: app).filter { getpgid($0) == pid }
    }

    func reachesBeyondProcessGroup(_ app: AppRuntime) -> Bool { app.cgroup != nil }
    func contains(_ pid: pid_t, in app: AppRuntime) -> Bool { app.cgroup?.pids().contains(pid) == true }

    // MARK: Freezer and priority

    func freezer(of app: AppRuntime) -> FreezerKind? { app.cgroup == nil ? nil : .cgroup2 }
    var canFreeze: Bool { true }

    func freeze(_ app: AppRuntime) throws(SystemError) {
        guard app.cgroup != nil else { return try processGroups.freeze(app) }
        freezeUnit(app, freeze: true)
    }

    func thaw(_ app: AppRuntime) throws(SystemError) {
        guard app.cgroup != nil else { return }
        freezeUnit(app, freeze: false)
    }

    private func freezeUnit(_ app: AppRuntime, freeze: Bool) {
        let name = app.name
        bus.freezeUnit(ScopeUnits.unitName(app: name), freeze: freeze) { error, _ in
            if let error { Log.warning("\(name): Failed to \(freeze ? "freeze" : "thaw") its scope: \(error)") }
        }
    }

    func thawIfFrozen(_ app: AppRuntime) {
        guard let cgroup = app.cgroup, cgroup.isFreezing() else { return }
        freezeUnit(app, freeze: false)
    }

    func isFrozen(_ app: AppRuntime) -> Bool { app.cgroup?.isFrozen() ?? false }

    /// Each change of weights (and of memory protection with them) is one SetUnitProperties, runtime only (a unit
    /// file of the scope would outlive it).
    /// `oom_score_adj` is per process, as elsewhere.
    func apply(_ priority: PriorityClass, previous: PriorityClass?, to app: AppRuntime, leader: pid_t, members: [pid_t]) -> PriorityClass? {
        if app.cgroup != nil && previous?.weightClass != priority.weightClass {
            let name = app.name
            let properties = UnitProperty.weights(priority, memoryLow: app.config.memoryLow)
            bus.setUnitProperties(ScopeUnits.unitName(app: name), properties) { error, _ in
                if let error { Log.debug("\(name): Failed to set its scope's weights and memory protection: \(error)") }
            }
        }
        let failures = ProcessPriority.apply(priority, from: previous, processGroup: leader, members: members,
                                             useNice: app.cgroup == nil, kept: kept)
        for failure in failures { Log.debug("\(app.name): \(failure), ignoring") }
        return priority
    }

    // MARK: Ends

    /// cgroup2 kills frozen processes too: no thaw is needed first.
    func killAll(_ app: AppRuntime, leader: pid_t) {
        _ = app.cgroup?.killAll()
        processGroups.killAll(app, leader: leader)
    }

    /// systemd collects an empty scope itself (`CollectMode=`).
    func remove(_ app: AppRuntime) {
        if let path = app.cgroup?.unifiedPath { kept.forget(under: path) }
        started[app.name] = nil
        sweeps[app.name] = nil
    }

    func displayPath(of app: AppRuntime) -> String? {
        app.cgroup == nil ? nil : ScopeUnits.unitName(app: app.name)
    }

    func leftoverNames() -> Set<String> {
        Set(subdirectoryNames(of: mount + "/" + ScopeUnits.slice).compactMap(ScopeUnits.appName(unit:)))
    }

    func leftover(_ name: String) -> AppCgroup? {
        let cgroup = scopeCgroup(name)
        return fileExists(cgroup.unifiedPath! + "/cgroup.procs") ? cgroup : nil
    }

    func removeAll() { kept.forget(under: "/") }
}

/// An app whose scope systemd has not filled yet: its leader, the looks left, whether systemd answered the start,
/// and the timer of the next one.
private final class PendingSweep {
    weak var app: AppRuntime?
    let leader: pid_t
    var tries = 0
    var unanswered = false
    var timer: LoopTimer?

    init(app: AppRuntime, leader: pid_t) {
        self.app = app
        self.leader = leader
    }
}

