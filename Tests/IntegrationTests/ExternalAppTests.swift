import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// External apps (`External=yes`): processes lifecycled did not start attach on RUNTIME_DIR/app.sock with a hello
/// that names the app and carries no token; the daemon checks the peer with SO_PEERCRED and /proc, never what the
/// client claims. Real processes, real users (setpriv drops a probe to `nobody`), real signals. Root is needed to
/// become another user and to place a process in a cgroup.
@Suite("external apps on the app socket", .serialized, .enabled(if: geteuid() == 0, "becoming nobody needs root"))
struct ExternalAppTests {
    static let nobody: uid_t = 65534

    func external(_ extra: String = "") -> String {
        "[App]\nExternal=yes\nExternalUser=root\n\(extra)\n[Lifecycle]\nBackgroundTimeSec=infinity\nTimeoutStopSec=3\n"
    }

    func socketPath(_ daemon: DaemonHarness) -> String { daemon.runtimeDirectory.appendingPathComponent("app.sock").path }

    /// Examples/python/lifecycle_client.py attaching as `app` (`--connect`), leading a new process group; its output
    /// goes to the harness's directory. `shell`: a /bin/sh command run first, in the same process (it `exec`s the client).
    func startClient(_ daemon: DaemonHarness, _ app: String, shell: String = "") throws -> Process {
        let client = ["/usr/bin/python3", DaemonHarness.pythonClient, "--connect", socketPath(daemon), "--app", app,
                      "--new-process-group"]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "\(shell)\nexec \"$@\"", "sh"] + client
        var environment = daemon.environment
        environment["LIFECYCLE_RECORD"] = daemon.recordFile.path
        process.environment = environment
        let output = daemon.root.appendingPathComponent("client-\(app).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        try handle.seekToEnd()
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        return process
    }

    /// A raw attacher: connects to app.sock as `uid`, says hello as `app` without a token, prints the daemon's
    /// first line and exits. `leader`: setpgid(0, 0) first; else it connects from a forked child, which never leads
    /// its group. `otherUserInGroup`: before connecting, a child that became `nobody` joins its process group.
    static let probe = """
        import json, os, signal, socket, sys, time
        path, app, leader, other, linger = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4] == "1", sys.argv[5] == "1"
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        if leader:
            os.setpgid(0, 0)
        elif os.getpgid(0) == os.getpid():
            child = os.fork()
            if child:
                sys.exit(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
        stranger = None
        if other:
            stranger = os.fork()
            if stranger == 0:
                os.setgid(65534); os.setuid(65534); time.sleep(60); os._exit(0)
            time.sleep(0.2)
        s = socket.socket(socket.AF_UNIX); s.connect(path)
        s.sendall((json.dumps({"type": "hello", "protocol": 1, "app": app}) + "\\n").encode())
        data = b""
        while not data.endswith(b"\\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        print(data.decode().strip(), flush=True)
        if linger:
            s.close(); time.sleep(60)
        if stranger:
            os.kill(stranger, signal.SIGKILL); os.waitpid(stranger, 0)
        """

    func probe(_ daemon: DaemonHarness, _ app: String, uid: uid_t = 0, leader: Bool = true,
               otherUserInGroup: Bool = false) throws -> String {
        let (process, line) = try startProbe(daemon, app, uid: uid, leader: leader, otherUserInGroup: otherUserInGroup)
        process.waitUntilExit()
        return line
    }

    /// The probe, started; returns once it printed the daemon's first line. `linger`: it then closes its socket
    /// and lives on (60 s, or until a signal ends it).
    func startProbe(_ daemon: DaemonHarness, _ app: String, uid: uid_t = 0, leader: Bool = true,
                    otherUserInGroup: Bool = false, linger: Bool = false) throws -> (Process, String) {
        let process = Process()
        let python = ["/usr/bin/python3", "-c", Self.probe, socketPath(daemon), app, leader ? "1" : "0",
                      otherUserInGroup ? "1" : "0", linger ? "1" : "0"]
        if uid != 0 {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            // Another user may not enter the test's working directory (a checkout under a private directory).
            process.currentDirectoryURL = URL(fileURLWithPath: "/")
            process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"] + python
        } else {
            process.executableURL = URL(fileURLWithPath: python[0])
            process.arguments = Array(python.dropFirst())
        }
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        return (process, String(decoding: out.fileHandleForReading.availableDataOrLine(), as: UTF8.self))
    }

