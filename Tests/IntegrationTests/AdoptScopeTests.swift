import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// `[Adopt] Scopes=yes` against the cgroup shape a user manager makes (`FakeUserSession`), with real processes of an
/// unprivileged user in real scopes: adoption, freezing (checked in cgroup.events and in the processes' CPU time in
/// /proc), the rails, and nothing left frozen after a crash, a stop or a reload that turns adoption off.
@Suite("Adopt: the desktop's scopes", .serialized)
struct AdoptScopeTests {
    static let foo = "app-gnome-org.example.Foo-1234.scope"

    func withSession(_ extra: String = "", _ body: (DaemonHarness, FakeUserSession) throws -> Void) throws {
        let harness = try DaemonHarness()
        let session = try FakeUserSession(tag: harness.tag)
        defer {
            harness.stop()
            session.stop()
        }
        try harness.daemonConfig(config(session, extra))
        try body(harness, session)
    }

    func config(_ session: FakeUserSession, _ extra: String = "") -> String {
        "[Adopt]\nScopes=yes\nAppSlice=\(session.appSlice)\nUser=\(HeadlessSway.user)\nBackgroundTimeSec=1\n\(extra)"
    }

    func adopted(_ daemon: DaemonHarness) throws -> [String: AppStatus] {
        Dictionary(uniqueKeysWithValues: try daemon.list().filter { $0.adopted != nil }.map { ($0.name, $0) })
    }

