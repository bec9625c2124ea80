import CSupport
import Glibc
import LifecycleModel

/// How the machine mounts cgroups.
public enum CgroupLayout: String, Sendable {
    /// cgroup2 only, at the mount root (most current distributions).
    case unified = "cgroup2"
    /// v1 controllers at the mount root, cgroup2 (with no or few controllers) at `unified`.
    case hybrid
    /// v1 only.
    case legacy = "v1"
    /// No usable cgroups: apps are supervised through their process group alone.
    case none
}

/// Which freezer suspends an app's cgroup.
public enum FreezerKind: String, Sendable {
    /// cgroup.freeze: frozen tasks show S in /proc, and fatal signals still get through.
    case cgroup2
    /// freezer.state: frozen tasks show D, and stay unkillable until thawed.
    case v1
}

/// What statfs says a path is; the input of the layout decision.
enum FilesystemKind: Sendable, Equatable {
    case cgroup2, cgroup1, tmpfs, other, missing

    init(statfsOf path: String) {
        var magic: UInt64 = 0
        guard cs_statfs_magic(path, &magic) == 0 else { self = .missing; return }
        switch magic {
        case cs_cgroup2_magic: self = .cgroup2
        case cs_cgroup1_magic: self = .cgroup1
        case cs_tmpfs_magic: self = .tmpfs
        default: self = .other
        }
    }
}

/// The cgroup mechanisms available to the daemon, found once at start-up, and the parent
/// groups under which every app gets its own `app-<name>` group.
///
/// Two arrangements:
/// - Delegated (a systemd service with `Delegate=yes` on cgroup2): the service's cgroup is ours.
///   The daemon moves into `<root>/supervisor/`, enables cpu, io and memory for the children, and
///   each app gets `<root>/app-<name>/` (`DelegatedSubtree`).
/// - Not delegated (started by hand, no `Delegate=yes`, hybrid or v1 hosts): a `lifecycled…`
///   group under the cgroup2 root or under our own group, plus v1 cpu and freezer groups where
///   those hierarchies exist; `fallbackReason` says why ("not delegated: …").
public struct CgroupSupport: Sendable {
    public var layout: CgroupLayout
    /// Why the arrangement is not the preferred one, for the log and `lifectl status`: why the
    /// layout is `none` although cgroups are mounted, or why the daemon is "not delegated: …".
    public var fallbackReason: String?
    /// Whether the daemon owns a delegated subtree; `.notDelegated` says why not.
    public var delegation: CgroupDelegation = .notDelegated(reason: "no cgroups")
    /// The cgroup2 parent group, e.g. /sys/fs/cgroup/unified/lifecycled, or the delegated root.
    var unifiedParent: String?
    /// The v1 parents, e.g. /sys/fs/cgroup/cpu/lifecycled.
    var cpuParent: String?
    var freezerParent: String?
    /// Whether app groups under `unifiedParent` get cpu.weight / io.weight / cgroup.freeze.
    var unifiedCPU = false
    var unifiedIO = false
    var unifiedFreezer = false
    /// Whether app groups under `unifiedParent` get memory.low (the memory controller is enabled for them).
    var unifiedMemory = false
    /// The controllers enabled for the app groups of a delegated subtree, and why some are not.
    var delegatedControllers: Set<String> = []
    /// The files of an app group, probed once (`AppCgroup.Files`).
    let appGroupFiles = AppGroupFilesCache()
    var controllerFailure: SystemError?

    init(layout: CgroupLayout, fallbackReason: String? = nil) {
        self.layout = layout
        self.fallbackReason = fallbackReason
    }

    /// The delegated subtree, when there is one.
    var delegatedSubtree: DelegatedSubtree? {
        if case .delegated(let root) = delegation { DelegatedSubtree(root: root) } else { nil }
    }

    /// Whether a cgroup weighs the CPU for background apps; without it, use nice.
    public var hasCPUControl: Bool { unifiedCPU || cpuParent != nil }

    public var canFreeze: Bool { unifiedFreezer || freezerParent != nil }