    func stopClient(_ process: Process) {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    @Test("an external client attaches, gets didFinishLaunching, is focused, backgrounded, suspended, resumed and terminated")
    func externalClientIsSupervised() throws {
        try DaemonHarness.running(["x": external()]) { daemon in
            #expect(try daemon.status("x").state.rawValue == "notRunning")
            let client = try startClient(daemon, "x")
            defer { stopClient(client) }
            let pid = client.processIdentifier
            try daemon.waitUntil("x acked didFinishLaunching") {
                (try? daemon.status("x"))?.state.rawValue == "inactive" && daemon.records("x").contains { $0.type == "didFinishLaunching" }
                    && (try? daemon.status("x"))?.awaiting == nil
            }
            let launch = try #require(daemon.records("x").first { $0.type == "didFinishLaunching" })
            #expect(launch.launchOptions?["launchedBy"] == .string("external"))
            #expect(launch.pid == pid)
            #expect(try daemon.status("x").pid == pid, "the attached process is the app")
            #expect(daemon.log.contains("x: external process \(pid) (uid 0) attached"))

            try daemon.control("focus", "x")
            #expect(try daemon.status("x").state.rawValue == "active")
            try daemon.control("background", "x")
            #expect(try daemon.status("x").state.rawValue == "background")
            try daemon.control("suspend", "x")
            #expect(try daemon.status("x").state.rawValue == "suspended")
            // The reply leaves once the stop is sent (lifectl(1)); the kernel shows T once the process took it.
            try daemon.waitUntil("the external process is stopped") { Kernel.state(pid) == "T" }
            try daemon.control("resume", "x")
            #expect(Kernel.state(pid) != "T")
            #expect(try daemon.status("x").state.rawValue == "background")
            #expect(daemon.types("x").filter { $0 != "hello" } == ["didFinishLaunching", "didBecomeActive", "willResignActive",
                                                                  "didEnterBackground"],
                    "the callbacks of focus and background, none for suspend and resume (UIKit sends none)")

            try daemon.control("terminate", "x")
            #expect(try daemon.status("x").state.rawValue == "notRunning")
            #expect(daemon.types("x").last == "willTerminate")
            client.waitUntilExit()
            #expect(client.terminationStatus == 0, "it exited on the daemon's SIGTERM")
            #expect(daemon.log.contains("x: external process \(pid) ended"))

            // It is not restarted, and it may attach again.
            let again = try startClient(daemon, "x")
            defer { stopClient(again) }
            try daemon.waitUntil("x attached again") { (try? daemon.status("x"))?.pid == again.processIdentifier }
            #expect(try daemon.status("x").launches == 2)
        }
    }

    @Test("lifectl launch and focus of an external app are refused: lifecycled cannot start it")
    func launchIsRefused() throws {
        try DaemonHarness.running(["x": external()]) { daemon in
            for verb in ["launch", "focus"] {
                let output = try daemon.lifectl(verb, "x")
                #expect(output.status != 0, "\(verb) must fail")
                #expect(output.stderr.contains("it is an external app (External=yes)"), "\(verb): \(output.stderr)")
            }
            #expect(try daemon.status("x").state.rawValue == "notRunning")
            #expect(try daemon.lifectl("terminate", "x").status == 0, "terminate of a stopped app is a no-op, not an error")
        }
    }

    @Test("refused: an unknown app, one not external, another uid, a non-leader, a group with another user's process")
    func refusals() throws {
        let plain = "[App]\nExec=\(DaemonHarness.pythonClient)\n"
        try DaemonHarness.running(["x": external(), "plain": plain]) { daemon in
            let cases: [(String, () throws -> String)] = [
                ("cannot attach as 'nope': no such app", { try probe(daemon, "nope") }),
                // A name with a newline, 105 characters long: clipped to 64, the newline shown as '?'.
                ("cannot attach as 'bad?fake\(String(repeating: "x", count: 56))…': no such app",
                 { try probe(daemon, "bad\nfake" + String(repeating: "x", count: 97)) }),
                ("cannot attach as 'plain': it does not accept external clients", { try probe(daemon, "plain") }),
                ("cannot attach as 'x': uid 65534 may not attach as it", { try probe(daemon, "x", uid: Self.nobody) }),
                ("does not lead its own process group", { try probe(daemon, "x", leader: false) }),
                ("holds processes of other users", { try probe(daemon, "x", otherUserInGroup: true) }),
            ]
            for (expected, attempt) in cases {
                let line = try attempt()
                #expect(line.contains("\"type\":\"error\"") && line.contains(expected), "expected '\(expected)': \(line)")
                #expect(try daemon.status("x").state.rawValue == "notRunning")
            }
            #expect(try daemon.status("plain").state.rawValue == "notRunning")
            #expect(daemon.log.contains("Refused an external client as x from pid"))
            #expect(!daemon.log.contains("\nfake"), "a client's name never starts a log line")
            // The daemon still serves: a good client attaches after all that.
            let client = try startClient(daemon, "x")
            defer { stopClient(client) }
            try daemon.waitUntil("x attached") { (try? daemon.status("x"))?.pid == client.processIdentifier }
        }
    }

    @Test("a second client for an external app that has one is refused; the first stays the app's")
    func secondClientIsRefused() throws {
        try DaemonHarness.running(["x": external()]) { daemon in
            let client = try startClient(daemon, "x")
            defer { stopClient(client) }
            try daemon.waitUntil("x attached") { (try? daemon.status("x"))?.pid == client.processIdentifier }
            let line = try probe(daemon, "x")
            #expect(line.contains("cannot attach as 'x': it is connected already (pid \(client.processIdentifier))"), "\(line)")
            try daemon.control("focus", "x")
            #expect(try daemon.status("x").pid == client.processIdentifier)
            #expect(try daemon.status("x").state.rawValue == "active")
        }
    }

    @Test("ExternalFrom=cgroup: a process outside the app's cgroup is refused; one placed in it attaches, and stopping covers the cgroup")
    func cgroupIsRequired() throws {
        try DaemonHarness.running(["cg": external("ExternalFrom=cgroup\n")]) { daemon in
            let cgroup = try #require(try daemon.status("cg").cgroup, "the cgroup of an ExternalFrom=cgroup app exists before it attaches")
            let procs = cgroup + "/cgroup.procs"
            #expect(FileManager.default.fileExists(atPath: procs), "\(procs)")
            let refused = try probe(daemon, "cg")
            #expect(refused.contains("is not in its cgroup \(cgroup)"), "\(refused)")

            // Whoever starts the app places it: here the shell writes its own pid, then execs the client.
            let client = try startClient(daemon, "cg", shell: "echo $$ > '\(procs)'")
            defer { stopClient(client) }
            try daemon.waitUntil("cg attached") { (try? daemon.status("cg"))?.pid == client.processIdentifier }
            try daemon.waitUntil("cg launched") { (try? daemon.status("cg"))?.awaiting == nil }
            try daemon.control("suspend", "cg")
            #expect(Kernel.stops(client.processIdentifier))
            try daemon.control("terminate", "cg")
            client.waitUntilExit()
            #expect(try daemon.status("cg").state.rawValue == "notRunning")
        }
    }

    @Test("a client that hangs up leaves its app running, managed without messages; its process's exit ends the app")
    func disconnectKeepsTheProcessSupervised() throws {
        try DaemonHarness.running(["x": external()]) { daemon in
            // The probe says hello, reads the welcome and exits: the connection closes with the process.
            let line = try probe(daemon, "x")
            #expect(line.contains("\"type\":\"hello\""), "welcomed: \(line)")
            try daemon.waitForState("x", "notRunning")
            #expect(daemon.log.contains("x: external process"))
            #expect(daemon.log.contains("ended (its exit status went to its parent)"))

            // A client that closes its socket and lives on: still the app, now without messages.
            let (lingering, welcome) = try startProbe(daemon, "x", linger: true)
            defer { stopClient(lingering) }
            #expect(welcome.contains("\"type\":\"hello\""), "\(welcome)")
            try daemon.waitUntil("x is managed without messages") { (try? daemon.status("x"))?.protocol == "silent" }
            #expect(try daemon.status("x").pid == lingering.processIdentifier)
            #expect(try daemon.status("x").state.isRunning)
            try daemon.control("suspend", "x")
            #expect(Kernel.stops(lingering.processIdentifier), "still stopped by its process group (T once the SIGSTOP the answer followed is taken)")
            try daemon.control("terminate", "x")
            lingering.waitUntilExit()
            try daemon.waitForState("x", "notRunning")
        }
    }

    @Test("app.sock: one non-root user holds at most 8 connections waiting for their hello; root still attaches meanwhile")
    func pendingConnectionsArePerUser() throws {
        try DaemonHarness.running(["x": external()]) { daemon in
            // The 20 connections are looked at once root's client, connecting after them, has attached: by then the
            // daemon has taken all 20 (no fixed wait decides it). The 8 it keeps are still waiting, or, on a machine
            // slow enough to take 5 s for that, closed by the hello timeout; never refused for the cap.
            let script = """
                import json, select, socket, sys
                conns = []
                for _ in range(20):
                    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); conns.append(s)
                print("connected", flush=True)
                sys.stdin.readline()
                refused, kept, errors = 0, 0, []
                for s in conns:
                    if select.select([s], [], [], 0)[0]:
                        data = s.recv(65536).decode(errors="replace").strip()
                        if "no hello within" in data:
                            kept += 1
                        else:
                            refused += 1
                            errors.append(data)
                    else:
                        kept += 1
                print(json.dumps({"refused": refused, "kept": kept, "errors": errors[:1]}), flush=True)
                sys.stdin.read()
                """
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            // Another user may not enter the test's working directory (a checkout under a private directory).
            process.currentDirectoryURL = URL(fileURLWithPath: "/")
            process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script,
                                 socketPath(daemon)]
            let input = Pipe(), out = Pipe()
            process.standardInput = input
            process.standardOutput = out
            try process.run()
            defer {
                try? input.fileHandleForWriting.close()
                process.waitUntilExit()
            }
            let connected = String(decoding: out.fileHandleForReading.availableDataOrLine(), as: UTF8.self)
            try #require(connected == "connected", "the script's 20 connections: \(connected)")
            // While nobody holds its 8, root's client gets in.
            let client = try startClient(daemon, "x")
            defer { stopClient(client) }
            try daemon.waitUntil("x attached") { (try? daemon.status("x"))?.pid == client.processIdentifier }
            try input.fileHandleForWriting.write(contentsOf: Data("count\n".utf8))
            let line = String(decoding: out.fileHandleForReading.availableDataOrLine(), as: UTF8.self)
            struct Result: Decodable { var refused: Int; var kept: Int; var errors: [String] }
            let result = try JSONDecoder().decode(Result.self, from: Data(line.utf8))
            #expect(result.refused == 12 && result.kept == 8, "20 connections, 8 kept waiting: \(line)")
            #expect(result.errors.first?.contains("too many connections waiting for their hello from uid 65534 (at most 8)") == true, "\(line)")
            #expect(daemon.log.contains("app socket: too many connections waiting for their hello from uid 65534"))
        }
    }

    @Test("config: External=yes without ExternalUser=, or with a user nobody has, is an error and the app is not loaded")
    func configErrors() throws {
        let apps = ["nouser": "[App]\nExternal=yes\n", "ghost": "[App]\nExternal=yes\nExternalUser=no-such-user-here\n",
                    "x": external()]
        try DaemonHarness.running(apps) { daemon in
            let names = try daemon.list().map(\.name)
            #expect(names == ["x"], "\(names)")
            #expect(daemon.log.contains("apps/nouser.conf: External=yes needs ExternalUser="))
            #expect(daemon.log.contains("apps/ghost.conf: ExternalUser=no-such-user-here: no such user, app 'ghost' not loaded"))
            let line = try probe(daemon, "nouser")
            #expect(line.contains("no such app"), "\(line)")
        }
    }

    @Test("after a crash of the daemon, an external app is re-adopted and its client reconnects with its token")
    func externalAppSurvivesDaemonCrash() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("x", external())
        try harness.start()
        let client = try startClient(harness, "x")
        defer { stopClient(client) }
        let pid = client.processIdentifier
        try harness.waitUntil("x launched") { (try? harness.status("x"))?.awaiting == nil && (try? harness.status("x"))?.pid == pid }
        try harness.control("focus", "x")
        try harness.crash()
        try harness.start(keepLog: true)
        try harness.waitUntil("x's client reconnected") { harness.log.contains("x: its client reconnected (pid \(pid))") }
        #expect(try harness.status("x").pid == pid)
        #expect(try harness.status("x").state.rawValue == "active")
        try harness.control("suspend", "x")
        try harness.waitUntil("x is stopped") { Kernel.state(pid) == "T" }
        try harness.control("terminate", "x")
        client.waitUntilExit()
        try harness.waitForState("x", "notRunning")
    }

    @Test("at start, a stopped process in an external app's cgroup that no state accounts for is continued, not terminated")
    func externalStraysAreContinuedNotKilled() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("cg", external("ExternalFrom=cgroup\n"))
        try harness.start()
        let procs = try #require(try harness.status("cg").cgroup) + "/cgroup.procs"
        let stray = Process()
        // Signals unblocked (the test runner's threads block them, and children inherit that): a SIGTERM would end it.
        stray.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        stray.arguments = ["-c", "import signal, time\nsignal.pthread_sigmask(signal.SIG_SETMASK, [])\ntime.sleep(60)"]
        try stray.run()
        defer { stopClient(stray) }
        try String(stray.processIdentifier).write(toFile: procs, atomically: false, encoding: .utf8)
        kill(stray.processIdentifier, SIGSTOP)
        try harness.waitUntil("the stray is stopped") { Kernel.state(stray.processIdentifier) == "T" }

        try harness.crash()
        try harness.start(keepLog: true)
        try harness.waitUntil("the stray runs again") { Kernel.state(stray.processIdentifier) == "S" }
        #expect(stray.isRunning, "not terminated: lifecycled did not start it")
        #expect(!harness.log.contains("cannot be re-adopted"), "no SIGTERM was sent")
        #expect(harness.log.contains("cg: process \(stray.processIdentifier) in the cgroup of this external app, not attached: continued"))
        #expect(try harness.status("cg").state.rawValue == "notRunning")
    }
}
