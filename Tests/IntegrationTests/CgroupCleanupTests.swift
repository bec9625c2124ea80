import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// An app's cgroup goes with it: when the daemon stops, even after the app needed SIGKILL, and when the app's
/// processes are dropped at re-adoption because the app left the configuration.
@Suite("app cgroups are removed", .serialized)
struct CgroupCleanupTests {
    let python = DaemonHarness.pythonClient

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Sends SIGTERM to the daemon and waits until it has exited.
    func stopDaemon(_ harness: DaemonHarness) throws {
        let pid = try #require(harness.daemonPID)
        kill(pid, SIGTERM)
        try harness.waitUntil("the daemon exited", timeout: 30) { !harness.isDaemonRunning }
    }

    @Test("a stop that needed SIGKILL leaves no app cgroup behind",
          .enabled(if: Host.canManageCgroups, "needs a cgroup per app (root)"))
    func killedAppLeavesNoCgroup() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("stubborn", "[App]\nExec=\(python) --ignore-sigterm --children 30\n\n[Lifecycle]\nTimeoutStopSec=1\n")
        try harness.start()
        try harness.control("launch", "stubborn")
        let cgroup = try #require(try harness.status("stubborn").cgroup, "the daemon made no cgroup for the app")
        try harness.waitUntil("the children are in the cgroup") {
            ((try? String(contentsOfFile: cgroup + "/cgroup.procs", encoding: .utf8)) ?? "").split(separator: "\n").count >= 31
        }

        try stopDaemon(harness)

        #expect(harness.log.contains("stubborn: did not exit within 1s of SIGTERM; sending SIGKILL"))
        #expect(!exists(cgroup), "the app's cgroup \(cgroup) is gone")
    }

    @Test("an app dropped at re-adoption (no longer configured) has its cgroup removed once its processes are gone",
          .enabled(if: Host.canManageCgroups, "needs a cgroup per app (root)"))
    func droppedAppLeavesNoCgroup() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("gone", "[App]\nExec=\(python) --ignore-sigterm --children 2\n\n[Lifecycle]\nTimeoutStopSec=1\n")
        try harness.app("kept", "[App]\nExec=\(python)\n")
        try harness.start()
        try harness.control("launch", "gone")
        let cgroup = try #require(try harness.status("gone").cgroup, "the daemon made no cgroup for the app")
        try harness.crash()
        try harness.removeApp("gone")
        try harness.start(keepLog: true)
        try harness.waitUntil("the dropped app's cgroup is removed", timeout: 15) { !exists(cgroup) }
    }
}
