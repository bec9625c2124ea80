import Foundation
import Glibc
import LifecycleModel
import LifecycleProtocol
import Testing

/// The daemon under a service manager, played by Tests/Fixtures/fake_service_manager.py: a real NOTIFY_SOCKET,
/// WATCHDOG_USEC, and the control socket passed in with LISTEN_FDS (socket activation). No systemd runs here
/// (PID 1 is not systemd), so the test is the service manager.
@Suite("systemd service manager protocol", .serialized)
struct ServiceManagerTests {
    static let fixture = DaemonHarness.fakeServiceManager

    struct Notification: Decodable {
        var t: Int64
        var message: String
    }

    func notifications(_ file: URL) -> [Notification] {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(Notification.self, from: Data($0.utf8)) }
    }

    @Test("READY=1 once the sockets listen and the auto-launch apps run; STATUS=, watchdog pings, RELOADING=1, STOPPING=1")
    func notifiesTheServiceManager() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let record = harness.root.appendingPathComponent("notify.jsonl")
        try harness.app("a", "[App]\nExec=\(DaemonHarness.pythonClient)\nAutoLaunch=yes\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
        let control = harness.runtimeDirectory.appendingPathComponent("control.sock").path
        try harness.start(wrapper: ["/usr/bin/env", "python3", Self.fixture, "--record", record.path,
                                    "--watchdog-usec", "200000", "--listen", control, "--"])

        try harness.waitUntil("READY=1") { notifications(record).contains { $0.message.contains("READY=1") } }
        let ready = try #require(notifications(record).first { $0.message.contains("READY=1") })
        #expect(ready.message.contains("STATUS=1 apps: 1 inactive"), "the auto-launch app runs before READY: \(ready.message)")
        #expect(harness.log.contains("Listening on the control socket passed by the service manager"))
        #expect(try harness.status("a").pid != nil)

        try harness.control("focus", "a")
        try harness.waitUntil("STATUS= follows the change") {
            notifications(record).contains { $0.message == "STATUS=1 apps: 1 active" }
        }

        // WATCHDOG_USEC=200000: the loop pings every 100 ms by itself.
        let pingsBefore = notifications(record).filter { $0.message == "WATCHDOG=1" }.count
        try harness.waitUntil("several more watchdog pings") {
            notifications(record).filter { $0.message == "WATCHDOG=1" }.count >= pingsBefore + 3
        }

        harness.reload()
        try harness.waitUntil("RELOADING=1, then READY=1") {
            let messages = notifications(record).map(\.message)
            guard let reloading = messages.lastIndex(where: { $0.hasPrefix("RELOADING=1") }) else { return false }
            return messages[reloading...].contains { $0.hasPrefix("READY=1") }
        }
        let reloading = try #require(notifications(record).last { $0.message.hasPrefix("RELOADING=1") })
        #expect(reloading.message.contains("\nMONOTONIC_USEC="))

        kill(harness.daemonPID!, SIGTERM)
        try harness.waitUntil("the daemon exits") { !harness.isDaemonRunning }
        #expect(notifications(record).contains { $0.message == "STOPPING=1" })
        #expect(FileManager.default.fileExists(atPath: control), "a passed socket's file belongs to the socket unit")
    }

    @Test("no watchdog pings when the watchdog is off; the daemon makes its own socket without socket activation")
    func noWatchdogWithoutWatchdogUSec() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let record = harness.root.appendingPathComponent("notify.jsonl")
        try harness.app("plain", "[App]\nExec=sleep 100000\nProtocol=none\n[Lifecycle]\nBackgroundTimeSec=0.5\n")
        try harness.start(wrapper: ["/usr/bin/env", "python3", Self.fixture, "--record", record.path, "--"])
        try harness.waitUntil("READY=1") { notifications(record).contains { $0.message.contains("READY=1") } }
        // A later notification on the same socket: the STATUS= after the daemon's own 0.5 s timer suspended the
        // app. A ping sent meanwhile is recorded before it.
        try harness.control("launch", "plain", "--background")
        try harness.waitUntil("STATUS= says the app was suspended") {
            notifications(record).contains { $0.message == "STATUS=1 apps: 1 suspended" }
        }
        #expect(!notifications(record).contains { $0.message == "WATCHDOG=1" })
        #expect(harness.log.contains("Listening on \(harness.runtimeDirectory.path)/control.sock"))
    }
}
