import CSupport
import Glibc
import Synchronization
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
        if own == "/" { _ = enableSubtreeControllers(in: mount, wanted: ["cpu", "io"]) }
        // Best effort: a controller bound to a v1 hierarchy (hybrid) or missing from the parent's
        // cgroup.controllers cannot be enabled, and then weights are simply not available.
        _ = enableSubtreeControllers(in: parent, wanted: ["cpu", "io"])
        unifiedParent = parent
        let delegated = cgroupFileWords(parent + "/cgroup.subtree_control")
        unifiedCPU = delegated.contains("cpu")
        unifiedIO = delegated.contains("io")
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

/// `AppCgroup.Files` of the first app group made, for the next ones. A class, so that `CgroupSupport` (a value passed
/// around) shares one; locked, since that value is Sendable.
final class AppGroupFilesCache: Sendable {
    private let cached = Mutex<AppCgroup.Files?>(nil)

    func files(_ probe: () -> AppCgroup.Files) -> AppCgroup.Files {
        if let files = cached.withLock({ $0 }) { return files }
        let files = probe()
        cached.withLock { $0 = files }
        return files
    }
}

/// One app's groups: a cgroup2 group and/or v1 cpu and freezer groups (hybrid machines have all three).
public struct AppCgroup: Sendable, Equatable {
    public let app: String
    public let unifiedPath: String?
    public let cpuPath: String?
    public let freezerPath: String?
    /// The freezer `freeze()` uses; cgroup2's when there is one. Settable to pick the v1 one.
    public var freezer: FreezerKind?
    /// The controllers of the cgroup2 group (its cgroup.controllers).
    public let controllers: Set<String>
    /// Which weight files the groups have, found once: the controllers are enabled for the children
    /// before any app group is made (at start-up), so they do not change under a group.
    private let hasCPUWeight: Bool
    private let hasIOWeight: Bool
    private let hasCPUShares: Bool
    /// Made by this `makeAppCgroup` call (every one of its groups), not found from an earlier run: it cannot be
    /// frozen, so the launch skips the check.
    public internal(set) var isNew = false
    /// The files written or read at every transition, their paths made once.
    private let cpuWeightFile: String?
    private let ioWeightFile: String?
    private let cpuSharesFile: String?
    private let procsFile: String?

    /// What an app group has, the same for every app group under the same parents (the parents' controllers
    /// decide it): probed on the first group made and reused (`CgroupSupport.appGroupFiles`), so that a launch
    /// does not probe again.
    struct Files: Sendable, Equatable {
        var hasFreeze = false
        var controllers: Set<String> = []
        var hasCPUWeight = false
        var hasIOWeight = false
        var hasCPUShares = false

        init(unifiedPath: String?, cpuPath: String?) {
            hasFreeze = unifiedPath.map { fileExists($0 + "/cgroup.freeze") } ?? false
            controllers = unifiedPath.map { cgroupFileWords($0 + "/cgroup.controllers") } ?? []
            hasCPUWeight = unifiedPath.map { fileExists($0 + "/cpu.weight") } ?? false
            hasIOWeight = unifiedPath.map { fileExists($0 + "/io.weight") } ?? false
            hasCPUShares = cpuPath.map { fileExists($0 + "/cpu.shares") } ?? false
        }
    }

    init(app: String, unifiedPath: String?, cpuPath: String?, freezerPath: String?, files: Files? = nil) {
        self.app = app
        self.unifiedPath = unifiedPath
        self.cpuPath = cpuPath
        self.freezerPath = freezerPath
        let files = files ?? Files(unifiedPath: unifiedPath, cpuPath: cpuPath)
        if unifiedPath != nil && files.hasFreeze {
            freezer = .cgroup2
        } else if freezerPath != nil {
            freezer = .v1
        }
        controllers = unifiedPath == nil ? [] : files.controllers
        hasCPUWeight = unifiedPath != nil && files.hasCPUWeight
        hasIOWeight = unifiedPath != nil && files.hasIOWeight
        hasCPUShares = cpuPath != nil && files.hasCPUShares
        cpuWeightFile = hasCPUWeight ? unifiedPath.map { $0 + "/cpu.weight" } : nil
        ioWeightFile = hasIOWeight ? unifiedPath.map { $0 + "/io.weight" } : nil
        cpuSharesFile = hasCPUShares ? cpuPath.map { $0 + "/cpu.shares" } : nil
        procsFile = (unifiedPath ?? cpuPath ?? freezerPath).map { $0 + "/cgroup.procs" }
    }

    /// Whether `setPriority` weighs the CPU (cpu.weight or cpu.shares exists); without it,
    /// fall back to nice.
    public var controlsCPU: Bool { hasCPUWeight || hasCPUShares }

    /// Every cgroup.procs the child joins (`SpawnRequest.cgroupProcsFiles`).
    public var procsFiles: [String] {
        [unifiedPath, cpuPath, freezerPath].compactMap { $0.map { $0 + "/cgroup.procs" } }
    }

    /// The group to show a person: the cgroup2 one, else the v1 cpu one.
    public var displayPath: String {
        unifiedPath ?? cpuPath ?? freezerPath ?? ""
    }

    /// Sets the CPU (and IO) weight for `cls`, in whichever of cpu.weight, io.weight and
    /// cpu.shares exist; through `kept` when given.
    func setPriority(_ cls: PriorityClass, kept: KeptKernelFiles? = nil) throws(SystemError) {
        func write(_ path: String, _ value: String) throws(SystemError) {
            if let kept { try kept.write(path, value) } else { try writeKernelFile(path, value) }
        }
        if let cpuWeightFile { try write(cpuWeightFile, String(cls.cgroupWeight)) }
        if let ioWeightFile { try write(ioWeightFile, "default \(cls.cgroupWeight)") }
        if let cpuSharesFile { try write(cpuSharesFile, String(cls.cpuShares)) }
    }

