import Glibc
import Testing
import TestSupport
@testable import LifecycleDaemon

/// Paging a stopped process's memory out with process_madvise, on a real process. Anonymous memory leaves RAM
/// only into swap: the test turns a zram swap device on for itself where the machine has none (and off again),
/// and where no swap can be had it checks the other half of the promise: nothing fails, and the anonymous memory
/// stays.
@Suite(.serialized) struct KernelMemoryReclaimTests {
    @Test func onlyWritablePrivateMappingsArePagedOut() {
        let maps = """
            55d0c000-55d0e000 r--p 00000000 fd:00 131 /usr/bin/python3
            7f00a000-7f40a000 rw-p 00000000 00:00 0
            7f50a000-7f60a000 rw-s 00000000 00:01 12 /dev/shm/x
            7ffd1000-7ffd3000 r--p 00000000 00:00 0 [vvar]
            7ffd3000-7ffd5000 r-xp 00000000 00:00 0 [vdso]
            7ffe0000-7fff0000 rw-p 00000000 00:00 0 [stack]
            """
        #expect(PageOut.privateMappings(maps) == [
            PageOut.Range(start: 0x7f00a000, length: 0x400000),
            PageOut.Range(start: 0x7ffe0000, length: 0x10000),
        ])
    }

    @Test(.enabled(if: getuid() == 0, "a zram swap device and another process's memory need root"))
    func aStoppedProcessAnonymousMemoryLeavesRAM() throws {
        let swapOn = TestSwap.on
        #expect(swapOn || !fileExists("/sys/class/zram-control"), "a machine with zram gets its swap device")
        let children = Children()
        defer { children.killAndReapAll() }
        // 64 MiB, each page written once (a zero-filled bytearray is not in RAM until touched).
        let pid = try children.spawn(SpawnRequest(executable: "/usr/bin/python3", argv: ["python3", "-c", """
            b = bytearray(64 << 20)
            for i in range(0, len(b), 4096): b[i] = 1
            import sys, time
            sys.stdout.write("ready\\n"); sys.stdout.flush()
            time.sleep(600)
            """]))
        try #require(eventually(timeout: 30) { (ProcessMemory.of(pid)?.residentAnonymous ?? 0) > 60 << 20 },
                     "the child touched its 64 MiB: \(String(describing: ProcessMemory.of(pid))), state \(String(describing: ProcessTable.state(of: pid)))")
        kill(pid, SIGSTOP)
        try #require(eventually(timeout: 10) { ProcessTable.state(of: pid) == "T" })
        let before = try #require(ProcessMemory.of(pid))

        var pageOut = try PageOut(pid: pid)
        var steps = 0
        while !pageOut.done {
            try pageOut.step(budget: 16 << 20)
            steps += 1
        }
        let after = try #require(ProcessMemory.of(pid))
        #expect(pageOut.advised >= 64 << 20, "every private mapping advised")
        #expect(steps > 1, "the work is done in bounded steps")
        if swapOn {
            #expect(after.residentAnonymous < before.residentAnonymous / 10, "before \(before), after \(after)")
            #expect(after.swapped >= 60 << 20, "the anonymous memory is in swap: \(after)")
        } else {
            #expect(after.residentAnonymous >= 60 << 20, "without swap the anonymous memory stays: \(after)")
        }

        // Continued, it faults its pages back and runs on.
        kill(pid, SIGCONT)
        try #require(eventually(timeout: 10) { ProcessTable.state(of: pid) != "T" })
        #expect(kill(pid, 0) == 0)
    }

    @Test(.enabled(if: getuid() == 0, "another process's memory needs root"))
    func aMappingLargerThanTheBudgetIsPagedOutAPartAtATime() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        let pid = try children.spawn(SpawnRequest(executable: "/usr/bin/python3", argv: ["python3", "-c", """
            b = bytearray(64 << 20)
            for i in range(0, len(b), 4096): b[i] = 1
            import time
            time.sleep(600)
            """]))
        try #require(eventually(timeout: 30) { (ProcessMemory.of(pid)?.residentAnonymous ?? 0) > 60 << 20 })
        kill(pid, SIGSTOP)
        try #require(eventually(timeout: 10) { ProcessTable.state(of: pid) == "T" })

        let budget: UInt = 4 << 20
        var pageOut = try PageOut(pid: pid)
        var largest: UInt64 = 0
        while !pageOut.done {
            let before = pageOut.advised
            try pageOut.step(budget: budget)
            largest = max(largest, pageOut.advised - before)
        }
        #expect(pageOut.advised >= 64 << 20, "every private mapping advised")
        #expect(largest <= UInt64(budget), "no step advised more than its budget: \(largest) bytes")
        kill(pid, SIGCONT)
    }

    @Test func aProcessThatIsGoneIsAnError() throws {
        let children = Children()
        let pid = try children.spawn(SpawnRequest(executable: "/bin/true", argv: ["true"]))
        _ = children.reap(pid)
        #expect(throws: SystemError.self) { _ = try PageOut(pid: pid) }
    }
}

/// A zram swap device for the test's lifetime, unless the machine has swap already (then that one is used) or
/// cannot have one (then `on` is false).
