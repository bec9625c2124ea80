import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// `kill -9` of the daemon, then a new daemon on the same runtime directory: apps that are still there and
/// the same processes are re-adopted in their state; anything else is continued and terminated. No process
/// is left stopped without a daemon that knows it.
@Suite("the daemon's crash and restart", .serialized)
struct DaemonCrashTests {
    let python = DaemonHarness.pythonClient

    func client(_ arguments: String = "", lifecycle: String = "BackgroundTimeSec=infinity", extra: String = "") -> String {
        "[App]\nExec=\(python) \(arguments)\n\n[Lifecycle]\n\(lifecycle)\n\(extra)"
    }

    func status(_ daemon: DaemonHarness, _ app: String) throws -> AppStatus { try daemon.status(app) }

    @Test("apps active, in the background and suspended are re-adopted with their pids, states, queues and scenes")
    func readoptsEveryState() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", client())
        try harness.app("b", client())
        try harness.app("c", client("--observe batteryLevelDidChange"))
        try harness.app("w", client(extra: "\n[Scenes]\nSupportsMultipleScenes=yes\n"))
        try harness.app("t", client("--task-on-background forever", lifecycle: "BackgroundTimeSec=300"))
        try harness.start()
        try harness.control("launch", "t", "--background")
        try harness.waitUntil("t holds a background task") { (try? harness.status("t").backgroundTasks.count) == 1 }
        let taskTimeBefore = try #require(try harness.status("t").backgroundTimeRemaining)

        try harness.control("focus", "w")
        try harness.lifectl("scene", "open", "w")
        try harness.control("focus", "a")
        try harness.control("launch", "b", "--background")
        try harness.control("launch", "c", "--background")
        try harness.control("suspend", "c")
        try harness.lifectl("post", "batteryLevelDidChange", "--data", #"{"level":0.4}"#)
        let before = try harness.list()
        let pids = Dictionary(uniqueKeysWithValues: before.compactMap { app in app.pid.map { (app.name, $0) } })
        let c = try #require(pids["c"])
        #expect(Kernel.stops(c))
        #expect(before.first { $0.name == "c" }?.queuedNotifications == 1)

        try harness.crash()
        #expect(Kernel.state(c) == "T", "still stopped while no daemon runs")
        try harness.start(keepLog: true)

        let after = try harness.list()
        for app in ["a", "b", "c", "w"] {
            #expect(after.first { $0.name == app }?.pid == pids[app], "\(app) keeps its process")
        }
        #expect(after.first { $0.name == "a" }?.state.rawValue == "active")
        #expect(after.first { $0.name == "b" }?.state.rawValue == "background")
        #expect(after.first { $0.name == "c" }?.state.rawValue == "suspended")
        #expect(after.first { $0.name == "w" }?.state.rawValue == "background")
        #expect(after.first { $0.name == "c" }?.queuedNotifications == 1, "the queued notification survived")
        #expect(after.first { $0.name == "w" }?.scenes?.map(\.scene) == ["s1", "s2"], "the scene sessions survived")
        let t = try harness.status("t")
        #expect(t.backgroundTasks.count == 1, "the open background task survived")
        // Its task time went on counting from when it entered the background, not from the restart.
        #expect(try #require(t.backgroundTimeRemaining) <= taskTimeBefore)
        #expect(Kernel.state(c) == "T", "a suspended app stays suspended")
        #expect(harness.log.contains("c: re-adopted process \(c) in state suspended"))

        try harness.control("resume", "c")
        try harness.waitUntil("c runs again") { Kernel.state(c) != "T" }
        let a = try #require(pids["a"])
        try harness.control("terminate", "a")
        try harness.waitUntil("a's process is gone") { !Kernel.exists(a) || Kernel.state(a) == "Z" }
        try harness.waitForState("a", "notRunning")
    }

    @Test("a suspended app whose config is gone after the crash is continued and terminated, not left stopped")
    func unconfiguredProcessIsReleased() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("gone", client())
        try harness.start()
        try harness.control("launch", "gone", "--background")
        try harness.control("suspend", "gone")
        let pid = try #require(try harness.status("gone").pid)
        // The reply leaves once the stop is sent (lifectl(1)); the kernel shows T once the process took it.
        try harness.waitUntil("gone is stopped") { Kernel.state(pid) == "T" }

