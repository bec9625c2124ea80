import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// Scenes end to end: the real daemon, real clients (the Python example and the Swift scenes example),
/// lifectl's scene verbs, and the kernel's view of the app's priority.
@Suite("Scenes end to end", .serialized)
struct SceneIntegrationTests {
    let python = DaemonHarness.pythonClient
    static let scenes = "[Scenes]\nSupportsMultipleScenes=yes\nConfiguration=window:Main window:Editor\n"

    func sceneApp(_ arguments: String = "", lifecycle: String = "BackgroundTimeSec=infinity") -> String {
        "[App]\nExec=\(python) \(arguments)\n\n[Lifecycle]\n\(lifecycle)\n\n\(Self.scenes)"
    }

    func plainApp() -> String { "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n" }

    /// The messages an app received from record index `start` on: `type` or `type scene`.
    func received(_ daemon: DaemonHarness, _ app: String, from start: Int = 0) -> [String] {
        daemon.records().dropFirst(start).filter { $0.app == app && $0.type != "hello" }
            .map { record in record.scene.map { "\(record.type) \($0)" } ?? record.type }
    }

    func oomScoreAdj(_ pid: pid_t) throws -> String {
        try String(contentsOfFile: "/proc/\(pid)/oom_score_adj", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func scenes(_ daemon: DaemonHarness, _ app: String) throws -> [String: String] {
        let status = try daemon.status(app)
        return Dictionary(uniqueKeysWithValues: (status.scenes ?? []).map { ($0.scene, $0.state) })
    }

    @Test("two scenes of one app: focus moves between them, then to another app, in UIKit's order on every side; state and priority follow")
    func focusBetweenScenesAndApps() throws {
        try DaemonHarness.running(["w": sceneApp(), "p": plainApp()]) { daemon in
            try daemon.control("focus", "w")
            #expect(received(daemon, "w") == ["didFinishLaunching", "configurationForConnecting s1", "sceneWillConnect s1",
                                              "sceneWillEnterForeground s1", "sceneDidBecomeActive s1", "didBecomeActive"])
            let pid = try #require(try daemon.status("w").pid)
            #expect(try daemon.status("w").state.rawValue == "active")
            #expect(try oomScoreAdj(pid) == "0")

            var start = daemon.records().count
            let opened = try daemon.lifectl("scene", "open", "w", "--config", "Editor")
            #expect(opened.status == 0, "\(opened.stderr)")
            #expect(opened.stdout.contains("opened scene s2"))
            #expect(received(daemon, "w", from: start) == ["configurationForConnecting s2", "sceneWillConnect s2",
                                                           "sceneWillEnterForeground s2", "sceneWillResignActive s1",
                                                           "sceneDidBecomeActive s2"])
            #expect(daemon.records("w").last { $0.type == "sceneWillConnect" }?.configuration == "Editor")
            #expect(try scenes(daemon, "w") == ["s1": "foregroundInactive", "s2": "foregroundActive"])
            #expect(try daemon.status("w").state.rawValue == "active", "the app held focus while it moved between its scenes")

            start = daemon.records().count
            try daemon.control("scene", "focus", "w", "s1")
            #expect(received(daemon, "w", from: start) == ["sceneWillResignActive s2", "sceneDidBecomeActive s1"])

