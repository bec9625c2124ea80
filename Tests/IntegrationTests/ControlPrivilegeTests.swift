import Foundation
import Glibc
import LifecycleModel
import LifecycleProtocol
import Testing

/// What a local user who may not change states (a stranger, here `nobody` through setpriv) can and cannot do to
/// the daemon: its floods of queries and refusals do not delay root or fill the log, it does not see the apps'
/// saved state, and an app's client cannot pass for the daemon's notifications. Also lifectl's way to the system
/// daemon for a user. Root is needed to become another user.
@Suite("control socket privileges", .serialized, .enabled(if: geteuid() == 0, "becoming another user needs root"))
struct ControlPrivilegeTests {
    static let nobody: uid_t = 65534
    static let flood = DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/control_flood.py").path
    let python = DaemonHarness.pythonClient

    var app: String { "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n" }

    /// `python3 -c SOURCE ARGUMENTS` as nobody, its standard input and output as pipes. The source is read here,
    /// as root: the checkout may be in a directory nobody cannot enter.
    func asNobody(python source: String, _ arguments: [String]) throws -> (process: Process, input: FileHandle, output: FileHandle) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        // Another user may not enter the test's working directory (a checkout under a private directory).
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        process.arguments = ["--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups",
                             "/usr/bin/env", "python3", "-c", source] + arguments
        let input = Pipe(), out = Pipe()
        process.standardInput = input
        process.standardOutput = out
        try process.run()
        return (process, input.fileHandleForWriting, out.fileHandleForReading)
    }

    func line(_ handle: FileHandle) -> String { String(decoding: handle.availableDataOrLine(), as: UTF8.self) }

    @Test("root's request is served before the requests strangers flooded in ahead of it; root's focus completes amid them; the strangers are all answered")
    func privilegedRequestsGoBeforeAStrangersFlood() throws {
        // Many apps make each stranger's `status` costly; all but one are never launched.
        var apps = ["a": app]
        for index in 0..<300 { apps["x\(index)"] = "[App]\nExec=/bin/true\n" }
        try DaemonHarness.running(apps) { daemon in
            let daemonPID = try #require(daemon.daemonPID)
            let socketPath = daemon.runtimeDirectory.appendingPathComponent("control.sock").path
            let hog = try asNobody(python: try String(contentsOfFile: Self.flood, encoding: .utf8), [socketPath, "30"])
            defer {
                kill(daemonPID, SIGCONT)
                try? hog.input.close()
                hog.process.waitUntilExit()
            }
            #expect(line(hog.output) == "ready")
            let root = try ControlLine(socketPath)
            _ = try root.exchange(#"{"verb":"status"}"#)  // accepted and answered before the daemon is paused

            // With the daemon paused, every stranger queues 4 requests, then root one: when it goes on, all are waiting.
            #expect(kill(daemonPID, SIGSTOP) == 0)
            try hog.input.write(contentsOf: Data("burst 4\n".utf8))
            #expect(line(hog.output) == "sent")
            try root.send(#"{"verb":"status"}"#)
            #expect(kill(daemonPID, SIGCONT) == 0)
            let reply = try LineCoder().decode(ControlReply.self, from: Array(try root.receive().utf8))
            let rootStamp = try #require(reply.daemon?.uptimeSeconds)

            try daemon.control("focus", "a")
            #expect(try daemon.status("a").state.rawValue == "active")

            struct Flood: Decodable { var burst: [Double?]; var closed: Int; var failures: [String] }
            let result = try JSONDecoder().decode(Flood.self, from: Data(line(hog.output).utf8))
            #expect(result.burst.count == 120 && result.closed == 0 && result.failures.isEmpty,
                    "every stranger's request is answered: \(result.burst.count) of 120, \(result.closed) closed, \(result.failures)")
            let before = result.burst.compactMap { $0 }.filter { $0 < rootStamp }.count
            #expect(before <= 1, "\(before) strangers' requests were served before root's, which was waiting as long")
        }
    }

    @Test("a stranger's repeated refusals are logged once, then counted in one line; the refusal names [Control] Group=")
    func repeatedRefusalsAreLoggedOnceWithACount() throws {
        try DaemonHarness.running(["a": app]) { daemon in
            let socketPath = daemon.runtimeDirectory.appendingPathComponent("control.sock").path
            let source = """
                import socket, sys
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sys.argv[1])
                s.sendall(b'{"verb":"focus","app":"a"}\\n' * 500)
                data = b""
                while data.count(b"\\n") < 500:
                    chunk = s.recv(65536)
                    if not chunk: break
                    data += chunk
                lines = data.decode().splitlines()
                print(sum("permission denied" in l for l in lines), lines[0], flush=True)
                """
            let refuser = try asNobody(python: source, [socketPath])
            let answer = line(refuser.output)
            refuser.process.waitUntilExit()
            #expect(answer.hasPrefix("500 "), "every request is answered with a refusal: \(answer)")
            #expect(answer.contains("[Control] Group="), "the refusal says how access is granted: \(answer)")
            try daemon.waitUntil("the count of the other refusals is logged", timeout: 20) {
                daemon.log.contains("499 more refused requests from uid 65534")
            }
            let logged = daemon.log.components(separatedBy: "Refused focus a from uid 65534").count - 1
            #expect(logged == 1, "one line for the first refusal, not one per refusal: \(logged)")
            #expect(try daemon.status("a").state.rawValue == "notRunning")
        }
    }

    @Test("a scene's saved state is shown to root and to the app's own user, hidden from other users (savedStateHidden)")
    func savedStateIsHiddenFromStrangers() throws {
        let scenes = "[Scenes]\nSupportsMultipleScenes=yes\nConfiguration=window:Main window:Editor\n"
        let sceneApp = "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n\n\(scenes)"
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let nobodysApp = "[App]\nExec=\(try harness.readableByAll(python))\nUser=nobody\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n\n\(scenes)"
        // The app that runs as nobody records its messages too.
        FileManager.default.createFile(atPath: harness.recordFile.path, contents: nil)
        chmod(harness.recordFile.path, 0o666)
        try harness.app("w", sceneApp)
        try harness.app("n", nobodysApp)
        try harness.start()
        for name in ["w", "n"] {
            try harness.control("focus", name)
            try harness.control("scene", "close", name, "s1")
        }
        func rows(_ output: DaemonHarness.Output) throws -> [String: [String: Any]] {
            #expect(output.status == 0, "\(output.stderr)")
            let rows = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [[String: Any]])
            return Dictionary(uniqueKeysWithValues: rows.map { ($0["app"] as? String ?? "", $0) })
        }
        let asRoot = try rows(harness.lifectl("scenes", "--json"))
        #expect(asRoot["w"]?["savedState"] != nil && asRoot["n"]?["savedState"] != nil, "root sees both: \(asRoot)")

        let asNobody = try rows(harness.lifectl("scenes", "--json", asUser: Self.nobody))
        #expect(asNobody["w"]?["savedState"] == nil, "another user's app's state is not shown: \(asNobody)")
        #expect(asNobody["w"]?["savedStateHidden"] as? Bool == true, "and the answer says it is hidden")
        #expect(asNobody["w"]?["state"] as? String == "disconnected", "the rest of the answer is there")
        #expect(asNobody["n"]?["savedState"] != nil, "the app's own user sees its state: \(asNobody)")

        let status = try harness.lifectl("status", "--json", asUser: Self.nobody)
        #expect(status.status == 0)
        let apps = try LineCoder().decode(StatusOutput.self, from: Array(status.stdout.utf8)).apps
        let w = try #require(apps.first { $0.name == "w" })
        #expect(w.scenes?.first?.savedState == nil && w.scenes?.first?.savedStateHidden == true)
        let table = try harness.lifectl("scenes", asUser: Self.nobody)
        #expect(table.stdout.contains("(hidden)"), "\(table.stdout)")
    }

    @Test("an app's client may post the declared client types only: system types are refused (postFailed), nobody gets them, the connection stays")
    func clientsCannotPostSystemNotifications() throws {
        let sender = "[App]\nExec=\(python) --post-on-active batteryLevelDidChange\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
        let declaredSender = "[App]\nExec=\(python) --post-on-active chatMessage\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
        let receiver = "[App]\nExec=\(python) --observe batteryLevelDidChange,chatMessage\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
        try DaemonHarness.running(["forger": sender, "chat": declaredSender, "receiver": receiver],
                                  daemonConfig: "[NotificationTypes]\nchatMessage=none\nbatteryLevelDidChange=latest\n") { daemon in
            try daemon.control("launch", "receiver")
            try daemon.control("focus", "forger")
            try daemon.waitUntil("the forger is told its post failed") {
                daemon.records("forger").contains { $0.type == "postFailed" }
            }
            let refusal = try #require(daemon.records("forger").first { $0.type == "postFailed" })
            #expect(refusal.message?.contains("system notification") == true, "\(refusal.message ?? "")")
            #expect(refusal.message?.contains("chatMessage") == true, "it names the types apps may post")
            // A declared client type still goes through, after the refused one: nothing else was affected.
            try daemon.control("focus", "chat")
            try daemon.waitUntil("the receiver gets the declared type") {
                daemon.records("receiver").contains { $0.type == "notification" && $0.name == "chatMessage" }
            }
            #expect(!daemon.records("receiver").contains { $0.name == "batteryLevelDidChange" }, "the forged post reached nobody")
            #expect(try daemon.status("forger").protocol == "lifecycle", "the forger keeps its connection")
            // lifectl (root) may still post a system type.
            #expect(try daemon.lifectl("post", "batteryLevelDidChange", "--data", #"{"level":0.5}"#).status == 0)
            try daemon.waitUntil("the receiver gets the daemon's post") {
                daemon.records("receiver").contains { $0.name == "batteryLevelDidChange" }
            }
        }
    }

    @Test("a user's lifectl with no daemon of its own finds the system daemon in /run/lifecycled, and says where it looked when there is none")
    func lifectlFallsBackToTheSystemDaemon() throws {
        try DaemonHarness.running(["a": app]) { daemon in
            let own = daemon.root.appendingPathComponent("nobody-runtime")
            try FileManager.default.createDirectory(at: own, withIntermediateDirectories: true)
            let lifectl = DaemonHarness.products.appendingPathComponent("lifectl").path
            func run(_ arguments: [String]) throws -> DaemonHarness.Output {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: arguments[0])
                process.arguments = Array(arguments.dropFirst())
                var environment = daemon.environment
                environment.removeValue(forKey: "LIFECYCLED_RUNTIME_DIR")
                environment["XDG_RUNTIME_DIR"] = own.path
                process.environment = environment
                let out = Pipe(), err = Pipe()
                process.standardOutput = out
                process.standardError = err
                try process.run()
                let stdout = out.fileHandleForReading.readDataToEndOfFile()
                let stderr = err.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                return DaemonHarness.Output(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                                            stderr: String(decoding: stderr, as: UTF8.self))
            }
            let asNobody = ["/usr/bin/setpriv", "--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups", lifectl, "list"]
            // In a mount namespace of its own, /run/lifecycled is the test daemon's directory (the host's /run is untouched).
            let found = try run(["/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                                 "mount -t tmpfs tmpfs /run && mkdir /run/lifecycled && mount --bind \"$0\" /run/lifecycled && exec \"$@\"",
                                 daemon.runtimeDirectory.path] + asNobody)
            #expect(found.status == 0, "\(found.stderr)")
            #expect(found.stdout.contains("a"), "\(found.stdout)")

            let lost = try run(["/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                                "mount -t tmpfs tmpfs /run && exec \"$@\"", "sh"] + asNobody)
            #expect(lost.status == 3)
            #expect(lost.stderr.contains("\(own.path)/lifecycled/control.sock"), "names its own directory: \(lost.stderr)")
            #expect(lost.stderr.contains("/run/lifecycled/control.sock"), "and the system's: \(lost.stderr)")
        }
    }
}

/// `lifectl status --json`'s output.
/// `lifectl status --json`'s object: the apps, and the daemon's block when no app is named.
private struct StatusOutput: JSONReadable {
    var apps: [AppStatus]

    init(json: ParsedJSON, path: String) throws(ProtocolError) {
        apps = try JSONFields(json, path: path).required("apps")
    }
}

/// One control connection held open across requests, as root.
final class ControlLine {
    private let fd: Int32
    private var buffer: [UInt8] = []

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() where index < raw.count - 1 { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            throw HarnessError("connect \(path): \(errno)")
        }
    }

    deinit { Glibc.close(fd) }

    func send(_ request: String) throws {
        let bytes = Array((request + "\n").utf8)
        guard bytes.withUnsafeBytes({ Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
            throw HarnessError("send: \(errno)")
        }
    }

    /// The next reply line, waiting at most 30 seconds.
    func receive() throws -> String {
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            if let end = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 1)
                return line
            }
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, 30_000) > 0 else { throw HarnessError("no reply within 30 s") }
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { throw HarnessError("the daemon closed the connection") }
            buffer += chunk[..<count]
        }
    }

    func exchange(_ request: String) throws -> String {
        try send(request)
        return try receive()
    }
}
