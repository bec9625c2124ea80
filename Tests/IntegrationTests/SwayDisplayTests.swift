import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// `[Display] Source=sway` against a real headless sway: the apps' windows (foot, started by the apps lifecycled
/// launches) drive the states, checked through `lifectl list --json`, /proc and the clients' own records.
@Suite("Display: states follow a real sway", .serialized)
struct SwayDisplayTests {
    let python = DaemonHarness.pythonClient

    /// An app whose main process is the protocol client, with a foot window (app_id `window`) as its child.
    func windowedApp(_ window: String, sway: HeadlessSway, lifecycle: String = "BackgroundTimeSec=infinity") -> String {
        "[App]\n\(sway.appEnvironment)Exec=/bin/sh -c \"foot --app-id \(window) sleep 100000 & exec \(python)\"\n\n"
            + "[Lifecycle]\n\(lifecycle)\nTimeoutStopSec=3\n"
    }

    func withSway(_ apps: (HeadlessSway, String) -> [String: String], _ body: (DaemonHarness, HeadlessSway, String) throws -> Void) throws {
        let harness = try DaemonHarness()
        let sway = try HeadlessSway(tag: harness.tag)
        defer {
            harness.stop()
            sway.stop()
        }
        for (name, text) in apps(sway, harness.tag) { try harness.app(name, text) }
        try harness.daemonConfig("[Display]\nSource=sway\nSwaySocket=\(sway.socketLink)\n")
        try harness.start()
        try harness.waitUntil("the daemon follows sway") { harness.log.contains("display: following sway") }
        try body(harness, sway, harness.tag)
        #expect(harness.isDaemonRunning, "the daemon must still be running at the end of the test")
    }

    func state(_ daemon: DaemonHarness, _ app: String) throws -> String { try daemon.status(app).state.rawValue }

    /// The callbacks the app's client received, from record index `start` on.
    func callbacks(_ daemon: DaemonHarness, _ app: String, from start: Int = 0) -> [String] {
        Array(daemon.types(app).dropFirst(start)).filter { $0 != "hello" && $0 != "didFinishLaunching" }
    }

