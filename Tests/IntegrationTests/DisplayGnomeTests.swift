import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// `[Display] Source=gnome` against the cgroup shape a user manager makes (`FakeUserSession`), with real processes
/// in real scopes. No GNOME Shell runs here: the test writes `user.xdg.inactive-since` on the scopes' cgroup
/// directories with setxattr(2) as mutter does (`-1` on focus, the monotonic time in microseconds on its loss);
/// the cgroups, the inotify events, the freezer and the processes are real.
@Suite("Display: GNOME's focus marks", .serialized)
struct DisplayGnomeTests {
    static let foo = "app-gnome-org.example.Foo-1234.scope"
    static let bar = "app-org.example.Bar-99.scope"

    /// Writes the mark with Python's os.setxattr (setxattr(2), as mutter's g_file_set_attribute does).
    static func mark(_ session: FakeUserSession, _ unit: String, _ value: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", "import os, sys; os.setxattr(sys.argv[1], 'user.xdg.inactive-since', sys.argv[2].encode())",
                             session.path(unit), value]
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw HarnessError("setxattr on \(unit) failed") }
    }

    /// Now on CLOCK_MONOTONIC in microseconds, as mutter's g_get_monotonic_time().
    static func monotonicMicroseconds() -> String {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return String(Int64(time.tv_sec) * 1_000_000 + Int64(time.tv_nsec) / 1000)
    }

    @Test("the focused scope's app is active, the one that lost the focus is inactive for the grace, then in the background and frozen; focused again, it is thawed and active")
    func focusMarksDriveTheStates() throws {
        let daemon = try DaemonHarness()
        let session = try FakeUserSession(tag: daemon.tag)
        defer {
            daemon.stop()
            session.stop()
        }
        try daemon.daemonConfig("""
            [Adopt]
            Scopes=yes
            AppSlice=\(session.appSlice)
            User=\(HeadlessSway.user)
            BackgroundTimeSec=1
            [Display]
            Source=gnome
            GnomeGraceSec=4
            """)
        let fooPids = try session.unit(Self.foo, busy: true)
        try session.unit(Self.bar)
        try daemon.start()
        try daemon.waitUntil("both scopes are adopted") {
            let names = Set(try daemon.list().filter { $0.adopted != nil }.map(\.name))
            return names.isSuperset(of: ["org.example.Foo", "org.example.Bar"])
        }
        let status = try daemon.lifectl("status").stdout
        #expect(status.contains("gnome at \(session.mount)/\(session.appSlice), connected"), "\(status)")

        // Never focused: hidden, so in the background and then suspended after its own BackgroundTimeSec.
        try daemon.waitForState("org.example.Foo", "suspended")
        try session.wait("the unfocused scope is frozen") { session.frozen(Self.foo) }

        try Self.mark(session, Self.foo, "-1")
        try daemon.waitForState("org.example.Foo", "active")
        try session.wait("the focused scope is thawed") { !session.frozen(Self.foo) }
        #expect(!FakeUserSession.idle(fooPids[0]), "a thawed busy process runs")

        // The focus moves to Bar: Foo lost it just now, so it stays visible (inactive) for the grace.
        try Self.mark(session, Self.foo, Self.monotonicMicroseconds())
        try Self.mark(session, Self.bar, "-1")
        try daemon.waitForState("org.example.Bar", "active")
        #expect(try daemon.status("org.example.Foo").state == .inactive)
        // After the grace, with no other event: the timer hides it, and its BackgroundTimeSec freezes it.
        try daemon.waitForState("org.example.Foo", "suspended")
        try session.wait("the scope that lost the focus is frozen") { session.frozen(Self.foo) }
        #expect(!session.frozen(Self.bar), "the focused scope runs")

        try Self.mark(session, Self.bar, Self.monotonicMicroseconds())
        try Self.mark(session, Self.foo, "-1")
        try daemon.waitForState("org.example.Foo", "active")
        try session.wait("focused again, the scope is thawed") { !session.frozen(Self.foo) }

        // lifectl's verbs go the usual way: GNOME takes no request without an extension.
        try daemon.control("background", "org.example.Foo")
        try daemon.waitForState("org.example.Foo", "background")
        #expect(daemon.isDaemonRunning)
    }

    @Test("garbage in the attribute counts as never focused and is logged once; a missing slice is logged and leaves focus to lifectl")
    func garbageAndMissingSlice() throws {
        let daemon = try DaemonHarness()
        let session = try FakeUserSession(tag: daemon.tag)
        defer {
            daemon.stop()
            session.stop()
        }
        try daemon.daemonConfig("""
            [Adopt]
            Scopes=yes
            AppSlice=\(session.appSlice)
            User=\(HeadlessSway.user)
            BackgroundTimeSec=1
            [Display]
            Source=gnome
            """)
        try session.unit(Self.foo)
        try Self.mark(session, Self.foo, "-1")
        try daemon.start()
        try daemon.waitForState("org.example.Foo", "active")
        try Self.mark(session, Self.foo, "not a time")
        try daemon.waitForState("org.example.Foo", "suspended")
        try Self.mark(session, Self.foo, "garbage again")
        try Self.mark(session, Self.foo, "-1")
        try daemon.waitForState("org.example.Foo", "active")
        #expect(daemon.log.components(separatedBy: "lifecycled cannot read").count == 2, "logged once: \(daemon.log)")
        daemon.stop()

        let missing = try DaemonHarness()
        defer { missing.stop() }
        try missing.daemonConfig("[Adopt]\nAppSlice=lifecycled-it-\(missing.tag)-none.slice/app.slice\n[Display]\nSource=gnome\n")
        try missing.start()
        try missing.waitUntil("the missing slice is logged") { missing.log.contains("cannot be watched") }
        let status = try missing.lifectl("status").stdout
        #expect(status.contains("gnome (no app slice to follow"), "\(status)")
    }

    @Test("Source=auto follows GNOME's marks when the app slice's units carry them, and nothing when none does")
    func autoPicksGnomeWhenTheMarksAreInUse() throws {
        // No sway socket and no X display in the daemon's environment, so only the marks can decide.
        let noDisplay = ["SWAYSOCK": "", "DISPLAY": ""]
        let config = { (session: FakeUserSession) in
            "[Adopt]\nScopes=yes\nAppSlice=\(session.appSlice)\nUser=\(HeadlessSway.user)\n[Display]\nSource=auto\n"
        }
        let unmarked = try DaemonHarness()
        let plain = try FakeUserSession(tag: unmarked.tag)
        try plain.unit(Self.foo)
        try unmarked.daemonConfig(config(plain))
        try unmarked.start(extraEnvironment: noDisplay)
        try unmarked.waitUntil("auto finds nothing to follow") {
            unmarked.log.contains("display: Source=auto found no display server")
        }
        #expect(try unmarked.lifectl("status").stdout.contains("none (focus follows lifectl alone)"))
        unmarked.stop()
        plain.stop()

        let daemon = try DaemonHarness()
        let session = try FakeUserSession(tag: daemon.tag)
        defer {
            daemon.stop()
            session.stop()
        }
        try session.unit(Self.foo)
        try session.unit(Self.bar)
        try Self.mark(session, Self.foo, "-1")
        try daemon.daemonConfig(config(session))
        try daemon.start(extraEnvironment: noDisplay)
        try daemon.waitForState("org.example.Foo", "active")
        let status = try daemon.lifectl("status").stdout
        #expect(status.contains("gnome (auto) at \(session.mount)/\(session.appSlice), connected"), "\(status)")
        #expect(daemon.log.contains("display: following GNOME's focus marks"), "\(daemon.log)")
    }
}
