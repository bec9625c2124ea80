import CSupport
import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// Delegated cgroup2 subtrees (a systemd service with `Delegate=yes`).
///
/// What is real and what is laid out:
/// - Real, on this hybrid machine: `/sys/fs/cgroup/unified/lifecycled-deleg-test-<pid>-<test>/`
///   plays the service cgroup systemd would delegate, with a spawned `sleep` in it playing the
///   daemon (the test runner itself must stay where it is). Moving into `supervisor/`, app
///   cgroups beside it with freeze and kill, removal, the delegate xattr, and "nothing of the
///   root written" are checked on the kernel's files.
/// - Laid out, in a temporary directory of plain files named like cgroup files: the cgroup2 here
///   offers no cpu, io or memory controller (cpu and io are bound to v1), so enabling them and
///   the weights they bring are checked against files the test writes, as the kernel would
///   present them on a pure cgroup2 host. The code takes paths, so it does not know the difference.
private let isHybridRoot = getuid() == 0
    && cs_is_tmpfs("/sys/fs/cgroup") == 1 && cs_is_cgroup2("/sys/fs/cgroup/unified") == 1
/// The real-cgroup tests make groups under /sys/fs/cgroup, which takes root; their paths are the hybrid layout's.
private let onHybridRoot = ConditionTrait.enabled(
    if: isHybridRoot, "needs root and the hybrid cgroup layout (v1 cpu/freezer + cgroup2 at /sys/fs/cgroup/unified), as this machine and CI have")

@Suite struct KernelCgroupDelegationTests {
    // MARK: Deciding (pure)

