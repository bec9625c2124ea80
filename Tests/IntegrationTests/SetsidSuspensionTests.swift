import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// A suspension by signal of an app whose child called setsid() and keeps forking: the stop is confirmed against
/// the app's cgroup as it is after the signals, so that a process forked meanwhile is stopped too.
@Suite("suspension of an app with a setsid() child", .serialized)
struct SetsidSuspensionTests {
    static let fixture = DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/setsid_forker.sh").path

    func members(_ cgroup: String) -> [pid_t] {
        let text = (try? String(contentsOfFile: cgroup + "/cgroup.procs", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { pid_t($0) }
    }

    /// SIGSTOP in SigPnd or ShdPnd of /proc/PID/status.
    func stopPending(_ pid: pid_t) -> Bool {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        return status.split(separator: "\n").contains { line in
            guard line.hasPrefix("SigPnd:") || line.hasPrefix("ShdPnd:"),
                  let mask = line.split(separator: "\t").last.flatMap({ UInt64($0, radix: 16) }) else { return false }
            return mask & (UInt64(1) << UInt64(SIGSTOP - 1)) != 0
        }
    }

    @Test("every process in the app's cgroup is stopped (T) once its suspension is confirmed, even one forked during the stop",
          .enabled(if: Host.canManageCgroups, "needs a cgroup per app (root); without one the limit is documented"))
    func everyCgroupMemberIsStopped() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("forker", "[App]\nExec=\(Self.fixture)\nProtocol=none\n\n[Lifecycle]\nBackgroundTimeSec=infinity\nSuspendMethod=signal\nTimeoutStopSec=2\n")
        try harness.start()
        try harness.control("launch", "forker", "--background")
        let cgroup = try #require(try harness.status("forker").cgroup, "the daemon made no cgroup for the app")
        try harness.waitUntil("the setsid() child forks") { members(cgroup).count > 4 }

        for round in 1...8 {
            let confirmations = harness.log.components(separatedBy: "forker: suspended with signal").count
            try harness.control("suspend", "forker")
            try harness.waitUntil("the suspension is confirmed (round \(round))") {
                harness.log.components(separatedBy: "forker: suspended with signal").count > confirmations
            }
            let running = members(cgroup).filter { pid in
                guard let state = Kernel.state(pid), state != "T", state != "Z" else { return false }
                // In an uninterruptible wait with SIGSTOP pending: it stops before it runs any code of its own.
                return !(state == "D" && stopPending(pid))
            }
            #expect(running.isEmpty, "round \(round): processes of the suspended app still run: \(running)")
            try harness.control("resume", "forker")
            usleep(50_000)
        }
    }
}
