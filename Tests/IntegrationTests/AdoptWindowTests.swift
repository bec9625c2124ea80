import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// `[Adopt] Windows=yes` (with `Scopes=yes`) against a real headless sway: two foot windows started by the test as
/// the session's user (through sway's own `exec`, as a launcher would), one moved into a launcher's scope and one
/// not. Neither is configured; both are adopted and follow what sway shows, the scope's by its freezer and the
/// other by signals.
@Suite("Adopt: windows on a real sway", .serialized)
struct AdoptWindowTests {
    /// A daemon, a sway and a session for `body`, all stopped afterwards with the foot processes `body` registers.
    func withSway(_ body: (DaemonHarness, HeadlessSway, FakeUserSession, inout [pid_t]) throws -> Void) throws {
        let harness = try DaemonHarness()
        let sway = try HeadlessSway(tag: harness.tag)
        let session = try FakeUserSession(tag: harness.tag)
        var footPIDs: [pid_t] = []
        defer {
            harness.stop()
            for pid in footPIDs { kill(pid, SIGCONT); kill(pid, SIGKILL) }
            sway.stop()
            session.stop()
        }
        try body(harness, sway, session, &footPIDs)
    }

    /// Windows and scopes adopted, following `sway`.
    func config(_ sway: HeadlessSway, _ session: FakeUserSession) -> String {
        """
        [Display]
        Source=sway
        SwaySocket=\(sway.socketLink)

        \(session.adoptingWindowsAndScopes)
        """
    }

    /// A foot window with `appID`, started as the session's user through sway's `exec`, as a launcher would.
    func foot(_ sway: HeadlessSway, _ appID: String) throws -> HeadlessSway.View {
        try sway.msg("exec foot --app-id \(appID) sleep 100000")
        return try sway.waitForView(appID)
    }

    /// The launcher's part: a foot and its child go into `scope`.
    func moveIntoScope(_ pid: pid_t, _ scope: String, _ session: FakeUserSession) throws {
        try FileManager.default.createDirectory(atPath: session.path(scope), withIntermediateDirectories: true)
        for pid in [pid] + Kernel.children(of: pid) {
            try "\(pid)".write(toFile: session.path(scope) + "/cgroup.procs", atomically: false, encoding: .utf8)
        }
    }

