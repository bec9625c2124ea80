import Foundation
import Glibc
import LifecycleModel
import LifecycleProtocol
import Testing

/// The accept budget of the control socket and the app socket (Daemon/UnixListener.swift): a burst of connects is
/// taken 64 at a time, each wakeup's count in the debug log, while a request on a connection that was there first is
/// answered and every connection of the burst is served in the end.
@Suite("accept budget", .serialized)
struct AcceptBudgetTests {
    /// Opens `control` control connections, each with a `list` request written, and `apps` app-socket connections,
    /// each with a hello for an unknown app; says "ready"; on "go", reads one reply from each control connection and
    /// prints how many were answered.
    static let burst = """
        import socket, sys
        control, apps, count, app_count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        held = []
        for _ in range(count):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(control)
            s.sendall(b'{"verb":"list"}\\n')
            held.append(s)
        others = []
        for _ in range(app_count):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(apps)
            s.sendall(b'{"type":"hello","protocol":1,"app":"nosuch","token":"0"}\\n')
            others.append(s)
        print("ready", flush=True)
        sys.stdin.readline()
        answered = 0
        for s in held:
            s.settimeout(30)
            data = b""
            while not data.endswith(b"\\n"):
                chunk = s.recv(65536)
                if not chunk: break
                data += chunk
            answered += data.endswith(b"\\n")
        print(answered, flush=True)
        """

    /// The counts the debug log gives for the bursts `socket` took in one wakeup.
    func bursts(_ log: String, _ socket: String) -> [Int] {
        log.split(separator: "\n").compactMap { line in
            guard let range = line.range(of: "\(socket): took ") else { return nil }
            return Int(line[range.upperBound...].prefix { $0.isNumber })
        }
    }

    @Test("120 control connections and 100 app connections queued while the daemon was stopped: taken at most 64 per wakeup; root's request on its open connection is answered, and so is every queued one")
    func aBurstOfConnectsIsTakenOnABudget() throws {
        try DaemonHarness.running(["a": "[App]\nExec=/bin/sleep 1000\nProtocol=none\n"]) { daemon in
            let daemonPID = try #require(daemon.daemonPID)
            let control = daemon.runtimeDirectory.appendingPathComponent("control.sock").path
            let apps = daemon.runtimeDirectory.appendingPathComponent("app.sock").path
            let root = try ControlLine(control)
            _ = try root.exchange(#"{"verb":"status"}"#)  // accepted and answered before the daemon is paused

            #expect(kill(daemonPID, SIGSTOP) == 0)
            defer { kill(daemonPID, SIGCONT) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-c", Self.burst, control, apps, "120", "100"]
            let input = Pipe(), output = Pipe()
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            defer {
                try? input.fileHandleForWriting.close()
                process.waitUntilExit()
            }
            #expect(String(decoding: output.fileHandleForReading.availableDataOrLine(), as: UTF8.self) == "ready")
            try root.send(#"{"verb":"status"}"#)
            #expect(kill(daemonPID, SIGCONT) == 0)

            let reply = try LineCoder().decode(ControlReply.self, from: Array(try root.receive().utf8))
            #expect(reply.daemon != nil, "root's request is answered amid the burst")
            try input.fileHandleForWriting.write(contentsOf: Data("go\n".utf8))
            let answered = String(decoding: output.fileHandleForReading.availableDataOrLine(), as: UTF8.self)
            #expect(answered == "120", "every queued control connection is answered: \(answered)")

            try daemon.waitUntil("the bursts in the debug log") {
                bursts(daemon.log, "the control socket").reduce(0, +) >= 100 && bursts(daemon.log, "the app socket").reduce(0, +) >= 64
            }
            let controlBursts = bursts(daemon.log, "the control socket"), appBursts = bursts(daemon.log, "the app socket")
            #expect(controlBursts.max() == 64, "no wakeup takes more than the budget: \(controlBursts)")
            #expect(appBursts.max() == 64, "no wakeup takes more than the budget: \(appBursts)")
            #expect(daemon.log.contains("the control socket: took 64 connections in one wakeup (its budget); the rest wait for the next"))
        }
    }
}
