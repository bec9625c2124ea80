import CSupport
import Glibc

/// Whether the daemon owns a cgroup2 subtree delegated to it by systemd (`Delegate=yes`), and
/// why not when it does not (for the log and `lifectl status`).
public enum CgroupDelegation: Sendable, Equatable {
    /// The daemon runs in `root/supervisor` and each app in `root/app-<name>`. `root` is the
    /// directory of the cgroup systemd made for the service, e.g.
    /// /sys/fs/cgroup/system.slice/lifecycled.service.
    case delegated(root: String)
    /// The daemon keeps its `lifecycled…` parent groups (see `CgroupSupport.detect`).
    case notDelegated(reason: String)
}

/// A cgroup2 subtree delegated to the daemon: the daemon in a leaf `supervisor/`, each app in a
/// sibling cgroup, since a cgroup2 group with children holds no processes of its own.
///
///     <root>/                   systemd's: we write only cgroup.subtree_control (and move out)
///     <root>/supervisor/        the daemon, every thread of it
///     <root>/app-<name>/        one app: cpu.weight, io.weight, cgroup.freeze, cgroup.kill
///     <root>/.control/          systemd's, for ExecStartPost=/ExecReload=/ExecStop= (not ours)
///
/// Only the files delegation hands over are written at the root (docs/PLATFORM.md, "cgroups"); its
/// other attributes are the service manager's, set from the unit file.
///
/// App cgroups are named `app-<name>`, not `app-<name>.scope`: below a delegation point the
/// service manager manages no units, and a unit suffix would claim one that does not exist. The
/// `app-` prefix also keeps an app's name from meeting a kernel attribute file or `supervisor`.
///
/// The paths are plain strings so that tests can point this at a tree of ordinary files.
struct DelegatedSubtree: Sendable, Equatable {
    /// The leaf the daemon moves into: a unit that sets `DelegateSubgroup=supervisor` starts the daemon
    /// already there.
    static let supervisorName = "supervisor"
    static let appPrefix = "app-"
    /// What the daemon enables for its apps, where the root's cgroup.controllers offers it:
    /// cpu and io for the background weights, memory for per-app pressure and limits.
    static let wantedControllers = ["cpu", "io", "memory"]

    let root: String

    var supervisorLeaf: String { root + "/" + Self.supervisorName }

    /// The delegated root for our own cgroup2 path (the `0::` line): that cgroup itself, or its
    /// parent when we are already in its `supervisor/` leaf (`DelegateSubgroup=supervisor`, or a
    /// second detection in the same process).
    static func rootPath(ownPath: String) -> String {
        let suffix = "/" + supervisorName
        guard ownPath.hasSuffix(suffix), ownPath.count > suffix.count else { return ownPath }
        return String(ownPath.dropLast(suffix.count))
    }

    /// Creates `supervisor/` (or reuses it) and moves the process `pid` into it: the write to
    /// cgroup.procs moves every thread of the process at once. This must come before any app
    /// cgroup gets a domain controller, because a cgroup with processes of its own cannot enable
    /// controllers for its children (the no-internal-processes rule). The daemon passes its own
    /// pid; tests pass a helper process's, so that the test runner stays where it is.
    func moveIntoLeaf(pid: pid_t) throws(SystemError) {
        // Writing 0 to cgroup.procs means "the writer": a test would move its runner.
        precondition(pid > 0, "moveIntoLeaf needs a real pid")
        let created: Bool = try makeDirectory(supervisorLeaf)
        do {
            try writeKernelFile(supervisorLeaf + "/cgroup.procs", String(pid))
        } catch {
            if created { rmdir(supervisorLeaf) }
            throw error
        }
    }

    /// Enables in the root's cgroup.subtree_control those of `wanted` that its cgroup.controllers
    /// lists and that are not enabled yet, so that every app cgroup gets their files. Returns the
    /// wanted controllers enabled afterwards, and the failure if a write was refused (EBUSY:
    /// processes are left in the root). Never writes controllers the root does not offer: the
    /// kernel would refuse the whole write.
    func enableControllers(_ wanted: [String] = wantedControllers) -> (enabled: Set<String>, failure: SystemError?) {
        enableSubtreeControllers(in: root, wanted: wanted)
    }

    /// The app cgroups (`app-*`) below the root; not `supervisor/`, not systemd's `.control/`.
    func appCgroups() -> [String] {
        subdirectoryNames(of: root).filter { $0.hasPrefix(Self.appPrefix) }.sorted().map { root + "/" + $0 }
    }

    /// Removes the app cgroups left (at shutdown, after each app removed its own). Leaves the
    /// root and `supervisor/`, which the daemon is in: systemd removes both when the service stops.
    func removeAppCgroups() -> [SystemError] {
        appCgroups().compactMap { removeCgroupDirectory($0) }
    }
}