    @Test("a launcher's scope becomes the app named by its AppID: frozen after its grace time in the background, thawed when focused, forgotten when its last process exits")
    func scopeIsAdoptedFrozenAndForgotten() throws {
        try withSession { daemon, session in
            // One scope before the daemon starts (found by the first scan), one after (found through inotify).
            let fooPids = try session.unit(Self.foo, count: 2, busy: true)
            try daemon.start()
            try daemon.waitUntil("the scope is adopted") { try adopted(daemon)["org.example.Foo"] != nil }
            let foo = try daemon.status("org.example.Foo")
            #expect(foo.adopted == "scope \(Self.foo)")
            #expect(foo.protocol == "none")
            #expect(foo.state == .inactive)
            #expect(foo.cgroup == session.path(Self.foo))
            #expect(foo.suspendMethod == "freezer")
            #expect(fooPids.contains(try #require(foo.pid)))
            let status = try daemon.lifectl("status").stdout
            #expect(status.contains("adopt: scopes in \(session.mount)/\(session.appSlice), 1 adopted"), "\(status)")

            let barPids = try session.unit("app-org.example.Bar-99.scope")
            try daemon.waitUntil("the scope made later is adopted") { try adopted(daemon)["org.example.Bar"] != nil }
            #expect(try daemon.status("org.example.Bar").adopted == "scope app-org.example.Bar-99.scope")

            // In the background for its grace time: the whole scope is frozen through its own cgroup.freeze.
            try daemon.control("background", "org.example.Foo")
            try daemon.waitForState("org.example.Foo", "suspended")
            try session.wait("the scope is frozen") { session.frozen(Self.foo) }
            for pid in fooPids { #expect(FakeUserSession.idle(pid), "a frozen busy process uses no CPU") }
            #expect(!session.frozen("app-org.example.Bar-99.scope"), "another scope is left alone")

            try daemon.control("focus", "org.example.Foo")
            try daemon.waitForState("org.example.Foo", "active")
            try session.wait("the scope is thawed") { !session.frozen(Self.foo) }
            #expect(FakeUserSession.runs(fooPids[0]), "a thawed busy process runs")

            // The desktop owns its lifetime: its last process gone, the app is gone, and nothing is restarted.
            session.kill(barPids)
            try daemon.waitUntil("the app whose scope emptied is forgotten") { try adopted(daemon)["org.example.Bar"] == nil }
            #expect(daemon.log.contains("org.example.Bar: its last process exited; forgotten"))
            session.kill([fooPids[0]])
            usleep(200_000)
            #expect(try adopted(daemon)["org.example.Foo"] != nil, "one process of the scope still runs")
            session.kill([fooPids[1]])
            try daemon.waitUntil("the app is forgotten") { try adopted(daemon)["org.example.Foo"] == nil }
            #expect(daemon.isDaemonRunning)
        }
    }

    @Test("the rails: the built-in exclusions, Exclude= and another user's processes are refused and logged once")
    func railsRefuseAndLogOnce() throws {
        try withSession("Exclude=org.example.Secret\n") { daemon, session in
            try session.unit("app-gnome-mako-1.scope")
            try session.unit("app-gnome-org.example.Secret-5.scope")
            try session.unit("app-gnome-org.example.Root-6.scope", asRoot: true)
            try session.unit("app-gnome-org.example.Fine-7.scope")
            try daemon.start()
            try daemon.waitUntil("the allowed scope is adopted") { try adopted(daemon)["org.example.Fine"] != nil }
            // More events on the refused scopes: still refused, and not logged again.
            try session.unit("app-gnome-org.example.Secret-5.scope")
            try session.unit("app-gnome-org.example.Late-8.scope")
            try daemon.waitUntil("the later scope is adopted") { try adopted(daemon)["org.example.Late"] != nil }
            #expect(Set(try adopted(daemon).keys) == ["org.example.Fine", "org.example.Late"])
            let log = daemon.log
            #expect(log.contains("not adopting app-gnome-mako-1.scope: it is part of the desktop"))
            #expect(log.components(separatedBy: "not adopting app-gnome-org.example.Secret-5.scope: it is in Exclude=").count == 2)
            #expect(log.contains("not adopting app-gnome-org.example.Root-6.scope: process"))
            #expect(log.contains("belongs to another user"))
        }
    }

    @Test("kill -9 with a scope frozen, then a start: the new daemon thaws it and adopts it again")
    func crashLeavesNothingFrozen() throws {
        try withSession { daemon, session in
            let pids = try session.unit(Self.foo, busy: true)
            try daemon.start()
            try daemon.waitUntil("the scope is adopted") { try adopted(daemon)["org.example.Foo"] != nil }
            try daemon.control("background", "org.example.Foo")
            try daemon.waitForState("org.example.Foo", "suspended")
            try session.wait("the scope is frozen") { session.frozen(Self.foo) }
            try daemon.crash()
            #expect(session.frozen(Self.foo), "a crashed daemon thaws nothing itself")
            try daemon.start(keepLog: true)
            try daemon.waitUntil("the scope is adopted again") { try adopted(daemon)["org.example.Foo"]?.state == .inactive }
            try session.wait("the scope is thawed") { !session.frozen(Self.foo) }
            #expect(FakeUserSession.runs(pids[0]))
            #expect(daemon.log.contains("thawed \(session.path(Self.foo)), which a previous lifecycled left frozen"))
        }
    }

    @Test("a stop and a reload that turns adoption off thaw every adopted scope and terminate none")
    func stopAndReloadThaw() throws {
        try withSession { daemon, session in
            let pids = try session.unit(Self.foo, busy: true)
            try daemon.start()
            try daemon.waitUntil("the scope is adopted") { try adopted(daemon)["org.example.Foo"] != nil }
            try daemon.control("background", "org.example.Foo")
            try daemon.waitForState("org.example.Foo", "suspended")
            try session.wait("the scope is frozen") { session.frozen(Self.foo) }

            try daemon.daemonConfig("[Adopt]\nScopes=no\n")
            daemon.reload()
            try daemon.waitUntil("the app is let go") { try adopted(daemon).isEmpty }
            try session.wait("the scope is thawed") { !session.frozen(Self.foo) }
            #expect(FakeUserSession.runs(pids[0]))

            try daemon.daemonConfig(config(session))
            daemon.reload()
            try daemon.waitUntil("the scope is adopted again") { try adopted(daemon)["org.example.Foo"] != nil }
            try daemon.control("background", "org.example.Foo")
            try daemon.waitForState("org.example.Foo", "suspended")
            try session.wait("the scope is frozen") { session.frozen(Self.foo) }

            let daemonPID = try #require(daemon.daemonPID)
            kill(daemonPID, SIGTERM)
            try daemon.waitUntil("the daemon stops") { !daemon.isDaemonRunning }
            try session.wait("the scope is thawed") { !session.frozen(Self.foo) }
            #expect(Kernel.exists(pids[0]), "an adopted app is the desktop's: not terminated when the daemon stops")
            #expect(FakeUserSession.runs(pids[0]))
        }
    }

    @Test("an app file with AppId= and no Exec= holds the settings of an adopted app: its [Lifecycle] keys apply when it appears, and it is never launched")
    func ownFileSettingsApplyWhenAdopted() throws {
        try withSession { daemon, session in
            try daemon.app("player", "[App]\nAppId=org.example.Player\n\n[Lifecycle]\nBackgroundModes=audio\n")
            let pids = try session.unit("app-gnome-org.example.Player-3.scope", busy: true)
            try session.unit(Self.foo)
            try daemon.start()
            try daemon.waitUntil("both scopes are adopted") { try adopted(daemon).count == 2 }
            #expect(try daemon.list().count == 2, "the settings file is no app of its own")
            #expect(try daemon.status("org.example.Player").backgroundModes == ["audio"])
            try daemon.control("background", "org.example.Player")
            try daemon.control("background", "org.example.Foo")
            try daemon.waitForState("org.example.Foo", "suspended")
            usleep(1_500_000)
            #expect(try daemon.status("org.example.Player").state == .background, "BackgroundModes=audio keeps it running")
            try session.wait("the scope is thawed") { !session.frozen("app-gnome-org.example.Player-3.scope") }
            #expect(FakeUserSession.runs(pids[0]))
        }
    }

    @Test("[Adopt] ResumeEverySec= and ResumeForSec= wake a frozen adopted scope into the background for a while, then freeze it again; OnlyOnBattery= on a machine without a battery keeps it running")
    func adoptRailsApplyToAdoptedApps() throws {
        // A wake of 4 s: the state is read during it, one lifectl after the thaw is seen.
        try withSession("ResumeEverySec=2\nResumeForSec=4\n") { daemon, session in
            try session.unit(Self.foo)
            try daemon.start()
            try daemon.waitUntil("the scope is adopted") { try adopted(daemon)["org.example.Foo"] != nil }
            try daemon.control("background", "org.example.Foo")
            try session.wait("the scope is frozen") { session.frozen(Self.foo) }
            try session.wait("a wake thaws it") { !session.frozen(Self.foo) }
            #expect(try daemon.status("org.example.Foo").state == .background)
            try session.wait("the wake ends frozen again") { session.frozen(Self.foo) }
        }
        // No power supply here (a machine without a battery counts as on external power): never suspended.
        try withSession("OnlyOnBattery=yes\n") { daemon, session in
            try session.unit(Self.foo)
            try daemon.start()
            try daemon.waitUntil("the scope is adopted") { try adopted(daemon)["org.example.Foo"] != nil }
            try daemon.control("background", "org.example.Foo")
            usleep(2_000_000)
            #expect(try daemon.status("org.example.Foo").state == .background, "past its 1 s grace, on external power")
            #expect(!session.frozen(Self.foo))
        }
    }

    @Test("lifectl resume --all thaws and continues every suspended app, adopted or configured")
    func resumeAllThawsEverything() throws {
        try withSession("BackgroundTimeSec=infinity\n") { daemon, session in
            try daemon.app("sleeper", "[App]\nExec=/bin/sleep 100000\nProtocol=none\n")
            let pids = try session.unit(Self.foo, busy: true)
            try daemon.start()
            try daemon.waitUntil("the scope is adopted") { try adopted(daemon)["org.example.Foo"] != nil }
            try daemon.control("launch", "sleeper")
            try daemon.control("suspend", "org.example.Foo")
            try daemon.control("suspend", "sleeper")
            try session.wait("the scope is frozen") { session.frozen(Self.foo) }
            let sleeper = try #require(try daemon.status("sleeper").pid)
            #expect(Kernel.stops(sleeper))

            let result = try daemon.lifectl("resume", "--all")
            #expect(result.status == 0, "\(result.stderr)")
            try daemon.waitForState("org.example.Foo", "background")
            try daemon.waitForState("sleeper", "background")
            try session.wait("the scope is thawed") { !session.frozen(Self.foo) }
            #expect(FakeUserSession.runs(pids[0]))
            #expect(Kernel.state(sleeper) != "T")
            #expect(try daemon.lifectl("resume", "--all", "sleeper").status == 2, "--all takes no app")
        }
    }

    @Test("a reload that configures an app of an adopted app's name lets the adopted one go, thawed, and adds the configured one")
    func configuredNameTakesOverFromAdopted() throws {
        try withSession { daemon, session in
            let pids = try session.unit(Self.foo, busy: true)
            try daemon.start()
            try daemon.waitUntil("the scope is adopted") { try adopted(daemon)["org.example.Foo"] != nil }
            try daemon.control("suspend", "org.example.Foo")
            try session.wait("the scope is frozen") { session.frozen(Self.foo) }
            try daemon.app("org.example.Foo", "[App]\nExec=/bin/sleep 100000\nProtocol=none\n")
            daemon.reload()
            try daemon.waitUntil("the configured app replaces the adopted one") {
                (try? daemon.status("org.example.Foo"))?.adopted == nil && (try? daemon.status("org.example.Foo")) != nil
            }
            try session.wait("the scope is thawed") { !session.frozen(Self.foo) }
            #expect(try daemon.status("org.example.Foo").state == .notRunning)
            #expect(FakeUserSession.runs(pids[0]))
            #expect(daemon.isDaemonRunning)
        }
    }

    @Test("lifectl terminate of an adopted app asks each of its processes with SIGTERM: processes that lead no process group end on it, not at the SIGKILL after the stop timeout")
    func terminateReachesProcessesThatLeadNoGroup() throws {
        try withSession("BackgroundTimeSec=infinity\n") { daemon, session in
            // As a launcher that forks and exits leaves them: each process is a child whose parent is gone, in a
            // process group no process of the scope leads. The test runner blocks SIGTERM and its children
            // inherit the mask: the program unblocks it first.
            let program = ["/usr/bin/python3", "-c", """
                import os, signal, sys, time
                signal.pthread_sigmask(signal.SIG_SETMASK, [])
                while sys.argv[1] not in open("/proc/self/cgroup").read(): time.sleep(0.01)
                if os.fork(): os._exit(0)
                time.sleep(100000)
                """, Self.foo]
            let parents = try session.unit(Self.foo, count: 2, command: program)
            var pids: [pid_t] = []
            try session.wait("the forked children are the scope's processes") {
                pids = ((try? String(contentsOfFile: session.path(Self.foo) + "/cgroup.procs", encoding: .utf8)) ?? "")
                    .split(separator: "\n").compactMap { pid_t($0) }
                return pids.count == 2 && Set(pids).isDisjoint(with: parents)
            }
            for pid in pids { #expect(getpgid(pid) != pid) }
            func ended(_ pid: pid_t) -> Bool { !Kernel.exists(pid) || Kernel.state(pid) == "Z" }
            try daemon.start()
            try daemon.waitUntil("the scope is adopted") { try adopted(daemon)["org.example.Foo"] != nil }
            #expect(try daemon.lifectl("terminate", "org.example.Foo").status == 0)
            try session.wait("both processes ended") { pids.allSatisfy(ended) }
            try daemon.waitUntil("the app is forgotten") { try adopted(daemon)["org.example.Foo"] == nil }
            #expect(!daemon.log.contains("org.example.Foo: sent SIGKILL"), "\(daemon.log)")
        }
    }
}