    /// Human lines for the log and `lifectl status`.
    public var mechanisms: [String] {
        var lines: [String] = []
        if let subtree = delegatedSubtree {
            lines.append("app cgroups under: cgroup2 \(subtree.root) (delegated; lifecycled runs in \(subtree.supervisorLeaf))")
            var controllers = "cgroup2 controllers for apps: "
                + (delegatedControllers.isEmpty ? "none" : delegatedControllers.sorted().joined(separator: " "))
            if let controllerFailure { controllers += " (\(controllerFailure), ignoring)" }
            lines.append(controllers)
        } else {
            var groups: [String] = []
            if let unifiedParent { groups.append("cgroup2 \(unifiedParent)") }
            if let cpuParent { groups.append("v1 cpu \(cpuParent)") }
            if let freezerParent { groups.append("v1 freezer \(freezerParent)") }
            if !groups.isEmpty { lines.append("app cgroups under: " + groups.joined(separator: ", ")) }
        }

        let (fg, bg, sus) = (PriorityClass.foreground, PriorityClass.background, PriorityClass.suspended)
        // Suspended apps keep the background weights (PriorityClass.weightClass): a stopped process runs no code.
        if unifiedCPU {
            lines.append("background priority: cgroup2 cpu.weight \(fg.cgroupWeight) → \(bg.cgroupWeight), kept while suspended")
        } else if cpuParent != nil {
            lines.append("background priority: cgroup v1 cpu.shares \(fg.cpuShares) → \(bg.cpuShares), kept while suspended")
        } else {
            lines.append("background priority: nice \(fg.niceValue) → \(bg.niceValue), kept while suspended (no cgroup cpu control)")
        }
        if unifiedIO {
            lines.append("background io priority: cgroup2 io.weight \(fg.cgroupWeight) → \(bg.cgroupWeight), kept while suspended")
        }
        if unifiedMemory {
            lines.append("foreground memory protection: cgroup2 memory.low (the app's MemoryLow=), none in the background or suspended")
        }
        if unifiedFreezer {
            lines.append("suspend (freezer): cgroup2 cgroup.freeze")
        } else if freezerParent != nil {
            lines.append("suspend (freezer): cgroup v1 freezer.state")
        } else {
            lines.append("suspend: SIGSTOP to the process group (no cgroup freezer)")
        }
        lines.append("oom_score_adj: \(fg.oomScoreAdj) / \(bg.oomScoreAdj) / \(sus.oomScoreAdj)")
        return lines
    }

    // MARK: Detection

    /// Finds the layout and sets up the groups apps go under. Never fails: if the groups cannot
    /// be created (not root, read-only), the layout is `none` with `fallbackReason`.
    ///
    /// `delegated`: nil decides from what the process sees (`CgroupDelegation.decide`: cgroup2
    /// unified, a group of our own, `INVOCATION_ID`, and systemd's delegate xattr on the group);
    /// true or false forces the decision. When delegated, this moves the calling process into
    /// `<own group>/supervisor/` and `groupName` is not used (each service has its own subtree,
    /// so two daemons cannot collide). If taking the subtree fails, the daemon falls back to the
    /// non-delegated groups and `fallbackReason` says why.
    /// `v1FreezerBesideCgroup2`: also make the v1 freezer groups where cgroup2 freezes (tests of the v1 freezer
    /// on a hybrid host); the daemon never does.
    public static func detect(
        mountRoot: String = "/sys/fs/cgroup",
        selfCgroupFile: String = "/proc/self/cgroup",
        groupName: String = "lifecycled",
        delegated: Bool? = nil,
        v1FreezerBesideCgroup2: Bool = false
    ) -> CgroupSupport {
        detect(mountRoot: mountRoot, selfCgroupFile: selfCgroupFile, groupName: groupName, delegated: delegated,
               daemonPID: getpid(), invocationID: getenv("INVOCATION_ID").map { String(cString: $0) },
               v1FreezerBesideCgroup2: v1FreezerBesideCgroup2)
    }

