import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// How a suspension is confirmed, and which priority files a suspend and a resume leave: real daemons, real
/// processes, real signals; the kernel's view read from /proc and the cgroup files, the daemon's from its log.
/// The daemon confirms the stop of a process it started from the kernel's report (CLD_STOPPED), of one it did not
/// start (re-adopted) from /proc; either way every process of the app is checked.
@Suite("suspension: confirmation and priority", .serialized)
struct SuspendConfirmationTests {
    static let forkingApp = DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/forking_app.py").path
    let plain = "[App]\nExec=sleep 100000\nProtocol=none\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n"

    func confirmations(_ daemon: DaemonHarness, _ app: String) -> [Substring] {
        daemon.log.split(separator: "\n").filter { $0.contains("\(app): suspended with signal: ") && $0.contains("confirmed after") }
    }

    /// The CPU weight file of the process's group that the daemon writes: v1 cpu.shares where the cpu controller is
    /// on v1 (a hybrid host), else cgroup2 cpu.weight; nil where neither exists (no cgroup cpu control here).
    func weightFile(of pid: pid_t) -> String? {
        let lines = ((try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)) ?? "").split(separator: "\n")
        for line in lines {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3, fields[1].split(separator: ",").contains("cpu") else { continue }
            let file = "/sys/fs/cgroup/\(fields[1])\(fields[2])/cpu.shares"
            if FileManager.default.fileExists(atPath: file) { return file }
        }
        guard let unified = lines.first(where: { $0.hasPrefix("0::") })?.dropFirst(3) else { return nil }
        return ["/sys/fs/cgroup/unified\(unified)/cpu.weight", "/sys/fs/cgroup\(unified)/cpu.weight"]
            .first { FileManager.default.fileExists(atPath: $0) }
    }

    func read(_ file: String) -> String {
        ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("a suspension is confirmed, and a suspended app keeps its background CPU weight while its oom_score_adj rises")
    func suspendedAppKeepsItsBackgroundWeight() throws {
        try DaemonHarness.running(["plain": plain]) { daemon in
            try daemon.control("launch", "plain", "--background")
            let pid = try #require(try daemon.status("plain").pid)
            let weight = weightFile(of: pid)
            let background = weight.map(read)
            if let weight { #expect(["128", "20"].contains(read(weight)), "background weight in \(weight)") }
            #expect(read("/proc/\(pid)/oom_score_adj") == "500")

            try daemon.control("suspend", "plain")
            try daemon.waitUntil("plain is stopped") { Kernel.state(pid) == "T" }
            try daemon.waitUntil("the daemon confirmed the stop") { confirmations(daemon, "plain").count == 1 }
            #expect(confirmations(daemon, "plain").first?.contains("1 process stopped") == true)
            #expect(read("/proc/\(pid)/oom_score_adj") == "900", "suspended apps are the first the OOM killer takes")
            if let weight { #expect(read(weight) == background, "a stopped process runs no code: its weight is left as it was") }

            try daemon.control("resume", "plain")
            try daemon.waitUntil("plain runs again") { Kernel.state(pid) != "T" }
            #expect(read("/proc/\(pid)/oom_score_adj") == "500")
            if let weight { #expect(read(weight) == background) }

            try daemon.control("focus", "plain")
            #expect(read("/proc/\(pid)/oom_score_adj") == "0")
            if let weight { #expect(["1024", "100"].contains(read(weight)), "foreground weight") }
            // Stopped by someone else while in the foreground: it gets the suspended rank and the background weight.
            kill(-pid, SIGSTOP)
            try daemon.waitForState("plain", "suspended")
            #expect(read("/proc/\(pid)/oom_score_adj") == "900")
            if let weight { #expect(read(weight) == background) }
            kill(-pid, SIGCONT)
            try daemon.waitForState("plain", "background")
            #expect(read("/proc/\(pid)/oom_score_adj") == "500")
            #expect(!daemon.log.contains("Failed to confirm"))
        }
    }

    @Test("once the daemon's own stop is confirmed, someone else's SIGCONT is noticed; its own resume never is taken for one")
    func continueAfterAConfirmedStopIsSomeoneElses() throws {
        try DaemonHarness.running(["plain": plain]) { daemon in
            try daemon.control("launch", "plain", "--background")
            let pid = try #require(try daemon.status("plain").pid)
            // Back-to-back pairs: the report of each resume's SIGCONT may arrive after the next SIGSTOP.
            for _ in 0..<20 {
                try daemon.control("suspend", "plain")
                try daemon.control("resume", "plain")
            }
            #expect(try daemon.status("plain").state.rawValue == "background")
            try daemon.waitUntil("plain runs") { Kernel.state(pid) != "T" }
            #expect(!daemon.log.contains("by someone else"), "the daemon's own stops and continues are its own")

            let confirmed = confirmations(daemon, "plain").count
            try daemon.control("suspend", "plain")
            try daemon.waitUntil("the stop is confirmed") { confirmations(daemon, "plain").count == confirmed + 1 }
            kill(-pid, SIGCONT)
            try daemon.waitForState("plain", "background")
            #expect(daemon.log.contains("plain: its process was continued by someone else"))
            #expect(!daemon.log.contains("Failed to confirm"))
        }
    }

    @Test("every process of the app is stopped before the stop is confirmed: the group, an orphan, a child that left the group")
    func everyProcessIsCheckedBeforeTheStopIsConfirmed() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let file = harness.root.appendingPathComponent("pids.json").path
        try harness.app("forker", "[App]\nExec=\(Self.forkingApp) \(file) stay\nProtocol=none\n\n"
                        + "[Lifecycle]\nBackgroundTimeSec=infinity\nSuspendMethod=signal\nTimeoutStopSec=2\n")
        try harness.start()
        try harness.control("launch", "forker", "--background")
        try harness.waitUntil("the app started its children") { FileManager.default.fileExists(atPath: file) }
        let pids = try JSONDecoder().decode([String: pid_t].self, from: Data(contentsOf: URL(fileURLWithPath: file)))
        let hasCgroup = try harness.status("forker").cgroup != nil
        // Without a cgroup the child that called setsid() is out of reach: the process group is all there is.
        let reached = pids.filter { hasCgroup || $0.key != "escaped" }.map(\.value)

        try harness.control("suspend", "forker")
        try harness.waitUntil("the stop is confirmed") { confirmations(harness, "forker").count == 1 }
        #expect(reached.allSatisfy { Kernel.state($0) == "T" }, "confirmed only once every process is stopped")
        #expect(confirmations(harness, "forker").first?.contains("\(reached.count) processes stopped") == true,
                "\(confirmations(harness, "forker"))")

        try harness.control("resume", "forker")
        try harness.waitUntil("every process runs again") { reached.allSatisfy { Kernel.state($0) != "T" } }
        #expect(try harness.status("forker").state.rawValue == "background")
        #expect(!harness.log.contains("by someone else"))
    }

    @Test("a process the daemon did not start (re-adopted after a crash) is confirmed stopped from /proc")
    func readoptedProcessIsConfirmedFromProc() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("plain", plain)
        try harness.start()
        try harness.control("launch", "plain", "--background")
        let pid = try #require(try harness.status("plain").pid)
        try harness.crash()
        try harness.start(keepLog: true)
        try harness.waitUntil("plain is re-adopted") { harness.log.contains("plain: re-adopted process \(pid)") }

        try harness.control("suspend", "plain")
        try harness.waitUntil("plain is stopped") { Kernel.state(pid) == "T" }
        try harness.waitUntil("the stop is confirmed") { confirmations(harness, "plain").count == 1 }
        #expect(read("/proc/\(pid)/oom_score_adj") == "900")
        try harness.control("resume", "plain")
        try harness.waitUntil("plain runs again") { Kernel.state(pid) != "T" }
        #expect(try harness.status("plain").state.rawValue == "background")
        #expect(!harness.log.contains("by someone else"))
    }
}
