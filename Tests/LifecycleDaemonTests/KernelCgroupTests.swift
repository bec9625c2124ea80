import CSupport
import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// This machine is hybrid (v1 cpu and freezer at /sys/fs/cgroup/<name>, cgroup2 with freeze and
/// kill but no cpu controller at /sys/fs/cgroup/unified). The real-cgroup tests run where that
/// holds and root can create groups; the layout decision for other machines is tested as a pure
/// function, because statfs needs real mounts.
private let isHybridRoot = getuid() == 0
    && cs_is_tmpfs("/sys/fs/cgroup") == 1 && cs_is_cgroup2("/sys/fs/cgroup/unified") == 1

/// The real-cgroup tests' condition, with the reason Swift Testing prints when it skips one. They make real groups,
/// which takes root, and their paths are this hybrid layout's (v1 `cpu` and `freezer` beside cgroup2 at
/// /sys/fs/cgroup/unified); this machine and CI have both. On a pure cgroup2 host the layout decision is tested
/// above as a pure function, and the daemon's own tests exercise the groups it makes there.
private let onHybridRoot = ConditionTrait.enabled(
    if: isHybridRoot, "needs root and the hybrid cgroup layout (v1 cpu/freezer + cgroup2 at /sys/fs/cgroup/unified), as this machine and CI have")

@Suite struct KernelCgroupTests {
    // MARK: Layout decision (pure)