    @Test func delegationIsTakenOnlyWhenEverySignOfSystemdDelegationIsThere() {
        let service = "/system.slice/lifecycled.service"
        func decide(_ forced: Bool? = nil, layout: CgroupLayout = .unified, own: String? = service,
                    invocation: String? = "0123abcd", marked: Bool = true) -> CgroupDelegation {
            let mount: String? = switch layout {
            case .unified: "/sys/fs/cgroup"
            case .hybrid: "/sys/fs/cgroup/unified"
            case .legacy, .none: nil
            }
            return CgroupDelegation.decide(forced: forced, layout: layout, unifiedMount: mount, ownPath: own,
                                           invocationID: invocation, isMarked: { _ in marked })
        }

        #expect(decide() == .delegated(root: "/sys/fs/cgroup/system.slice/lifecycled.service"))
        #expect(decide(invocation: nil) == .notDelegated(reason: "not started as a systemd service (no INVOCATION_ID)"))
        #expect(decide(marked: false) == .notDelegated(reason:
            "/sys/fs/cgroup/system.slice/lifecycled.service is not marked delegated (no user.delegate or trusted.delegate xattr); set Delegate=yes in the unit"),
            "root without Delegate=yes can write everything: writability proves nothing")
        #expect(decide(own: "/") == .notDelegated(reason: "our cgroup2 group is the root"))
        // A hybrid host delegates its cgroup2 part: taken (freeze, kill, tracking), seen in a systemd-nspawn container.
        #expect(decide(layout: .hybrid) == .delegated(root: "/sys/fs/cgroup/unified/system.slice/lifecycled.service"))
        #expect(decide(layout: .legacy, own: nil) == .notDelegated(reason: "no cgroup2 hierarchy (v1 only)"))
        #expect(decide(false) == .notDelegated(reason: "turned off"))

        // Forced: no INVOCATION_ID or mark needed, hybrid allowed (tests), but still not the root.
        #expect(decide(true, layout: .hybrid, invocation: nil, marked: false)
            == .delegated(root: "/sys/fs/cgroup/unified/system.slice/lifecycled.service"))
        #expect(decide(true, own: "/") == .notDelegated(reason: "our cgroup2 group is the root"))
        #expect(decide(true, layout: .legacy, own: nil) == .notDelegated(reason: "no cgroup2 hierarchy (v1 only)"))
    }

    @Test func alreadyInTheSupervisorLeafTheRootIsItsParent() {
        // DelegateSubgroup=supervisor (systemd 254), or a second detection in the same process.
        #expect(DelegatedSubtree.rootPath(ownPath: "/system.slice/lifecycled.service/supervisor") == "/system.slice/lifecycled.service")
        #expect(DelegatedSubtree.rootPath(ownPath: "/system.slice/lifecycled.service") == "/system.slice/lifecycled.service")
        #expect(DelegatedSubtree.rootPath(ownPath: "/system.slice/supervisors") == "/system.slice/supervisors")
        #expect(DelegatedSubtree.rootPath(ownPath: "/supervisor") == "/supervisor", "a top-level group keeps its name: its parent would be the root")

        var askedAbout: [String] = []
        let decision = CgroupDelegation.decide(
            forced: nil, layout: .unified, unifiedMount: "/sys/fs/cgroup",
            ownPath: "/system.slice/lifecycled.service/supervisor", invocationID: "x",
            isMarked: { askedAbout.append($0); return true })
        #expect(decision == .delegated(root: "/sys/fs/cgroup/system.slice/lifecycled.service"))
        #expect(askedAbout == ["/sys/fs/cgroup/system.slice/lifecycled.service"], "the mark is on the delegated root")
    }

    // MARK: Controllers and weights (laid out: a pure cgroup2 tree of plain files)

    @Test func onlyControllersTheRootOffersAreEnabled() throws {
        // Laid out: this machine's cgroup2 offers no cpu, io or memory.
        func enable(offered: String, enabled: String = "") throws -> (written: String, result: Set<String>) {
            let fake = try TemporaryDirectory()
            try writeNewFile(fake.path + "/cgroup.controllers", offered)
            try writeNewFile(fake.path + "/cgroup.subtree_control", enabled)
            let (result, failure) = DelegatedSubtree(root: fake.path).enableControllers()
            #expect(failure == nil)
            return (try readKernelFile(fake.path + "/cgroup.subtree_control"), result)
        }

        #expect(try enable(offered: "cpuset cpu io memory hugetlb pids\n") == ("+cpu +io +memory", ["cpu", "io", "memory"]))
        #expect(try enable(offered: "cpu pids\n") == ("+cpu", ["cpu"]), "no io or memory offered: not asked for")
        #expect(try enable(offered: "cpu io memory\n", enabled: "cpu\n") == ("+io +memory", ["cpu", "io", "memory"]))
        #expect(try enable(offered: "pids hugetlb\n") == ("", []), "nothing wanted is offered: nothing written")
        #expect(try enable(offered: "cpu io\n", enabled: "cpu io\n") == ("cpu io\n", ["cpu", "io"]), "already enabled: nothing written")
    }

    @Test func refusedControllersAreReportedNotThrown() throws {
        // Laid out: a directory where cgroup.subtree_control should be makes every write fail
        // (EISDIR), standing in for the kernel's EBUSY when processes are left in the root.
        let fake = try TemporaryDirectory()
        try writeNewFile(fake.path + "/cgroup.controllers", "cpu io memory\n")
        try makeDirectory(fake.path + "/cgroup.subtree_control")

        let (enabled, failure) = DelegatedSubtree(root: fake.path).enableControllers()

        #expect(enabled.isEmpty)
        #expect(failure?.errno == EISDIR)
        #expect(failure?.operation == "open \(fake.path)/cgroup.subtree_control")
    }

    @Test func delegatedPureCgroup2TreeGivesAppsWeightsAndLeavesTheRootsAttributes() throws {
        // Laid out as the kernel presents a delegated service cgroup on a pure cgroup2 host:
        // the root's files, the supervisor/ and app-demo/ directories with the files mkdir
        // would give them once cpu and io are enabled.
        let fake = try TemporaryDirectory()
        let root = fake.path
        let rootFiles = [
            "cgroup.controllers": "cpuset cpu io memory pids\n", "cgroup.subtree_control": "",
            "cgroup.procs": "4242\n", "cgroup.type": "domain\n", "cgroup.freeze": "0\n",
            "cpu.weight": "100\n", "io.weight": "default 100\n", "memory.max": "max\n",
        ]
        for (name, text) in rootFiles { try writeNewFile(root + "/" + name, text) }
        try makeDirectory(root + "/supervisor")
        try writeNewFile(root + "/supervisor/cgroup.procs", "")
        try makeDirectory(root + "/app-demo")
        for name in ["cgroup.procs", "cgroup.freeze", "cpu.weight", "io.weight"] {
            try writeNewFile(root + "/app-demo/" + name, "")
        }

        let support = try CgroupSupport.takeDelegated(DelegatedSubtree(root: root), layout: .unified, daemonPID: 4242)

        #expect(try readKernelFile(root + "/supervisor/cgroup.procs") == "4242")
        #expect(support.delegation == .delegated(root: root))
        #expect(support.fallbackReason == nil)
        #expect(support.hasCPUControl && support.canFreeze)
        #expect(support.mechanisms == [
            "app cgroups under: cgroup2 \(root) (delegated; lifecycled runs in \(root)/supervisor)",
            "cgroup2 controllers for apps: cpu io memory",
            "background priority: cgroup2 cpu.weight 100 → 20, kept while suspended",
            "background io priority: cgroup2 io.weight 100 → 20, kept while suspended",
            "foreground memory protection: cgroup2 memory.low (the app's MemoryLow=), none in the background or suspended",
            "suspend (freezer): cgroup2 cgroup.freeze",
            "oom_score_adj: 0 / 500 / 900",
        ])

        let cgroup = try support.makeAppCgroup(app: "demo")
        #expect(cgroup.unifiedPath == root + "/app-demo")
        #expect(cgroup.procsFiles == [root + "/app-demo/cgroup.procs"])
        #expect(cgroup.controlsCPU)
        try cgroup.setPriority(.background)
        #expect(try readKernelFile(root + "/app-demo/cpu.weight") == "20")
        #expect(try readKernelFile(root + "/app-demo/io.weight") == "default 20")

        for (name, text) in rootFiles where name != "cgroup.subtree_control" {
            #expect(try readKernelFile(root + "/" + name) == text, "\(name) of the delegated root is systemd's")
        }
        #expect(try readKernelFile(root + "/cgroup.subtree_control") == "+cpu +io +memory")
    }

    // MARK: This machine: a real cgroup2 root standing in for the service's

    @Test(onHybridRoot)
    func daemonMovesIntoSupervisorLeafAndTheRootKeepsItsAttributes() throws {
        try withDelegatedRoot("move") { root, name, daemon, _ in
            let before = attributeSnapshot(root)

            let support = CgroupSupport.detect(
                mountRoot: "/sys/fs/cgroup", selfCgroupFile: "/proc/\(daemon)/cgroup", groupName: name + "-unused",
                delegated: true, daemonPID: daemon, invocationID: nil)

            #expect(support.delegation == .delegated(root: root))
            #expect(support.fallbackReason == nil)
            #expect(ownUnifiedLine(daemon) == "0::/\(name)/supervisor")
            #expect(pids(in: root + "/supervisor/cgroup.procs") == [daemon])
            #expect(pids(in: root + "/cgroup.procs").isEmpty, "no process left in the root: it can enable controllers")
            // Nothing this cgroup2 offers is wanted (cgroup.controllers is empty or hugetlb), so
            // nothing may have been written to subtree_control.
            let offered = cgroupFileWords(root + "/cgroup.controllers")
            #expect(cgroupFileWords(root + "/cgroup.subtree_control").isSubset(of: offered.intersection(DelegatedSubtree.wantedControllers)))
            #expect(support.mechanisms.contains("cgroup2 controllers for apps: none"))
            #expect(support.mechanisms.contains("suspend (freezer): cgroup2 cgroup.freeze"))
            #expect(support.mechanisms.contains("background priority: nice 0 → 10, kept while suspended (no cgroup cpu control)"))
            #expect(!fileExists("/sys/fs/cgroup/cpu/\(name)-unused") && !fileExists(root + "/\(name)-unused"),
                    "no lifecycled group when delegated")

            #expect(attributeSnapshot(root) == before)
        }
    }

    @Test(onHybridRoot, .enabled(if: fileExists("/usr/bin/python3"), "needs python3 to play a daemon with several threads"))
    func everyThreadOfTheDaemonMovesWithIt() throws {
        // A daemon with threads, as the Swift runtime always has: python with three more.
        let script = "import threading,time\n[threading.Thread(target=time.sleep,args=(60,),daemon=True).start() for _ in range(3)]\ntime.sleep(60)"
        try withDelegatedRoot("threads", daemon: ["/usr/bin/python3", "-c", script]) { root, name, daemon, _ in
            #expect(eventually(timeout: 5) { threadIDs(of: daemon).count == 4 })

            try DelegatedSubtree(root: root).moveIntoLeaf(pid: daemon)

            let threads = threadIDs(of: daemon)
            #expect(threads.count == 4)
            for thread in threads {
                #expect((try? readKernelFile("/proc/\(daemon)/task/\(thread)/cgroup"))?.contains("0::/\(name)/supervisor\n") == true,
                        "thread \(thread)")
            }
            #expect(Set(pids(in: root + "/supervisor/cgroup.threads")) == Set(threads))
            #expect(pids(in: root + "/cgroup.threads").isEmpty)
        }
    }

    @Test(onHybridRoot)
    func appCgroupsGoBesideTheSupervisorAndFreezeAndKill() throws {
        try withDelegatedRoot("apps") { root, name, daemon, children in
            let before = attributeSnapshot(root)
            let support = CgroupSupport.detect(
                mountRoot: "/sys/fs/cgroup", selfCgroupFile: "/proc/\(daemon)/cgroup", groupName: name + "-unused",
                delegated: true, daemonPID: daemon, invocationID: nil)
            let cgroup = try support.makeAppCgroup(app: "demo")

            #expect(cgroup.unifiedPath == root + "/app-demo")
            #expect(cgroup.cpuPath == nil && cgroup.freezerPath == nil, "a delegated subtree is cgroup2 only")
            #expect(cgroup.freezer == .cgroup2)
            let first = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"], cgroupProcsFiles: cgroup.procsFiles))
            let second = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "31"], cgroupProcsFiles: cgroup.procsFiles))
            #expect(ownUnifiedLine(first) == "0::/\(name)/app-demo")
            #expect(Set(cgroup.pids()) == [first, second])

            try cgroup.freeze()
            #expect(eventually { cgroup.isFrozen() })
            #expect(ProcessTable.state(of: first) == "S")
            #expect(ProcessTable.state(of: daemon) != "T" && !isFrozen(root + "/supervisor"), "the daemon is not frozen with its app")
            #expect(cgroup.killAll().isEmpty)
            #expect(children.reap(first) == .signaled(SIGKILL))
            #expect(children.reap(second) == .signaled(SIGKILL))
            #expect(eventually { cgroup.pids().isEmpty })
            #expect(cgroup.remove().isEmpty)
            #expect(!fileExists(root + "/app-demo"))

            #expect(attributeSnapshot(root) == before, "freezing and killing apps writes none of the root's files")
        }
    }

    @Test(onHybridRoot)
    func removeParentRemovesAppCgroupsOnlyWhenDelegated() throws {
        try withDelegatedRoot("remove") { root, name, daemon, _ in
            let support = CgroupSupport.detect(
                mountRoot: "/sys/fs/cgroup", selfCgroupFile: "/proc/\(daemon)/cgroup", groupName: name + "-unused",
                delegated: true, daemonPID: daemon, invocationID: nil)
            _ = try support.makeAppCgroup(app: "left")
            _ = try support.makeAppCgroup(app: "frozen").freeze()
            // systemd's own sub-cgroup for ExecReload= and friends.
            try makeDirectory(root + "/.control")

            #expect(support.removeParent().isEmpty)

            #expect(!fileExists(root + "/app-left") && !fileExists(root + "/app-frozen"))
            #expect(fileExists(root + "/supervisor") && fileExists(root), "the daemon is still in supervisor/")
            #expect(fileExists(root + "/.control"), "systemd's")
            #expect(pids(in: root + "/supervisor/cgroup.procs") == [daemon])
        }
    }

    @Test(onHybridRoot)
    func failedMoveFallsBackToTheLifecycledGroups() throws {
        try withDelegatedRoot("fallback", daemon: nil) { root, name, _, _ in
            let selfCgroup = try TemporaryDirectory()
            try writeNewFile(selfCgroup.path + "/cgroup", "0::/\(name)\n")
            let gone = try pidOfAnExitedProcess()
            let groupName = name + "-group"

            let support = CgroupSupport.detect(
                mountRoot: "/sys/fs/cgroup", selfCgroupFile: selfCgroup.path + "/cgroup", groupName: groupName,
                delegated: true, daemonPID: gone, invocationID: nil)
            defer { support.removeParent() }

            #expect(support.fallbackReason == "not delegated: Failed to write '\(gone)' to \(root)/supervisor/cgroup.procs: No such process")
            #expect(support.delegation == .notDelegated(reason: "Failed to write '\(gone)' to \(root)/supervisor/cgroup.procs: No such process"))
            #expect(!fileExists(root + "/supervisor"), "the leaf it made is removed again")
            #expect(support.layout == .hybrid)
            #expect(support.unifiedParent == root + "/" + groupName)
            #expect(support.cpuParent == "/sys/fs/cgroup/cpu/" + groupName)

            #expect(support.removeParent().isEmpty)
            #expect(!fileExists(root + "/" + groupName) && !fileExists("/sys/fs/cgroup/cpu/" + groupName))
        }
    }

    @Test(onHybridRoot)
    func delegateMarkIsSystemdsXattrOnTheCgroup() throws {
        try withDelegatedRoot("mark", daemon: nil) { root, name, _, _ in
            let decide = {
                CgroupDelegation.decide(forced: nil, layout: .unified, unifiedMount: "/sys/fs/cgroup/unified",
                                        ownPath: "/" + name, invocationID: "0123abcd", isMarked: isMarkedDelegated)
            }
            #expect(!isMarkedDelegated(root))
            #expect(decide() != .delegated(root: root))

            try setExtendedAttribute("user.delegate", "1", of: root)  // what systemd does for Delegate=yes

            #expect(isMarkedDelegated(root))
            #expect(decide() == .delegated(root: root), "as it would be on a unified host")
        }
    }

    @Test(onHybridRoot)
    func trustedDelegateMarkCountsToo() throws {
        // systemd 244–250 set only trusted.delegate.
        try withDelegatedRoot("trusted", daemon: nil) { root, _, _, _ in
            try setExtendedAttribute("trusted.delegate", "1", of: root)
            #expect(isMarkedDelegated(root))
        }
    }

    @Test(onHybridRoot)
    func onThisHybridMachineAutoDetectionSaysWhyNotDelegated() {
        let name = "lifecycled-deleg-test-\(getpid())-auto"
        let support = CgroupSupport.detect(
            mountRoot: "/sys/fs/cgroup", selfCgroupFile: "/proc/self/cgroup", groupName: name,
            delegated: nil, daemonPID: getpid(), invocationID: "0123abcd")
        defer { support.removeParent() }

        // The test runner sits in the cgroup2 root here (not under systemd), so there is nothing delegated.
        #expect(support.fallbackReason == "not delegated: our cgroup2 group is the root")
        #expect(support.unifiedParent == "/sys/fs/cgroup/unified/\(name)")
        #expect(ownUnifiedLine(getpid()) == "0::/", "the test runner did not move")
    }
}