        try harness.crash()
        try harness.removeApp("gone")
        try harness.start(keepLog: true)

        try harness.waitUntil("the stopped process is continued and ends") { !Kernel.exists(pid) || Kernel.state(pid) == "Z" }
        #expect(harness.log.contains("cannot be re-adopted (it is no longer in the configuration)"))
    }

    @Test("processes in an app's cgroup that no state file accounts for are continued and terminated")
    func straysInTheCgroupAreReleased() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", client())
        try harness.start()
        try harness.control("launch", "a", "--background")
        try harness.control("suspend", "a")
        let status = try harness.status("a")
        let pid = try #require(status.pid)
        try #require(status.cgroup != nil, "this test needs the app's cgroup (a hybrid or cgroup2 host, as root)")

        try harness.crash()
        try FileManager.default.removeItem(at: harness.runtimeDirectory.appendingPathComponent("state/a.json"))
        try harness.start(keepLog: true)

        try harness.waitUntil("the stray is continued and ends") { !Kernel.exists(pid) || Kernel.state(pid) == "Z" }
        #expect(harness.log.contains("no saved state accounts for them"))
        #expect(try harness.status("a").state.rawValue == "notRunning")
    }

    @Test("a saved pid that now belongs to another process (start time differs) is neither adopted nor signalled")
    func recycledPidIsLeftAlone() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", client())
        let stranger = Process()
        stranger.executableURL = URL(fileURLWithPath: "/bin/sleep")
        stranger.arguments = ["30"]
        try stranger.run()
        // SIGKILL: the test runner blocks SIGTERM in its threads, and its children inherit the mask.
        defer { kill(stranger.processIdentifier, SIGKILL); stranger.waitUntilExit() }
        let state = harness.runtimeDirectory.appendingPathComponent("state")
        // As the daemon makes it: its own, mode 0700 (it refuses any other).
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        // What a previous daemon would have written for an app whose pid was since reused by `stranger`.
        let persisted = #"{"name":"a","pid":\#(stranger.processIdentifier),"startTime":1,"snapshot":{"state":"suspended","launches":1,"deadlineMisses":0,"terminatedInBackground":false,"memoryTerminations":0,"observing":[],"queue":{"limit":64,"entries":[]},"sessions":[],"nextSceneNumber":1,"discardedUntold":[]}}"#
        try persisted.write(to: state.appendingPathComponent("a.json"), atomically: true, encoding: .utf8)

        try harness.start()

        #expect(try harness.status("a").state.rawValue == "notRunning")
        #expect(stranger.isRunning && Kernel.state(stranger.processIdentifier) != "T")
        #expect(try harness.status("a").terminatedInBackground, "the previous run ended suspended, as the file says")
    }

    @Test("a state file that cannot be read is reported and ignored; the daemon starts")
    func unreadableStateIsIgnored() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", client())
        let state = harness.runtimeDirectory.appendingPathComponent("state")
        // As the daemon makes it: its own, mode 0700 (it refuses any other).
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try "{not json".write(to: state.appendingPathComponent("a.json"), atomically: true, encoding: .utf8)
        try harness.start()
        #expect(harness.log.contains("Ignoring an unreadable state file"))
        try harness.control("focus", "a")
        #expect(try harness.status("a").state.rawValue == "active")
    }

    @Test("without a service manager, clients reconnect with their token: queued notifications arrive once, lifecycle goes on")
    func clientsReconnect() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", client())
        try harness.app("c", client("--observe batteryLevelDidChange"))
        let notes = DaemonHarness.products.appendingPathComponent("notes-example").path
        try harness.app("notes", "[App]\nExec=\(notes)\nEnvironment=NOTES_STATE_FILE=\(harness.root.path)/notes.json\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
        try harness.start()
        try harness.control("launch", "notes", "--background")
        try harness.control("launch", "c", "--background")
        try harness.control("suspend", "c")
        try harness.control("focus", "a")
        try harness.lifectl("post", "batteryLevelDidChange", "--data", #"{"level":0.4}"#)
        #expect(try harness.status("c").queuedNotifications == 1)

        try harness.crash()
        try harness.start(keepLog: true)

        try harness.waitUntil("a reconnected") { harness.types("a").filter { $0 == "hello" }.count == 2 }
        try harness.waitUntil("notes reconnected") { harness.log.contains("notes: its client reconnected") }
        #expect(try harness.status("a").protocol == "lifecycle")
        #expect(harness.log.contains("a: its client reconnected"))

        try harness.control("resume", "c")
        try harness.waitUntil("c reconnected and got what was queued") { harness.types("c").contains("notification") }
        let notifications = harness.records("c").filter { $0.type == "notification" }
        #expect(notifications.count == 1, "delivered once")
        #expect(notifications.first?.payload == ["level": 0.4])

        let start = harness.records().count
        try harness.control("focus", "c")
        // The focus is answered once c settled; a reads its didEnterBackground in its own time.
        try harness.waitUntil("a got didEnterBackground") { harness.types("a").last == "didEnterBackground" }
        let switched = harness.records().dropFirst(start).map { "\($0.app).\($0.type)" }
        #expect(switched.filter { $0.hasPrefix("a.") } == ["a.willResignActive", "a.didEnterBackground"]
                && switched.filter { $0.hasPrefix("c.") } == ["c.willEnterForeground", "c.didBecomeActive"],
                "lifecycle messages flow on the new connections: \(switched)")
        try harness.control("focus", "notes")
        #expect(harness.types("notes").suffix(2) == ["willEnterForeground", "didBecomeActive"], "the Swift library reconnected too")
    }

    @Test("the app socket refuses a wrong token, a process outside the app, and a first message that is not a hello")
    func appSocketRefusesStrangers() throws {
        try DaemonHarness.running(["a": client()]) { harness in
            try harness.control("focus", "a")
            let socket = harness.runtimeDirectory.appendingPathComponent("app.sock").path
            let statePath = harness.runtimeDirectory.appendingPathComponent("state/a.json")
            // The daemon rewrites the file in place while it runs (a read at the same time may see a mix of two
            // saves): read until one whole save is seen.
            var savedToken: String?
            try harness.waitUntil("a's state is saved with its token") {
                let saved = (try? Data(contentsOf: statePath)).flatMap { try? JSONSerialization.jsonObject(with: $0) } as? [String: Any]
                savedToken = saved?["token"] as? String
                return savedToken != nil
            }
            let token = try #require(savedToken)
            #expect(token.count == 32)

            func attempt(_ line: String) throws -> String {
                let script = """
                    import socket,sys
                    s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode()+b"\\n")
                    print(s.makefile().readline().strip())
                    """
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
                process.arguments = ["-c", script, socket, line]
                let out = Pipe()
                process.standardOutput = out
                try process.run()
                let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                return text
            }
            #expect(try attempt(#"{"type":"hello","protocol":1,"app":"a","token":"0000"}"#).contains("wrong token"))
            #expect(try attempt(#"{"type":"hello","protocol":1,"app":"a","token":"\#(token)"}"#).contains("is not one of its processes"),
                    "the right token from a process outside the app is refused")
            #expect(try attempt(#"{"type":"ack","id":1}"#).contains("must be a hello with the app's name and its token"))
            #expect(try harness.status("a").protocol == "lifecycle", "a's own connection is untouched")
        }
    }

    @Test("under a service manager the connections wait in its fd store: after a crash the clients are taken back without reconnecting")
    func fdStoreKeepsClientsConnected() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let notifications = harness.root.appendingPathComponent("notify.jsonl")
        try harness.app("a", client())
        try harness.app("c", client("--observe batteryLevelDidChange"))
        try harness.start(wrapper: ["/usr/bin/python3", DaemonHarness.fakeServiceManager, "--record", notifications.path, "--restart-on-failure", "--"])
        try harness.control("focus", "a")
        try harness.control("launch", "c", "--background")
        try harness.control("suspend", "c")
        try harness.lifectl("post", "batteryLevelDidChange", "--data", #"{"level":0.3}"#)
        func notified() -> [[String: Any]] {
            let text = (try? String(contentsOf: notifications, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }
        func storing() -> [[String: Any]] { notified().filter { ($0["message"] as? String)?.contains("FDSTORE=1") == true } }
        // The fake service manager records each notification as it reads it, in its own time.
        try harness.waitUntil("four descriptors stored") { storing().count >= 4 }
        let stored = storing()
        #expect(stored.count == 4 && stored.allSatisfy { $0["fds"] as? Int == 1 }, "each app's connection and pidfd went into the store")
        #expect(stored.filter { ($0["message"] as? String)?.contains("FDNAME=pidfd-") == true }.count == 2)
        let first = try harness.answeringDaemonPID()

        kill(first, SIGKILL)
        try harness.waitUntil("the service manager restarted the daemon") { (try? harness.answeringDaemonPID()).map { $0 != first } ?? false }
        let restart = try #require(notified().first { $0["restart"] != nil })
        #expect((restart["fds"] as? [String])?.sorted() == ["app-a", "app-c", "pidfd-a", "pidfd-c"],
                "the stored connections and pidfds were passed back")
        try harness.waitUntil("a took its connection back") { harness.log.contains("a: took back its client connection") }
        // The next daemon watches the very processes through the stored pidfds (no pidfd_open of a pid).
        #expect(harness.log.contains("a: took back the pidfd of process"))
        #expect(harness.log.contains("c: took back the pidfd of process"))
        #expect(harness.types("a").filter { $0 == "hello" }.count == 1, "the client never had to reconnect")
        #expect(!harness.log.contains("reconnecting through"))
        #expect(try harness.status("a").protocol == "lifecycle")

        try harness.control("resume", "c")
        try harness.waitUntil("c got what was queued") { harness.types("c").contains("notification") }
        #expect(harness.records("c").filter { $0.type == "notification" }.count == 1)
        try harness.control("focus", "c")
        #expect(harness.types("c").suffix(2) == ["willEnterForeground", "didBecomeActive"])
        try harness.waitUntil("a got didEnterBackground") { harness.types("a").last == "didEnterBackground" }
        #expect(harness.types("a").suffix(2) == ["willResignActive", "didEnterBackground"])
        let ids = harness.records("c").compactMap(\.id)
        #expect(ids.last! > 1000, "message ids went on past the previous daemon's")

        // The re-adopted process ends: both of its stored descriptors leave the store.
        // (The fake service manager records each datagram when it gets to it: waited for, not read at once.)
        try harness.control("terminate", "a")
        func removed() -> [String] { notified().compactMap { $0["message"] as? String }.filter { $0.hasPrefix("FDSTOREREMOVE=1") } }
        try? harness.waitUntil("both of a's descriptors left the store") {
            removed().contains { $0.contains("FDNAME=pidfd-a") } && removed().contains { $0.contains("FDNAME=app-a") }
        }
        #expect(removed().contains { $0.contains("FDNAME=pidfd-a") } && removed().contains { $0.contains("FDNAME=app-a") }, "\(removed())")
    }

    @Test("a re-adopted app ends while the service manager still holds its pidfd: the daemon goes on")
    func readoptedExitWhileTheStoreHoldsThePidfd() throws {
        // The exit of a re-adopted process is watched on the pidfd taken back from the fd store. Closing that pidfd
        // before its event source left the registration in epoll, since the store still held the same file, and the
        // next wait returned an event for the freed source: sd-event aborted (seen under systemd 252 on
        // `systemctl stop` after a restart). The fake service manager keeps removed descriptors open here.
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let notifications = harness.root.appendingPathComponent("notify.jsonl")
        try harness.app("a", "[App]\nExec=/bin/sleep 1000\nProtocol=none\nAutoLaunch=yes\n")
        try harness.app("b", client())
        try harness.start(wrapper: ["/usr/bin/python3", DaemonHarness.fakeServiceManager, "--record", notifications.path, "--restart-on-failure",
                                    "--keep-removed", "--"])
        try harness.control("focus", "b")
        let first = try harness.answeringDaemonPID()
        kill(first, SIGKILL)
        try harness.waitUntil("the service manager restarted the daemon") { (try? harness.answeringDaemonPID()).map { $0 != first } ?? false }
        try harness.waitUntil("a's pidfd was taken back") { harness.log.contains("a: took back the pidfd of process") }
        let second = try harness.answeringDaemonPID()
        let pid = try #require(try harness.status("a").pid)

        kill(pid, SIGKILL)
        try harness.waitUntil("a's end was seen") { (try? harness.status("a").pid) == nil }
        for _ in 0..<5 { _ = try harness.list() }
        try harness.control("background", "b")
        try harness.control("focus", "b")
        #expect(try harness.answeringDaemonPID() == second, "the same daemon answers")
        #expect(!harness.log.contains("Code should not be reached"))
        #expect(!(((try? String(contentsOf: notifications, encoding: .utf8)) ?? "").contains("\"restart\": 2")),
                "the service manager did not have to restart it again")
    }

    @Test("kill -9 in the middle of a suspension (stopped, not yet saved): the next daemon continues the process")
    func crashMidSuspension() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("c", client())
        try harness.start(extraEnvironment: ["LIFECYCLED_TEST_PAUSE_AFTER": "stopProcess:c"])
        try harness.control("launch", "c", "--background")
        let pid = try #require(try harness.status("c").pid)
        let daemon = try #require(harness.daemonPID)
        let suspend = try harness.startLifectl("suspend", "c")
        try harness.waitUntil("the daemon paused right after stopping c") { Kernel.state(daemon) == "T" && Kernel.state(pid) == "T" }

        try harness.crash()
        suspend.waitUntilExit()
        try harness.start(keepLog: true)

        let state = try harness.status("c").state.rawValue
        #expect(state == "background", "the file was saved before the stop: c is taken back in the background")
        try harness.waitUntil("c runs again") { Kernel.state(pid) != "T" }
        #expect(harness.log.contains("died mid-suspension"))
        try harness.control("suspend", "c")
        try harness.waitUntil("and it can be suspended as usual") { Kernel.state(pid) == "T" }
    }

    @Test("kill -9 in the middle of an app switch (willResignActive sent, not acked): one app active, and the switch can be asked again")
    func crashMidSwitch() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", client())
        try harness.app("b", client())
        try harness.start(extraEnvironment: ["LIFECYCLED_TEST_PAUSE_AFTER": "send:a:willResignActive"])
        try harness.control("focus", "a")
        try harness.control("launch", "b", "--background")
        let daemon = try #require(harness.daemonPID)
        let focus = try harness.startLifectl("focus", "b")
        try harness.waitUntil("the daemon paused right after sending willResignActive") { Kernel.state(daemon) == "T" }

        try harness.crash()
        focus.waitUntilExit()
        try harness.start(keepLog: true)

        let apps = try harness.list()
        #expect(apps.first { $0.name == "a" }?.state.rawValue == "active", "a never acked its resignation: still active")
        #expect(apps.filter { $0.state.rawValue == "active" }.count == 1)
        #expect(apps.allSatisfy { app in app.pid.map { Kernel.state($0) != "T" } ?? true }, "nothing is left stopped")
        try harness.waitUntil("a reconnected") { harness.types("a").filter { $0 == "hello" }.count == 2 }
        try harness.control("focus", "b")
        #expect(try harness.status("b").state.rawValue == "active")
        #expect(try harness.status("a").state.rawValue == "background")
    }

    @Test("apps start with SIGPIPE ignored (as systemd's IgnoreSIGPIPE=yes) and every other signal at its default")
    func sigpipeIsIgnored() throws {
        try DaemonHarness.running(["plain": "[App]\nExec=sleep 100000\nProtocol=none\n"]) { harness in
            try harness.control("launch", "plain")
            let pid = try #require(try harness.status("plain").pid)
            let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
            let ignored = try #require(status.split(separator: "\n").first { $0.hasPrefix("SigIgn:") }?.split(separator: "\t").last)
            // Signals 1 to 31; glibc's own real-time signals (32, 33) cannot be changed from a program and are not ours to judge.
            let standard = (UInt64(ignored, radix: 16) ?? 0) & 0x7fff_ffff
            #expect(standard == 1 << (UInt64(SIGPIPE) - 1), "SigIgn: \(ignored)")
        }
    }
}