    @Test func layoutIsDecidedFromWhatStatfsReports() {
        typealias Kind = FilesystemKind
        #expect(CgroupSupport.decideLayout(root: .cgroup2, unified: .missing, cpu: .missing, freezer: .missing) == .unified)
        #expect(CgroupSupport.decideLayout(root: .tmpfs, unified: .cgroup2, cpu: .cgroup1, freezer: .cgroup1) == .hybrid)
        #expect(CgroupSupport.decideLayout(root: .tmpfs, unified: .cgroup2, cpu: .missing, freezer: .missing) == .hybrid)
        #expect(CgroupSupport.decideLayout(root: .tmpfs, unified: .missing, cpu: .cgroup1, freezer: .missing) == .legacy)
        #expect(CgroupSupport.decideLayout(root: .tmpfs, unified: .tmpfs, cpu: .tmpfs, freezer: .cgroup1) == .legacy)
        #expect(CgroupSupport.decideLayout(root: .other, unified: .missing, cpu: .missing, freezer: .missing) == .none)
        #expect(CgroupSupport.decideLayout(root: .tmpfs, unified: .tmpfs, cpu: .tmpfs, freezer: .tmpfs) == .none,
                "empty directories on a tmpfs are not cgroup mounts")
    }

    @Test func ownGroupIsTheZeroLine() {
        let hybrid = "9:name=systemd:/\n1:cpu:/\n0::/\n"
        #expect(CgroupSupport.unifiedPath(inProcSelfCgroup: hybrid) == "/")
        #expect(CgroupSupport.unifiedPath(inProcSelfCgroup: "0::/system.slice/lifecycled.service\n") == "/system.slice/lifecycled.service")
        #expect(CgroupSupport.unifiedPath(inProcSelfCgroup: "4:memory:/x\n1:cpu:/\n") == nil)
    }

    @Test func directoryWithoutCgroupMountsHasNone() throws {
        let fake = try TemporaryDirectory()
        try makeDirectory(fake.path + "/unified")
        try makeDirectory(fake.path + "/cpu")

        let support = CgroupSupport.detect(mountRoot: fake.path, groupName: "lifecycled-test")

        #expect(support.layout == .none)
        #expect(support.fallbackReason == nil)
        #expect(!support.canFreeze && !support.hasCPUControl)
        #expect(support.mechanisms.contains("suspend: SIGSTOP to the process group (no cgroup freezer)"))
        #expect(throws: SystemError.self) { try support.makeAppCgroup(app: "demo") }
    }

    // MARK: This machine

    @Test(onHybridRoot)
    func detectFindsHybridAndCreatesTheParents() throws {
        let name = testGroupName("detect")
        let support = CgroupSupport.detect(groupName: name)
        defer { support.removeParent() }

        #expect(support.layout == .hybrid)
        #expect(support.fallbackReason?.hasPrefix("not delegated: ") == true, "hybrid hosts are never taken as delegated")
        #expect(support.delegatedSubtree == nil)
        #expect(support.unifiedParent == "/sys/fs/cgroup/unified/\(name)")
        #expect(support.cpuParent == "/sys/fs/cgroup/cpu/\(name)")
        #expect(support.freezerParent == nil, "cgroup2 freezes here: no v1 freezer group per app")
        #expect(support.canFreeze && support.hasCPUControl)
        #expect(!support.unifiedCPU, "cpu is bound to v1 here")
        #expect(support.mechanisms.contains("background priority: cgroup v1 cpu.shares 1024 → 128, kept while suspended"))
        #expect(support.mechanisms.contains("suspend (freezer): cgroup2 cgroup.freeze"))
        #expect(support.mechanisms.contains("oom_score_adj: 0 / 500 / 900"))

        #expect(support.removeParent().isEmpty)
        #expect(!fileExists("/sys/fs/cgroup/unified/\(name)") && !fileExists("/sys/fs/cgroup/cpu/\(name)"))
    }

    @Test(onHybridRoot)
    func unreadableOwnGroupFallsBackToNone() {
        let support = CgroupSupport.detect(selfCgroupFile: "/nonexistent/cgroup", groupName: testGroupName("fallback"))

        #expect(support.layout == .none)
        #expect(support.fallbackReason == "Failed to open /nonexistent/cgroup: No such file or directory")
    }

    @Test(onHybridRoot)
    func insideAnotherGroupTheParentIsOurChild() throws {
        // As under a systemd service: our group is not the root, and we must not leave it.
        let own = testGroupName("service")
        try makeDirectory("/sys/fs/cgroup/unified/\(own)")
        defer { rmdir("/sys/fs/cgroup/unified/\(own)") }
        let selfCgroup = try TemporaryDirectory()
        try writeNewFile(selfCgroup.path + "/cgroup", "1:cpu:/\n0::/\(own)\n")

        let support = CgroupSupport.detect(selfCgroupFile: selfCgroup.path + "/cgroup", groupName: "lifecycled")
        defer { support.removeParent() }

        #expect(support.unifiedParent == "/sys/fs/cgroup/unified/\(own)/lifecycled")
        #expect(fileExists("/sys/fs/cgroup/unified/\(own)/lifecycled/cgroup.freeze"))
    }

    @Test(onHybridRoot)
    func spawnedChildJoinsEveryAppGroup() throws {
        try withAppCgroup("placement") { cgroup, children, group in
            #expect(fileExists(cgroup.unifiedPath! + "/cgroup.freeze"))
            #expect(cgroup.procsFiles.count == 3)
            #expect(cgroup.displayPath == "/sys/fs/cgroup/unified/\(group)/app-demo")
            #expect(cgroup.freezer == .cgroup2)

            let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"], cgroupProcsFiles: cgroup.procsFiles))

            let lines = try readKernelFile("/proc/\(pid)/cgroup").split(separator: "\n")
            #expect(lines.contains("0::/\(group)/app-demo"))
            #expect(lines.contains { $0.hasSuffix(":cpu:/\(group)/app-demo") })
            #expect(lines.contains { $0.hasSuffix(":freezer:/\(group)/app-demo") })
            #expect(cgroup.pids() == [pid])
        }
    }

    @Test(onHybridRoot)
    func priorityClassWritesCPUShares() throws {
        try withAppCgroup("shares") { cgroup, _, _ in
            let shares = cgroup.cpuPath! + "/cpu.shares"
            #expect(cgroup.controlsCPU)

            try cgroup.setPriority(.background)
            #expect(try readKernelFile(shares) == "128\n")
            try cgroup.setPriority(.suspended)
            #expect(try readKernelFile(shares) == "128\n", "a stopped process keeps its background weight")
            try cgroup.setPriority(.foreground)
            #expect(try readKernelFile(shares) == "1024\n")
            #expect(!fileExists(cgroup.unifiedPath! + "/cpu.weight"), "no cpu controller in cgroup2 here")
        }
    }

    @Test(onHybridRoot)
    func keptFilesWriteAndReadAgainThroughOneDescriptor() throws {
        try withAppCgroup("kept") { cgroup, children, _ in
            let kept = KeptKernelFiles()
            let shares = cgroup.cpuPath! + "/cpu.shares"
            try cgroup.setPriority(.background, kept: kept)
            try cgroup.setPriority(.foreground, kept: kept)
            #expect(try readKernelFile(shares) == "1024\n", "the second write went through the kept descriptor")
            #expect(kept.count == 1)

            #expect(cgroup.pids(kept: kept) == [])
            let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"], cgroupProcsFiles: cgroup.procsFiles))
            #expect(cgroup.pids(kept: kept) == [pid], "cgroup.procs is read anew through the kept descriptor")
            #expect(kept.count == 2)
        }
    }

    /// A v1 cgroup.procs kept open answers from the list the kernel made at its first read for as long as it is read
    /// again within a second: the group's members would be those of then, a process that ended included.
    @Test(onHybridRoot)
    func aV1GroupsProcessesAreReadAfreshEachTime() throws {
        try withAppCgroup("kept-v1") { hybrid, children, _ in
            let cgroup = AppCgroup(app: "demo", unifiedPath: nil, cpuPath: hybrid.cpuPath, freezerPath: hybrid.freezerPath)
            let kept = KeptKernelFiles()
            #expect(cgroup.pids(kept: kept) == [])
            let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"], cgroupProcsFiles: cgroup.procsFiles))
            #expect(cgroup.pids(kept: kept) == [pid], "a process that joined is listed at once")
            children.killAndReapAll()
            #expect(cgroup.pids(kept: kept) == [], "one that ended is gone at once")
        }
    }

    @Test(onHybridRoot)
    func aKeptFileOfAGroupMadeAgainIsOpenedAnew() throws {
        let group = testGroupName("kept-again")
        let support = CgroupSupport.detect(groupName: group, v1FreezerBesideCgroup2: true)
        try #require(support.layout == .hybrid, "\(support.fallbackReason ?? "")")
        defer { support.removeParent() }
        let kept = KeptKernelFiles()
        let first = try support.makeAppCgroup(app: "again")
        try first.setPriority(.background, kept: kept)
        #expect(first.remove().isEmpty)

        let second = try support.makeAppCgroup(app: "again")
        defer { _ = second.remove() }
        #expect(try readKernelFile(second.cpuPath! + "/cpu.shares") == "1024\n", "a new group starts at the default")
        try second.setPriority(.background, kept: kept)
        #expect(try readKernelFile(second.cpuPath! + "/cpu.shares") == "128\n", "written to the new group, not the removed one")
    }

    @Test(onHybridRoot)
    func cgroup2FreezerFreezesAndThaws() throws {
        try withAppCgroup("freeze2") { cgroup, children, _ in
            let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"], cgroupProcsFiles: cgroup.procsFiles))
            #expect(!cgroup.isFrozen())

            try cgroup.freeze()
            #expect(eventually { cgroup.isFrozen() })
            #expect(ProcessTable.state(of: pid) == "S", "cgroup2-frozen tasks do not show T")

            try cgroup.thaw()
            #expect(eventually { !cgroup.isFrozen() })
        }
    }

    @Test(onHybridRoot)
    func v1FreezerFreezesAndThaws() throws {
        try withAppCgroup("freeze1") { cgroup, children, _ in
            var cgroup = cgroup
            cgroup.freezer = .v1
            let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"], cgroupProcsFiles: cgroup.procsFiles))

            try cgroup.freeze()
            #expect(eventually { cgroup.isFrozen() })
            #expect(ProcessTable.state(of: pid) == "D", "v1-frozen tasks show D")

            try cgroup.thaw()
            #expect(eventually { !cgroup.isFrozen() })
        }
    }

    @Test(onHybridRoot)
    func killAllEmptiesTheGroupEvenWhenFrozen() throws {
        for kind in [FreezerKind.cgroup2, .v1] {
            try withAppCgroup("kill-\(kind.rawValue)") { cgroup, children, _ in
                var cgroup = cgroup
                cgroup.freezer = kind
                let first = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"], cgroupProcsFiles: cgroup.procsFiles))
                // Two direct children, so that nothing is orphaned to PID 1 (slow to reap here).
                let second = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "31"], cgroupProcsFiles: cgroup.procsFiles))
                try cgroup.freeze()
                #expect(eventually { cgroup.isFrozen() })

                #expect(cgroup.killAll().isEmpty)

                #expect(children.reap(first) == .signaled(SIGKILL))
                #expect(children.reap(second) == .signaled(SIGKILL))
                #expect(eventually { cgroup.pids().isEmpty })
            }
        }
    }

    // MARK: Files opened per use

    /// Each weight write opens the file by path: when the group is removed (rmdir, not `remove()`) and made again
    /// under the same path, the next write reaches the new group.
    @Test(onHybridRoot)
    func aWeightWriteReachesAGroupMadeAgain() throws {
        let group = testGroupName("remade")
        let support = CgroupSupport.detect(groupName: group)
        try #require(support.layout == .hybrid, "\(support.fallbackReason ?? "")")
        defer { support.removeParent() }
        let first = try support.makeAppCgroup(app: "demo")
        let shares = first.cpuPath! + "/cpu.shares"
        try first.setPriority(.background)
        #expect(try readKernelFile(shares) == "128\n")

        for path in [first.unifiedPath!, first.cpuPath!] { #expect(rmdir(path) == 0, "rmdir \(path): errno \(errno)") }
        let again = try support.makeAppCgroup(app: "demo")
        defer { again.remove() }
        #expect(again.cpuPath == first.cpuPath)
        #expect(try readKernelFile(shares) == "1024\n", "a new group starts at the default")

        try again.setPriority(.background)
        #expect(try readKernelFile(shares) == "128\n")
    }

    /// cgroup.procs is read anew each time: a process that joins shows, one that leaves goes.
    @Test(onHybridRoot)
    func cgroupProcsIsReadAnew() throws {
        try withAppCgroup("procs-anew") { cgroup, children, _ in
            #expect(cgroup.pids() == [])
            let first = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"], cgroupProcsFiles: cgroup.procsFiles))
            #expect(cgroup.pids() == [first])
            let second = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "31"], cgroupProcsFiles: cgroup.procsFiles))
            #expect(Set(cgroup.pids()) == [first, second])
            kill(first, SIGKILL)
            #expect(children.reap(first) == .signaled(SIGKILL))
            #expect(eventually { cgroup.pids() == [second] })
        }
    }

    /// Weight writes, freezing and reading the members leave no descriptor open on the group's files, so
    /// `remove()` has nothing to close before it removes the directories.
    @Test(onHybridRoot)
    func groupFilesAreNotKeptOpen() throws {
        let support = CgroupSupport.detect(groupName: testGroupName("not-kept"))
        defer { support.removeParent() }
        let cgroup = try support.makeAppCgroup(app: "demo")
        try cgroup.setPriority(.background)
        _ = cgroup.pids()
        _ = cgroup.isFrozen()
        #expect(Self.descriptors(under: cgroup.unifiedPath!) + Self.descriptors(under: cgroup.cpuPath!) == 0)

        #expect(cgroup.remove().isEmpty)
        #expect(!fileExists(cgroup.unifiedPath!) && !fileExists(cgroup.cpuPath!))
    }

    /// Descriptors of this process open on files under `directory` (the group is this test's own).
    private static func descriptors(under directory: String) -> Int {
        openDescriptorTargets().count { $0.target.hasPrefix(directory + "/") }
    }

    @Test(onHybridRoot)
    func removeDeletesEveryAppGroupEvenFrozen() throws {
        let support = CgroupSupport.detect(groupName: testGroupName("remove"), v1FreezerBesideCgroup2: true)
        defer { support.removeParent() }
        let cgroup = try support.makeAppCgroup(app: "demo")
        try cgroup.freeze()
        let directories = [cgroup.unifiedPath!, cgroup.cpuPath!, cgroup.freezerPath!]
        #expect(directories.allSatisfy(fileExists))

        #expect(cgroup.remove().isEmpty)

        #expect(!directories.contains(where: fileExists))
        #expect(support.removeParent().isEmpty)
    }
}