// MARK: - Helpers

/// Makes `/sys/fs/cgroup/unified/lifecycled-deleg-test-<pid>-<test>/`, the stand-in for the
/// cgroup systemd delegates to a service, and starts `daemon` in it (as systemd starts the
/// service's main process there). Afterwards kills and reaps every child and removes every
/// cgroup below and the root itself, whatever `body` did.
private func withDelegatedRoot(
    _ test: String, daemon argv: [String]? = ["/bin/sleep", "60"],
    _ body: (_ root: String, _ name: String, _ daemon: pid_t, _ children: Children) throws -> Void
) throws {
    let name = "lifecycled-deleg-test-\(getpid())-\(test)"
    let root = "/sys/fs/cgroup/unified/" + name
    try makeDirectory(root)
    let children = Children()
    defer {
        children.killAndReapAll()
        removeCgroupTree(root)
        #expect(!fileExists(root), "test cgroup left behind")
    }
    var daemon: pid_t = 0
    if let argv {
        daemon = try children.spawn(SpawnRequest(executable: argv[0], argv: argv, cgroupProcsFiles: [root + "/cgroup.procs"]))
    }
    try body(root, name, daemon, children)
}

/// Removes a cgroup and every cgroup below it, deepest first (after their processes are gone).
private func removeCgroupTree(_ path: String) {
    for child in subdirectoryNames(of: path) { removeCgroupTree(path + "/" + child) }
    if isFrozen(path) { try? writeKernelFile(path + "/cgroup.freeze", "0") }
    _ = eventually { rmdir(path) == 0 || errno == ENOENT }
}