    @Test("a window no app owns is adopted as its process and its descendants; one in a scope is the scope's; both follow sway, and a crash leaves nothing stopped")
    func windowsAreAdoptedAndFollowSway() throws {
        try withSway { harness, sway, session, footPIDs in
            let tag = harness.tag
            let scope = "app-sway-org.example.Term-77.scope"
            let termView = try foot(sway, "term-\(tag)")
            let plainView = try foot(sway, "plain-\(tag)")
            footPIDs = [termView.pid, plainView.pid]
            try moveIntoScope(termView.pid, scope, session)
            try harness.daemonConfig(config(sway, session))
            try harness.start()
            let plain = "plain-\(tag)"
            try harness.waitUntil("both are adopted") {
                let apps = try harness.list()
                return apps.contains { $0.name == "org.example.Term" } && apps.contains { $0.name == plain }
            }
            #expect(try harness.status("org.example.Term").adopted == "scope \(scope)")
            #expect(try harness.status(plain).adopted == "process \(plainView.pid)")
            #expect(try harness.list().count == 2, "the scope's window is not adopted a second time")
            // Side by side on one workspace, the newer window focused.
            try harness.waitForState(plain, "active")
            try harness.waitForState("org.example.Term", "inactive")

            // The plain window to another workspace: its app goes to the background and is stopped by signals.
            try sway.msg("[con_id=\(plainView.id)] move container to workspace 2")
            try harness.waitForState(plain, "suspended")
            #expect(Kernel.stops(plainView.pid))
            for child in Kernel.children(of: plainView.pid) { #expect(Kernel.state(child) == "T", "its descendants are stopped too") }
            try session.wait("the scope is thawed") { !session.frozen(scope) }

            // Showing workspace 2 resumes it first; the scope's app goes to the background and its scope is frozen.
            try sway.msg("workspace 2")
            try harness.waitForState(plain, "active")
            #expect(Kernel.state(plainView.pid) != "T")
            try harness.waitForState("org.example.Term", "suspended")
            try session.wait("the scope is frozen") { session.frozen(scope) }

            // Back: the plain app is stopped again; then the daemon dies with one app frozen and one stopped.
            try sway.msg("workspace 1")
            try harness.waitForState("org.example.Term", "active")
            try harness.waitForState(plain, "suspended")
            #expect(Kernel.stops(plainView.pid))
            try harness.crash()
            #expect(Kernel.state(plainView.pid) == "T", "a crashed daemon continues nothing itself")
            try harness.daemonConfig("[Adopt]\nScopes=no\nWindows=no\n")
            try harness.start(keepLog: true)
            try harness.waitUntil("the stopped process is continued") { Kernel.state(plainView.pid) != "T" }
            #expect(harness.log.contains("which a previous lifecycled left stopped"))
            try session.wait("the scope is thawed") { !session.frozen(scope) }
            #expect(try harness.list().isEmpty)
        }
    }

    @Test("a window adopted as its process before its launcher moves that process into a scope becomes the scope's: the process's app is let go, and the scope's app follows the window")
    func windowMovedIntoScopeLaterIsTheScopes() throws {
        try withSway { harness, sway, session, footPIDs in
            let tag = harness.tag
            try harness.daemonConfig(config(sway, session))
            try harness.start()
            // The order a slow launcher gives: the window maps, and is adopted, before its process is in the scope.
            let early = "early-\(tag)"
            let view = try foot(sway, early)
            footPIDs = [view.pid]
            try harness.waitUntil("the window is adopted as its process") { try harness.list().contains { $0.name == early } }
            #expect(try harness.status(early).adopted == "process \(view.pid)")

            let scope = "app-sway-org.example.Scoped-5678.scope"
            try moveIntoScope(view.pid, scope, session)
            try harness.waitUntil("the scope is adopted") { try harness.list().contains { $0.name == "org.example.Scoped" } }
            #expect(try harness.status("org.example.Scoped").adopted == "scope \(scope)")
            try harness.waitUntil("the process's app is let go") { try !harness.list().contains { $0.name == early } }
            #expect(harness.log.contains("\(early): let go (its process is in \(scope) now)"))

            // The window is the scope's app's: focused, it is active; on another workspace, its scope is frozen.
            try harness.waitForState("org.example.Scoped", "active")
            try sway.msg("[con_id=\(view.id)] move container to workspace 2")
            try harness.waitForState("org.example.Scoped", "suspended")
            try session.wait("the scope is frozen") { session.frozen(scope) }
            #expect(Kernel.state(view.pid) != "T", "frozen by its scope, never stopped by signals as the process's app was")
            try sway.msg("workspace 2")
            try harness.waitForState("org.example.Scoped", "active")
            try session.wait("the scope is thawed") { !session.frozen(scope) }
        }
    }

    @Test("a window whose process its launcher moves into an adopted scope that already runs (nothing announces the move) is that scope's app's from the next picture on")
    func windowMovedIntoARunningScopeIsTheScopes() throws {
        try withSway { harness, sway, session, footPIDs in
            let tag = harness.tag
            let scope = "app-sway-org.example.Late-9.scope"
            // The scope's own window first, focused: its app is active.
            let first = try foot(sway, "first-\(tag)")
            footPIDs = [first.pid]
            try moveIntoScope(first.pid, scope, session)
            try harness.daemonConfig(config(sway, session).replacingOccurrences(of: "Windows=yes", with: "Windows=no"))
            try harness.start()
            try harness.waitForState("org.example.Late", "active")

            // A window maps outside the scope and takes the focus: the app resigns, so the daemon has read that
            // picture, and the new window's process was found to be no app's.
            let late = "late-\(tag)"
            let view = try foot(sway, late)
            footPIDs.append(view.pid)
            try harness.waitForState("org.example.Late", "inactive")

            // The launcher moves it in; the scope stays populated, so its cgroup.events does not change. The next
            // pictures show its window focused: the app's.
            try moveIntoScope(view.pid, scope, session)
            try sway.msg("workspace 2")
            try sway.msg("workspace 1")
            try harness.waitForState("org.example.Late", "active")
        }
    }

    /// An adopted window whose process tree holds processes that leave it while stopped: foot runs a shell whose
    /// subshell starts two `setsid sleep`s (their own sessions, so no hangup or orphaned-group SIGCONT reaches them).
    /// Returns the view, the subshell and the two sleeps.
    static func windowWithDetachedChildren(_ sway: HeadlessSway, appID: String) throws -> (HeadlessSway.View, pid_t, [pid_t]) {
        try sway.msg("exec foot --app-id \(appID) sh -c '(setsid sleep 100001 & setsid sleep 100002 & wait) & exec sleep 100000'")
        let view = try sway.waitForView(appID)
        var subshell: pid_t?, sleeps: [pid_t] = []
        for _ in 0..<200 where sleeps.count < 2 {
            for shell in Kernel.children(of: view.pid) {
                for middle in Kernel.children(of: shell) {
                    subshell = middle
                    sleeps = Kernel.children(of: middle)
                }
            }
            if sleeps.count < 2 { usleep(50_000) }
        }
        guard let subshell, sleeps.count == 2 else { throw HarnessError("foot's tree did not come up") }
        return (view, subshell, sleeps.sorted())
    }

    static func daemonConfig(_ sway: HeadlessSway) -> String {
        "[Display]\nSource=sway\nSwaySocket=\(sway.socketLink)\n\n[Adopt]\nWindows=yes\nUser=\(HeadlessSway.user)\nBackgroundTimeSec=1\n"
    }

    /// The window of `windowWithDetachedChildren`, adopted and suspended (hidden on workspace 1) by a running daemon;
    /// everything is ended after `body`, even on failure.
    static func withSuspendedTree(_ body: (DaemonHarness, HeadlessSway.View, pid_t, [pid_t]) throws -> Void) throws {
        let harness = try DaemonHarness()
        let sway = try HeadlessSway(tag: harness.tag)
        var cleanup: [pid_t] = []
        defer {
            harness.stop()
            for pid in cleanup { kill(pid, SIGCONT); kill(pid, SIGKILL) }
            sway.stop()
        }
        let appID = "tree-\(harness.tag)"
        let (view, subshell, sleeps) = try windowWithDetachedChildren(sway, appID: appID)
        cleanup = [view.pid, subshell] + sleeps
        try sway.msg("workspace 2")
        try harness.daemonConfig(daemonConfig(sway))
        try harness.start()
        try harness.waitUntil("the window is adopted") { try harness.list().contains { $0.name == appID } }
        try harness.waitForState(appID, "suspended")
        for pid in sleeps { #expect(Kernel.stops(pid), "the detached sleeps are stopped with the app") }
        try body(harness, view, subshell, sleeps)
    }

    @Test("processes stopped for an adopted window are continued by the next daemon after a crash and the leader's death; one whose recorded start time is not its own (a recycled pid) is left alone")
    func stoppedDescendantsAreContinuedAfterACrashAndTheLeadersDeath() throws {
        try Self.withSuspendedTree { harness, view, _, sleeps in
            try harness.crash()
            kill(view.pid, SIGKILL)
            let ledger = harness.runtimeDirectory.appendingPathComponent("state/stopped")
            // A recycled pid, simulated: the first sleep's line is given a start time that is not its own, as a new
            // process under the same pid number would have. That process must not be continued.
            let text = try String(contentsOf: ledger, encoding: .utf8)
            let lines = text.split(separator: "\n").map { line -> String in
                let words = line.split(separator: " ")
                guard words.count == 3, words[1] == "\(sleeps[0])" else { return String(line) }
                return "\(words[0]) \(words[1]) \((UInt64(words[2]) ?? 0) + 12345)"
            }
            #expect(lines.contains { $0.contains(" \(sleeps[1]) ") }, "the ledger names the second sleep: \(text)")
            try (lines.joined(separator: "\n") + "\n").write(to: ledger, atomically: true, encoding: .utf8)
            // Dead is enough: its parent may be stopped with the tree, and a zombie is never reaped then.
            try harness.waitUntil("the leader is dead") { [nil, "Z"].contains(Kernel.state(view.pid)) }

            try harness.daemonConfig("[Adopt]\nWindows=no\n")
            try harness.start(keepLog: true)
            try harness.waitUntil("the second sleep runs") { Kernel.state(sleeps[1]) != "T" }
            #expect(!FileManager.default.fileExists(atPath: ledger.path), "the ledger is done with once read")
            #expect(Kernel.state(sleeps[0]) == "T", "the entry whose start time does not match is not signalled")
        }
    }

    @Test("lifectl resume --all continues a process stopped for an adopted window that has left the window's tree (its parent died)")
    func resumeAllReachesStoppedProcessesOutsideTheTree() throws {
        try Self.withSuspendedTree { harness, _, subshell, sleeps in
            // The subshell dies: the sleeps are reparented, out of the window's tree, still stopped; the app lives on.
            kill(subshell, SIGKILL)
            // Its parent is stopped and does not reap it: dead is a zombie or gone.
            try harness.waitUntil("the sleeps left the tree") { Kernel.state(subshell) == nil || Kernel.state(subshell) == "Z" }
            #expect(Kernel.state(sleeps[0]) == "T" && Kernel.state(sleeps[1]) == "T")

            let resumed = try harness.lifectl("resume", "--all")
            #expect(resumed.status == 0, "\(resumed.stderr)")
            try harness.waitUntil("both sleeps run") { sleeps.allSatisfy { Kernel.state($0) != "T" } }
        }
    }
}
