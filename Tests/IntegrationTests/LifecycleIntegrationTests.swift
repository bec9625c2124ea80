import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// The real daemon, real client processes (the Python and Swift examples), real signals, real /proc.
/// Serialized: each test starts its own daemon, and the machine has two cores.
@Suite("lifecycled end to end", .serialized)
struct LifecycleIntegrationTests {
    let python = DaemonHarness.pythonClient

    func withDaemon(_ apps: [String: String], daemonConfig: String? = nil, _ body: (DaemonHarness) throws -> Void) throws {
        try DaemonHarness.running(apps, daemonConfig: daemonConfig, body)
    }

    func client(_ arguments: String = "", lifecycle: String = "") -> String {
        "[App]\nExec=\(python) \(arguments)\n\n[Lifecycle]\n\(lifecycle)\n"
    }

    @Test("focus launches an app: didFinishLaunching, then didBecomeActive; it is active")
    func launchThenFocusBecomesActive() throws {
        try withDaemon(["a": client()]) { daemon in
            try daemon.control("focus", "a")
            let status = try daemon.status("a")
            #expect(status.state.rawValue == "active")
            let pid = try #require(status.pid)
            #expect(Kernel.exists(pid))
            #expect(getpgid(pid) == pid, "every app runs in its own process group")
            #expect(daemon.types("a") == ["hello", "didFinishLaunching", "didBecomeActive"])
            let launch = try #require(daemon.records("a").first { $0.type == "didFinishLaunching" })
            #expect(launch.launchOptions?["launchedBy"] == .string("lifectl"))
            #expect(launch.launchOptions?["terminatedInBackground"] == .bool(false))
        }
    }

    @Test("launch --background: didFinishLaunching, then didEnterBackground")
    func launchIntoBackground() throws {
        try withDaemon(["a": client(lifecycle: "BackgroundTimeSec=infinity")]) { daemon in
            try daemon.control("launch", "a", "--background")
            #expect(try daemon.status("a").state.rawValue == "background")
            #expect(daemon.types("a") == ["hello", "didFinishLaunching", "didEnterBackground"])
        }
    }