    /// `detect` with the process to move into `supervisor/` (tests pass a helper's pid, and
    /// its /proc/PID/cgroup as `selfCgroupFile`) and the environment's `INVOCATION_ID`.
    static func detect(
        mountRoot: String, selfCgroupFile: String, groupName: String, delegated: Bool?,
        daemonPID: pid_t, invocationID: String?, v1FreezerBesideCgroup2: Bool = false
    ) -> CgroupSupport {
        let cpuMount = mountRoot + "/cpu"
        let freezerMount = mountRoot + "/freezer"
        let cpuKind = FilesystemKind(statfsOf: cpuMount)
        let freezerKind = FilesystemKind(statfsOf: freezerMount)
        let layout = decideLayout(
            root: FilesystemKind(statfsOf: mountRoot), unified: FilesystemKind(statfsOf: mountRoot + "/unified"),
            cpu: cpuKind, freezer: freezerKind)
        guard layout != .none else { return CgroupSupport(layout: .none) }

        let unifiedMount: String? = switch layout {
        case .unified: mountRoot
        case .hybrid: mountRoot + "/unified"
        case .legacy, .none: nil
        }
        var ownPath: String?
        if unifiedMount != nil {
            do {
                ownPath = try ownUnifiedPath(selfCgroupFile)
            } catch {
                return CgroupSupport(layout: .none, fallbackReason: error.description)
            }
        }

        var delegation = CgroupDelegation.decide(
            forced: delegated, layout: layout, unifiedMount: unifiedMount, ownPath: ownPath,
            invocationID: invocationID, isMarked: isMarkedDelegated)
        if case .delegated(let root) = delegation {
            do {
                return try takeDelegated(DelegatedSubtree(root: root), layout: layout, daemonPID: daemonPID)
            } catch {
                delegation = .notDelegated(reason: error.description)
            }
        }

        var support = CgroupSupport(layout: layout)
        var created: [String] = []
        do throws(SystemError) {
            if let unifiedMount, let ownPath {
                try support.setUpUnified(mount: unifiedMount, ownPath: ownPath, groupName: groupName, created: &created)
            }
            // v1 groups beside cgroup2 on hybrid and v1 hosts (never on unified ones). On a hybrid host whose v1
            // hierarchies are read-only (a container), the cgroup2 part alone still serves: skip them, say why.
            var v1Failures: [String] = []
            // No v1 freezer group where cgroup2 freezes (kernel 5.2+): the app groups' cgroup.freeze is the one used,
            // and a third group per app only cost its launch a mkdir, an open and a migration, and its exit an rmdir.
            for (kind, mount, keyPath) in [(cpuKind, cpuMount, \CgroupSupport.cpuParent), (freezerKind, freezerMount, \CgroupSupport.freezerParent)]
            where layout != .unified && kind == .cgroup1 && !(keyPath == \CgroupSupport.freezerParent && support.unifiedFreezer && !v1FreezerBesideCgroup2) {
                do {
                    support[keyPath: keyPath] = try makeParent(mount + "/" + groupName, created: &created)
                } catch {
                    guard layout == .hybrid, support.unifiedParent != nil else { throw error }
                    v1Failures.append(error.description)
                }
            }
            if !v1Failures.isEmpty {
                support.fallbackReason = "v1 groups skipped (" + v1Failures.joined(separator: "; ") + ")"
            }
        } catch {
            for path in created.reversed() { rmdir(path) }
            return CgroupSupport(layout: .none, fallbackReason: error.description)
        }
        if case .notDelegated(let reason) = delegation {
            support.fallbackReason = ["not delegated: " + reason, support.fallbackReason].compactMap { $0 }.joined(separator: "; ")
        }
        support.delegation = delegation
        return support
    }

    /// Takes over a delegated subtree: the daemon (`daemonPID`) into `supervisor/` first, then
    /// the controllers for the children (best effort: without them apps still get freeze and
    /// kill, and background priority falls back to nice). Writes nothing of the root but its
    /// cgroup.subtree_control (and, by moving the daemon out, its cgroup.procs).
    static func takeDelegated(_ subtree: DelegatedSubtree, layout: CgroupLayout, daemonPID: pid_t) throws(SystemError) -> CgroupSupport {
        try subtree.moveIntoLeaf(pid: daemonPID)
        let (enabled, failure) = subtree.enableControllers()
        var support = CgroupSupport(layout: layout)
        support.delegation = .delegated(root: subtree.root)
        support.unifiedParent = subtree.root
        support.delegatedControllers = enabled
        support.controllerFailure = failure
        support.unifiedCPU = enabled.contains("cpu")
        support.unifiedIO = enabled.contains("io")
        support.unifiedMemory = enabled.contains("memory")
        // Reading is allowed everywhere: a non-root cgroup2 group has cgroup.freeze, and so will
        // every app group below it.
        support.unifiedFreezer = fileExists(subtree.root + "/cgroup.freeze")
        return support
    }

    /// The layout from what statfs reports for the mount root, `unified`, `cpu` and `freezer`
    /// below it (docs/PLATFORM.md, "cgroups").
    static func decideLayout(root: FilesystemKind, unified: FilesystemKind, cpu: FilesystemKind, freezer: FilesystemKind) -> CgroupLayout {
        if root == .cgroup2 { return .unified }
        if root == .tmpfs && unified == .cgroup2 { return .hybrid }
        if cpu == .cgroup1 || freezer == .cgroup1 { return .legacy }
        return .none
    }

