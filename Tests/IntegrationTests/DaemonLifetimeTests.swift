import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// One daemon per runtime directory, and what a daemon takes back from a previous one: a second daemon refuses to
/// start beside a running one, and re-adoption takes only processes that are the app's own.
@Suite("the daemon's lifetime: one per runtime directory, honest re-adoption", .serialized)
struct DaemonLifetimeTests {
    let python = DaemonHarness.pythonClient

    func client(_ arguments: String = "") -> String {
        "[App]\nExec=\(python) \(arguments)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
    }

    /// Runs a second lifecycled on the harness's directories until it exits; returns its status and output.
    func secondDaemon(_ harness: DaemonHarness) throws -> DaemonHarness.Output {
        let process = Process()
        process.executableURL = DaemonHarness.products.appendingPathComponent("lifecycled")
        process.arguments = ["--config", harness.configDirectory.path, "--log-level", "debug"]
        process.environment = harness.environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // A second daemon that does not refuse would run on: it is stopped after a while, and the test fails.
        let deadline = Date().addingTimeInterval(10)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
            Issue.record("the second daemon did not exit by itself")
        }
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return DaemonHarness.Output(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                                    stderr: String(decoding: stderr, as: UTF8.self))
    }

    @Test("a second daemon on the same runtime directory exits non-zero naming the directory and the holder, and the first's apps are untouched")
    func secondDaemonRefusesToStart() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", client())
        try harness.app("b", client())
        try harness.start()
        try harness.control("focus", "a")
        try harness.control("launch", "b", "--background")
        try harness.control("suspend", "b")
        let before = try harness.list()
        let first = try #require(harness.daemonPID)
        let b = try #require(before.first { $0.name == "b" }?.pid)
        #expect(Kernel.stops(b))

        let second = try secondDaemon(harness)

        #expect(second.status != 0)
        let said = second.stdout + second.stderr
        #expect(said.contains("already serves the runtime directory \(harness.runtimeDirectory.path)"), "\(said)")
        #expect(said.contains("pid \(first)"), "the holder's pid is named: \(said)")
        #expect(try harness.answeringDaemonPID() == first, "the first daemon still answers on its socket")
        let after = try harness.list()
        for app in before {
            let now = after.first { $0.name == app.name }
            #expect(now?.state == app.state, "\(app.name) keeps its state")
            #expect(now?.pid == app.pid, "\(app.name) keeps its process")
        }
        #expect(Kernel.state(b) == "T", "the suspended app stays stopped")
        let a = try #require(before.first { $0.name == "a" }?.pid)
        #expect(Kernel.exists(a) && Kernel.state(a) != "T", "the active app runs on")
        #expect(!harness.log.contains("re-adopted"), "nothing was re-adopted")
        // The first daemon still drives its apps.
        try harness.control("resume", "b")
        try harness.waitUntil("b runs again") { Kernel.state(b) != "T" }
    }

    @Test("after a kill -9 the lock is gone with the daemon: the next one starts and re-adopts")
    func crashedDaemonLeavesNoLock() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", client())
        try harness.start()
        try harness.control("focus", "a")
        let a = try #require(try harness.status("a").pid)
        try harness.crash()
        try harness.start(keepLog: true)
        #expect(try harness.status("a").pid == a)
        #expect(try harness.status("a").state.rawValue == "active")
    }

    /// Field 22 of /proc/PID/stat, as the state file keeps it.
    func startTime(_ pid: pid_t) throws -> UInt64 {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let close = try #require(stat.lastIndex(of: ")"))
        let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
        return try #require(UInt64(fields[19]))
    }

    /// A `sleep` of the test's own, in the test's process group: nothing of any app.
    func unrelatedSleep() throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sleep")
        process.arguments = ["300"]
        try process.run()
        return process
    }

    @Test("a state file naming an unrelated process is neither adopted nor signalled, for a configured app or one that is gone")
    func forgedStateFileIsNotTrusted() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", client())
        try harness.start()
        try harness.control("focus", "a")
        let state = harness.runtimeDirectory.appendingPathComponent("state")
        let saved = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: state.appendingPathComponent("a.json"))) as? [String: Any])
        try harness.control("terminate", "a")
        try harness.waitForState("a", "notRunning")
        try harness.crash()

        let victims = [try unrelatedSleep(), try unrelatedSleep()]
        defer { for victim in victims { victim.terminate() } }
        for (name, victim) in zip(["a", "ghost"], victims) {
            var forged = saved
            forged["name"] = name
            forged["pid"] = Int(victim.processIdentifier)
            forged["startTime"] = try startTime(victim.processIdentifier)
            forged["suspendedWith"] = "signal"
            try JSONSerialization.data(withJSONObject: forged).write(to: state.appendingPathComponent("\(name).json"))
        }
        try harness.start(keepLog: true)

        #expect(try harness.status("a").state.rawValue == "notRunning", "the unrelated process was not taken for a")
        #expect(try harness.status("a").pid == nil)
        // A release would continue and SIGTERM it at once (sleep dies of SIGTERM); give it the time to have happened.
        usleep(500_000)
        for victim in victims {
            #expect(victim.isRunning, "pid \(victim.processIdentifier) was not signalled")
            #expect(Kernel.state(victim.processIdentifier) == "S", "pid \(victim.processIdentifier) runs on, not stopped")
        }
        #expect(harness.log.contains("a: its state file names process \(victims[0].processIdentifier), which is not in the app's own cgroup or process group"))
        #expect(!harness.log.contains("re-adopted process \(victims[0].processIdentifier)"))
    }

    @Test("a state file whose name inside is not its own is ignored")
    func stateFileMustNameItsOwnApp() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", client())
        try harness.start()
        try harness.control("focus", "a")
        let a = try #require(try harness.status("a").pid)
        try harness.crash()
        let state = harness.runtimeDirectory.appendingPathComponent("state")
        try FileManager.default.moveItem(at: state.appendingPathComponent("a.json"), to: state.appendingPathComponent("b.json"))
        try harness.start(keepLog: true)
        #expect(harness.log.contains("it names the app 'a', not 'b'"))
        #expect(try harness.status("a").pid == nil, "the file of another name did not re-adopt a")
        // a's process is still in a's cgroup (or its own session): the strays check or nothing, never left stopped.
        #expect(Kernel.state(a) != "T")
    }

    @Test("a re-adopted app is journaled as re-adopted, not as a transition from notRunning, and its end as an unknown status")
    func readoptionAndItsEndAreLoggedHonestly() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", client())
        try harness.start()
        try harness.control("focus", "a")
        let a = try #require(try harness.status("a").pid)
        try harness.crash()
        try harness.start(keepLog: true)
        #expect(try harness.status("a").state.rawValue == "active")
        let restarted = harness.log.components(separatedBy: "lifecycled 0.1.0 starting").last ?? ""
        #expect(restarted.contains("a: re-adopted process \(a) in state active"))
        #expect(!restarted.contains("a: notRunning → active"), "no transition from notRunning: \(restarted)")
        kill(a, SIGKILL)
        try harness.waitForState("a", "notRunning")
        #expect(harness.log.contains("a: process \(a) ended with an unknown status (not lifecycled's child)"))
        #expect(!harness.log.contains("exited with status 255"))
    }
}