    @Test("an app switch follows UIKit: A resigns, A enters the background, B comes forward, B becomes active")
    func appSwitchFollowsUIKitOrder() throws {
        let lifecycle = "BackgroundTimeSec=infinity"
        try withDaemon(["a": client(lifecycle: lifecycle), "b": client(lifecycle: lifecycle)]) { daemon in
            try daemon.control("focus", "a")
            try daemon.control("launch", "b", "--background")
            let before = daemon.records().count
            try daemon.control("focus", "b")

            let apps = try daemon.list()
            #expect(apps.first { $0.name == "a" }?.state.rawValue == "background")
            #expect(apps.first { $0.name == "b" }?.state.rawValue == "active")
            // The switch in the order the daemon sent it (its debug log, one thread): a process's receive time says
            // when it got a CPU, and on two busy CPUs a client can read a message after the next one went out.
            let sent = daemon.log.split(separator: "\n").compactMap { line -> String? in
                guard let range = line.range(of: ": sent "), !line.contains("process group") else { return nil }
                let app = line[..<range.lowerBound].split(separator: " ").last.map(String.init) ?? ""
                let callback = line[range.upperBound...].split(separator: " ").first.map(String.init) ?? ""
                return "\(app).\(callback)"
            }.filter { ["a", "b"].contains($0.split(separator: ".").first.map(String.init) ?? "") }
            let switchSent = Array(sent.drop { $0 != "a.willResignActive" })
            #expect(switchSent == ["a.willResignActive", "a.didEnterBackground", "b.willEnterForeground", "b.didBecomeActive"],
                    "sent \(switchSent)")
            // Each process received its own part in order; the focus is answered once b settled, and a reads its
            // didEnterBackground in its own time.
            try daemon.waitUntil("a got didEnterBackground") { daemon.types("a").last == "didEnterBackground" }
            let received = daemon.records().dropFirst(before).map { "\($0.app).\($0.type)" }
            #expect(received.filter { $0.hasPrefix("a.") } == ["a.willResignActive", "a.didEnterBackground"], "got \(received)")
            #expect(received.filter { $0.hasPrefix("b.") } == ["b.willEnterForeground", "b.didBecomeActive"], "got \(received)")
        }
    }

    @Test("background, then suspended after the grace time with every process of the group in state T")
    func backgroundSuspendsAfterGraceTime() throws {
        try withDaemon(["a": client("--children 2", lifecycle: "BackgroundTimeSec=2")]) { daemon in
            try daemon.control("focus", "a")
            let pid = try #require(try daemon.status("a").pid)
            try daemon.waitUntil("the children are started") { Kernel.group(pid).count == 3 }
            #expect(try daemon.settle("background", "a").state.rawValue == "background")
            #expect(Kernel.group(pid).allSatisfy { Kernel.state($0) != "T" }, "not stopped during the grace time")

            try daemon.waitForState("a", "suspended")
            let group = Kernel.group(pid)
            #expect(group.count == 3)
            try daemon.waitUntil("every process shows T") { group.allSatisfy { Kernel.state($0) == "T" } }
            // Stopped only after the client had the didEnterBackground message (and acked it).
            #expect(daemon.types("a").last == "didEnterBackground")
            #expect(daemon.log.contains("a: background → suspended (background time over)"))
        }
    }

    @Test("resume continues every process; focus brings the app back to active")
    func resumeAndFocusBackToActive() throws {
        try withDaemon(["a": client("--children 1", lifecycle: "BackgroundTimeSec=infinity")]) { daemon in
            try daemon.control("focus", "a")
            let pid = try #require(try daemon.status("a").pid)
            try daemon.control("suspend", "a")
            #expect(try daemon.status("a").state.rawValue == "suspended")
            try daemon.waitUntil("the group is stopped") { Kernel.group(pid).allSatisfy { Kernel.state($0) == "T" } }

            try daemon.control("resume", "a")
            #expect(try daemon.status("a").state.rawValue == "background")
            try daemon.waitUntil("the group runs again") { Kernel.group(pid).allSatisfy { Kernel.state($0) != "T" } }

            try daemon.control("focus", "a")
            #expect(try daemon.status("a").state.rawValue == "active")
            #expect(try daemon.status("a").pid == pid, "the same process, woken, not a new one")
            #expect(daemon.types("a").suffix(4) == ["willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"])
        }
    }

    @Test("SuspendMethod=freezer freezes the app's cgroup where the machine has a freezer",
          .enabled(if: Host.canManageCgroups, "needs a cgroup the daemon can make (root, a writable cgroup filesystem)"))
    func freezerSuspendsTheCgroup() throws {
        try withDaemon(["a": client("--children 1", lifecycle: "BackgroundTimeSec=infinity\nSuspendMethod=freezer")]) { daemon in
            try daemon.control("launch", "a", "--background")
            try daemon.control("suspend", "a")
            #expect(try daemon.status("a").state.rawValue == "suspended")
            let status = try daemon.status("a")
            let cgroup = try #require(status.cgroup, "the daemon made no cgroup for the app: \(status.suspendMethod)")
            #expect(status.suspendMethod.hasPrefix("freezer"))
            if cgroup.contains("/unified/") || !cgroup.contains("/cpu/") {
                // cgroup2 (pure, or the hybrid's unified mount): cgroup.events says frozen.
                try daemon.waitUntil("cgroup.events says frozen 1") {
                    ((try? String(contentsOfFile: cgroup + "/cgroup.events", encoding: .utf8)) ?? "").contains("frozen 1")
                }
            }
            let pid = try #require(status.pid)
            let procs = (try? String(contentsOfFile: cgroup + "/cgroup.procs", encoding: .utf8)) ?? ""
            #expect(procs.split(separator: "\n").contains(Substring(String(pid))), "the app runs in its own cgroup")
            try daemon.control("resume", "a")
            try daemon.waitUntil("thawed") {
                !((try? String(contentsOfFile: cgroup + "/cgroup.events", encoding: .utf8)) ?? "").contains("frozen 1")
            }
        }
    }

    /// The daemon waits for each child's exec (CLONE_VFORK) and the child joins its cgroup before that exec: in a
    /// cgroup left frozen the child would freeze, and the daemon with it, in state D for good. A frozen app killed
    /// by jetsam leaves its cgroup frozen, so the next launch must find it thawed.
    @Test("SuspendMethod=freezer without a cgroup the daemon can make falls back to SIGSTOP",
          .enabled(if: !Host.canManageCgroups, "this machine lets the daemon make cgroups: the test above runs instead"))
    func freezerFallsBackToSignalWithoutACgroup() throws {
        try withDaemon(["a": client("--children 1", lifecycle: "BackgroundTimeSec=infinity\nSuspendMethod=freezer")]) { daemon in
            try daemon.control("launch", "a", "--background")
            try daemon.control("suspend", "a")
            let status = try daemon.status("a")
            #expect(status.state.rawValue == "suspended")
            #expect(status.cgroup == nil)
            #expect(status.suspendMethod == "signal")
        }
    }

    @Test("a cgroup left frozen never freezes a launch: a killed frozen app's cgroup is thawed, and a launch thaws first",
          .enabled(if: Host.hasCgroup2Freezer, "only a cgroup2 freezer lets a frozen process die of SIGKILL"))
    func frozenCgroupNeverHangsALaunch() throws {
        try withDaemon(["f": client(lifecycle: "BackgroundTimeSec=infinity\nSuspendMethod=freezer")]) { daemon in
            try daemon.control("launch", "f", "--background")
            try daemon.control("suspend", "f")
            let status = try daemon.status("f")
            let cgroup = try #require(status.cgroup, "the daemon made no cgroup for the app: \(status.suspendMethod)")
            try #require(status.suspendMethod.hasPrefix("freezer (cgroup2")
                         && FileManager.default.fileExists(atPath: cgroup + "/cgroup.freeze"),
                         "expected a cgroup2 freezer; got \(status.suspendMethod), cgroup \(cgroup)")
            func freezeFile() -> String { ((try? String(contentsOfFile: cgroup + "/cgroup.freeze", encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines) }
            #expect(freezeFile() == "1")
            // Killed while frozen, as jetsam does: the cgroup must not stay frozen.
            kill(try #require(status.pid), SIGKILL)
            try daemon.waitForState("f", "notRunning")
            #expect(freezeFile() == "0", "the cgroup of a frozen app that died is thawed")

            // Frozen by someone else while the app is not running: the launch must still come back.
            try "1".write(toFile: cgroup + "/cgroup.freeze", atomically: false, encoding: .utf8)
            defer { try? "0".write(toFile: cgroup + "/cgroup.freeze", atomically: false, encoding: .utf8) }
            let launch = try daemon.startLifectl("launch", "f", "--background")
            let finished = (try? daemon.waitUntil("the launch returns") { !launch.isRunning }) != nil
            if !finished {
                // Let the hung daemon go, so that the rest of the suite runs, and fail.
                try? "0".write(toFile: cgroup + "/cgroup.freeze", atomically: false, encoding: .utf8)
                Issue.record("a launch into a frozen cgroup hung the daemon")
                launch.waitUntilExit()
                return
            }
            #expect(launch.terminationStatus == 0)
            let pid = try #require(try daemon.status("f").pid)
            #expect(Kernel.state(pid) != nil)
            #expect(freezeFile() == "0")
            #expect(try daemon.status("f").state.rawValue == "background")
        }
    }

    @Test("a crash is restarted with a backoff that doubles")
    func crashIsRestartedWithBackoff() throws {
        try withDaemon(["a": client(lifecycle: "BackgroundTimeSec=infinity") + "\n[App]\nRestart=on-failure\nRestartSec=0.2\n"]) { daemon in
            try daemon.control("focus", "a")
            let first = try #require(try daemon.status("a").pid)
            kill(first, SIGSEGV)
            try daemon.waitUntil("a new process is running") {
                let status = try daemon.status("a")
                return status.pid != nil && status.pid != first && status.launches == 2
            }
            #expect(daemon.log.contains("a: restarting in 200ms (start 2 of at most 5 within 10s)"))
            // It held focus when it crashed, so it gets it back.
            try daemon.waitForState("a", "active")
            let second = try #require(try daemon.status("a").pid)
            kill(second, SIGSEGV)
            try daemon.waitUntil("a third process is running") { try daemon.status("a").launches == 3 }
            #expect(daemon.log.contains("a: restarting in 400ms (start 3 of at most 5 within 10s)"))
            #expect(!Kernel.exists(first) && !Kernel.exists(second), "crashed processes are reaped, not zombies")
        }
    }

    @Test("a crash loop ends in failed; a launch by hand starts it again")
    func crashLoopEndsInFailed() throws {
        let app = "[App]\nExec=/bin/sh -c \"exit 3\"\nProtocol=none\nRestart=on-failure\nRestartSec=50ms\nStartLimitBurst=3\nStartLimitIntervalSec=60\n"
        // The same loop with one start more: started after `loop` failed, it fails only after a restart delay of
        // 200 ms, the delay `loop`'s next start would have had.
        let marker = "[App]\nExec=/bin/sh -c \"exit 3\"\nProtocol=none\nRestart=on-failure\nRestartSec=50ms\nStartLimitBurst=4\nStartLimitIntervalSec=60\n"
        try withDaemon(["loop": app, "marker": marker]) { daemon in
            _ = try daemon.lifectl("launch", "loop")
            try daemon.waitForState("loop", "failed")
            #expect(try daemon.status("loop").launches == 3)
            #expect(daemon.log.contains("loop: started 3 times within 60s; giving up"))
            // Stays failed: no more restarts.
            _ = try daemon.lifectl("launch", "marker")
            try daemon.waitForState("marker", "failed")
            #expect(try daemon.status("marker").launches == 4)
            #expect(try daemon.status("loop").launches == 3)
            #expect(try daemon.status("loop").state.rawValue == "failed")
            _ = try daemon.lifectl("launch", "loop")
            try daemon.waitUntil("it is started again") { try daemon.status("loop").launches >= 4 }
        }
    }

    @Test("terminate: willTerminate reaches the app before its process ends; no zombie")
    func terminateSendsWillTerminateFirst() throws {
        try withDaemon(["a": client("--children 1")]) { daemon in
            try daemon.control("focus", "a")
            let pid = try #require(try daemon.status("a").pid)
            let group = Kernel.group(pid)
            try daemon.control("terminate", "a")
            let status = try daemon.status("a")
            #expect(status.state.rawValue == "notRunning")
            #expect(status.pid == nil)
            #expect(daemon.types("a").last == "willTerminate")
            try daemon.waitUntil("every process of the app is gone") { group.allSatisfy { !Kernel.exists($0) } }
            #expect(!daemon.log.contains("a: restarting"), "a requested termination is not a crash")
        }
    }

    @Test("terminate of a suspended app: no message, the process is continued so that it can exit")
    func terminateSuspendedApp() throws {
        try withDaemon(["a": client(lifecycle: "BackgroundTimeSec=0")]) { daemon in
            try daemon.control("launch", "a", "--background")
            try daemon.waitForState("a", "suspended")
            let pid = try #require(try daemon.status("a").pid)
            try daemon.control("terminate", "a")
            #expect(try daemon.status("a").state.rawValue == "notRunning")
            #expect(!daemon.types("a").contains("willTerminate"))
            try daemon.waitUntil("the process is gone") { !Kernel.exists(pid) }
            #expect(daemon.log.contains("a: suspended → notRunning"))
        }
    }

    @Test("a client that never acks: the deadline passes, it is counted, and the transition goes on")
    func neverAckingClientHitsTheDeadline() throws {
        // 3 s: the deadline holds for every callback, and the client's acks of the others must all come in time.
        let app = client("--no-ack-for didEnterBackground", lifecycle: "AckTimeoutSec=3\nBackgroundTimeSec=0")
        try withDaemon(["slow": app]) { daemon in
            try daemon.control("focus", "slow")
            try daemon.control("background", "slow")
            // The daemon waited for the deadline, then went on: suspended right after (BackgroundTimeSec=0).
            try daemon.waitForState("slow", "suspended")
            let status = try daemon.status("slow")
            #expect(status.deadlineMisses == 1)
            #expect(status.awaiting == nil)
            #expect(daemon.log.contains("slow: didEnterBackground (id 4) was not acknowledged within 3s; going on (1 missed so far)"))
        }
    }

    @Test("a client that does not finish launching in time is killed, like iOS's launch watchdog")
    func launchWatchdogKillsASlowLauncher() throws {
        // 3 s, not less: the watchdog kills a client that said hello and never acked; one whose hello comes after the
        // timeout (a Python start-up on a loaded machine) is managed without messages instead, which is another test.
        try withDaemon(["stuck": client("--no-ack", lifecycle: "LaunchTimeoutSec=3")]) { daemon in
            _ = try daemon.lifectl("launch", "stuck")
            try daemon.waitForState("stuck", "notRunning")
            #expect(daemon.log.contains("stuck: did not finish launching within 3s; killing it (launch watchdog)"))
            #expect(try daemon.status("stuck").deadlineMisses == 1)
        }
    }

    @Test("a malformed client gets an error and is disconnected; the daemon and other apps carry on")
    func malformedClientIsDisconnected() throws {
        try withDaemon(["bad": client("--garbage"), "good": client()]) { daemon in
            _ = try daemon.lifectl("launch", "bad")
            try daemon.waitUntil("bad got its error") { daemon.types("bad").contains("error") }
            let error = try #require(daemon.records("bad").first { $0.type == "error" })
            #expect(error.message?.contains("not a JSON object") == true, "got \(error.message ?? "nil")")
            let bad = try daemon.status("bad")
            #expect(bad.protocol == "silent", "managed without messages from now on")
            #expect(bad.pid.map(Kernel.exists) == true, "the process itself is left alone")

            try daemon.control("focus", "good")
            #expect(try daemon.status("good").state.rawValue == "active")
            // The silent app still goes through the states, by signals alone.
            try daemon.control("suspend", "bad")
            let pid = try #require(bad.pid)
            try daemon.waitUntil("bad is stopped") { Kernel.state(pid) == "T" }
        }
    }

    @Test("a program that speaks no protocol goes through the same states by priorities and SIGSTOP")
    func protocolNoneAppIsManaged() throws {
        try withDaemon(["plain": "[App]\nExec=sleep 100000\nProtocol=none\n[Lifecycle]\nBackgroundTimeSec=0.2\n"]) { daemon in
            try daemon.control("focus", "plain")
            #expect(try daemon.status("plain").state.rawValue == "active")
            let pid = try #require(try daemon.status("plain").pid)
            try daemon.control("background", "plain")
            try daemon.waitForState("plain", "suspended")
            try daemon.waitUntil("it is stopped") { Kernel.state(pid) == "T" }
            let adj = try String(contentsOfFile: "/proc/\(pid)/oom_score_adj", encoding: .utf8)
            #expect(adj.trimmingCharacters(in: .whitespacesAndNewlines) == "900", "suspended apps are the first the OOM killer takes")
        }
    }

    @Test("a stop or continue the daemon did not cause is noticed and reconciled")
    func externalStopAndContinueAreReconciled() throws {
        try withDaemon(["a": client(lifecycle: "BackgroundTimeSec=infinity")]) { daemon in
            try daemon.control("launch", "a", "--background")
            let pid = try #require(try daemon.status("a").pid)
            kill(-pid, SIGSTOP)
            try daemon.waitForState("a", "suspended")
            kill(-pid, SIGCONT)
            try daemon.waitForState("a", "background")
            #expect(daemon.log.contains("a: its process was stopped by someone else"))
        }
    }

    @Test("a refused transition names the app, its state and the request")
    func refusedTransitionIsExplained() throws {
        try withDaemon(["a": client()]) { daemon in
            let output = try daemon.lifectl("resume", "a")
            #expect(output.status == 1)
            #expect(output.stderr.contains("cannot resume 'a': it is notRunning"))
            let unknown = try daemon.lifectl("focus", "nosuch")
            #expect(unknown.status == 4, "exit status 4: no such app")
            #expect(unknown.stderr.contains("no such app"))
        }
    }

    @Test("a bad config line is reported with file, line and key; the rest loads")
    func badConfigLineIsReported() throws {
        let broken = "[App]\nExec=\(python)\n[Lifecycle]\nBackgroundTimeSec=tenn\nLaunchTimeoutSec=7\n"
        try withDaemon(["broken": broken, "noexec": "[App]\nDescription=nothing to run\n", "fine": client()]) { daemon in
            let output = try daemon.lifectl("status", "--json")
            #expect(output.status == 0)
            #expect(output.stdout.contains("apps/broken.conf:5: BackgroundTimeSec=: invalid duration"), "\(output.stdout)")
            #expect(daemon.log.contains("apps/broken.conf:5: BackgroundTimeSec="))
            #expect(daemon.log.contains("noexec"))
            let names = try daemon.list().map(\.name)
            #expect(names == ["broken", "fine"], "the broken key is ignored, the app without Exec= is not loaded")
            try daemon.control("focus", "broken")
            #expect(try daemon.status("broken").state.rawValue == "active")
        }
    }

    @Test("SIGHUP reloads: added apps appear, removed ones are terminated, unchanged ones are untouched")
    func reloadChangesOnlyChangedApps() throws {
        try withDaemon(["keep": client(), "drop": client()]) { daemon in
            try daemon.control("focus", "keep")
            try daemon.control("launch", "drop")
            let keepPID = try daemon.status("keep").pid
            try daemon.removeApp("drop")
            try daemon.app("new", client())
            daemon.reload()
            try daemon.waitUntil("the reload is done") { try daemon.list().map(\.name) == ["keep", "new"] }
            #expect(try daemon.status("keep").pid == keepPID)
            #expect(try daemon.status("keep").state.rawValue == "active")
            #expect(daemon.types("drop").last == "willTerminate")
        }
    }

    @Test("only root and the daemon's user may change states; anyone may list")
    func unprivilegedUserCanOnlyQuery() throws {
        try withDaemon(["a": client()]) { daemon in
            let list = try daemon.lifectl("list", asUser: 65534)
            #expect(list.status == 0, "\(list.stderr)")
            #expect(list.stdout.contains("a"))
            let focus = try daemon.lifectl("focus", "a", asUser: 65534)
            #expect(focus.status == 1)
            #expect(focus.stderr.contains("permission denied"))
            #expect(try daemon.status("a").state.rawValue == "notRunning")
        }
    }

    @Test("the Swift example saves its state on didEnterBackground and restores it at the next launch")
    func swiftExampleKeepsStateAcrossLaunches() throws {
        let harnessState = FileManager.default.temporaryDirectory.appendingPathComponent("notes-\(getpid())-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: harnessState) }
        let notes = "[App]\nExec=notes-example\nEnvironment=NOTES_STATE_FILE=\(harnessState.path)\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
        struct Saved: Decodable { var launches: Int; var backgroundEntries: Int }
        try withDaemon(["notes": notes]) { daemon in
            try daemon.control("focus", "notes")
            try daemon.control("background", "notes")
            var saved = try JSONDecoder().decode(Saved.self, from: Data(contentsOf: harnessState))
            #expect(saved.launches == 1 && saved.backgroundEntries == 1)
            try daemon.control("terminate", "notes")
            try daemon.control("focus", "notes")
            try daemon.control("background", "notes")
            saved = try JSONDecoder().decode(Saved.self, from: Data(contentsOf: harnessState))
            #expect(saved.launches == 2, "the second launch restored the first one's state")
            #expect(saved.backgroundEntries == 2)
            #expect(daemon.types("notes") == ["didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground",
                                              "willTerminate", "didFinishLaunching", "didBecomeActive", "willResignActive",
                                              "didEnterBackground"])
        }
    }

    @Test("SIGTERM to the daemon: every app gets willTerminate, suspended ones exit too, nothing is left")
    func daemonStopTerminatesEveryApp() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", client(lifecycle: "BackgroundTimeSec=infinity"))
        try harness.app("b", client("--children 1", lifecycle: "BackgroundTimeSec=0"))
        try harness.start()
        try harness.control("focus", "a")
        try harness.control("launch", "b", "--background")
        try harness.waitForState("b", "suspended")
        let pids = try harness.list().compactMap(\.pid).flatMap(Kernel.group)
        #expect(pids.count == 3)
        kill(harness.daemonPID!, SIGTERM)
        try harness.waitUntil("the daemon exits") { !harness.isDaemonRunning }
        #expect(harness.types("a").last == "willTerminate")
        #expect(harness.types("b").last == "willTerminate", "the suspended app was continued and told too")
        try harness.waitUntil("no process is left") { pids.allSatisfy { !Kernel.exists($0) } }
        #expect(harness.log.contains("Stopped"))
    }
}
