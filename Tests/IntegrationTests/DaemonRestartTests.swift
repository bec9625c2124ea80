import Foundation
import Glibc
import LifecycleProtocol
import TestSupport
import Testing

/// `systemctl restart lifecycled` versus `systemctl stop lifecycled`: both send SIGTERM, and the daemon asks
/// systemd over D-Bus which job it is running on its unit. PID 1 on this machine is not systemd, so the test
/// plays systemd twice: `fake_service_manager.py` is its notify socket and fd store (and its restart: SIGTERM,
/// then a new start with the stored fds), and `fake_systemd_bus.c` (sd-bus in server mode, compiled here with
/// `cc`) answers GetUnitByPID, Unit.Job and Job.JobType on a socket given to the daemon through its test hook
/// LIFECYCLED_SYSTEMD_BUS. Apps, clients, signals and sockets are all real.
@Suite("systemctl restart keeps the apps; systemctl stop terminates them", .serialized)
struct DaemonRestartTests {
    let python = DaemonHarness.pythonClient

    func client(_ arguments: String = "") -> String {
        "[App]\nExec=\(python) \(arguments)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
    }

    func notifications(_ file: URL) -> [[String: Any]] {
        let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    func isGone(_ pid: pid_t) -> Bool { !Kernel.exists(pid) || Kernel.state(pid) == "Z" }

    @Test("a restart job: the daemon exits 0 without touching its apps, and the next one takes every app and connection back")
    func restartHandsOverEveryApp() throws {
        let bus = try FakeSystemdBus(mode: "restart")
        let harness = try DaemonHarness()
        // The bus goes first: the harness's own SIGTERM then finds no systemd and stops every app.
        defer { harness.stop() }
        defer { bus.stop() }
        let notify = harness.root.appendingPathComponent("notify.jsonl")
        try harness.app("a", client())
        try harness.app("b", client("--observe batteryLevelDidChange"))
        try harness.app("c", client("--observe batteryLevelDidChange"))
        try harness.start(wrapper: ["/usr/bin/python3", DaemonHarness.fakeServiceManager, "--record", notify.path, "--restart-on-signal", "--"],
                          extraEnvironment: [bus.variable: bus.address])
        try harness.control("focus", "a")
        try harness.control("launch", "b", "--background")
        try harness.control("launch", "c", "--background")
        try harness.control("suspend", "c")
        let before = try harness.list()
        let pids = Dictionary(uniqueKeysWithValues: before.compactMap { app in app.pid.map { (app.name, $0) } })
        let c = try #require(pids["c"])
        #expect(Kernel.stops(c))
        let first = try harness.answeringDaemonPID()
        let wrapper = try #require(harness.daemonPID)

        // `systemctl restart`: SIGTERM, then a new start with the fd store passed back.
        kill(wrapper, SIGUSR1)
        try harness.waitUntil("the next daemon answers") { (try? harness.answeringDaemonPID()).map { $0 != first } ?? false }

        #expect(bus.requests.contains("GetUnitByPID \(first)"), "the daemon asked for its own unit: \(bus.requests)")
        #expect(bus.requests.contains("Get /org/freedesktop/systemd1/job/42 org.freedesktop.systemd1.Job JobType"))
        let restart = try #require(notifications(notify).first { $0["restart"] != nil })
        #expect(restart["status"] as? Int == 0, "the daemon exited 0")
        #expect((restart["fds"] as? [String])?.sorted() == ["app-a", "app-b", "app-c", "pidfd-a", "pidfd-b", "pidfd-c"],
                "every connection and pidfd stayed in the store")
        #expect(!notifications(notify).contains { ($0["message"] as? String)?.contains("FDSTOREREMOVE") == true })
        #expect(notifications(notify).contains { $0["message"] as? String == "STOPPING=1" })
        #expect(harness.log.contains("Restarting: leaving 3 apps to the next daemon"))
        #expect(!harness.log.contains("Stopping: terminating"))

        let after = try harness.list()
        for app in ["a", "b", "c"] {
            #expect(after.first { $0.name == app }?.pid == pids[app], "\(app) keeps its process")
            #expect(harness.types(app).filter { $0 == "hello" }.count == 1, "\(app)'s client never reconnected")
            #expect(!harness.types(app).contains("willTerminate"), "\(app) was not told to terminate")
        }
        #expect(after.first { $0.name == "a" }?.state.rawValue == "active")
        #expect(after.first { $0.name == "b" }?.state.rawValue == "background")
        #expect(after.first { $0.name == "c" }?.state.rawValue == "suspended")
        #expect(Kernel.state(c) == "T", "the suspended app stayed stopped: never continued, nor signalled")
        #expect(!harness.log.contains("but its processes run"), "the next daemon found c stopped, as it was left")
        #expect(pids.values.allSatisfy { !isGone($0) }, "no app got SIGTERM (the client exits on it)")
        try harness.waitUntil("the connections were taken back") { harness.log.contains("c: took back its client connection") }
        #expect(!harness.log.contains("reconnecting through"))

        // The clients are still connected: a post reaches b once, and c once it is resumed.
        try harness.lifectl("post", "batteryLevelDidChange", "--data", #"{"level":0.7}"#)
        try harness.waitUntil("b got the notification") { harness.types("b").contains("notification") }
        #expect(harness.records("b").filter { $0.type == "notification" }.map(\.payload) == [["level": 0.7]], "delivered exactly once")
        #expect(try harness.status("c").queuedNotifications == 1)
        try harness.control("resume", "c")
        try harness.waitUntil("c runs again") { Kernel.state(c) != "T" }
        try harness.waitUntil("c got what was queued") { harness.types("c").contains("notification") }
        #expect(harness.records("c").filter { $0.type == "notification" }.count == 1)
        try harness.control("focus", "b")
        #expect(harness.types("b").suffix(2) == ["willEnterForeground", "didBecomeActive"], "lifecycle goes on over the kept connections")
        // The focus is answered once b settled; a reads its didEnterBackground in its own time.
        try harness.waitUntil("a got didEnterBackground") { harness.types("a").last == "didEnterBackground" }
        #expect(harness.types("a").suffix(2) == ["willResignActive", "didEnterBackground"])
    }

    /// Each way a SIGTERM is not a restart, with what the journal says about it.
    static func logged(_ mode: String) -> String {
        let failed = "Failed to ask systemd whether this stop is a restart: "
        switch mode {
        case "stop": return "(a stop job on /org/freedesktop/systemd1/unit/lifecycled_2eservice, per LIFECYCLED_SYSTEMD_BUS"
        case "nojob": return "(no job on /org/freedesktop/systemd1/unit/lifecycled_2eservice"
        case "garbage": return failed + "read the unit's Job property as v (uo)"
        case "hang", "mute": return failed + "no reply to GetUnitByPID"
        default: return failed + "connect to unix:path="
        }
    }

    @Test("a stop job, no job, a garbled answer, a bus that never answers or is not there: every app is terminated",
          arguments: ["stop", "nojob", "garbage", "hang", "mute", "missing"])
    func everythingElseStops(_ mode: String) throws {
        let logged = Self.logged(mode)
        let bus = try FakeSystemdBus(mode: mode == "missing" ? "stop" : mode)
        if mode == "missing" { bus.stop() }
        let harness = try DaemonHarness()
        defer { harness.stop() }
        defer { bus.stop() }
        let notify = harness.root.appendingPathComponent("notify.jsonl")
        try harness.app("a", client())
        try harness.app("c", client())
        try harness.start(wrapper: ["/usr/bin/python3", DaemonHarness.fakeServiceManager, "--record", notify.path, "--"],
                          extraEnvironment: [bus.variable: bus.address])
        try harness.control("focus", "a")
        try harness.control("launch", "c", "--background")
        try harness.control("suspend", "c")
        let a = try #require(try harness.status("a").pid)
        let c = try #require(try harness.status("c").pid)
        let daemon = try harness.answeringDaemonPID()
        let wrapper = try #require(harness.daemonPID)

        // `systemctl stop`: SIGTERM, and the fake service manager exits with the daemon's status.
        kill(wrapper, SIGTERM)
        try harness.waitUntil("the daemon stopped") { !harness.isDaemonRunning }

        #expect(harness.log.contains(logged), "mode \(mode)")
        #expect(harness.log.contains("Stopping: terminating 2 running apps"))
        #expect(!harness.log.contains("Restarting:"))
        #expect(isGone(a) && isGone(c), "every app was terminated")
        #expect(harness.types("a").contains("willTerminate"))
        #expect(harness.types("c").contains("willTerminate"), "the suspended app was continued and told")
        if ["stop", "nojob", "garbage", "hang"].contains(mode) {
            #expect(bus.requests.contains("GetUnitByPID \(daemon)"), "the daemon asked: \(bus.requests)")
        }
        if mode == "stop" {
            #expect(bus.requests.contains("Get /org/freedesktop/systemd1/job/42 org.freedesktop.systemd1.Job JobType"))
        }
    }
}
