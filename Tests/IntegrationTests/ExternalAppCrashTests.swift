import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// External apps (docs/PROTOCOL.md, "External apps") across a `kill -9` of the daemon: a suspended one, by its
/// process group and from its cgroup, is re-adopted as suspended by the next daemon (never left stopped without a
/// daemon that knows it) and resumes on request; it passes the re-adoption's own-process check.
@Suite("external apps across a daemon crash", .serialized, .enabled(if: geteuid() == 0, "external apps need root here"))
struct ExternalAppCrashTests {
    func socketPath(_ daemon: DaemonHarness) -> String { daemon.runtimeDirectory.appendingPathComponent("app.sock").path }

    /// The Python client attaching as `app`, leading a new process group; `shell` runs first (it then execs the client).
    func startClient(_ daemon: DaemonHarness, _ app: String, shell: String = "") throws -> Process {
        let client = ["/usr/bin/python3", DaemonHarness.pythonClient, "--connect", socketPath(daemon), "--app", app,
                      "--new-process-group"]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "\(shell)\nexec \"$@\"", "sh"] + client
        var environment = daemon.environment
        environment["LIFECYCLE_RECORD"] = daemon.recordFile.path
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    @Test("a suspended external app stays stopped while no daemon runs, is re-adopted as suspended, and resumes",
          arguments: ["process-group", "cgroup"])
    func suspendedExternalAppIsReadopted(from: String) throws {
        if from == "cgroup" && !Host.canManageCgroups { return }
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("x", "[App]\nExternal=yes\nExternalUser=root\nExternalFrom=\(from)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\nTimeoutStopSec=3\n")
        try harness.start()
        let shell = from == "cgroup" ? "echo $$ > \(try #require(try harness.status("x").cgroup))/cgroup.procs" : ""
        let client = try startClient(harness, "x", shell: shell)
        defer { kill(-client.processIdentifier, SIGCONT); kill(-client.processIdentifier, SIGKILL); client.waitUntilExit() }
        let pid = client.processIdentifier
        try harness.waitUntil("x attached") { (try? harness.status("x"))?.pid == pid && (try? harness.status("x"))?.awaiting == nil }
        try harness.control("background", "x")
        try harness.control("suspend", "x")
        try harness.waitUntil("x is stopped") { Kernel.state(pid) == "T" }
        // The file is written once the loop's callback returns, after lifectl's answer: a crash before that write
        // is the kernel-wins case (DaemonCrashTests), not this one.
        let file = harness.runtimeDirectory.appendingPathComponent("state/x.json")
        try harness.waitUntil("the state file says suspended") {
            (try? String(contentsOf: file, encoding: .utf8))?.contains(#""state":"suspended""#) == true
        }

        try harness.crash()
        #expect(Kernel.state(pid) == "T", "suspended while no daemon runs")
        try harness.start(keepLog: true)

        #expect(try harness.status("x").pid == pid, "re-adopted, not dropped by the own-process check")
        #expect(try harness.status("x").state.rawValue == "suspended")
        #expect(!harness.log.contains("which is not in the app's own cgroup or process group"))
        try harness.control("resume", "x")
        try harness.waitUntil("x runs again") { Kernel.state(pid) != "T" }
        try harness.control("terminate", "x")
        client.waitUntilExit()
        try harness.waitForState("x", "notRunning")
    }
}