    @Test("focus, workspaces, the scratchpad and closing a window drive the states and callbacks; lifectl focus and background move the real focus")
    func swayDrivesTheStates() throws {
        try withSway({ sway, tag in
            ["a": windowedApp("a-\(tag)", sway: sway), "b": windowedApp("b-\(tag)", sway: sway, lifecycle: "BackgroundTimeSec=1")]
        }) { daemon, sway, tag in
            // A launched app is inactive until its window shows; a new window takes the focus in sway.
            try daemon.control("launch", "a")
            _ = try sway.waitForView("a-\(tag)")
            try daemon.waitForState("a", "active")
            try daemon.control("launch", "b")
            _ = try sway.waitForView("b-\(tag)")
            try daemon.waitForState("b", "active")
            // Two tiled windows side by side: a resigned and stays inactive.
            try daemon.waitForState("a", "inactive")
            #expect(callbacks(daemon, "a") == ["didBecomeActive", "willResignActive"])

            // Focus back to a by sway itself.
            let aView = try #require(try sway.view("a-\(tag)"))
            let bView = try #require(try sway.view("b-\(tag)"))
            let bRecords = daemon.types("b").count
            try sway.msg("[con_id=\(aView.id)] focus")
            try daemon.waitForState("a", "active")
            try daemon.waitForState("b", "inactive")
            #expect(callbacks(daemon, "b", from: bRecords) == ["willResignActive"])

            // b's window moves to another workspace: b goes to the background, then is suspended after its grace.
            try sway.msg("[con_id=\(bView.id)] move container to workspace 2")
            try daemon.waitForState("b", "suspended")
            let bPid = try #require(try daemon.status("b").pid)
            #expect(Kernel.stops(bPid))
            #expect(Kernel.state(bView.pid) == "T", "the window's process, a child of the app, is stopped too")

            // Switching to that workspace shows b's window: b is resumed and becomes active, a goes to the background.
            let bBefore = daemon.types("b").count
            try sway.msg("workspace 2")
            try daemon.waitForState("b", "active")
            try daemon.waitForState("a", "background")
            #expect(Kernel.state(bPid) != "T")
            #expect(callbacks(daemon, "b", from: bBefore) == ["didEnterBackground", "willEnterForeground", "didBecomeActive"]
                    || callbacks(daemon, "b", from: bBefore) == ["willEnterForeground", "didBecomeActive"])

            // lifectl focus asks sway, and the real focus moves.
            try daemon.control("focus", "a")
            try daemon.waitForState("a", "active")
            #expect(try sway.view("a-\(tag)")?.focused == true)
            // b left the foreground; its one-second grace may be over by now.
            #expect(try ["background", "suspended"].contains(state(daemon, "b")))

            // lifectl background puts a's window in the scratchpad.
            try daemon.control("background", "a")
            try daemon.waitForState("a", "background")
            #expect(try sway.view("a-\(tag)")?.visible == false)

            // Closing b's last window while its process runs: b goes to the background.
            try sway.msg("[con_id=\(bView.id)] focus")
            try daemon.waitForState("b", "active")
            try sway.msg("[con_id=\(bView.id)] kill")
            try daemon.waitUntil("b leaves the foreground") { ["background", "suspended"].contains(try self.state(daemon, "b")) }
            #expect(Kernel.exists(bPid))
        }
    }

    @Test("sway killed and restarted: the daemon keeps every state, reconnects, and follows the new sway")
    func swayRestartLosesNothing() throws {
        try withSway({ sway, tag in
            ["a": windowedApp("a-\(tag)", sway: sway), "b": windowedApp("b-\(tag)", sway: sway, lifecycle: "BackgroundTimeSec=1")]
        }) { daemon, sway, tag in
            try daemon.control("launch", "b")
            let bView = try sway.waitForView("b-\(tag)")
            try daemon.waitForState("b", "active")
            try sway.msg("[con_id=\(bView.id)] move container to workspace 2")
            try daemon.waitForState("b", "suspended")
            try daemon.control("launch", "a")
            _ = try sway.waitForView("a-\(tag)")
            try daemon.waitForState("a", "active")

            try sway.kill()
            try daemon.waitUntil("the daemon notices") { daemon.log.contains("the apps keep their states, reconnecting") }
            #expect(try state(daemon, "a") == "active")
            #expect(try state(daemon, "b") == "suspended")
            let status = try daemon.lifectl("status")
            #expect(status.stdout.contains("display: sway at"))

            try sway.start()
            try daemon.waitUntil("the daemon follows the new sway") {
                daemon.log.components(separatedBy: "display: following sway").count > 2
            }
            // a's window died with the old sway: a is in the background now; nothing suspended shows a window.
            try daemon.waitForState("a", "background")
            #expect(try state(daemon, "b") == "suspended")
            for view in try sway.views() {
                #expect(Kernel.state(view.pid) != "T", "a visible window's process is never left stopped")
            }
            // The new sway drives the states as the old one did.
            try daemon.control("focus", "b")
            try daemon.waitForState("b", "active")
            #expect(Kernel.state(try #require(try daemon.status("b").pid)) != "T")
        }
    }
}

/// Focus switches followed from sway's events through the daemon's model of the tree: adopted foot windows laid out
/// as split, tabbed (nested in a split), stacked and floating on three workspaces. After every switch each app's
/// state is what sway's own tree says of its window, and strace of the daemon shows it asked sway for no tree.
@Suite("Display: focus switches on a real sway are followed without reading the tree", .serialized)
struct SwayFocusModelTests {
    /// The GET_TREE request as strace -xx prints the daemon's write of it: the magic, length 0, type 4.
    static let getTree = #"\x69\x33\x2d\x69\x70\x63\x00\x00\x00\x00\x04\x00\x00\x00"#

    /// strace attached to the daemon's threads, tracing its writes into `file` until `detach`.
    final class Tracer {
        let process = Process()
        let file: String

