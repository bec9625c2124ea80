import Glibc

/// `[Adopt] ScopeTrees=yes`: an adopted window's process tree goes into a transient scope of its own, which the
/// user's service manager makes as `systemd-run --user --scope` does (`PIDs=` the tree's members), in
/// `lifecycled.slice`. The kernel then keeps in the scope whatever its processes fork, a worker that double-forks
/// and calls setsid() included, and the scope is frozen through its own `cgroup.freeze`, as a launcher's adopted
/// scope is. Only a daemon that is a user's service moves its own user's processes, through that user's manager:
/// a manager moves processes only of its own user, and only into its own units. The move is the one change the
/// daemon cannot give back (the manager cannot put processes back into another unit's cgroup): once let go, the
/// processes run on in the scope, which systemd collects when its last process exits.
final class TreeScopes {
    static let prefix = "lifecycled-adopted-"

    private let loop: EventLoop
    private let environment: [String: String]
    /// The scope placement's connection to the same manager, when there is one.
    private let shared: SystemdManagerBus?
    private var bus: SystemdManagerBus?
    /// The cgroup2 mount, and the manager's own cgroup below it (`…/user@UID.service`).
    private var mount = ""
    private var manager = ""
    /// Why trees stay trees, for status; nil while scopes are made.
    private(set) var unavailable: String? = "ScopeTrees=no"

    init(loop: EventLoop, environment: [String: String], shared: SystemdManagerBus?) {
        self.loop = loop
        self.environment = environment
        self.shared = shared
    }

    /// At start and at every reload: `enabled` is `ScopeTrees=yes` with `Windows=yes`. The manager is found and
    /// connected to the first time (a bounded wait, as at the daemon's start); why not is logged once per change.
    func apply(enabled: Bool) {
        guard enabled else { unavailable = "ScopeTrees=no"; return }
        guard bus == nil else { unavailable = nil; return }
        let reason = connect()
        if let reason {
            if unavailable != reason { Log.notice("adopt: ScopeTrees=yes, but \(reason); adopted windows stay process trees") }
        } else {
            Log.info("adopt: adopted windows go into scopes of their own in \(manager)/\(ScopeUnits.slice)")
        }
        unavailable = reason
    }

    private func connect() -> String? {
        guard geteuid() != 0 else {
            return "lifecycled runs as root (only a user's own service manager moves that user's processes into a scope)"
        }
        let own = (try? readKernelFile("/proc/self/cgroup")) ?? ""
        guard let found = ScopeUnits.managerRoot(procSelfCgroup: own, euid: geteuid()) else {
            return "lifecycled is no service of a user's service manager (no user@UID.service in /proc/self/cgroup)"
        }
        guard let mounted = AppSlice.unifiedMount(mountinfo: (try? readKernelFile("/proc/self/mountinfo")) ?? "") else {
            return "no cgroup2 hierarchy is mounted"
        }
        do {
            bus = try shared ?? SystemdManagerBus.connect(loop: loop, environment: environment)
        } catch {
            return "\(error)"
        }
        mount = mounted
        manager = found
        return nil
    }

    /// The scope for app `name`'s tree (`members`, led by `leader`), asked of the manager now, or nil where the tree
    /// stays as it is: no manager, a process of another user, or a leader already in a cgroup of its tree alone.
    /// A leader already in one of these scopes (left by a previous daemon) keeps it. The returned cgroup is the
    /// scope's as systemd will make it; the place holds the tree there once the leader shows in it.
    func scope(for name: String, leader: pid_t, members: [pid_t]) -> (unit: String, cgroup: AppCgroup)? {
        guard unavailable == nil, let bus else { return nil }
        let uid = geteuid()
        guard members.allSatisfy({ ProcessIdentity.realUID(of: $0).map { $0 == uid } ?? true }) else { return nil }
        guard let current = AppSlice.unifiedCgroup(procSelfCgroup: (try? readKernelFile("/proc/\(leader)/cgroup")) ?? "")
        else { return nil }
        let slice = manager + "/" + ScopeUnits.slice + "/"
        if current.hasPrefix(slice + Self.prefix), let unit = current.split(separator: "/").last {
            return (String(unit), cgroup(name, path: mount + current))
        }
        let inCgroup = AppCgroup(app: name, unifiedPath: mount + current, cpuPath: nil, freezerPath: nil).pids()
        if !inCgroup.isEmpty && Set(inCgroup).isSubset(of: members) { return nil }
        let unit = Self.prefix + ScopeUnits.escape(name) + "-\(leader).scope"
        let properties: [UnitProperty] = [
            .string("Description", "lifecycled: adopted app \(name), the process tree of \(leader)"),
            .string("Slice", ScopeUnits.slice),
            .pids("PIDs", members.map { UInt32(bitPattern: $0) }),
            .string("CollectMode", "inactive-or-failed"),
        ]
        bus.startTransientUnit(unit, properties: properties) { error, _ in
            if let error {
                Log.warning("\(name): Failed to start the scope \(unit) for its processes: \(error); it stays a process tree")
            } else {
                Log.info("\(name): its processes \(members.map(String.init).joined(separator: ", ")) are in the scope \(unit)")
            }
        }
        return (unit, cgroup(name, path: mount + slice + unit))
    }

    /// The scope's cgroup, with a freezer: systemd makes it after the call, so there is nothing to probe yet.
    private func cgroup(_ name: String, path: String) -> AppCgroup {
        var files = AppCgroup.Files(unifiedPath: nil, cpuPath: nil)
        files.hasFreeze = true
        return AppCgroup(app: name, unifiedPath: path, cpuPath: nil, freezerPath: nil, files: files)
    }
}