/// Enables the controllers of `wanted` that `directory`'s cgroup.controllers offers and its
/// cgroup.subtree_control lacks: one write for all ("+cpu +io +memory", which the kernel applies
/// together), and one per controller if that is refused, so that one refused controller does not
/// cost the others. Returns the wanted controllers enabled afterwards, and the first failure.
func enableSubtreeControllers(in directory: String, wanted: [String]) -> (enabled: Set<String>, failure: SystemError?) {
    let available = cgroupFileWords(directory + "/cgroup.controllers")
    var enabled = cgroupFileWords(directory + "/cgroup.subtree_control").intersection(wanted)
    let missing = wanted.filter { available.contains($0) && !enabled.contains($0) }
    guard !missing.isEmpty else { return (enabled, nil) }
    let file = directory + "/cgroup.subtree_control"
    do {
        try writeKernelFile(file, missing.map { "+" + $0 }.joined(separator: " "))
        return (enabled.union(missing), nil)
    } catch {
        guard missing.count > 1 else { return (enabled, error) }
        var failure: SystemError?
        for controller in missing {
            do {
                try writeKernelFile(file, "+" + controller)
                enabled.insert(controller)
            } catch let refused {
                failure = failure ?? refused
            }
        }
        return (enabled, failure)
    }
}

// MARK: - Deciding

extension CgroupDelegation {
    /// Whether to take our cgroup2 group as a delegated subtree.
    ///
    /// - `forced` true or false decides (tests); true still needs a cgroup2 hierarchy and a group
    ///   of our own below its root.
    /// - nil decides from what we see, and every condition must hold: a cgroup2 hierarchy (pure
    ///   or hybrid); our group is not the root; `INVOCATION_ID` is set (we run as a service); and the group
    ///   carries the service manager's delegation mark (docs/PLATFORM.md, "cgroups"). A service
    ///   running as root could write any group, so writability proves nothing, and moving out of
    ///   a group that was not delegated would take over what the service manager owns.
    ///
    /// `unifiedMount` is the cgroup2 mount (nil on v1-only hosts), `ownPath` the `0::` path.
    static func decide(
        forced: Bool?, layout: CgroupLayout, unifiedMount: String?, ownPath: String?,
        invocationID: String?, isMarked: (String) -> Bool
    ) -> CgroupDelegation {
        if forced == false { return .notDelegated(reason: "turned off") }
        guard let unifiedMount, let ownPath else {
            return .notDelegated(reason: "no cgroup2 hierarchy (v1 only)")
        }
        // On a hybrid host systemd delegates the cgroup2 part only (the v1 cpu and freezer stay its own): taken for
        // process tracking, cgroup.freeze and cgroup.kill; background priority then falls back to nice
        // (docs/SYSTEMD-CONTAINER.md).
        let rootPath = DelegatedSubtree.rootPath(ownPath: ownPath)
        guard rootPath != "/" else { return .notDelegated(reason: "our cgroup2 group is the root") }
        let root = unifiedMount + rootPath
        if forced == nil {
            guard invocationID != nil else {
                return .notDelegated(reason: "not started as a systemd service (no INVOCATION_ID)")
            }
            guard isMarked(root) else {
                return .notDelegated(reason: "\(root) is not marked delegated (no user.delegate or trusted.delegate xattr); set Delegate=yes in the unit")
            }
        }
        return .delegated(root: root)
    }
}

/// Whether systemd marked `directory` as a delegation point: `user.delegate` or
/// `trusted.delegate` is "1".
func isMarkedDelegated(_ directory: String) -> Bool {
    ["user.delegate", "trusted.delegate"].contains { extendedAttribute($0, of: directory) == "1" }
}

/// An extended attribute's value; nil if unset or unreadable (trusted.* needs CAP_SYS_ADMIN).
func extendedAttribute(_ name: String, of path: String) -> String? {
    var buffer = [UInt8](repeating: 0, count: 256)
    let count = buffer.withUnsafeMutableBytes { getxattr(path, name, $0.baseAddress, $0.count) }
    guard count >= 0 else { return nil }
    return String(decoding: buffer.prefix(count), as: UTF8.self)
}

// MARK: - Small helpers shared with Cgroups.swift

/// rmdir, the only way to delete a cgroup (its files cannot be unlinked). EBUSY (processes or
/// child groups left) and ENOENT are not reported.
func removeCgroupDirectory(_ path: String) -> SystemError? {
    if rmdir(path) == 0 || errno == EBUSY || errno == ENOENT { return nil }
    return SystemError(operation: "remove \(path)", errno: errno)
}

/// The space- or newline-separated words of a cgroup file; none if it cannot be read.
func cgroupFileWords(_ path: String) -> Set<String> {
    let text = (try? readKernelFile(path)) ?? ""
    return Set(text.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init))
}

/// The names of the directories in `path` (cgroups, in a cgroup directory).
func subdirectoryNames(of path: String) -> [String] {
    guard let directory = opendir(path) else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        guard entry.pointee.d_type == UInt8(DT_DIR) else { continue }
        let name = directoryEntryName(entry)
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}
