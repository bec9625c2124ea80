import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// The control socket's `watch` verb and `lifectl watch` (docs/CONTROL.md) against the real daemon and real apps:
/// what a scripted sequence of requests and a reload does appears once and in order in both, a watcher that stops
/// reading is dropped without harm to anyone else, and a user who may not change states may watch.
@Suite("control socket: watch", .serialized)
struct ControlWatchTests {
    let python = DaemonHarness.pythonClient

    var plainApp: String { "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n" }
    var sceneApp: String {
        "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n\n"
            + "[Scenes]\nSupportsMultipleScenes=yes\nConfiguration=window:Main window:Editor\n"
    }

    static func events(_ lines: [String]) -> [WatchEvent] {
        lines.compactMap { try? LineCoder().decode(WatchEvent.self, from: Array($0.utf8)) }
    }

    /// The changes of a stream, in a form that compares across the two clients: without the times.
    static func changes(_ events: [WatchEvent]) -> [String] {
        events.compactMap { event in
            switch event.event {
            case "transition": "\(event.app!): \(event.from!) → \(event.to!) (\(event.reason!))"
            case "sceneTransition": "\(event.app!) \(event.scene!): \(event.from!) → \(event.to!) (\(event.reason!))"
            case "added": "\(event.app!) added \(event.state!)"
            case "removed": "\(event.app!) removed"
            default: nil
            }
        }
    }

    /// Lines from a raw control connection until one satisfies `last` (included).
    static func lines(_ connection: ControlLine, until last: (String) -> Bool) throws -> [String] {
        var lines: [String] = []
        while true {
            let line = try connection.receive()
            lines.append(line)
            if last(line) { return lines }
        }
    }

