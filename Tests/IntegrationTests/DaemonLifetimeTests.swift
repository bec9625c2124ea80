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
        #expect(Kernel.state(b) == "T")

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
}