/// The contents of the root's attribute files: what a write would change. Left out: who is in it
/// (cgroup.procs, cgroup.threads: checked separately) and statistics that change on their own.
private func attributeSnapshot(_ directory: String) -> [String: String] {
    let changing: Set<String> = ["cgroup.procs", "cgroup.threads", "cgroup.stat", "cgroup.stat.local", "cpu.stat", "cpu.stat.local"]
    var snapshot: [String: String] = [:]
    for name in directoryEntries(directory) where !changing.contains(name) {
        if name.hasSuffix(".pressure") && name != "cgroup.pressure" { continue }
        var info = stat()
        guard stat(directory + "/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { continue }
        // cgroup.kill cannot be read.
        if let text = try? readKernelFile(directory + "/" + name) { snapshot[name] = text }
    }
    return snapshot
}

private func pids(in file: String) -> [pid_t] {
    ((try? readKernelFile(file)) ?? "").split(separator: "\n").compactMap { pid_t(String($0)) }
}

private func threadIDs(of pid: pid_t) -> [pid_t] {
    directoryEntries("/proc/\(pid)/task").compactMap { pid_t($0) }.sorted()
}

private func ownUnifiedLine(_ pid: pid_t) -> String? {
    ((try? readKernelFile("/proc/\(pid)/cgroup")) ?? "").split(separator: "\n").first { $0.hasPrefix("0::") }.map(String.init)
}

private func isFrozen(_ cgroup: String) -> Bool {
    ((try? readKernelFile(cgroup + "/cgroup.events")) ?? "").split(separator: "\n").contains("frozen 1")
}

/// A pid no process has: one of ours, exited and reaped (pids are not reused at once).
private func pidOfAnExitedProcess() throws -> pid_t {
    let children = Children()
    let pid = try children.spawn(SpawnRequest(executable: "/bin/true", argv: ["true"]))
    #expect(children.reap(pid) == .exited(0))
    return pid
}

private func setExtendedAttribute(_ name: String, _ value: String, of path: String) throws {
    let bytes = Array(value.utf8)
    guard setxattr(path, name, bytes, bytes.count, 0) == 0 else {
        throw SystemError(operation: "set \(name) on \(path)", errno: errno)
    }
}

private func writeNewFile(_ path: String, _ text: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw SystemError(operation: "create \(path)", errno: errno) }
    close(fd)
    if !text.isEmpty { try writeKernelFile(path, text) }
}
