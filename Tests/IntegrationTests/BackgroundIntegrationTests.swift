import Foundation
import Glibc
import LifecycleModel
import LifecycleProtocol
import Testing

/// Background tasks, background modes, memory pressure and the system sources, end to end with real clients.
@Suite("background work and system events end to end", .serialized)
struct BackgroundIntegrationTests {
    let python = DaemonHarness.pythonClient

    func withDaemon(_ apps: [String: String], daemonConfig: String? = nil, _ body: (DaemonHarness) throws -> Void) throws {
        try DaemonHarness.running(apps, daemonConfig: daemonConfig, body)
    }

    func client(_ arguments: String, lifecycle: String) -> String {
        "[App]\nExec=\(python) \(arguments)\n\n[Lifecycle]\n\(lifecycle)\n"
    }

    @Test("a background task keeps the app running past its grace time; ending it suspends the app")
    func backgroundTaskExtendsTheGraceTime() throws {
        let app = client("--task-on-background 1.5", lifecycle: "BackgroundTimeSec=0.2\nBackgroundTaskTimeSec=30")
        try withDaemon(["a": app]) { daemon in
            try daemon.control("focus", "a")
            let pid = try #require(try daemon.status("a").pid)
            try daemon.control("background", "a")
            // The client's record of the daemon's answer: the task is open for 1.5 s, less than a few lifectl polls can
            // take on a loaded machine.
            try daemon.waitUntil("the task began") { daemon.records("a").contains { $0.type == "backgroundTaskBegan" } }
            // For as long as the task is open (1.5 s, well past BackgroundTimeSec=0.2), every look finds the app in the
            // background and running; the end of the task is the later event that stops the looking. The process is
            // read before the daemon: an app the daemon still calls background was running a moment earlier too.
            try daemon.waitUntil("the task ended") {
                let process = Kernel.state(pid)
                let status = try daemon.status("a")
                guard !status.backgroundTasks.isEmpty else { return true }
                #expect(status.state.rawValue == "background", "the open task holds it up")
                #expect(process != "T")
                return false
            }
            try daemon.waitForState("a", "suspended")
            let status = try daemon.status("a")
            #expect(status.taskOverruns == 0 && status.backgroundTasks.isEmpty)
            let began = try #require(daemon.records("a").first { $0.type == "backgroundTaskBegan" })
            #expect((began.remainingMs ?? 0) > 25_000, "the remaining time counts from entering the background")
        }
    }

    @Test("a task still open at the deadline: backgroundTimeWillExpire, then suspended anyway and counted")
    func taskOverrunIsWarnedAndSuspended() throws {
        let app = client("--task-on-background forever",
                         lifecycle: "BackgroundTimeSec=0.2\nBackgroundTaskTimeSec=1.5\nExpirationWarningSec=1")
        try withDaemon(["a": app]) { daemon in
            try daemon.control("focus", "a")
            try daemon.control("background", "a")
            try daemon.waitForState("a", "suspended")
            let warning = try #require(daemon.records("a").first { $0.type == "backgroundTimeWillExpire" })
            // At most ExpirationWarningSec before the end; a loop that wakes late makes it less, never more.
            #expect((1...1000).contains(warning.remainingMs ?? 0), "ExpirationWarningSec=1 before the end")
            #expect(try daemon.status("a").taskOverruns == 1)
            #expect(daemon.log.contains("a: background tasks still open when their 1.5s ran out: work1; suspending it anyway (1 overruns so far)"))
        }
    }

    @Test("an app that ends its tasks on the expiration warning is suspended without an overrun")
    func endingTasksOnTheWarningAvoidsTheOverrun() throws {
        let app = client("--task-on-background forever --end-on-expire",
                         lifecycle: "BackgroundTimeSec=0.2\nBackgroundTaskTimeSec=2\nExpirationWarningSec=1.5")
        try withDaemon(["a": app]) { daemon in
            try daemon.control("focus", "a")
            try daemon.control("background", "a")
            try daemon.waitForState("a", "suspended")
            #expect(daemon.types("a").contains("backgroundTimeWillExpire"))
            #expect(try daemon.status("a").taskOverruns == 0)
        }
    }

    @Test("BackgroundModes=audio: in the background at low priority, never suspended for its grace time")
    func backgroundModeIsNeverSuspended() throws {
        let app = client("", lifecycle: "BackgroundTimeSec=0.1\nBackgroundModes=audio")
        // The same grace time without a mode: its suspension, later than the player's grace time would have ended,
        // is the event the test waits for before it looks at the player.
        let marker = client("", lifecycle: "BackgroundTimeSec=0.1")
        try withDaemon(["player": app, "marker": marker]) { daemon in
            try daemon.control("focus", "player")
            let pid = try #require(try daemon.status("player").pid)
            try daemon.control("background", "player")
            try daemon.control("launch", "marker", "--background")
            try daemon.waitForState("marker", "suspended")
            let status = try daemon.status("player")
            #expect(status.state.rawValue == "background")
            #expect(status.backgroundModes == ["audio"])
            #expect(Kernel.state(pid) != "T")
            let adj = try String(contentsOfFile: "/proc/\(pid)/oom_score_adj", encoding: .utf8)
            #expect(adj.trimmingCharacters(in: .whitespacesAndNewlines) == "500", "background priority all the same")
        }
    }

