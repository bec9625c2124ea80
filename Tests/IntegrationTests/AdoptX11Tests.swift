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
    /// An xterm of the session's user on `x`, titled `title` with the class `windowClass`.
    func xterm(_ x: XvfbOpenbox, _ session: FakeUserSession, title: String, windowClass: String) throws -> pid_t {
        try Self.spawn(["/usr/bin/setpriv", "--reuid=\(session.uid)", "--regid=\(session.gid)", "--clear-groups", "--",
                        "/usr/bin/env", "DISPLAY=\(x.display)", "HOME=/", "/usr/bin/xterm", "-class", windowClass,
                        "-T", title, "-e", "sleep", "100000"])
    }

    /// Started with posix_spawn and reaped with waitpid: Foundation's Process did not see such an xterm's exit in this
    /// runner. An empty signal mask, not the runner's: the sleep ends on the hangup when its xterm is killed.
    static func spawn(_ argv: [String]) throws -> pid_t {
        var pid: pid_t = 0
        var cArgs = argv.map { strdup($0) } + [nil]
        defer { for arg in cArgs { free(arg) } }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
        let status = posix_spawn(&pid, argv[0], nil, &attributes, &cArgs, environ)
        guard status == 0 else { throw HarnessError("posix_spawn \(argv[0]): \(String(cString: strerror(status)))") }
        return pid
    }

    /// A daemon harness, an X server with openbox and a session user for `body`; every process `body` records in
    /// `spawned` is continued, killed with its children and reaped afterwards, also on failure.
    func onDesktop(_ body: (DaemonHarness, XvfbOpenbox, FakeUserSession, inout [pid_t]) throws -> Void) throws {
        let harness = try DaemonHarness()
        let x = try XvfbOpenbox(tag: harness.tag)
        let session = try FakeUserSession(tag: harness.tag)
        var spawned: [pid_t] = []
        defer {
            harness.stop()
            for pid in spawned {
                for child in Kernel.children(of: pid) { kill(child, SIGCONT); kill(child, SIGKILL) }
                kill(pid, SIGCONT)
                kill(pid, SIGKILL)
                waitpid(pid, nil, 0)
            }
            x.stop()
            session.stop()
        }
        try body(harness, x, session, &spawned)
    }

    @Test("a window no app owns is adopted by its WM_CLASS as its process tree; one in a scope is the scope's; both follow openbox")
    func windowsAreAdoptedAndFollowOpenbox() throws {
        try onDesktop { harness, x, session, spawned in
            let tag = harness.tag
            let scope = "app-openbox-org.example.XTerm-5.scope"
            let plain = "Plain\(tag)"
            let scoped = try xterm(x, session, title: "scoped-\(tag)", windowClass: "Scoped\(tag)")
            spawned.append(scoped)
            let scopedWindow = try x.waitForWindow("scoped-\(tag)")
            let loose = try xterm(x, session, title: "plain-\(tag)", windowClass: plain)
            spawned.append(loose)
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

                \(session.adoptingWindowsAndScopes)
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

    /// A process of the session's user, in no window.
    func bystander(_ session: FakeUserSession) throws -> pid_t {
        try Self.spawn(["/usr/bin/setpriv", "--reuid=\(session.uid)", "--regid=\(session.gid)", "--clear-groups", "--",
                        "/bin/sleep", "100000"])
    }

    @Test("a window whose _NET_WM_PID names another process of the user is its own process's, as the X server vouches; the named one is never adopted nor stopped")
    func theServersPidWinsOverTheClaimedOne() throws {
        try onDesktop { harness, x, session, spawned in
            let tag = harness.tag
            let liarClass = "Liar\(tag)"
            let victim = try bystander(session)
            spawned.append(victim)
            let liar = try xterm(x, session, title: "liar-\(tag)", windowClass: liarClass)
            spawned.append(liar)
            let window = try x.waitForWindow("liar-\(tag)")
            // The client rewrites what it says about itself: its window now names the bystander.
            _ = try x.xprop("-id", window, "-f", "_NET_WM_PID", "32c", "-set", "_NET_WM_PID", "\(victim)")
            #expect(try x.xprop("-id", window, "_NET_WM_PID").contains("\(victim)"))

            try harness.daemonConfig("""
                [Display]
                Source=x11
                X11Display=\(x.display)

                [Adopt]
                Windows=yes
                User=\(HeadlessSway.user)
                BackgroundTimeSec=1

                """)
            try harness.start()
            try harness.waitUntil("the window is adopted") { try harness.list().map(\.name).contains(liarClass) }
            #expect(try harness.status(liarClass).adopted == "process \(liar)", "the process the X server saw, not the one named")

            try x.xdotool("windowminimize", window)
            try harness.waitForState(liarClass, "suspended")
            #expect(Kernel.stops(liar))
            #expect(!Kernel.stops(victim, within: 1.5), "the process the window named is left alone")
            #expect(Kernel.state(victim) != "T")
        }
    }

    /// nice and oom_score_adj of a process, read back from the kernel.
    static func priority(_ pid: pid_t) -> (nice: Int32, oom: Int)? {
        errno = 0
        let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(pid))
        guard errno == 0, let text = try? String(contentsOfFile: "/proc/\(pid)/oom_score_adj", encoding: .utf8),
              let oom = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return nil }
        return (nice, oom)
    }

    @Test("an adopted window's processes get back their nice and oom_score_adj when a reload lets them go, and at the next start after a crash")
    func priorityIsGivenBack() throws {
        try onDesktop { harness, x, session, spawned in
            let tag = harness.tag
            let name = "Weighed\(tag)"
            let term = try xterm(x, session, title: "weighed-\(tag)", windowClass: name)
            spawned.append(term)
            let window = try x.waitForWindow("weighed-\(tag)")
            try x.waitUntil("the xterm's child runs") { !Kernel.children(of: term).isEmpty }
            let processes = [term] + Kernel.children(of: term)
            // What the desktop gave them, which is neither the daemon's foreground nor its background.
            for pid in processes {
                setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(pid), 3)
                try "123".write(toFile: "/proc/\(pid)/oom_score_adj", atomically: false, encoding: .utf8)
            }
            func config(windows: Bool) throws {
                try harness.daemonConfig("""
                    [Display]
                    Source=x11
                    X11Display=\(x.display)

                    [Adopt]
                    Windows=\(windows ? "yes" : "no")
                    User=\(HeadlessSway.user)
                    BackgroundTimeSec=1

                    """)
            }
            func weighedByTheDaemon() -> Bool {
                processes.allSatisfy { pid in Self.priority(pid).map { $0.nice == 10 && $0.oom == 900 } ?? false }
            }
            func givenBack() -> Bool {
                processes.allSatisfy { pid in Self.priority(pid).map { $0.nice == 3 && $0.oom == 123 } ?? false }
            }

            try config(windows: true)
            try harness.start()
            try harness.waitUntil("the window is adopted") { try harness.list().map(\.name).contains(name) }
            try x.xdotool("windowminimize", window)
            try harness.waitForState(name, "suspended")
            try harness.waitUntil("the daemon's suspended priority is on every process") { weighedByTheDaemon() }

            // A reload that stops adopting lets it go: continued, and what it had is given back.
            try config(windows: false)
            harness.reload()
            try harness.waitUntil("the app is let go") { !(try harness.list().map(\.name).contains(name)) }
            try harness.waitUntil("nice 3 and oom_score_adj 123 are back") { givenBack() }
            for pid in processes { #expect(Kernel.state(pid) != "T") }

            // Adopted again, suspended again, then the daemon is killed: the next one gives back what it had changed.
            try config(windows: true)
            harness.reload()
            try harness.waitForState(name, "suspended")
            try harness.waitUntil("the daemon's suspended priority is on every process again") { weighedByTheDaemon() }
            try harness.crash()
            #expect(weighedByTheDaemon(), "a killed daemon gives nothing back by itself")
            try config(windows: false)
            try harness.start()
            try harness.waitUntil("the next daemon gives back nice 3 and oom_score_adj 123") { givenBack() }
            for pid in processes { #expect(Kernel.state(pid) != "T", "and continues what the killed one stopped") }
        }
    }

    @Test("a root lifecycled without [Adopt] User= adopts no root process through a window")
    func rootsWindowsAreNotAdoptedWithoutUser() throws {
        let harness = try DaemonHarness()
        let x = try XvfbOpenbox(tag: harness.tag)
        var spawned: [pid_t] = []
        defer {
            harness.stop()
            for pid in spawned {
                for child in Kernel.children(of: pid) { kill(child, SIGKILL) }
                kill(pid, SIGKILL)
                waitpid(pid, nil, 0)
            }
            x.stop()
        }
        let tag = harness.tag
        let rootClass = "RootTerm\(tag)"
        let pid = try Self.spawn(["/usr/bin/env", "DISPLAY=\(x.display)", "HOME=/", "/usr/bin/xterm", "-class", rootClass,
                                  "-T", "root-\(tag)", "-e", "sleep", "100000"])
        spawned.append(pid)
        _ = try x.waitForWindow("root-\(tag)")

        try harness.daemonConfig("""
            [Display]
            Source=x11
            X11Display=\(x.display)

            [Adopt]
            Windows=yes
            BackgroundTimeSec=1

            """)
        try harness.start()
        try harness.waitUntil("the root window is refused") { harness.log.contains("not adopting window process \(pid)") }
        #expect(harness.log.contains("is root's, and windows adopt root's processes only with [Adopt] User=root"))
        #expect(try !harness.list().map(\.name).contains(rootClass))
        #expect(Kernel.state(pid) != "T")
    }
}
