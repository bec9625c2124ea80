import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// `[Adopt] Windows=yes` (with `Scopes=yes`) against a real Xvfb with openbox: two xterm windows started by the test
/// as the session's user, one moved into a launcher's scope and one not. Neither is configured; both are adopted,
/// named by their WM_CLASS (the scope's by its unit), and follow what openbox shows: minimized, on another desktop,
/// shown again.
@Suite("Adopt: windows on a real X server with openbox", .serialized)
struct AdoptX11Tests {
    /// An xterm of the session's user on `x`, titled `title` with the class `windowClass`. Started with posix_spawn
    /// and reaped with waitpid: Foundation's Process did not see such an xterm's exit in this runner.
    func xterm(_ x: XvfbOpenbox, _ session: FakeUserSession, title: String, windowClass: String) throws -> pid_t {
        let argv = ["/usr/bin/setpriv", "--reuid=\(session.uid)", "--regid=\(session.gid)", "--clear-groups", "--",
                    "/usr/bin/env", "DISPLAY=\(x.display)", "HOME=/", "/usr/bin/xterm", "-class", windowClass,
                    "-T", title, "-e", "sleep", "100000"]
        var pid: pid_t = 0
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { for arg in cArgs { free(arg) } }
        // An empty signal mask, not the runner's: the sleep ends on the hangup when its xterm is killed.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        let status = posix_spawn(&pid, argv[0], nil, &attributes, &cArgs, environ)
        guard status == 0 else { throw HarnessError("posix_spawn xterm: \(String(cString: strerror(status)))") }
        return pid
    }

    @Test("a window no app owns is adopted by its WM_CLASS as its process tree; one in a scope is the scope's; both follow openbox")
    func windowsAreAdoptedAndFollowOpenbox() throws {
        let harness = try DaemonHarness()
        let x = try XvfbOpenbox(tag: harness.tag)
        let session = try FakeUserSession(tag: harness.tag)
        var xterms: [pid_t] = []
        defer {
            harness.stop()
            for pid in xterms {
                for child in Kernel.children(of: pid) { kill(child, SIGCONT); kill(child, SIGKILL) }
                kill(pid, SIGCONT)
                kill(pid, SIGKILL)
                waitpid(pid, nil, 0)
            }
            x.stop()
            session.stop()
        }
        let tag = harness.tag
        let scope = "app-openbox-org.example.XTerm-5.scope"
        let plain = "Plain\(tag)"
        let scoped = try xterm(x, session, title: "scoped-\(tag)", windowClass: "Scoped\(tag)")
        xterms.append(scoped)
        let scopedWindow = try x.waitForWindow("scoped-\(tag)")
        let loose = try xterm(x, session, title: "plain-\(tag)", windowClass: plain)
        xterms.append(loose)
        let plainWindow = try x.waitForWindow("plain-\(tag)")
        // The launcher's part: the first xterm and its child go into their scope.
        try FileManager.default.createDirectory(atPath: session.path(scope), withIntermediateDirectories: true)
        for pid in [scoped] + Kernel.children(of: scoped) {
            try "\(pid)".write(toFile: session.path(scope) + "/cgroup.procs", atomically: false, encoding: .utf8)
        }

        try harness.daemonConfig("""
            [Display]
            Source=x11
            X11Display=\(x.display)

            [Adopt]
            Scopes=yes
            Windows=yes
            AppSlice=\(session.appSlice)
            User=\(HeadlessSway.user)
            BackgroundTimeSec=1

            """)
        try harness.start()
        try harness.waitUntil("both are adopted") {
            let names = Set(try harness.list().map(\.name))
            return names.contains("org.example.XTerm") && names.contains(plain)
        }
        #expect(try harness.status("org.example.XTerm").adopted == "scope \(scope)")
        #expect(try harness.status(plain).adopted == "process \(loose)")
        #expect(try harness.list().count == 2, "the scope's window is not adopted a second time")
        // Both shown on the one desktop, the newer window focused.
        try harness.waitForState(plain, "active")
        try harness.waitForState("org.example.XTerm", "inactive")

        // Minimized by the window manager: the plain window's app is stopped by signals, descendants included.
        try x.xdotool("windowminimize", plainWindow)
        try harness.waitForState(plain, "suspended")
        #expect(Kernel.stops(loose))
        let descendants = Kernel.children(of: loose)
        #expect(!descendants.isEmpty)
        for child in descendants { #expect(Kernel.stops(child), "its descendants are stopped too") }

        // The scope's window to the other desktop: frozen through its scope's cgroup.
        try x.xdotool("set_desktop_for_window", scopedWindow, "1")
        try harness.waitForState("org.example.XTerm", "suspended")
        try session.wait("the scope is frozen") { session.frozen(scope) }

        // Shown again, each is resumed: the plain one activated, the scope's desktop switched to.
        try x.xdotool("windowactivate", plainWindow)
        try harness.waitForState(plain, "active")
        #expect(Kernel.state(loose) != "T")
        try x.xdotool("set_desktop", "1")
        try x.xdotool("windowactivate", scopedWindow)
        try harness.waitForState("org.example.XTerm", "active")
        try session.wait("the scope is thawed") { !session.frozen(scope) }
        #expect(harness.isDaemonRunning)
    }
}
