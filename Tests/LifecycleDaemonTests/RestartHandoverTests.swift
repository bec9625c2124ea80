import Foundation
import Glibc
import Testing
@testable import LifecycleDaemon

/// What the daemon does to its delegated cgroup before it hands the apps over at `systemctl restart`.
/// Laid out in a temporary directory of plain files named like cgroup files: this hybrid machine's cgroup2 offers
/// no cpu, io or memory controller to enable, so the kernel's refusal of a process in a cgroup with controllers
/// enabled (which is why this exists) cannot be shown here; the code takes paths and does not know the difference.
@Suite struct RestartHandoverTests {
    func support(delegatedTo root: String?) -> CgroupSupport {
        var support = CgroupSupport(layout: .unified)
        if let root { support.delegation = .delegated(root: root) }
        return support
    }

    func makeRoot(subtreeControl: String) throws -> String {
        let root = NSTemporaryDirectory() + "restart-handover-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: root + "/app-a", withIntermediateDirectories: true)
        try subtreeControl.write(toFile: root + "/cgroup.subtree_control", atomically: false, encoding: .utf8)
        return root
    }

    @Test func theControllersEnabledForTheAppsAreDisabledSoThatSystemdCanStartTheNextDaemonInTheRoot() throws {
        let root = try makeRoot(subtreeControl: "cpu io memory\n")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let released = try support(delegatedTo: root).releaseControllersForNextStart()
        #expect(released == ["cpu", "io", "memory"])
        #expect(try String(contentsOfFile: root + "/cgroup.subtree_control", encoding: .utf8) == "-cpu -io -memory")
        #expect(FileManager.default.fileExists(atPath: root + "/app-a"), "the app cgroups stay")
    }

    @Test func nothingIsWrittenWhenNoControllerIsEnabledOrTheDaemonIsNotDelegated() throws {
        let root = try makeRoot(subtreeControl: "\n")
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(try support(delegatedTo: root).releaseControllersForNextStart() == [])
        #expect(try String(contentsOfFile: root + "/cgroup.subtree_control", encoding: .utf8) == "\n")
        #expect(try support(delegatedTo: nil).releaseControllersForNextStart() == [])
    }

    @Test func aRefusedWriteIsThrownSoThatTheDaemonStopsTheAppsInstead() throws {
        let root = try makeRoot(subtreeControl: "")
        defer { try? FileManager.default.removeItem(atPath: root) }
        // A sysfs file with words in it that nobody may open for writing, not even root (kernfs refuses a write
        // open of a file without write permission bits): the refusal the kernel gives when it will not let go.
        try FileManager.default.removeItem(atPath: root + "/cgroup.subtree_control")
        try FileManager.default.createSymbolicLink(atPath: root + "/cgroup.subtree_control", withDestinationPath: "/sys/devices/system/cpu/online")
        #expect(throws: SystemError.self) { try support(delegatedTo: root).releaseControllersForNextStart() }
    }

    /// The job types systemd knows. Installed jobs are collapsed first: try-restart becomes restart on a running
    /// unit, and reload-or-start and try-reload become reload or start.
    @Test func onlyARestartJobHandsTheAppsOver() {
        #expect(SystemdJob.isRestart(jobType: "restart"))
        #expect(SystemdJob.isRestart(jobType: "try-restart"))
        for type in ["start", "verify-active", "stop", "reload", "try-reload", "reload-or-start", "nop", "", "Restart"] {
            #expect(!SystemdJob.isRestart(jobType: type), "\(type)")
        }
    }
}