    /// Starts freezing. The kernel finishes asynchronously (docs/PLATFORM.md): poll `isFrozen()`.
    public func freeze() throws(SystemError) {
        switch (freezer, unifiedPath, freezerPath) {
        case (.cgroup2, let path?, _): try writeKernelFile(path + "/cgroup.freeze", "1")
        case (.v1, _, let path?): try writeKernelFile(path + "/freezer.state", "FROZEN")
        default: throw SystemError(operation: "freeze \(displayPath) (no cgroup freezer)", errno: ENOTSUP)
        }
    }

    public func thaw() throws(SystemError) {
        switch (freezer, unifiedPath, freezerPath) {
        case (.cgroup2, let path?, _): try writeKernelFile(path + "/cgroup.freeze", "0")
        case (.v1, _, let path?): try writeKernelFile(path + "/freezer.state", "THAWED")
        default: throw SystemError(operation: "thaw \(displayPath) (no cgroup freezer)", errno: ENOTSUP)
        }
    }

    /// Whether the freezer in use has finished freezing (cgroup2 `frozen 1` in cgroup.events,
    /// v1 `FROZEN`, not `FREEZING`). Re-read rather than waiting for cgroup.events
    /// notifications, which the kernel rate-limits (docs/PLATFORM.md).
    public func isFrozen() -> Bool {
        switch (freezer, unifiedPath, freezerPath) {
        case (.cgroup2, let path?, _): unifiedFrozen(path)
        case (.v1, _, let path?): v1State(path) == "FROZEN"
        default: false
        }
    }

    /// Asked to freeze and not done yet, or done (cgroup2 `cgroup.freeze` 1; v1 `FREEZING` or `FROZEN`).
    public func isFreezing() -> Bool {
        switch (freezer, unifiedPath, freezerPath) {
        case (.cgroup2, let path?, _): ((try? readKernelFile(path + "/cgroup.freeze")) ?? "").hasPrefix("1")
        case (.v1, _, let path?): v1State(path) != "THAWED"
        default: false
        }
    }

    private func unifiedFrozen(_ path: String) -> Bool {
        (try? withKernelFileBytes(path + "/cgroup.events") { String(decoding: $0, as: UTF8.self) })?
            .split(separator: "\n").contains("frozen 1") ?? false
    }

    private func v1State(_ path: String) -> String? {
        (try? withKernelFileBytes(path + "/freezer.state") { String(decoding: $0, as: UTF8.self) })?
            .split(separator: "\n").first.map(String.init)
    }

    /// The processes in the app's group; read through `kept` when given.
    func pids(kept: KeptKernelFiles? = nil) -> [pid_t] {
        guard let procsFile else { return [] }
        let pids = kept.map { kept in try? kept.withBytes(procsFile, Self.decimalLines) }
            ?? (try? withKernelFileBytes(procsFile, Self.decimalLines))
        return pids ?? []
    }

    /// The numbers of cgroup.procs, one per line (a line that is not one, or too large for a pid, is skipped),
    /// each line read in place (`ProcessTable.decimal`) without the array of slices a split made.
    static func decimalLines(_ bytes: UnsafeBufferPointer<UInt8>) -> [pid_t] {
        var pids: [pid_t] = []
        var start = 0
        for end in 0...bytes.count where end == bytes.count || bytes[end] == UInt8(ascii: "\n") {
            if let value = ProcessTable.decimal(bytes[start..<end]), value <= Int(Int32.max) { pids.append(pid_t(value)) }
            start = end + 1
        }
        return pids
    }

    /// SIGKILL to every process in the group (cgroup.kill where it exists: it also catches
    /// processes forked meanwhile). Returns the failures, for the caller to log.
    @discardableResult
    public func killAll() -> [SystemError] {
        var failures: [SystemError] = []
        if let unifiedPath, fileExists(unifiedPath + "/cgroup.kill") {
            do { try writeKernelFile(unifiedPath + "/cgroup.kill", "1") } catch { failures.append(error) }
        } else {
            for pid in pids() where kill(pid, SIGKILL) != 0 && errno != ESRCH {
                failures.append(SystemError(operation: "kill \(pid) of \(displayPath)", errno: errno))
            }
        }
        // Tasks frozen by the v1 freezer do not act on SIGKILL until thawed.
        if let freezerPath, let state = v1State(freezerPath), state != "THAWED" {
            do { try writeKernelFile(freezerPath + "/freezer.state", "THAWED") } catch { failures.append(error) }
        }
        return failures
    }

    /// Thaws and removes the app's groups. A group still busy (processes not yet gone) or
    /// already gone is left alone quietly; other failures are returned.
    @discardableResult
    public func remove() -> [SystemError] {
        var failures: [SystemError] = []
        if let unifiedPath, unifiedFrozen(unifiedPath) {
            do { try writeKernelFile(unifiedPath + "/cgroup.freeze", "0") } catch { failures.append(error) }
        }
        if let freezerPath, let state = v1State(freezerPath), state != "THAWED" {
            do { try writeKernelFile(freezerPath + "/freezer.state", "THAWED") } catch { failures.append(error) }
        }
        for path in [unifiedPath, cpuPath, freezerPath].compactMap({ $0 }) {
            if let failure = removeCgroupDirectory(path) { failures.append(failure) }
        }
        return failures
    }
}