/// Unique per test and per run, so tests running in parallel (and leftovers of a killed run) do
/// not collide.
private func testGroupName(_ test: String) -> String {
    "lifecycled-test-\(getpid())-\(test)"
}

/// Gives `body` an app cgroup "demo" under a parent of its own, and afterwards kills what is
/// left, reaps the children and removes every group, whatever `body` did.
/// The v1 freezer tests ask for the v1 freezer groups, which the daemon leaves out where cgroup2 freezes.
private func withAppCgroup(_ test: String, _ body: (AppCgroup, Children, String) throws -> Void) throws {
    let group = testGroupName(test)
    let support = CgroupSupport.detect(groupName: group, v1FreezerBesideCgroup2: true)
    try #require(support.layout == .hybrid, "\(support.fallbackReason ?? "")")
    defer { support.removeParent() }
    let cgroup = try support.makeAppCgroup(app: "demo")
    let children = Children()
    defer {
        cgroup.killAll()
        children.killAndReapAll()
        #expect(cgroup.remove().isEmpty)
        #expect(!fileExists(cgroup.unifiedPath!), "app group left behind")
    }
    try body(cgroup, children, group)
}

private func writeNewFile(_ path: String, _ text: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw SystemError(operation: "create \(path)", errno: errno) }
    close(fd)
    try writeKernelFile(path, text)
}
