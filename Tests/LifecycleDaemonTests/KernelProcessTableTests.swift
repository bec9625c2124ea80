import Glibc
import Testing
@testable import LifecycleDaemon

@Suite struct KernelProcessTableTests {
    @Test func stoppedGroupIsAllStoppedAndContinuedGroupIsNoneStopped() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        // Two processes in one group: a shell and its background sleep, which the shell reaps.
        // (An orphaned grandchild goes to PID 1, which here reaps only about a second later.)
        let leader = try children.spawn(SpawnRequest(executable: "/bin/sh", argv: ["sh", "-c", "sleep 30 & wait"]))
        #expect(eventually { ProcessTable.members(ofProcessGroup: leader).count == 2 })
        let members = ProcessTable.members(ofProcessGroup: leader)
        defer {
            kill(-leader, SIGCONT)
            for pid in members where pid != leader { kill(pid, SIGKILL) }
            _ = children.reap(leader)
        }
        #expect(members.contains(leader))
        #expect(ProcessTable.noneStopped(members))

        try sendSignal(SIGSTOP, toProcessGroup: leader)
        #expect(eventually { ProcessTable.allStopped(members) })

        try sendSignal(SIGCONT, toProcessGroup: leader)
        #expect(eventually { ProcessTable.noneStopped(members) })
        #expect(!ProcessTable.allStopped(members))
    }

    /// cgroup.procs parsed in one pass (`AppCgroup.decimalLines`): the numbers of the lines, the empty and the
    /// malformed lines skipped, a number too large for a pid skipped, the last line with or without its newline.
    @Test(arguments: [
        ("", [pid_t]()), ("\n", []), ("1\n", [1]), ("12\n34\n", [12, 34]), ("12\n\n34", [12, 34]),
        ("x\n5\n", [5]), ("5x\n6\n", [6]), ("2147483647\n2147483648\n99999999999\n7", [2147483647, 7]),
        ("0012\n", [12]),
    ])
    func cgroupProcsLinesAreParsed(_ text: String, _ expected: [pid_t]) {
        var bytes = Array(text.utf8)
        #expect(bytes.withUnsafeMutableBufferPointer { AppCgroup.decimalLines(UnsafeBufferPointer($0)) } == expected)
    }

    @Test func startTimeIdentifiesAProcess() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"]))

        let started = try #require(ProcessTable.startTime(of: pid))
        #expect(ProcessTable.startTime(of: pid) == started)
        #expect(try #require(ProcessTable.startTime(of: getpid())) <= started)
        // Running (R) just after execve, then asleep.
        #expect(eventually { ProcessTable.state(of: pid) == "S" })
    }

    @Test func vanishedProcessHasNoState() {
        // Above the default pid_max, so never a real process.
        #expect(ProcessTable.state(of: 4_194_304 + 1) == nil)
        #expect(ProcessTable.startTime(of: 4_194_304 + 1) == nil)
    }

    // A fake /proc: command names may hold spaces and ')' (prctl PR_SET_NAME accepts anything).
    @Test func statIsParsedAfterTheLastParenthesis() throws {
        let proc = try TemporaryDirectory()
        try fakeProcess(4242, comm: "evil) T 1 (x", state: "T", pgrp: 4242, startTime: 123_456, in: proc.path)
        try fakeProcess(4243, comm: "two words", state: "S", pgrp: 4242, startTime: 123_999, in: proc.path)
        try fakeProcess(4244, comm: "gone", state: "Z", pgrp: 4242, startTime: 124_000, in: proc.path)
        try fakeProcess(5000, comm: "other", state: "T", pgrp: 5000, startTime: 1, in: proc.path)
        try makeDirectory(proc.path + "/self")

        #expect(ProcessTable.members(ofProcessGroup: 4242, procRoot: proc.path) == [4242, 4243, 4244])
        #expect(ProcessTable.state(of: 4242, procRoot: proc.path) == "T")
        #expect(ProcessTable.startTime(of: 4242, procRoot: proc.path) == 123_456)
        let both = try #require(ProcessTable.stateAndStartTime(of: 4242, procRoot: proc.path))
        #expect(both.state == "T" && both.startTime == 123_456)
        #expect(ProcessTable.stateAndStartTime(of: 4243, procRoot: proc.path).map { "\($0.state) \($0.startTime)" } == "S 123999")
        #expect(ProcessTable.stateAndStartTime(of: 4245, procRoot: proc.path) == nil)
        #expect(ProcessTable.allStopped([4242], procRoot: proc.path))
        #expect(!ProcessTable.allStopped([4242, 4243], procRoot: proc.path))
        #expect(ProcessTable.noneStopped([4243], procRoot: proc.path))
        #expect(!ProcessTable.noneStopped([4243, 4242], procRoot: proc.path))
    }

    @Test func exitedProcessesDoNotHoldBackAStoppedGroup() throws {
        let proc = try TemporaryDirectory()
        try fakeProcess(10, comm: "stopped", state: "T", pgrp: 10, startTime: 1, in: proc.path)
        try fakeProcess(11, comm: "zombie", state: "Z", pgrp: 10, startTime: 1, in: proc.path)

        #expect(ProcessTable.allStopped([10, 11, 12], procRoot: proc.path), "a zombie and a vanished pid are skipped")
        #expect(!ProcessTable.allStopped([11, 12], procRoot: proc.path), "nothing is stopped")
        #expect(!ProcessTable.allStopped([], procRoot: proc.path))
        #expect(ProcessTable.noneStopped([], procRoot: proc.path))
    }
}

/// Writes `<root>/<pid>/stat` in the kernel's format (52 fields; see proc(5)).
private func fakeProcess(_ pid: pid_t, comm: String, state: Character, pgrp: pid_t, startTime: UInt64, in root: String) throws {
    try makeDirectory("\(root)/\(pid)")
    // Fields 3…52: state, ppid, pgrp, session, tty, tpgid, flags, minflt… starttime is field 22.
    var fields = [String](repeating: "0", count: 50)
    fields[0] = String(state)
    fields[1] = "1"
    fields[2] = String(pgrp)
    fields[3] = String(pgrp)
    fields[19] = String(startTime)
    let line = "\(pid) (\(comm)) " + fields.joined(separator: " ") + "\n"
    let fd = open("\(root)/\(pid)/stat", O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw SystemError(operation: "create a fake stat", errno: errno) }
    defer { close(fd) }
    try writeKernelFile("\(root)/\(pid)/stat", line)
}