    @Test("launch, focus, switch, background, suspend, resume, terminate, a scene opened and closed, an app added and removed by reload: each change once, in order, in the verb's stream and in lifectl watch --json; lifectl watch APP shows only APP, as human lines")
    func scriptedSequenceAppearsOnceInOrder() throws {
        try DaemonHarness.running(["a": plainApp, "w": sceneApp]) { daemon in
            let socket = daemon.runtimeDirectory.appendingPathComponent("control.sock").path
            let raw = try ControlLine(socket)
            try raw.send(#"{"verb":"watch"}"#)
            let snapshot = Self.events(try Self.lines(raw) { $0.contains(#""event":"ready""#) })
            #expect(snapshot.map { "\($0.event) \($0.app ?? "") \($0.state ?? "")" } == ["app a notRunning", "app w notRunning", "ready  "])
            #expect(snapshot.last?.protocol == 1)
            let json = try WatchProcess(daemon, ["watch", "--json"])
            defer { json.stop() }
            let human = try WatchProcess(daemon, ["watch", "a"])
            defer { human.stop() }
            try json.waitFor(#""event":"ready""#)
            try human.waitFor("notRunning")

            try daemon.control("launch", "a")
            try daemon.control("focus", "a")
            try daemon.control("focus", "w")
            let opened = try daemon.lifectl("scene", "open", "w", "--config", "Editor")
            #expect(opened.status == 0, "\(opened.stderr)")
            try daemon.control("scene", "close", "w", "s2")
            try daemon.control("background", "w")
            try daemon.control("suspend", "a")
            try daemon.control("resume", "a")
            try daemon.control("terminate", "a")
            try daemon.app("c", plainApp)
            #expect(try daemon.lifectl("reload").status == 0)
            try daemon.removeApp("c")
            #expect(try daemon.lifectl("reload").status == 0)

            let streamed = Self.changes(Self.events(try Self.lines(raw) { $0.contains(#""event":"removed""#) }))
            try json.waitFor(#""event":"removed""#)
            let printed = Self.changes(Self.events(json.interrupt()))
            #expect(json.status == 0, "lifectl watch exits 0 when interrupted")

            // Every app transition the daemon logged, once each, in its order: the log is written apart from the observers.
            let logged = daemon.log.split(separator: "\n").compactMap { line -> String? in
                guard let range = line.range(of: #"\b[aw]: [a-zA-Z]+ → [a-zA-Z]+ \(.*\)$"#, options: .regularExpression) else { return nil }
                return String(line[range])
            }
            let appTransitions = streamed.filter { !$0.hasPrefix("w s") && $0.contains(" → ") }
            #expect(appTransitions == logged, "the watch stream's transitions are the daemon's, once each, in order")
            #expect(appTransitions.filter { $0.hasPrefix("a:") }.map { $0.components(separatedBy: " (")[0] } == [
                "a: notRunning → inactive", "a: inactive → active", "a: active → inactive", "a: inactive → background",
                "a: background → suspended", "a: suspended → background", "a: background → notRunning",
            ])
            #expect(appTransitions.filter { $0.hasPrefix("w:") }.map { $0.components(separatedBy: " (")[0] } == [
                "w: notRunning → inactive", "w: inactive → active", "w: active → inactive", "w: inactive → background",
            ])
            let sceneChanges = streamed.filter { $0.hasPrefix("w s2") }.map { $0.components(separatedBy: " (")[0] }
            #expect(sceneChanges.first == "w s2: disconnected → unattached" || sceneChanges.first?.hasPrefix("w s2: disconnected →") == true,
                    "the opened scene appears: \(sceneChanges)")
            #expect(sceneChanges.last?.hasSuffix("→ disconnected") == true, "the closed scene goes: \(sceneChanges)")
            #expect(streamed.filter { $0.hasPrefix("c ") } == ["c added notRunning", "c removed"])
            #expect(printed == streamed, "lifectl watch --json prints the same changes as the verb's stream")

            try human.waitFor("background → notRunning")
            let humanLines = human.interrupt()
            #expect(human.status == 0)
            #expect(humanLines.contains { $0.range(of: #"^\d\d:\d\d:\d\d\.\d{3}  a +notRunning → inactive  \(.+\)$"#, options: .regularExpression) != nil },
                    "human lines: time, app, from → to, reason: \(humanLines)")
            #expect(!humanLines.contains { $0.contains(" w ") || $0.contains(" c ") }, "lifectl watch a shows only a: \(humanLines)")
        }
    }

    @Test("a watcher that stops reading is dropped with a last line and a log line; the daemon goes on answering, and another watcher gets every change")
    func stalledWatcherIsDropped() throws {
        try DaemonHarness.running(["a": plainApp, "b": plainApp]) { daemon in
            let socket = daemon.runtimeDirectory.appendingPathComponent("control.sock").path
            let stalled = try ControlLine(socket)
            try stalled.send(#"{"verb":"watch"}"#)
            let healthy = try WatchProcess(daemon, ["watch", "--json"])
            defer { healthy.stop() }
            try healthy.waitFor(#""event":"ready""#)

            // Switches until the daemon gives up on the watcher that never reads; the replies are read as they come.
            let control = try ControlLine(socket)
            var switches = 0
            while !daemon.log.contains("Dropped the watch of") && switches < 5000 {
                for app in ["a", "b"] {
                    let reply = try LineCoder().decode(ControlReply.self, from: Array(try control.exchange(#"{"verb":"focus","app":"\#(app)"}"#).utf8))
                    #expect(reply.ok && reply.apps?.first?.state.rawValue == "active", "focus \(app) is answered while the watcher stalls")
                }
                switches += 1
            }
            #expect(daemon.log.contains("Dropped the watch of"), "the stalled watcher is dropped after \(switches) switches")

            // It reads again at once: what was queued before it fell behind, then the last line, then the end.
            var received: [String] = []
            while let line = try? stalled.receive() { received.append(line) }
            let last = try #require(Self.events(received).last)
            #expect(last.event == "dropped" && last.reason?.contains("fell behind") == true, "the last line says why: \(received.suffix(2))")

            // Everyone else is served as before: the other watcher got every transition the daemon logged, in order.
            try daemon.control("focus", "a")
            let logged = daemon.log.split(separator: "\n").compactMap { line -> String? in
                guard let range = line.range(of: #"\b[ab]: [a-zA-Z]+ → [a-zA-Z]+ \(.*\)$"#, options: .regularExpression) else { return nil }
                return String(line[range])
            }
            #expect(logged.count >= switches * 4)
            try daemon.waitUntil("the other watcher got every transition") { Self.changes(Self.events(healthy.lines)).count >= logged.count }
            #expect(Self.changes(Self.events(healthy.interrupt())) == logged, "the reading watcher got every transition once, in order")
            #expect(healthy.status == 0, "it was not dropped: \(healthy.stderr)")
            #expect(try daemon.status("a").state.rawValue == "active")
            #expect(try daemon.status("b").state.rawValue == "background")
        }
    }

    @Test("a user who may not change states watches (lifectl watch as nobody) and is refused a change; an unknown app exits 4; the daemon stopping ends the watch with status 3")
    func unprivilegedWatchAndEnds() throws {
        let daemon = try DaemonHarness()
        defer { daemon.stop() }
        try daemon.app("a", plainApp)
        try daemon.start()
        let watcher = try WatchProcess(daemon, ["watch", "--json"], asUser: 65534)
        defer { watcher.stop() }
        try watcher.waitFor(#""event":"ready""#)
        try daemon.control("focus", "a")
        try watcher.waitFor(#""to":"active""#)
        let refused = try daemon.lifectl("focus", "a", asUser: 65534)
        #expect(refused.status == 1 && refused.stderr.contains("permission denied"))

        let unknown = try daemon.lifectl("watch", "nope")
        #expect(unknown.status == 4 && unknown.stderr.contains("no such app 'nope'"), "\(unknown)")

        daemon.stop()
        let lines = watcher.waitForExit()
        #expect(watcher.status == 3, "the daemon went away: \(watcher.stderr)")
        #expect(watcher.stderr.contains("lifecycled ended the watch: lifecycled is stopping"), "\(watcher.stderr)")
        #expect(Self.events(lines).last?.event == "closing")
    }
}

/// `lifectl watch …` left running, its output in a file.
final class WatchProcess {
    let process = Process()
    private let output: URL
    private let errors: URL

    init(_ daemon: DaemonHarness, _ arguments: [String], asUser uid: uid_t? = nil) throws {
        let lifectl = DaemonHarness.products.appendingPathComponent("lifectl").path
        // Not in the harness's directory: stopping the daemon removes it, and a test reads the output after that.
        output = FileManager.default.temporaryDirectory.appendingPathComponent("lifectl-watch-\(UUID().uuidString).out")
        errors = output.appendingPathExtension("err")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil)
        if let uid {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            // Another user may not enter the test's working directory (a checkout under a private directory).
            process.currentDirectoryURL = URL(fileURLWithPath: "/")
            process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", lifectl] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: lifectl)
            process.arguments = arguments
        }
        process.environment = daemon.environment
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
    }

    var lines: [String] {
        ((try? String(contentsOf: output, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    var stderr: String { (try? String(contentsOf: errors, encoding: .utf8)) ?? "" }

    var status: Int32 { process.terminationStatus }

    func waitFor(_ text: String, timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if lines.contains(where: { $0.contains(text) }) { return }
            guard process.isRunning else { break }
            usleep(20_000)
        }
        throw HarnessError("lifectl \(process.arguments ?? []) printed no line with \(text): \(lines) \(stderr)")
    }

    /// SIGINT, then its output once it has exited.
    func interrupt() -> [String] {
        kill(process.processIdentifier, SIGINT)
        return waitForExit()
    }

    func waitForExit() -> [String] {
        process.waitUntilExit()
        return lines
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: output)
        try? FileManager.default.removeItem(at: errors)
    }
}
