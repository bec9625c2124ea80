import Foundation
import Glibc
import LifecycleModel
import LifecycleProtocol
import Testing

/// Apps that fork (Tests/Fixtures/forking_app.py): a child in the app's process group, one that left it with
/// setsid(), and a grandchild orphaned by its parent. Suspension, resumption and termination reach all of them
/// through the app's cgroup (the process group alone for what stays in it); read from /proc and cgroup files.
@Suite("apps that fork", .serialized)
struct ForkedChildrenTests {
    static let fixture = DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/forking_app.py").path

    struct Pids: Decodable {
        var main: pid_t
        var grouped: pid_t
        var escaped: pid_t
        var orphan: pid_t
        var all: [pid_t] { [main, grouped, escaped, orphan] }
        var descendants: [pid_t] { [grouped, escaped, orphan] }
    }

    func app(_ daemon: DaemonHarness, _ mode: String, suspend: String, restart: String = "no") -> String {
        let file = daemon.root.appendingPathComponent("pids.json").path
        return "[App]\nExec=\(Self.fixture) \(file) \(mode)\nProtocol=none\nRestart=\(restart)\n\n"
            + "[Lifecycle]\nBackgroundTimeSec=infinity\nSuspendMethod=\(suspend)\nTimeoutStopSec=2\n"
    }

    func pids(_ daemon: DaemonHarness) throws -> Pids {
        let file = daemon.root.appendingPathComponent("pids.json")
        try daemon.waitUntil("the app started its children") { FileManager.default.fileExists(atPath: file.path) }
        return try JSONDecoder().decode(Pids.self, from: Data(contentsOf: file))
    }

    /// Dead: gone, or a zombie. A zombie is reaped by its parent: the daemon for the app's main process; for the
    /// descendants the main process left behind, whoever they were reparented to (PID 1: see `noZombieOfTheDaemon`).
    func isDead(_ pid: pid_t) -> Bool { Kernel.state(pid) == nil || Kernel.state(pid) == "Z" }

    func parent(of pid: pid_t) -> pid_t? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(close, offsetBy: 2)...].split(separator: " ").dropFirst().first.flatMap { pid_t($0) }
    }

    /// No zombie the daemon should reap is left: none of its children is a zombie.
    func expectNoZombieOfTheDaemon(_ daemon: DaemonHarness) throws {
        let daemonPID = try #require(daemon.daemonPID)
        try daemon.waitUntil("no child of the daemon is a zombie", timeout: 10) {
            let children = (try? String(contentsOfFile: "/proc/\(daemonPID)/task/\(daemonPID)/children", encoding: .utf8)) ?? ""
            return children.split(separator: " ").compactMap { pid_t($0) }.allSatisfy { Kernel.state($0) != "Z" }
        }
    }

    /// The cgroup2 group of a process (the `0::` line of /proc/PID/cgroup).
    func unifiedCgroup(of pid: pid_t) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8) else { return nil }
        return text.split(separator: "\n").first { $0.hasPrefix("0::") }.map { String($0.dropFirst(3)) }
    }

    /// `frozen 1` in the cgroup2 group's cgroup.events: every task in it is frozen.
    func frozen(_ cgroup: String) -> Bool {
        let events = (try? String(contentsOfFile: cgroup + "/cgroup.events", encoding: .utf8)) ?? ""
        return events.split(separator: "\n").contains("frozen 1")
    }

    @Test("SuspendMethod=freezer: all of an app's processes, wherever they forked to, are frozen, thawed, and killed",
          .enabled(if: Host.hasCgroup2Freezer, "needs a cgroup2 group per app (root, cgroup2); the signal test covers the rest"))
    func freezerReachesEveryDescendant() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("forker", app(harness, "stay", suspend: "freezer"))
        try harness.start()
        try harness.control("launch", "forker", "--background")
        let pids = try pids(harness)
        let status = try harness.status("forker")
        let cgroup = try #require(status.cgroup, "the daemon made no cgroup for the app: \(status.suspendMethod)")
        #expect(cgroup.contains("unified") || !cgroup.contains("/cpu"), "a cgroup2 group: \(cgroup)")
        let group = try #require(unifiedCgroup(of: pids.main))
        for pid in pids.all {
            #expect(unifiedCgroup(of: pid) == group, "pid \(pid) is in the app's cgroup, even after setsid or reparenting")
        }
        let path = "/sys/fs/cgroup/unified" + group
        let cgroupRoot = FileManager.default.fileExists(atPath: path) ? path : "/sys/fs/cgroup" + group

        try harness.control("suspend", "forker")
        try harness.waitUntil("the cgroup is frozen") { frozen(cgroupRoot) }
        #expect(try harness.status("forker").state.rawValue == "suspended")

        try harness.control("resume", "forker")
        try harness.waitUntil("the cgroup is thawed") { !frozen(cgroupRoot) }
        #expect(pids.all.allSatisfy { Kernel.state($0) != "T" && Kernel.state($0) != nil })

        try harness.control("terminate", "forker")
        try harness.waitUntil("every process of the app is dead") { pids.all.allSatisfy(isDead) }
        try expectNoZombieOfTheDaemon(harness)
    }

    @Test("SuspendMethod=signal: the process group is stopped (T) and continued; termination kills every descendant")
    func signalReachesTheGroupAndTerminationReachesAll() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("forker", app(harness, "stay", suspend: "signal"))
        try harness.start()
        try harness.control("launch", "forker", "--background")
        let pids = try pids(harness)
        let hasCgroup = try harness.status("forker").cgroup != nil

        try harness.control("suspend", "forker")
        let inGroup = [pids.main, pids.grouped, pids.orphan]
        #expect(inGroup.allSatisfy { getpgid($0) == pids.main }, "the orphan stayed in the group")
        try harness.waitUntil("the process group is stopped") { inGroup.allSatisfy { Kernel.state($0) == "T" } }
        // A child that left the process group (setsid) is still in the app's cgroup, and stopped with it;
        // without a cgroup nothing can find it (the process group is all there is).
        if hasCgroup {
            try harness.waitUntil("the child that called setsid() is stopped too") { Kernel.state(pids.escaped) == "T" }
        }

        try harness.control("resume", "forker")
        try harness.waitUntil("the process group runs again") { inGroup.allSatisfy { Kernel.state($0) != "T" } }
        if hasCgroup {
            try harness.waitUntil("the child that called setsid() runs again") { Kernel.state(pids.escaped) != "T" }
        }

        try harness.control("terminate", "forker")
        try harness.waitUntil("the main process and its group are dead") { inGroup.allSatisfy(isDead) }
        if hasCgroup {
            try harness.waitUntil("the escaped child is dead too (the app's cgroup is killed)") { isDead(pids.escaped) }
        }
        try expectNoZombieOfTheDaemon(harness)
    }

    @Test("a main process that exits takes its descendants with it: the daemon kills its group and cgroup")
    func descendantsDieWithTheMainProcess() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("forker", app(harness, "exit", suspend: "signal"))
        try harness.start()
        try harness.control("launch", "forker")
        let pids = try pids(harness)
        try harness.waitForState("forker", "notRunning")
        let hasCgroup = harness.log.contains("cgroup layout: cgroup2") || harness.log.contains("cgroup layout: hybrid")
        try harness.waitUntil("the grouped child and the orphan are dead") { isDead(pids.grouped) && isDead(pids.orphan) }
        if hasCgroup {
            try harness.waitUntil("the escaped child is dead") { isDead(pids.escaped) }
        }
        #expect(harness.log.contains("forker: process \(pids.main) exited"))
        try expectNoZombieOfTheDaemon(harness)
    }
}