        init(pid: pid_t, file: String) throws {
            self.file = file
            if access("/usr/bin/strace", X_OK) != 0 {
                try HeadlessSway.run("/bin/sh", ["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq strace >/dev/null"])
            }
            // The test runner blocks SIGINT, and strace would inherit that and never detach: python clears the mask.
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["python3", "-c", "import os, signal, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])",
                                 "/usr/bin/strace", "-f", "-qq", "-xx", "-s", "64", "-e", "trace=write,writev,sendto,sendmsg", "-o", file, "-p", "\(pid)"]
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Attached once the kernel names a tracer for the daemon.
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline, !((try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? "").contains("TracerPid:\t\(process.processIdentifier)") {
                usleep(20_000)
            }
        }

        /// GET_TREE requests written so far.
        var treeRequests: Int {
            ((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").components(separatedBy: SwayFocusModelTests.getTree).count - 1
        }

        func detach() {
            if process.isRunning { kill(process.processIdentifier, SIGINT) }
            let deadline = Date().addingTimeInterval(10)
            while process.isRunning, Date() < deadline { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
    }

    @Test("split, tabbed in split, stacked and floating windows on three workspaces: every app's state is what sway shows after each focus switch, and no switch reads the tree")
    func focusSwitchesFollowTheTreeModel() throws {
        let harness = try DaemonHarness()
        let sway = try HeadlessSway(tag: harness.tag)
        var tracer: Tracer?
        var pids: [pid_t] = []
        defer {
            tracer?.detach()
            harness.stop()
            for pid in pids { kill(pid, SIGCONT); kill(pid, SIGKILL) }
            sway.stop()
        }
        let tag = harness.tag
        try harness.daemonConfig("""
            [Display]
            Source=sway
            SwaySocket=\(sway.socketLink)

            [Adopt]
            Windows=yes
            User=\(HeadlessSway.user)
            BackgroundTimeSec=infinity

            """)
        try harness.start()
        try harness.waitUntil("the daemon follows sway") { harness.log.contains("display: following sway") }
        var views: [String: HeadlessSway.View] = [:]
        func open(_ name: String) throws {
            try sway.msg("exec foot --app-id \(name)-\(tag) sleep 100000")
            let view = try sway.waitForView("\(name)-\(tag)")
            views[name] = view
            pids.append(view.pid)
            try harness.waitUntil("\(name) is adopted") { try harness.list().contains { $0.name == "\(name)-\(tag)" } }
        }
        // Workspace 1: a beside a tabbed container of b and c. Workspace 2: d, e and f stacked. Workspace 3: h tiled, g floating.
        try open("a")
        try open("b")
        try sway.msg("splitv")
        try open("c")
        try sway.msg("layout tabbed")
        try sway.msg("workspace 2")
        for name in ["d", "e", "f"] { try open(name) }
        try sway.msg("layout stacking")
        try sway.msg("workspace 3")
        try open("g")
        try open("h")
        try sway.msg("[con_id=\(views["g"]!.id)] floating enable")
        try sway.msg("workspace 1")

        /// Waits until every app's state is what sway's tree says of its window: focused active, shown inactive,
        /// hidden in the background.
        func statesFollowSway(_ step: String) throws {
            var last = ""
            do {
                try harness.waitUntil("the states follow sway after \(step)", timeout: 20) {
                    let shown = try sway.views().filter { $0.appID.hasSuffix("-\(tag)") }
                    let states = Dictionary(uniqueKeysWithValues: try harness.list().map { ($0.name, $0.state.rawValue) })
                    let expected = Dictionary(uniqueKeysWithValues: shown.map { ($0.appID, $0.focused ? "active" : $0.visible ? "inactive" : "background") })
                    last = "sway: \(expected.sorted { $0.key < $1.key }), daemon: \(states.sorted { $0.key < $1.key })"
                    return shown.count == views.count && expected.allSatisfy { states[$0.key] == $0.value }
                }
            } catch {
                Issue.record("\(error): \(last)")
                throw error
            }
        }
        try statesFollowSway("the layout is made")

        tracer = try Tracer(pid: try #require(harness.daemonPID), file: harness.root.appendingPathComponent("strace.out").path)
        let id = { (name: String) in views[name]!.id }
        let switches = ["[con_id=\(id("a"))] focus", "[con_id=\(id("b"))] focus", "[con_id=\(id("c"))] focus",
                        "[con_id=\(id("e"))] focus", "[con_id=\(id("f"))] focus", "workspace 1", "[con_id=\(id("g"))] focus",
                        "[con_id=\(id("h"))] focus", "workspace 2", "[con_id=\(id("d"))] focus", "focus up",
                        "[con_id=\(id("b"))] focus", "focus right", "focus left"]
        for command in switches {
            try sway.msg(command)
            try statesFollowSway(command)
        }
        let tabs = try sway.views()
        #expect(tabs.first { $0.appID == "b-\(tag)" }?.visible == true && tabs.first { $0.appID == "c-\(tag)" }?.visible == false,
                "the switches end with b's tab shown over c's")
        #expect(tracer!.treeRequests == 0, "a focus or workspace switch sends no GET_TREE")

        // A change of structure is read from the tree: the same trace sees that request.
        try sway.msg("[con_id=\(id("a"))] move container to workspace 2")
        try statesFollowSway("a moved to workspace 2")
        try harness.waitUntil("the daemon reads the tree after a move") { tracer!.treeRequests > 0 }
        #expect(harness.isDaemonRunning)
    }
}

/// A display server that sends what sway never would: the daemon logs it, reconnects, and carries on.
@Suite("Display: broken input from the display server", .serialized)
struct SwayBrokenInputTests {
    @Test("garbage and a truncated reply: each is a clear log line and a reconnect; the daemon keeps serving")
    func garbageAndTruncationReconnect() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let socketPath = harness.root.appendingPathComponent("fake-sway.sock").path
        let fake = Process()
        fake.executableURL = URL(fileURLWithPath: DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/fake_sway.py").path)
        fake.arguments = [socketPath, "garbage", "truncated", "good"]
        let scenarios = Pipe()
        fake.standardOutput = scenarios
        try fake.run()
        defer {
            kill(fake.processIdentifier, SIGKILL)
            fake.waitUntilExit()
        }
        try harness.waitUntil("the fake sway listens") { access(socketPath, F_OK) == 0 }
        try harness.app("a", "[App]\nExec=\(DaemonHarness.pythonClient)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
        try harness.daemonConfig("[Display]\nSource=sway\nSwaySocket=\(socketPath)\n")
        try harness.start()

        try harness.waitUntil("the daemon follows the fake sway after two bad connections") {
            harness.log.contains("display: following sway")
        }
        #expect(harness.log.contains("sway sent input lifecycled cannot read (the message does not start with \"i3-ipc\""))
        #expect(harness.log.contains("sway closed the connection"))
        // The daemon is unaffected: it serves requests, and a window nobody owns changes nothing.
        try harness.control("launch", "a")
        #expect(try harness.status("a").state.rawValue == "inactive")
        let status = try harness.lifectl("status")
        #expect(status.stdout.contains("display: sway at \(socketPath), connected"))
        #expect(harness.isDaemonRunning)
    }
}

/// Who the daemon follows: a sway socket it looked for must be served by the user it follows, and a peer that never
/// answers or never accepts costs the loop nothing.
@Suite("Display: whose sway, and a sway that never answers", .serialized)
struct SwayTrustTests {
    /// A listener with a full backlog that accepts nothing: a blocking connect to it never returns.
    @Test("a sway socket that never accepts: the daemon serves, logs the refusal, and stops on SIGTERM")
    func aListenerThatNeverAcceptsBlocksNothing() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let socketPath = harness.root.appendingPathComponent("stuck-sway.sock").path
        let stuck = Process()
        stuck.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        stuck.arguments = ["-c", """
            import socket, sys, time
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(sys.argv[1])
            server.listen(0)
            # The one connection the backlog holds is taken by this process itself: every other connect waits.
            filler = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            filler.connect(sys.argv[1])
            print("full", flush=True)
            time.sleep(3600)
            """, socketPath]
        let ready = Pipe()
        stuck.standardOutput = ready
        try stuck.run()
        defer {
            kill(stuck.processIdentifier, SIGKILL)
            stuck.waitUntilExit()
        }
        _ = ready.fileHandleForReading.availableData
        try harness.daemonConfig("[Display]\nSource=sway\nSwaySocket=\(socketPath)\n")
        try harness.start()
        try harness.waitUntil("the refused connect is logged") { harness.log.contains("Failed to connect to sway at \(socketPath)") }
        #expect(try harness.lifectl("status").stdout.contains("display: sway at \(socketPath), reconnecting"))
        let pid = try #require(harness.daemonPID)
        kill(pid, SIGTERM)
        try harness.waitUntil("the daemon stops on SIGTERM") { !harness.isDaemonRunning }
    }

    @Test("a sway that accepts and never answers is given up after a while and tried again; the daemon serves meanwhile")
    func aSwayThatNeverAnswersIsGivenUp() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let socketPath = harness.root.appendingPathComponent("silent-sway.sock").path
        let silent = Process()
        silent.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        silent.arguments = ["-c", """
            import socket, sys, time
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.bind(sys.argv[1])
            server.listen(8)
            held = []
            while True:
                held.append(server.accept()[0])
            """, socketPath]
        try silent.run()
        defer {
            kill(silent.processIdentifier, SIGKILL)
            silent.waitUntilExit()
        }
        try harness.waitUntil("the silent sway listens") { access(socketPath, F_OK) == 0 }
        try harness.daemonConfig("[Display]\nSource=sway\nSwaySocket=\(socketPath)\n")
        try harness.start()
        #expect(try harness.lifectl("status").stdout.contains("reconnecting"))
        try harness.waitUntil("the silent connection is given up", timeout: 20) {
            harness.log.contains("sway at \(socketPath) did not answer within")
        }
    }

    @Test("a root daemon looks for sway only in [Adopt] User='s runtime directory, and follows a socket there only when that user serves it")
    func aRootDaemonFollowsOnlyTheUsersSway() throws {
        let harness = try DaemonHarness()
        let sway = try HeadlessSway(tag: harness.tag)
        defer {
            harness.stop()
            sway.stop()
        }
        // The user's runtime directory as the search sees it, holding a socket served by someone else (root here).
        let runtime = "/run/user/\(sway.uid)"
        let madeRuntime = access(runtime, F_OK) != 0
        if madeRuntime {
            mkdir("/run/user", 0o755)
            mkdir(runtime, 0o700)
            chown(runtime, sway.uid, 0)
        }
        defer { if madeRuntime { _ = try? FileManager.default.removeItem(atPath: runtime) } }
        let squatted = runtime + "/sway-ipc.\(sway.uid).1.sock"
        let fake = Process()
        fake.executableURL = URL(fileURLWithPath: DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/fake_sway.py").path)
        fake.arguments = [squatted, "good"]
        fake.standardOutput = FileHandle.nullDevice
        try fake.run()
        defer {
            kill(fake.processIdentifier, SIGKILL)
            fake.waitUntilExit()
            unlink(squatted)
        }
        try harness.waitUntil("the squatted socket listens") { access(squatted, F_OK) == 0 }
        try harness.daemonConfig("[Display]\nSource=sway\n\n[Adopt]\nUser=\(HeadlessSway.user)\n")
        try harness.start(extraEnvironment: ["SWAYSOCK": ""])
        try harness.waitUntil("the squatter is refused") {
            harness.log.contains("the sway socket \(squatted) is served by uid 0")
        }
        #expect(!harness.log.contains("display: following sway"))
        #expect(try harness.lifectl("status").stdout.contains("reconnecting"))
    }
}

