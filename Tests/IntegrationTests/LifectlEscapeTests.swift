import Foundation
import LifecycleModel
import LifecycleProtocol
import LifectlCommand
import Testing

/// lifectl's human output against a real daemon and a real client that names its background task with a terminal
/// escape: the app's text never reaches the terminal as control characters, and --json keeps it as it is.
@Suite("lifectl escapes what apps chose", .serialized)
struct LifectlEscapeTests {
    static let evil = "upload\u{1B}]0;pwned\u{07}"

    /// A client of the protocol in a few lines (PROTOCOL.md section 12): it acknowledges every lifecycle message and,
    /// once launched, begins a background task whose name sets the terminal's title if printed raw.
    static let client = #"""
        import json, os, socket
        sock = socket.socket(fileno=int(os.environ.pop("LIFECYCLE_FD")))
        sock.setblocking(True)
        sock.sendall(b'{"type":"hello","protocol":1}\n')
        for line in sock.makefile("rb"):
            message = json.loads(line)
            if "id" in message and "deadlineMs" in message:
                sock.sendall(json.dumps({"type": "ack", "id": message["id"]}).encode() + b"\n")
            if message.get("type") == "didFinishLaunching":
                task = {"type": "beginBackgroundTask", "task": 1, "name": "upload\u001b]0;pwned\u0007"}
                sock.sendall(json.dumps(task).encode() + b"\n")
        """#

    /// A daemon running the client above, its background task open. The caller stops the harness.
    static func launchedWithTask() throws -> DaemonHarness {
        let harness = try DaemonHarness()
        do {
            let script = harness.root.appendingPathComponent("evil.py")
            try client.write(to: script, atomically: true, encoding: .utf8)
            try harness.app("evil", "[App]\nExec=/usr/bin/python3 \(script.path)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
            try harness.start()
            try harness.control("launch", "evil")
            try harness.waitUntil("the background task") { try harness.status("evil").backgroundTasks.map(\.name) == [evil] }
        } catch {
            harness.stop()
            throw error
        }
        return harness
    }

    @Test("status, list and status --json of an app whose background task is named with an OSC escape")
    func statusEscapesABackgroundTaskName() throws {
        let harness = try Self.launchedWithTask()
        defer { harness.stop() }

        let status = try harness.lifectl("status", "evil")
        #expect(status.status == 0)
        #expect(status.stdout.contains("background tasks: 1 upload\\x1b]0;pwned\\x07"), "\(status.stdout)")
        for output in [status.stdout, try harness.lifectl("status").stdout, try harness.lifectl("list").stdout] {
            #expect(!output.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(output.debugDescription)")
        }
        let json = try harness.lifectl("status", "evil", "--json").stdout
        #expect(json.contains(#""name":"upload\u001b]0;pwned\u0007""#), "JSON output stays JSON: \(json)")
    }

    @Test("the daemon's log shows an app's background-task name with its control characters escaped")
    func daemonLogEscapesABackgroundTaskName() throws {
        let harness = try Self.launchedWithTask()
        defer { harness.stop() }

        // A suspension with the task still open logs the task's name ("suspended with background tasks open").
        try harness.control("suspend", "evil")
        try harness.waitUntil("the line naming the abandoned task") { harness.log.contains("background tasks open") }
        let log = harness.log
        #expect(log.contains("suspended with background tasks open: upload\\x1b]0;pwned\\x07"), "\(log)")
        #expect(!log.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(log.debugDescription)")
    }

    @Test("lifectl's text of several lines keeps its lines: the help, a usage error, a refused reload; a control character in a line is still escaped")
    func textOfSeveralLinesKeepsItsLines() throws {
        let lifectl = DaemonHarness.products.appendingPathComponent("lifectl").path
        let help = try ServiceFilesTests.Tool.run(lifectl, ["--help"])
        #expect(help.status == 0 && help.stdout == usage + "\n", "\(help.stdout.prefix(200).debugDescription)")
        let typo = try ServiceFilesTests.Tool.run(lifectl, ["b\u{1B}]0;x\u{07}gus"])
        #expect(typo.status == 2)
        #expect(typo.stderr == "lifectl: unknown verb 'b\\x1b]0;x\\x07gus'\n\n" + usage + "\n", "\(typo.stderr.prefix(200).debugDescription)")

        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("sleeper", "[App]\nExec=sleep 100000\nProtocol=none\n")
        try harness.start()
        try harness.app("sleeper", "[App]\nExec=sleep 100000\nProtocol=none\n\n[Lifecycle]\nBackgroundTimeSec=9\u{1B}[31m\n")
        let reload = try harness.lifectl("reload")
        #expect(reload.status == 1)
        let lines = reload.stderr.split(separator: "\n")
        #expect(lines.first == "lifectl: the configuration was reloaded without these files:", "\(reload.stderr.debugDescription)")
        #expect(lines.contains { $0.hasPrefix("  apps/sleeper.conf:") && $0.contains("BackgroundTimeSec=: invalid duration '9\\x1b[31m'") },
                "\(reload.stderr.debugDescription)")
        #expect(lines.contains("  apps/sleeper.conf: not applied: sleeper keeps the configuration it runs with"), "\(reload.stderr.debugDescription)")
        #expect(!reload.stderr.unicodeScalars.contains { $0.value == 0x1B }, "\(reload.stderr.debugDescription)")
    }
}
