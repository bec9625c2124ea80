import Glibc

/// `[Adopt] ScopeTrees=yes`: an adopted window's process tree goes into a transient scope of its own, which the
/// user's service manager makes as `systemd-run --user --scope` does (`PIDs=` the tree's members), in
/// `lifecycled.slice`. The kernel then keeps in the scope whatever its processes fork, a worker that double-forks
/// and calls setsid() included, and the scope is frozen through its own `cgroup.freeze`, as a launcher's adopted
/// scope is. A manager moves processes only of its own user, and only into its own units: a daemon that is a
/// user's service asks its own manager for its own user's processes; a daemon that runs as root asks the manager
/// of the user `[Adopt] User=` names (`UserManagerSocket`), for that user's processes only. The move is the one
/// change the daemon cannot give back (the manager cannot put processes back into another unit's cgroup): once
/// let go, the processes run on in the scope, which systemd collects when its last process exits.
final class TreeScopes {
    static let prefix = "lifecycled-adopted-"
    /// How long a daemon that runs as root waits before it looks for the user's manager again: the system service
    /// starts before the user logs in, and the user's manager starts and stops with the user's sessions.
    static let retryInterval: Duration = .seconds(10)
    /// What status says while the user's manager that was connected to is gone.
    static let gone = "the user's manager is gone; retrying"

    private let loop: EventLoop
    private let environment: [String: String]
    /// The scope placement's connection to the same manager, when there is one.
    private let shared: SystemdManagerBus?
    private var bus: SystemdManagerBus?
    /// The cgroup2 mount, and the manager's own cgroup below it (`…/user@UID.service`).
    private var mount = ""
    private var manager = ""
    /// The user whose processes go into scopes: the daemon's own, or `[Adopt] User=`'s for a daemon run as root.
    private var owner: uid_t?
    /// `[Adopt] User=` as configured, for a daemon run as root.
    private var user: String?
    /// `ScopeTrees=yes` with `Windows=yes`, as last applied.
    private var enabled = false
    /// Looks for the user's manager again while a daemon run as root has none (`retryInterval`).
    private var retry: LoopTimer?
    private let retryDelay: Duration
    /// Why trees stay trees, for status; nil while scopes are made.
    private(set) var unavailable: String? = "ScopeTrees=no"

    /// Where users' runtime directories are (`/run/user`; a test's directory in tests).
    private let runtimeRoot: String

    init(loop: EventLoop, environment: [String: String], shared: SystemdManagerBus?, runtimeRoot: String = "/run/user",
         retryInterval: Duration = TreeScopes.retryInterval) {
        self.loop = loop
        self.runtimeRoot = runtimeRoot
        retryDelay = retryInterval
        self.environment = environment
        self.shared = shared
    }

    /// At start and at every reload: `enabled` is `ScopeTrees=yes` with `Windows=yes`; `user` is `[Adopt] User=`.
    /// The manager is found and connected to the first time (a bounded wait, as at the daemon's start), and again
    /// where `User=` names another user; why not is logged once per change.
    func apply(enabled: Bool, user: String?) {
        self.enabled = enabled
        guard enabled else { retry?.cancel(); unavailable = "ScopeTrees=no"; return }
        if geteuid() == 0 && user != self.user {
            bus = nil
            self.user = user
        }
        guard bus == nil else { unavailable = nil; return }
        attempt()
    }

    private func attempt() {
        retry?.cancel()
        var reason = connect()
        if let found = reason, retries {
            reason = found + "; retrying"
            armRetry()
        }
        if let reason {
            if unavailable != reason { Log.notice("adopt: ScopeTrees=yes, but \(reason); adopted windows stay process trees") }
        } else {
            Log.info("adopt: adopted windows go into scopes of their own in \(manager)/\(ScopeUnits.slice)")
        }
        unavailable = reason
    }

    /// A daemon run as root with `[Adopt] User=` looks for that user's manager until it finds it, and again after the
    /// manager went: what it finds depends on the user's sessions, not on the config.
    private var retries: Bool { enabled && geteuid() == 0 && user.flatMap(ConfigLoader.systemUserID) != nil }

    private func armRetry() {
        if retry == nil {
            do {
                retry = try LoopTimer(loop: loop) { [unowned self] in
                    guard self.bus == nil, self.retries else { return }
                    self.attempt()
                }
            } catch {
                return Log.error("Failed to make the timer that looks for the user's manager again: \(error); only a reload looks again")
            }
        }
        retry?.arm(after: retryDelay)
    }

    /// The user's manager closed the connection (it exited with the user's last session, or re-executed): status
    /// says so at once, and the daemon looks for the manager again, on the whole check, as at the first connect.
    private func managerLeft(_ left: SystemdManagerBus) {
        // Not inside sd-bus's own callback: the bus that is dispatching goes with it.
        loop.afterCallback { [weak self] in
            guard let self, self.bus === left else { return }
            self.bus = nil
            Log.notice("adopt: the service manager of uid \(self.owner.map(String.init) ?? "?") went away; adopted windows stay process trees until it is back")
            self.unavailable = Self.gone
            self.armRetry()
        }
    }

    private func connect() -> String? {
        guard let mounted = AppSlice.unifiedMount(mountinfo: (try? readKernelFile("/proc/self/mountinfo")) ?? "") else {
            return "no cgroup2 hierarchy is mounted"
        }
        if geteuid() == 0 { return connectAsRoot(mount: mounted) }
        let own = (try? readKernelFile("/proc/self/cgroup")) ?? ""
        guard let found = ScopeUnits.managerRoot(procSelfCgroup: own, euid: geteuid()) else {
            return "lifecycled is no service of a user's service manager (no user@UID.service in /proc/self/cgroup)"
        }
        do {
            bus = try shared ?? SystemdManagerBus.connect(loop: loop, environment: environment)
        } catch {
            return "\(error)"
        }
        mount = mounted
        manager = found
        owner = geteuid()
        return nil
    }

    /// Root has no user's manager of its own: it connects to the manager of the user `[Adopt] User=` names, whose
    /// processes alone it moves, never through systemd's own connection (systemd's units are no user's).
    private func connectAsRoot(mount mounted: String) -> String? {
        guard let user else {
            return "lifecycled runs as root without [Adopt] User= (only a user's service manager moves that user's processes into a scope)"
        }
        guard let uid = ConfigLoader.systemUserID(user) else { return "[Adopt] User=\(user) is no user" }
        let path = UserManagerSocket.path(uid: uid, runtimeRoot: runtimeRoot)
        let connected: SystemdManagerBus
        do {
            connected = try SystemdManagerBus.connect(loop: loop, userManagerAt: path, uid: uid)
        } catch {
            return "\(error)"
        }
        connected.closed = { [unowned self, unowned connected] in self.managerLeft(connected) }
        bus = connected
        mount = mounted
        manager = connected.manager?.cgroup ?? ""
        owner = uid
        return nil
    }

    /// The scope for app `name`'s tree (`members`, led by `leader`), asked of the manager now, or nil where the tree
    /// stays as it is: no manager, a process of another user, or a leader already in a cgroup of its tree alone.
    /// A leader already in one of these scopes (left by a previous daemon) keeps it. The returned cgroup is the
    /// scope's as systemd will make it; the place holds the tree there once the leader shows in it.
    func scope(for name: String, leader: pid_t, members: [pid_t]) -> (unit: String, cgroup: AppCgroup)? {
        guard unavailable == nil, let bus, let uid = owner else { return nil }
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