    /// Our own cgroup2 path: the `0::` line of /proc/self/cgroup.
    static func unifiedPath(inProcSelfCgroup text: String) -> String? {
        for line in text.split(separator: "\n") where line.hasPrefix("0::") {
            return String(line.dropFirst(3))
        }
        return nil
    }

    private static func ownUnifiedPath(_ selfCgroupFile: String) throws(SystemError) -> String {
        guard let own = unifiedPath(inProcSelfCgroup: try readKernelFile(selfCgroupFile)) else {
            throw SystemError(operation: "find our cgroup2 group in \(selfCgroupFile) (no 0:: line)", errno: ENOENT)
        }
        return own
    }

    private mutating func setUpUnified(mount: String, ownPath own: String, groupName: String, created: inout [String]) throws(SystemError) {
        // At the root we own the tree. Inside someone's group that did not delegate to us (a
        // systemd service without Delegate=yes), create ours as a child and do not move: a group
        // holding processes cannot enable controllers for its children (no internal processes
        // rule), so weights need delegation.
        let ownDirectory = own == "/" ? mount : mount + own
        let parent = try Self.makeParent(ownDirectory + "/" + groupName, created: &created)
        if own == "/" { _ = enableSubtreeControllers(in: mount, wanted: ["cpu", "io", "memory"]) }
        // Best effort: a controller bound to a v1 hierarchy (hybrid) or missing from the parent's
        // cgroup.controllers cannot be enabled, and then weights and memory protection are simply not available.
        _ = enableSubtreeControllers(in: parent, wanted: ["cpu", "io", "memory"])
        unifiedParent = parent
        let delegated = cgroupFileWords(parent + "/cgroup.subtree_control")
        unifiedCPU = delegated.contains("cpu")
        unifiedIO = delegated.contains("io")
        unifiedMemory = delegated.contains("memory")
        // The root group has no cgroup.freeze; our parent is never the root.
        unifiedFreezer = fileExists(parent + "/cgroup.freeze")
    }

    private static func makeParent(_ path: String, created: inout [String]) throws(SystemError) -> String {
        if try makeDirectory(path) { created.append(path) }
        return path
    }

    // MARK: App groups

    /// Creates (or reuses, after a crash) the app's groups in every hierarchy in use.
    public func makeAppCgroup(app: String) throws(SystemError) -> AppCgroup {
        let directory = "app-" + app
        guard layout != .none else {
            throw SystemError(operation: "create a cgroup for \(app) (no usable cgroups)", errno: ENOTSUP)
        }
        var created: [String] = []
        do {
            func make(_ parent: String?) throws(SystemError) -> String? {
                guard let parent else { return nil }
                let path = parent + "/" + directory
                if try makeDirectory(path) { created.append(path) }
                return path
            }
            let unified = try make(unifiedParent)
            let cpu = try make(cpuParent)
            let freezer = try make(freezerParent)
            let files = appGroupFiles.files { AppCgroup.Files(unifiedPath: unified, cpuPath: cpu) }
            var group = AppCgroup(app: app, unifiedPath: unified, cpuPath: cpu, freezerPath: freezer, files: files)
            group.isNew = created.count == [unified, cpu, freezer].compactMap({ $0 }).count
            return group
        } catch {
            for path in created.reversed() { rmdir(path) }
            throw error
        }
    }

    /// The apps that have a group now (`app-NAME` under any parent), found by listing the parents: the stray scan at
    /// start-up looks into these instead of creating a group for every configured app, which would delay the first
    /// launch of a large configuration.
    public func existingAppCgroupNames() -> Set<String> {
        var names: Set<String> = []
        for parent in [unifiedParent, cpuParent, freezerParent].compactMap({ $0 }) {
            guard let directory = opendir(parent) else { continue }
            defer { closedir(directory) }
            while let entry = readdir(directory) {
                let name = directoryEntryName(entry)
                if name.hasPrefix("app-") && name.count > 4 { names.insert(String(name.dropFirst(4))) }
            }
        }
        return names
    }

    /// Removes the parent groups, at shutdown once every app group is removed. A parent still
    /// busy is left alone quietly; other failures are returned. In a delegated subtree this
    /// removes the app groups left and nothing else: the root is systemd's, and the daemon is
    /// still in `supervisor/` (systemd removes both when the service stops).
    @discardableResult
    public func removeParent() -> [SystemError] {
        if let subtree = delegatedSubtree { return subtree.removeAppCgroups() }
        return [unifiedParent, cpuParent, freezerParent].compactMap { $0 }.compactMap { removeCgroupDirectory($0) }
    }
}
