import Glibc
import Synchronization
import LifecycleModel

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
    /// The cgroup2 memory.low of the group, where the memory controller is enabled for it.
    let memoryLowFile: String?
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
        var hasMemoryLow = false

        init(unifiedPath: String?, cpuPath: String?) {
            hasFreeze = unifiedPath.map { fileExists($0 + "/cgroup.freeze") } ?? false
            controllers = unifiedPath.map { cgroupFileWords($0 + "/cgroup.controllers") } ?? []
            hasCPUWeight = unifiedPath.map { fileExists($0 + "/cpu.weight") } ?? false
            hasIOWeight = unifiedPath.map { fileExists($0 + "/io.weight") } ?? false
            hasCPUShares = cpuPath.map { fileExists($0 + "/cpu.shares") } ?? false
            hasMemoryLow = unifiedPath.map { fileExists($0 + "/memory.low") } ?? false
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
        memoryLowFile = files.hasMemoryLow ? unifiedPath.map { $0 + "/memory.low" } : nil
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
    /// The files `setPriority` writes.
    var weightFiles: [String] { [cpuWeightFile, ioWeightFile, cpuSharesFile].compactMap { $0 } }

    func setPriority(_ cls: PriorityClass, kept: KeptKernelFiles? = nil) throws(SystemError) {
        func write(_ path: String, _ value: String) throws(SystemError) {
            if let kept { try kept.write(path, value) } else { try writeKernelFile(path, value) }
        }
        if let cpuWeightFile { try write(cpuWeightFile, String(cls.cgroupWeight)) }
        if let ioWeightFile { try write(ioWeightFile, "default \(cls.cgroupWeight)") }
        if let cpuSharesFile { try write(cpuSharesFile, String(cls.cpuShares)) }
    }

    /// Sets memory.low for `cls` (`PriorityClass.memoryLow`), where the group has it; through `kept` when given.
    func protectMemory(_ cls: PriorityClass, _ protection: MemoryProtection, kept: KeptKernelFiles? = nil) throws(SystemError) {
        guard let memoryLowFile else { return }
        let value = cls.memoryLow(protection).cgroupValue
        if let kept { try kept.write(memoryLowFile, value) } else { try writeKernelFile(memoryLowFile, value) }
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

    /// The processes in the app's group; read through `kept` when given and the file is cgroup2's. A v1
    /// cgroup.procs kept open answers from the list the kernel made at its first read for as long as it is read again
    /// within a second (its pidlist cache), so it is opened afresh each time.
    func pids(kept: KeptKernelFiles? = nil) -> [pid_t] {
        guard let procsFile else { return [] }
        let pids = (unifiedPath == nil ? nil : kept).map { kept in try? kept.withBytes(procsFile, Self.decimalLines) }
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

    /// Whether any of the app's group directories is still there (a removal found it busy).
    var isPresent: Bool { [unifiedPath, cpuPath, freezerPath].compactMap { $0 }.contains(where: fileExists) }

    /// Removes the app's groups, waiting up to `limit` for processes just killed to be gone: a SIGKILLed process
    /// leaves its group only once it is reaped, by its parent or, for an orphan, by init, so a removal right after
    /// the kill finds the group busy and would leave it behind, empty, for good. Returns whether it is gone.
    @discardableResult
    func removeOnceEmpty(within limit: Duration) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        while true {
            remove()
            if !isPresent { return true }
            if clock.now >= deadline { return false }
            if pids().contains(where: { ProcessTable.state(of: $0).map { $0 != "Z" && $0 != "X" } ?? false }) { killAll() }
            usleep(2_000)
        }
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
