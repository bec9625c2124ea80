import Foundation
import Glibc
import LifecycleModel
import LifecycleProtocol
import Testing

/// Notifications with real clients: queued and coalesced while an app is stopped, delivered at once
/// while it runs, only the types it observes.
@Suite("notifications end to end", .serialized)
struct NotificationIntegrationTests {
    let python = DaemonHarness.pythonClient

    func withDaemon(_ apps: [String: String], daemonConfig: String? = nil, _ body: (DaemonHarness) throws -> Void) throws {
        try DaemonHarness.running(apps, daemonConfig: daemonConfig, body)
    }

    func client(_ arguments: String, lifecycle: String = "BackgroundTimeSec=infinity") -> String {
        "[App]\nExec=\(python) \(arguments)\n\n[Lifecycle]\n\(lifecycle)\n"
    }

    @discardableResult
    func post(_ daemon: DaemonHarness, _ type: String, _ data: String? = nil, app: String? = nil) throws -> String {
        var arguments = ["post", type]
        if let app { arguments += ["--app", app] }
        if let data { arguments += ["--data", data] }
        let process = Process()
        process.executableURL = DaemonHarness.products.appendingPathComponent("lifectl")
        process.arguments = arguments
        process.environment = daemon.environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw HarnessError("lifectl post failed: \(stderr)") }
        return stdout
    }

    @Test("posts to a suspended app are held, coalesced, and delivered on resume before willEnterForeground")
    func suspendedAppGetsOneMessagePerTypeOnResume() throws {
        let observe = "--observe batteryLevelDidChange,significantTimeChange,userDefaultsDidChange"
        try withDaemon(["a": client(observe)]) { daemon in
            try daemon.control("launch", "a", "--background")
            try daemon.control("suspend", "a")
            let pid = try #require(try daemon.status("a").pid)
            try daemon.waitUntil("a is stopped") { Kernel.state(pid) == "T" }
            let before = daemon.records("a").count

            try post(daemon, "batteryLevelDidChange", #"{"level":0.5}"#)
            try post(daemon, "significantTimeChange", #"{"reason":"clockSet"}"#)
            try post(daemon, "batteryLevelDidChange", #"{"level":0.4}"#)
            try post(daemon, "userDefaultsDidChange", #"{"a":1,"b":1}"#)
            try post(daemon, "significantTimeChange", #"{"reason":"midnight"}"#)
            try post(daemon, "batteryLevelDidChange", #"{"level":0.3}"#)
            try post(daemon, "userDefaultsDidChange", #"{"b":2}"#)
            #expect(try post(daemon, "currentLocaleDidChange", #"{"LANG":"de_DE.UTF-8"}"#).contains("queued for 0"),
                    "not observed: dropped, not queued")

            // Each post returned once the daemon had queued it; what reached the app early would show in the
            // records now and in the order of what arrives on resume below.
            #expect(daemon.records("a").count == before, "nothing reaches a stopped process")
            let held = try daemon.status("a")
            #expect(held.queuedNotifications == 3, "one entry per type, whatever the number of posts")
            #expect(held.queuedPosts == 7)

            try daemon.control("focus", "a")
            let woken = Array(daemon.records("a").dropFirst(before))
            #expect(woken.map { $0.type == "notification" ? $0.name ?? "?" : $0.type } ==
                    ["batteryLevelDidChange", "significantTimeChange", "userDefaultsDidChange",
                     "willEnterForeground", "didBecomeActive"], "first-post order, then the lifecycle")
            #expect(woken[0].payload == .object(["level": .number(0.3)]) && woken[0].posts == 3)
            #expect(woken[1].payload == nil && woken[1].posts == 2, "count: how many, no payload")
            #expect(woken[2].payload == .object(["a": .number(1), "b": .number(2)]) && woken[2].posts == 2, "merge")
            #expect(try daemon.status("a").queuedNotifications == 0)
        }
    }

    @Test("a running app gets a post at once; only apps that observe the type get it")
    func runningAppGetsPostsAtOnceOnlyForObservedTypes() throws {
        try withDaemon(["watcher": client("--observe currentLocaleDidChange"), "other": client("")]) { daemon in
            try daemon.control("focus", "watcher")
            try daemon.control("launch", "other")
            let output = try post(daemon, "currentLocaleDidChange", #"{"LANG":"fr_FR.UTF-8"}"#)
            #expect(output.contains("delivered to 1 apps, queued for 0"))
            try daemon.waitUntil("watcher got it") { daemon.records("watcher").contains { $0.type == "notification" } }
            let note = try #require(daemon.records("watcher").first { $0.type == "notification" })
            #expect(note.name == "currentLocaleDidChange" && note.posts == 1)
            #expect(note.payload == .object(["LANG": .string("fr_FR.UTF-8")]))
            #expect(!daemon.types("other").contains("notification"))
            #expect(try daemon.status("watcher").observing == ["currentLocaleDidChange"])
        }
    }

    @Test("a client posts over the protocol to the apps that observe the type")
    func clientPostsReachObservers() throws {
        // A type declared for client posts: the system types are the daemon's alone (ControlPrivilegeTests).
        try withDaemon(["sender": client("--post-on-active chatMessage"), "receiver": client("--observe chatMessage")],
                       daemonConfig: "[NotificationTypes]\nchatMessage=latest\n") { daemon in
            try daemon.control("launch", "receiver")
            try daemon.control("focus", "sender")
            try daemon.waitUntil("receiver got the post") { daemon.records("receiver").contains { $0.type == "notification" } }
            let note = try #require(daemon.records("receiver").first { $0.type == "notification" })
            #expect(note.payload == .object(["from": .string("sender")]))
        }
    }

    @Test("an app that has not said hello yet gets what was posted meanwhile, right after its hello")
    func postsBeforeHelloAreDeliveredAfterIt() throws {
        try withDaemon(["a": "[App]\nExec=/bin/sh -c \"sleep 0.5; exec \(python) --observe batteryLevelDidChange\"\n"]) { daemon in
            _ = try daemon.lifectl("launch", "a", "--timeout", "0.05")
            let output = try post(daemon, "batteryLevelDidChange", #"{"level":0.9}"#)
            #expect(output.contains("queued for 1"))
            try daemon.waitUntil("a got it after hello") { daemon.records("a").contains { $0.type == "notification" } }
            #expect(daemon.types("a").prefix(2) == ["hello", "notification"])
        }
    }

    @Test("the Swift library: a background task holds the app up; notifications it observes are coalesced while it sleeps")
    func swiftClientLibraryTasksAndNotifications() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("notes-\(getpid())-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: state) }
        let notes = "[App]\nExec=notes-example\nEnvironment=NOTES_STATE_FILE=\(state.path)\n[Lifecycle]\nBackgroundTimeSec=0\n"
        try withDaemon(["notes": notes]) { daemon in
            try daemon.control("focus", "notes")
            #expect(try daemon.status("notes").observing == ["currentLocaleDidChange"], "the library asked for what it observes")
            // The delegate begins a "sync" task in applicationDidEnterBackground, before its ack, and ends it 300 ms
            // later: the reply, the app's status as it settled, shows the task open.
            #expect(try daemon.settle("background", "notes").backgroundTasks.map(\.name) == ["sync"])
            try daemon.waitForState("notes", "suspended")
            #expect(daemon.log.contains("notes: began background task 1 'sync'"))

            try post(daemon, "currentLocaleDidChange", #"{"LANG":"de_DE.UTF-8"}"#)
            try post(daemon, "currentLocaleDidChange", #"{"LANG":"fr_FR.UTF-8"}"#)
            let before = daemon.records("notes").count
            try daemon.control("focus", "notes")
            let woken = Array(daemon.records("notes").dropFirst(before))
            #expect(woken.map(\.type) == ["notification", "willEnterForeground", "didBecomeActive"])
            #expect(woken.first?.posts == 2)
        }
    }

    @Test("posting an undeclared type is refused with the list of known types")
    func unknownTypeIsRefused() throws {
        try withDaemon(["a": client("")]) { daemon in
            let output = try daemon.lifectl("post", "noSuchThing")
            #expect(output.status == 1)
            #expect(output.stderr.contains("no such notification type"))
            #expect(output.stderr.contains("batteryLevelDidChange"))
            let bad = try daemon.lifectl("post", "batteryLevelDidChange", "--data", "{not json")
            #expect(bad.status == 2)
        }
    }
}