    @Test("a none-coalesced type keeps every payload up to QueueLimit and says how many were dropped")
    func noneTypeKeepsPayloadsUpToTheLimit() throws {
        let app = client("--observe messageReceived", lifecycle: "BackgroundTimeSec=infinity\nQueueLimit=3")
        try withDaemon(["a": app], daemonConfig: "[NotificationTypes]\nmessageReceived=none\n") { daemon in
            try daemon.control("launch", "a", "--background")
            try daemon.control("suspend", "a")
            for n in 1...5 {
                #expect(try daemon.lifectl("post", "messageReceived", "--data", "{\"n\":\(n)}").status == 0)
            }
            try daemon.control("resume", "a")
            try daemon.waitUntil("the messages arrived") { daemon.records("a").contains { $0.type == "notification" } }
            let note = try #require(daemon.records("a").first { $0.type == "notification" })
            #expect(note.payloads == [["n": 3], ["n": 4], ["n": 5]])
            #expect(note.posts == 5 && note.dropped == 2)
        }
    }

    @Test("memory pressure: a warning to every app, then the least recently used suspended app is terminated")
    func memoryPressureWarnsThenTerminatesSuspendedApps() throws {
        // The pressure event is injected through the control socket, on the same path a PSI trigger takes, so that
        // each event is one step of the policy; HostVariantTests/realMemorySqueeze makes real pressure instead.
        // The warning, the SIGKILL of the stopped process and the next launch's options are real.
        let lifecycle = "BackgroundTimeSec=infinity"
        try withDaemon(["old": client("", lifecycle: lifecycle), "recent": client("", lifecycle: lifecycle),
                        "front": client("", lifecycle: lifecycle)],
                       daemonConfig: "[Memory]\nTerminateAfterSec=0\n") { daemon in
            try daemon.control("focus", "old")
            try daemon.control("focus", "recent")
            try daemon.control("focus", "front")
            try daemon.control("suspend", "old")
            try daemon.control("suspend", "recent")
            let oldPID = try #require(try daemon.status("old").pid)

            #expect(try daemon.lifectl("simulate-memory-pressure").status == 0)
            try daemon.waitUntil("front got the warning") {
                daemon.records("front").contains { $0.type == "notification" && $0.name == "didReceiveMemoryWarning" }
            }
            #expect(try daemon.status("old").state.rawValue == "suspended", "the first event only warns")

            #expect(try daemon.lifectl("simulate-memory-pressure").status == 0)
            try daemon.waitForState("old", "notRunning")
            try daemon.waitUntil("the process is gone") { !Kernel.exists(oldPID) }
            #expect(try daemon.status("recent").state.rawValue == "suspended")
            #expect(try daemon.status("front").state.rawValue == "active", "never the active app")
            #expect(try daemon.status("old").memoryTerminations == 1)
            #expect(daemon.log.contains("old: terminated while suspended to relieve memory pressure (jetsam)"))

            try daemon.control("focus", "old")
            let relaunch = try #require(daemon.records("old").last { $0.type == "didFinishLaunching" })
            #expect(relaunch.launchOptions?["terminatedInBackground"] == .bool(true))
        }
    }

    @Test("userDefaultsDidChange: the app's preferences file rewritten on disk reaches that app (inotify)")
    func preferencesFileChangeReachesItsApp() throws {
        let prefs = FileManager.default.temporaryDirectory.appendingPathComponent("prefs-\(getpid())-\(UUID().uuidString).json")
        try "{\"volume\":1}".write(to: prefs, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: prefs) }
        let app = "[App]\nExec=\(python) --observe userDefaultsDidChange\nPreferencesFile=\(prefs.path)\n"
        try withDaemon(["a": app, "b": client("--observe userDefaultsDidChange", lifecycle: "")]) { daemon in
            try daemon.control("focus", "a")
            try daemon.control("launch", "b")
            try "{\"volume\":2}".write(to: prefs, atomically: true, encoding: .utf8)
            try daemon.waitUntil("a heard of it") { daemon.records("a").contains { $0.type == "notification" } }
            let note = try #require(daemon.records("a").first { $0.type == "notification" })
            #expect(note.name == "userDefaultsDidChange" && note.payload == ["path": .string(prefs.path)])
            #expect(!daemon.types("b").contains("notification"), "only the app whose file it is")
        }
    }

    @Test("significantTimeChange: the time zone file given in the config replaced, delivered to observers")
    func timeZoneChangeReachesObservers() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("tz-\(getpid())-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let localtime = root.appendingPathComponent("localtime")
        try FileManager.default.copyItem(atPath: "/usr/share/zoneinfo/UTC", toPath: localtime.path)
        let config = "[Sources]\nTimeChange=yes\nLocaltimeFile=\(localtime.path)\n"
        try withDaemon(["a": client("--observe significantTimeChange", lifecycle: "")], daemonConfig: config) { daemon in
            try daemon.control("focus", "a")
            let replacement = root.appendingPathComponent("localtime.new")
            try FileManager.default.copyItem(atPath: "/usr/share/zoneinfo/Europe/Berlin", toPath: replacement.path)
            #expect(rename(replacement.path, localtime.path) == 0)
            try daemon.waitUntil("a heard of it") { daemon.records("a").contains { $0.type == "notification" } }
            let note = try #require(daemon.records("a").first { $0.type == "notification" })
            // At least this one; another test target may set the machine's clock meanwhile, which is a post too.
            #expect(note.name == "significantTimeChange" && (note.posts ?? 0) >= 1)
        }
    }
}