            try daemon.control("launch", "p", "--background")
            start = daemon.records().count
            try daemon.control("focus", "p")
            // A client writes its record of a message as it handles it: the last one may land after lifectl's answer.
            try daemon.waitUntil("w's record of didEnterBackground") { received(daemon, "w", from: start).last == "didEnterBackground" }
            #expect(received(daemon, "w", from: start) == ["sceneWillResignActive s1", "willResignActive",
                                                           "sceneDidEnterBackground s1", "sceneDidEnterBackground s2",
                                                           "didEnterBackground"])
            #expect(received(daemon, "p", from: start) == ["willEnterForeground", "didBecomeActive"])
            let order = daemon.records().dropFirst(start).map { "\($0.app).\($0.type)" }
            let resigned = try #require(order.firstIndex(of: "w.willResignActive"))
            let forward = try #require(order.firstIndex(of: "p.willEnterForeground"))
            #expect(resigned < forward, "p comes forward only after w has resigned: \(order)")
            #expect(try daemon.status("w").state.rawValue == "background")
            #expect(try daemon.status("p").state.rawValue == "active")
            #expect(try oomScoreAdj(pid) == "500", "the derived background state brings the background priority")
            #expect(try scenes(daemon, "w") == ["s1": "background", "s2": "background"])

            start = daemon.records().count
            try daemon.control("scene", "focus", "w", "s2")
            #expect(received(daemon, "w", from: start) == ["sceneWillEnterForeground s2", "willEnterForeground",
                                                           "sceneDidBecomeActive s2", "didBecomeActive"])
            #expect(try oomScoreAdj(pid) == "0")
        }
    }

    @Test("the last foreground scene going to the background takes the app there, and its grace time suspends it")
    func lastSceneToBackgroundSuspends() throws {
        try DaemonHarness.running(["w": sceneApp(lifecycle: "BackgroundTimeSec=1")]) { daemon in
            try daemon.control("focus", "w")
            try daemon.lifectl("scene", "open", "w")
            try daemon.control("scene", "background", "w", "s2")
            #expect(try daemon.status("w").state.rawValue == "inactive", "s1 is still in the foreground, not in focus")
            #expect(try oomScoreAdj(try #require(try daemon.status("w").pid)) == "0")
            // The reply is the app as it settled, before its one-second grace can end.
            let reply = try daemon.lifectl("scene", "background", "w", "s1")
            #expect(reply.status == 0 && reply.stdout.hasPrefix("w: background"), "\(reply)")
            let pid = try #require(try daemon.status("w").pid)
            try daemon.waitForState("w", "suspended")
            try daemon.waitUntil("the process is stopped") { Kernel.state(pid) == "T" }
            #expect(try oomScoreAdj(pid) == "900")
        }
    }

    @Test("close keeps the session with its saved state; focus reconnects it and hands the state back")
    func closeAndReconnect() throws {
        try DaemonHarness.running(["w": sceneApp()]) { daemon in
            try daemon.control("focus", "w")
            var start = daemon.records().count
            try daemon.control("scene", "close", "w", "s1")
            #expect(received(daemon, "w", from: start) == ["sceneWillResignActive s1", "willResignActive",
                                                           "sceneDidEnterBackground s1", "didEnterBackground",
                                                           "sceneDidDisconnect s1"])
            let listed = try daemon.lifectl("scenes", "w", "--json")
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [[String: Any]])
            #expect(rows.count == 1)
            #expect(rows.first?["state"] as? String == "disconnected")
            #expect((rows.first?["savedState"] as? [String: Any])?["backgroundEntries"] as? Int == 1)

            start = daemon.records().count
            try daemon.control("scene", "focus", "w", "s1")
            let connect = try #require(daemon.records("w").dropFirst(0).last { $0.type == "sceneWillConnect" })
            #expect(connect.state == ["scene": "s1", "backgroundEntries": 1], "the state saved at sceneDidEnterBackground comes back")
            #expect(received(daemon, "w", from: start) == ["configurationForConnecting s1", "sceneWillConnect s1",
                                                           "sceneWillEnterForeground s1", "willEnterForeground",
                                                           "sceneDidBecomeActive s1", "didBecomeActive"])
        }
    }

    @Test("discard disconnects the scene, forgets the session and sends didDiscardSceneSessions")
    func discard() throws {
        try DaemonHarness.running(["w": sceneApp()]) { daemon in
            try daemon.control("focus", "w")
            try daemon.lifectl("scene", "open", "w")
            let start = daemon.records().count
            try daemon.control("scene", "discard", "w", "s1")
            #expect(received(daemon, "w", from: start) == ["sceneDidEnterBackground s1", "sceneDidDisconnect s1", "didDiscardSceneSessions"])
            #expect(daemon.records("w").last?.scenes == ["s1"])
            #expect(try scenes(daemon, "w") == ["s2": "foregroundActive"])
            let refused = try daemon.lifectl("scene", "focus", "w", "s1")
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("it has no scene session 's1'"))
        }
    }

    @Test("sessions survive the app's termination: the relaunch reconnects the last active one with its state")
    func sessionsSurviveRelaunch() throws {
        try DaemonHarness.running(["w": sceneApp()]) { daemon in
            try daemon.control("focus", "w")
            try daemon.lifectl("scene", "open", "w")
            try daemon.control("background", "w")
            try daemon.control("terminate", "w")
            try daemon.waitForState("w", "notRunning")
            #expect(try scenes(daemon, "w") == ["s1": "disconnected", "s2": "disconnected"])

            let start = daemon.records().count
            try daemon.control("focus", "w")
            #expect(received(daemon, "w", from: start) == ["didFinishLaunching", "configurationForConnecting s2", "sceneWillConnect s2",
                                                           "sceneWillEnterForeground s2", "sceneDidBecomeActive s2", "didBecomeActive"])
            let connect = try #require(daemon.records("w").last { $0.type == "sceneWillConnect" })
            #expect(connect.state == ["scene": "s2", "backgroundEntries": 1])
            #expect(try scenes(daemon, "w") == ["s1": "disconnected", "s2": "foregroundActive"])
        }
    }

    @Test("a client asks for its own new scene (requestSceneActivation), and gets it focused")
    func clientOpensItsOwnScene() throws {
        try DaemonHarness.running(["w": sceneApp("--open-scene-on-active Editor")]) { daemon in
            try daemon.control("focus", "w")
            try daemon.waitUntil("the app's own scene is active") { (try? scenes(daemon, "w")["s2"]) == "foregroundActive" }
            let connect = try #require(daemon.records("w").last { $0.type == "sceneWillConnect" })
            #expect(connect.scene == "s2" && connect.configuration == "Editor")
            let options = try #require(daemon.records("w").last { $0.type == "configurationForConnecting" })
            #expect(options.scene == "s2")
            #expect(try scenes(daemon, "w")["s1"] == "foregroundInactive")
            #expect(daemon.log.contains("w: asked to open a scene of itself") || daemon.log.contains("w/s2: new scene session"))
        }
    }

    @Test("a client destroys its own other scene (requestSceneDestruction): disconnected, discarded, and told")
    func clientDestroysItsOwnScene() throws {
        try DaemonHarness.running(["w": sceneApp("--close-others-on-active")]) { daemon in
            try daemon.control("focus", "w")
            let start = daemon.records().count
            try daemon.lifectl("scene", "open", "w")
            try daemon.waitUntil("s1 is discarded") { (try? scenes(daemon, "w")) == ["s2": "foregroundActive"] }
            #expect(received(daemon, "w", from: start).suffix(3) == ["sceneDidEnterBackground s1", "sceneDidDisconnect s1",
                                                                     "didDiscardSceneSessions"])
            #expect(daemon.records("w").last?.scenes == ["s1"])
        }
    }

    @Test("an app without [Scenes] keeps the app-level lifecycle, and scene verbs are refused for it")
    func appWithoutScenesIsUnchanged() throws {
        try DaemonHarness.running(["p": plainApp()]) { daemon in
            try daemon.control("focus", "p")
            #expect(received(daemon, "p") == ["didFinishLaunching", "didBecomeActive"])
            let refused = try daemon.lifectl("scene", "open", "p")
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("it does not use scenes"))
            #expect(try daemon.status("p").scenes == nil)
            let usage = try daemon.lifectl("scene", "focus", "p")
            #expect(usage.status == 2, "a scene verb without its scene is a usage error")
        }
    }

    @Test("the Swift scenes example keeps each scene's state across close and reconnect, per configuration")
    func swiftExampleKeepsPerSceneState() throws {
        let example = DaemonHarness.products.appendingPathComponent("scenes-example").path
        let config = "[App]\nExec=\(example)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n\n"
            + "[Scenes]\nSupportsMultipleScenes=yes\nConfiguration=window:Document window:Inspector\nConfiguration=externalDisplay:Inspector\n"
        try DaemonHarness.running(["scenes": config]) { daemon in
            try daemon.control("focus", "scenes")
            try daemon.lifectl("scene", "open", "scenes", "--role", "externalDisplay")
            #expect(daemon.records("scenes").last { $0.type == "sceneWillConnect" }?.configuration == "Inspector",
                    "the app delegate chose the Inspector for the external display")
            try daemon.control("scene", "focus", "scenes", "s1")
            try daemon.control("scene", "close", "scenes", "s1")
            try daemon.control("scene", "close", "scenes", "s2")
            try daemon.control("scene", "focus", "scenes", "s1")
            try daemon.control("scene", "focus", "scenes", "s2")

            let connects = daemon.records("scenes").filter { $0.type == "sceneWillConnect" }
            #expect(connects.map { $0.scene ?? "?" } == ["s1", "s2", "s1", "s2"])
            #expect(connects[2].state == ["draft": "draft of s1, edit 2", "edits": 2], "the document came back with its draft")
            #expect(connects[3].state == ["shown": 1], "the inspector came back with its count")
        }
    }

    /// A client that asks for new scenes without end: after its launch it sends `BURST` requestSceneActivation lines
    /// in one write, acks every message at once, and records what it receives (with requestFailed's message).
    static let sceneHoarder = #"""
        import json, os, socket, sys, time
        burst = int(sys.argv[1])
        record = os.open(os.environ["LIFECYCLE_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        sock = socket.socket(fileno=int(os.environ.pop("LIFECYCLE_FD")))
        sock.setblocking(True)
        sock.sendall(b'{"type":"hello","protocol":1}\n')
        for line in sock.makefile("rb"):
            message = json.loads(line)
            entry = {"app": "w", "type": message["type"], "t": time.monotonic_ns(), "id": message.get("id"),
                     "scene": message.get("scene"), "scenes": message.get("scenes"), "message": message.get("message")}
            os.write(record, (json.dumps(entry) + "\n").encode())
            if "id" in message and "deadlineMs" in message:
                sock.sendall(json.dumps({"type": "ack", "id": message["id"]}).encode() + b"\n")
            if message.get("type") == "didFinishLaunching":
                sock.sendall(b'{"type":"requestSceneActivation"}\n' * burst)
        """#

    /// Counts the kernel's reports of writes of `name` in `directory` (Tests/Fixtures/count_writes.py).
    final class WriteCounter {
        let process = Process()
        let output = Pipe()
        init(directory: String, name: String) throws {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = [DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/count_writes.py").path, directory, name]
            process.standardOutput = output
            try process.run()
            // Only the counter writes to the pipe, so that its end is seen once it exits.
            try output.fileHandleForWriting.close()
            let ready = output.fileHandleForReading.readData(ofLength: 6)
            guard String(decoding: ready, as: UTF8.self) == "ready\n" else { throw HarnessError("count_writes.py did not start") }
        }
        deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

        /// Stops counting; the number of writes seen.
        func finish() throws -> Int {
            kill(process.processIdentifier, SIGTERM)
            let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            guard let count = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { throw HarnessError("count_writes.py: \(text)") }
            return count
        }
    }

    @Test("a client asking for 300 scenes against MaxSceneSessions=16: 16 connect, the rest are refused naming the bound, the state file stays bounded and is written far less often than the app changes, lifectl keeps answering; at the bound a closed session is discarded for a new one")
    func sessionsPastTheBoundAreRefusedAndTheStateFileStaysSmall() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let script = harness.root.appendingPathComponent("hoarder.py")
        try Self.sceneHoarder.write(to: script, atomically: true, encoding: .utf8)
        try harness.app("w", "[App]\nExec=/usr/bin/python3 \(script.path) 300\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n\n[Scenes]\nSupportsMultipleScenes=yes\nMaxSceneSessions=16\n")
        try harness.start()
        let stateDirectory = harness.runtimeDirectory.appendingPathComponent("state").path
        let counter = try WriteCounter(directory: stateDirectory, name: "w.json")

        try harness.control("launch", "w")
        // The launch brings s1 forward; the client's requests make s2 to s16, and the other 285 are refused.
        try harness.waitUntil("300 answers: 15 more sessions in focus in turn, 285 refusals") {
            try scenes(harness, "w").count == 16 && harness.records("w").filter { $0.type == "requestFailed" }.count == 285
                && scenes(harness, "w")["s16"] == "foregroundActive"
        }
        let writes = try counter.finish()
        // Every lifecycle message the app acknowledged changed what its state file holds.
        let messages = harness.records("w").filter { $0.id != nil }.count

        let refusals = harness.records("w").filter { $0.type == "requestFailed" }.compactMap(\.message)
        #expect(refusals.count == 285 && refusals.allSatisfy { $0.contains("'w'") && $0.contains("MaxSceneSessions=16") },
                "each refusal names the app and the bound: \(Set(refusals))")
        #expect(messages >= 64, "16 scenes connected, each through several acknowledged messages: \(messages)")
        #expect(writes >= 1, "the counter sees the daemon's writes")
        #expect(writes * 4 <= messages, "\(writes) writes of the state file for \(messages) changes: they are coalesced")

        // lifectl answers, and the file holds the 16 sessions and no more.
        #expect(try harness.lifectl("list").status == 0)
        let stateFile = harness.runtimeDirectory.appendingPathComponent("state/w.json")
        try harness.waitUntil("the file holds the last sessions") {
            let file = try JSONSerialization.jsonObject(with: Data(contentsOf: stateFile)) as? [String: Any]
            let sessions = (file?["snapshot"] as? [String: Any])?["sessions"] as? [Any]
            return sessions?.count == 16
        }

        // Past the bound from lifectl too: refused with every session connected, and once two are closed, the
        // least recently used of them (s1, active before s2) is discarded for the new one.
        let refused = try harness.lifectl("scene", "open", "w")
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("MaxSceneSessions=16") && refused.stderr.contains("w"), "\(refused.stderr)")
        try harness.control("scene", "close", "w", "s2")
        try harness.control("scene", "close", "w", "s1")
        let start = harness.records("w").count
        let opened = try harness.lifectl("scene", "open", "w")
        #expect(opened.status == 0, "\(opened.stderr)")
        try harness.waitUntil("the discard is told") { harness.records("w").dropFirst(start).contains { $0.type == "didDiscardSceneSessions" } }
        #expect(harness.records("w").dropFirst(start).first { $0.type == "didDiscardSceneSessions" }?.scenes == ["s1"])
        #expect(try scenes(harness, "w").count == 16)
        #expect(try scenes(harness, "w")["s1"] == nil && scenes(harness, "w")["s2"] == "disconnected")
        #expect(harness.isDaemonRunning)
    }
}

