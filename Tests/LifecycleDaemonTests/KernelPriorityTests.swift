import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

@Suite struct KernelPriorityTests {
    @Test(.enabled(if: getuid() == 0, "lowering oom_score_adj and nice again needs root"))
    func priorityClassSetsOOMScoreAndNice() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"]))
        let which = __priority_which_t(PRIO_PGRP.rawValue)

        #expect(ProcessPriority.apply(.background, processGroup: pid, members: [pid], useNice: true).isEmpty)
        #expect(try readKernelFile("/proc/\(pid)/oom_score_adj") == "500\n")
        #expect(getpriority(which, id_t(pid)) == 10)

        #expect(ProcessPriority.apply(.suspended, processGroup: pid, members: [pid], useNice: false).isEmpty)
        #expect(try readKernelFile("/proc/\(pid)/oom_score_adj") == "900\n")
        #expect(getpriority(which, id_t(pid)) == 10, "nice is left alone without useNice")

        #expect(ProcessPriority.apply(.foreground, processGroup: pid, members: [pid], useNice: true).isEmpty)
        #expect(try readKernelFile("/proc/\(pid)/oom_score_adj") == "0\n")
        #expect(getpriority(which, id_t(pid)) == 0)
    }

    @Test(.enabled(if: getuid() == 0, "lowering nice again needs root"))
    func niceIsLeftAloneWhereTheClassWeighsTheSame() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"]))
        let which = __priority_which_t(PRIO_PGRP.rawValue)

        #expect(ProcessPriority.apply(.background, processGroup: pid, members: [pid], useNice: true).isEmpty)
        #expect(getpriority(which, id_t(pid)) == 10)
        // Someone else renices it: a suspension (same weights as the background) does not write nice again...
        #expect(setpriority(which, id_t(pid), 5) == 0)
        #expect(ProcessPriority.apply(.suspended, from: .background, processGroup: pid, members: [pid], useNice: true).isEmpty)
        #expect(try readKernelFile("/proc/\(pid)/oom_score_adj") == "900\n", "oom_score_adj differs, and is written")
        #expect(getpriority(which, id_t(pid)) == 5)
        // ...while a class known to weigh otherwise, or an unknown previous one, does.
        #expect(ProcessPriority.apply(.suspended, from: .foreground, processGroup: pid, members: [pid], useNice: true).isEmpty)
        #expect(getpriority(which, id_t(pid)) == 10)
        #expect(setpriority(which, id_t(pid), 5) == 0)
        #expect(ProcessPriority.apply(.suspended, processGroup: pid, members: [pid], useNice: true).isEmpty)
        #expect(getpriority(which, id_t(pid)) == 10)
    }

    @Test func suspendedAppsKeepTheirBackgroundWeights() {
        // A stopped or frozen process runs no code: only its rank for the OOM killer changes.
        #expect(PriorityClass.suspended.weightClass == .background)
        #expect(PriorityClass.suspended.cpuShares == PriorityClass.background.cpuShares)
        #expect(PriorityClass.suspended.cgroupWeight == PriorityClass.background.cgroupWeight)
        #expect(PriorityClass.suspended.niceValue == PriorityClass.background.niceValue)
        #expect(PriorityClass.suspended.oomScoreAdj > PriorityClass.background.oomScoreAdj)
        #expect(PriorityClass.foreground.cpuShares > PriorityClass.background.cpuShares)
    }

    @Test func vanishedMembersAreNotFailures() {
        #expect(ProcessPriority.apply(.background, processGroup: 4_194_305, members: [4_194_305], useNice: true).isEmpty)
    }
}

@Suite struct KernelSignalTests {
    @Test func signalReachesTheGroupAndAGoneGroupIsNotAnError() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"]))

        #expect(try sendSignal(SIGTERM, toProcessGroup: pid))
        #expect(children.reap(pid) == .signaled(SIGTERM))
        #expect(try sendSignal(SIGTERM, toProcessGroup: pid) == false)
    }

    @Test func pidFDBecomesReadableOnExit() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"]))
        let pidfd = try openPidFD(pid)

        var entry = pollfd(fd: pidfd.rawValue, events: Int16(POLLIN), revents: 0)
        #expect(poll(&entry, 1, 0) == 0)
        kill(pid, SIGKILL)
        #expect(poll(&entry, 1, 2000) == 1)
        #expect(children.reap(pid) == .signaled(SIGKILL))
    }

    @Test func systemErrorSaysWhatFailedAndWhy() {
        #expect(SystemError(operation: "open /sys/fs/cgroup/x", errno: EACCES).description
            == "Failed to open /sys/fs/cgroup/x: Permission denied")
    }
}
