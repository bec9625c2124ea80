import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// `[Adopt] Windows=yes` where no service manager can give an adopted app a scope (this machine's PID 1 is not
/// systemd): the app is its process tree and the session its launch made. A homescreen on a real private bus names
/// the window's process (`SetDisplayPids`), a real process of the session's user that double-forks a worker
/// (Tests/Fixtures/double_forking_app.py); no display server is needed for that.
@Suite("Adopt: a window app's double-forked worker", .serialized)
struct AdoptWorkerTests {
    static let fixture = DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/double_forking_app.py").path
    let api = DBusTests()

    @Test("a double-forked worker in the adopted app's session is stopped with the app (state T) and continued with it, and after a crash by the next daemon; an older process of the session is left alone")
    func doubleForkedWorkerIsStoppedAndContinuedWithTheApp() throws {
        let session = try FakeUserSession(tag: "worker-\(getpid())")
        defer { session.stop() }
        let app = Process()
        app.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        app.currentDirectoryURL = URL(fileURLWithPath: "/")
        // The user may not reach the checkout (a CI clone can sit in a 0700 folder): its program text is passed on.
        let program = try String(contentsOfFile: Self.fixture, encoding: .utf8)
        app.arguments = ["--reuid=\(session.uid)", "--regid=\(session.gid)", "--clear-groups", "--",
                         "/usr/bin/python3", "-c", program]
        let output = Pipe()
        app.standardOutput = output
        try app.run()
        var pids: [pid_t] = []
        defer {
            for pid in pids { kill(pid, SIGCONT); kill(pid, SIGKILL) }
            if app.isRunning { kill(app.processIdentifier, SIGKILL) }
        }
        var line = ""
        while !line.hasSuffix("\n") {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }
            line += String(decoding: data, as: UTF8.self)
        }
        pids = line.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { pid_t($0) }
        try #require(pids.count == 3, "the fixture printed \(line)")
        let (main, worker, elder) = (pids[0], pids[1], pids[2])
        #expect(getsid(elder) == getsid(main), "the elder shares the app's session")
        #expect(!Kernel.children(of: main).contains(worker), "the worker is no descendant of the app")
        #expect(getsid(worker) == getsid(main), "the worker keeps the app's session")
        #expect(getpgid(main) != main && getsid(main) != main, "the app leads neither its group nor its session")
        #expect(!Kernel.exists(getsid(main)), "the launcher that started the session has exited")

        // ScopeTrees=yes asks the manager of [Adopt] User= for a scope; this machine runs no user's manager (PID 1 is not
        // systemd), so the app stays a process tree and status says why.
        let config = "[Display]\nSource=dbus\n\n[Adopt]\nWindows=yes\nScopeTrees=yes\nUser=\(HeadlessSway.user)\nBackgroundTimeSec=1\n"
        try api.withBus([:], daemonConfig: config) { daemon, bus in
            _ = try api.mustCall(bus, "SetDisplayPids", "auu", "1", String(main), String(main))
            let name = "worker-app"
            try daemon.waitUntil("the window's process is adopted") { try daemon.list().contains { $0.name == name } }
            #expect(try daemon.status(name).adopted == "process \(main)")
            try daemon.waitForState(name, "active")
            let status = try daemon.lifectl("status").stdout
            #expect(status.contains("a worker that leaves the session is not followed"), "\(status)")
            let uid = try HeadlessSway.testUser().uid
            #expect(status.contains("no scopes: no service manager of uid \(uid) listens at /run/user/\(uid)/systemd/private"), "\(status)")
            #expect(status.contains("1 in process trees: a worker that calls setsid() and double-forks is not followed"), "\(status)")

            // Hidden: after its grace time the app is suspended, and its worker stopped with it.
            _ = try api.mustCall(bus, "SetDisplayPids", "auu", "0", "0")
            try daemon.waitForState(name, "suspended")
            #expect(Kernel.stops(main))
            #expect(Kernel.stops(worker), "the double-forked worker is stopped with the app")
            #expect(Kernel.state(elder) != "T", "a process of the session older than the app is not the app's")

            // Shown again: both run.
            _ = try api.mustCall(bus, "SetDisplayPids", "auu", "1", String(main), String(main))
            try daemon.waitForState(name, "active")
            try daemon.waitUntil("the worker is continued") { Kernel.state(worker) != "T" }
            #expect(Kernel.state(main) != "T")

            // Suspended again, then the daemon dies: the next one continues the worker too, before anything else.
            _ = try api.mustCall(bus, "SetDisplayPids", "auu", "0", "0")
            try daemon.waitForState(name, "suspended")
            #expect(Kernel.stops(worker))
            try daemon.crash()
            #expect(Kernel.state(worker) == "T", "a crashed daemon continues nothing itself")
            try daemon.daemonConfig("[Adopt]\nWindows=no\n")
            try daemon.start(keepLog: true)
            try daemon.waitUntil("the worker is continued after the crash") { Kernel.state(worker) != "T" }
            #expect(Kernel.state(main) != "T")
            #expect(daemon.log.contains("which a previous lifecycled left stopped"))
        }
    }
}
