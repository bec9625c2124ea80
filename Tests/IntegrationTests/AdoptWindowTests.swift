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
}
