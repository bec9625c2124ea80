import Foundation
import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// The pure readings behind adoption: `[Adopt]`, launcher unit names, where the app slice is, the rails and the
/// record a crashed daemon leaves.
@Suite struct AdoptParsingTests {
    @Test func everyAdoptKeyIsParsed() {
        let text = """
            [Adopt]
            Scopes=yes
            Windows=on
            ScopeTrees=yes
            User=alice
            AppSlice=/user.slice/user-1000.slice/user@1000.service/app.slice/
            Exclude=org.example.Chat "My Player"
            BackgroundTimeSec=45s
            """
        let (daemon, diagnostics) = ConfigLoader.parseDaemon(text: text, file: "lifecycled.conf")
        #expect(diagnostics == [])
        #expect(daemon.adopt.scopes && daemon.adopt.windows && daemon.adopt.scopeTrees)
        #expect(daemon.adopt.user == "alice")
        #expect(daemon.adopt.appSlice == "user.slice/user-1000.slice/user@1000.service/app.slice")
        #expect(daemon.adopt.exclude == ["org.example.Chat", "My Player"])
        #expect(daemon.adopt.backgroundTime == .seconds(45))
    }

    @Test func adoptionIsOffByDefaultWithAThirtySecondGrace() {
        let (daemon, _) = ConfigLoader.parseDaemon(text: "", file: "lifecycled.conf")
        #expect(!daemon.adopt.enabled && !daemon.adopt.scopeTrees)
        #expect(daemon.adopt.backgroundTime == .seconds(30))
    }

    @Test func adoptReclaimKeysAreParsed() {
        let (daemon, diagnostics) = ConfigLoader.parseDaemon(text: "[Adopt]\nReclaim=no\nReclaimAfterSec=90s\n",
                                                             file: "lifecycled.conf")
        #expect(diagnostics == [])
        #expect(!daemon.adopt.reclaim)
        #expect(daemon.adopt.reclaimAfter == .seconds(90))
        let (defaults, _) = ConfigLoader.parseDaemon(text: "", file: "lifecycled.conf")
        #expect(defaults.adopt.reclaim == AppPolicy().reclaim)
        #expect(defaults.adopt.reclaimAfter == AppPolicy().reclaimAfter)
    }

    @Test func aSlicePathThatClimbsOutIsAnError() {
        let (daemon, diagnostics) = ConfigLoader.parseDaemon(text: "[Adopt]\nAppSlice=../etc\n", file: "lifecycled.conf")
        #expect(daemon.adopt.appSlice == nil)
        #expect(diagnostics.count == 1)
    }

    @Test func anAppFileWithAppIdAndNoExecHoldsAdoptedSettings() throws {
        let directory = "/tmp/lifecycled-adopt-config-\(getpid())"
        defer { _ = try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory + "/apps", withIntermediateDirectories: true)
        try "[Adopt]\nScopes=yes\nBackgroundTimeSec=45\n".write(toFile: directory + "/lifecycled.conf", atomically: true, encoding: .utf8)
        try "[App]\nAppId=org.example.Player\n\n[Lifecycle]\nBackgroundModes=audio\n"
            .write(toFile: directory + "/apps/player.conf", atomically: true, encoding: .utf8)
        try "[App]\nDescription=nothing to run\n".write(toFile: directory + "/apps/broken.conf", atomically: true, encoding: .utf8)
        let loaded = ConfigLoader.load(directory: directory)
        #expect(loaded.apps.isEmpty)
        let player = try #require(loaded.adoptSettings["org.example.Player"])
        #expect(player.policy.backgroundModes == ["audio"])
        #expect(player.policy.backgroundTime == .seconds(45), "unset keys come from [Adopt] first")
        #expect(loaded.diagnostics.map(\.message).contains { $0.contains("no valid Exec=") }, "a file with neither stays an error")
    }

    @Test func aUsersDaemonReadsItsXDGConfigDirectory() {
        let env = ["HOME": "/home/alice"]
        #expect(ConfigDirectory.path(uid: 0, environment: env, exists: { _ in true }) == "/etc/lifecycled")
        #expect(ConfigDirectory.path(uid: 1000, environment: env, exists: { _ in true }) == "/home/alice/.config/lifecycled")
        #expect(ConfigDirectory.path(uid: 1000, environment: env, exists: { $0 == "/etc/xdg/lifecycled" }) == "/etc/xdg/lifecycled")
        #expect(ConfigDirectory.path(uid: 1000, environment: env, exists: { _ in false }) == "/home/alice/.config/lifecycled")
        #expect(ConfigDirectory.path(uid: 1000, environment: ["HOME": "/home/alice", "XDG_CONFIG_HOME": "/cfg"], exists: { _ in true })
                == "/cfg/lifecycled")
        #expect(ConfigDirectory.path(uid: 1000, environment: ["XDG_CONFIG_DIRS": "/opt/xdg:/etc/xdg"], exists: { $0 == "/etc/xdg/lifecycled" })
                == "/etc/xdg/lifecycled")
    }

    @Test func launcherUnitsNameTheirApp() {
        #expect(LauncherUnit(unit: "app-gnome-org.example.Foo-1234.scope")?.appID == "org.example.Foo")
        #expect(LauncherUnit(unit: "app-gnome-org.example.Foo-1234.scope")?.launcher == "gnome")
        #expect(LauncherUnit(unit: "app-org.kde.konsole-5678.scope")?.appID == "org.kde.konsole")
        #expect(LauncherUnit(unit: "app-org.kde.konsole-5678.scope")?.launcher == nil)
        #expect(LauncherUnit(unit: "app-gnome-firefox\\x2desr-99.scope")?.appID == "firefox-esr")
        #expect(LauncherUnit(unit: "app-flatpak-org.gnome.Maps@12ab.service")?.appID == "org.gnome.Maps")
        #expect(LauncherUnit(unit: "app-dbus\\x2d:1.2\\x2dorg.example.Svc.service")?.appID != nil)
        #expect(LauncherUnit(unit: "session-2.scope") == nil)
        #expect(LauncherUnit(unit: "app-.scope") == nil)
        #expect(LauncherUnit(unit: "app-gnome-x-.scope") == nil)
        #expect(LauncherUnit(unit: "app-foo.slice") == nil)
    }

    @Test func theCgroup2MountIsFoundOnHybridAndUnifiedHosts() {
        let hybrid = """
            31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
            32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
            41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
            """
        #expect(AppSlice.unifiedMount(mountinfo: hybrid) == "/sys/fs/cgroup/unified")
        let unified = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
        #expect(AppSlice.unifiedMount(mountinfo: unified) == "/sys/fs/cgroup")
        #expect(AppSlice.unifiedMount(mountinfo: "1 0 0:1 / /my\\040cg rw - cgroup2 none rw") == "/my cg")
        #expect(AppSlice.unifiedMount(mountinfo: hybrid.replacingLast("cgroup2 cgroup2", "tmpfs tmpfs")) == nil)
    }

    @Test func theSliceComesFromAppSliceThenUserThenTheDaemonsOwnCgroup() throws {
        let mountinfo = "41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw"
        let own = "1:cpu:/\n0::/user.slice/user-1000.slice/user@1000.service/app.slice/lifecycled.service\n"
        var config = AdoptConfig()
        let fromOwn = try AppSlice.find(config, mountinfo: mountinfo, ownCgroup: own, uid: { _ in nil })
        #expect(fromOwn.path == "/sys/fs/cgroup/unified/user.slice/user-1000.slice/user@1000.service/app.slice")
        config.user = "alice"
        let fromUser = try AppSlice.find(config, mountinfo: mountinfo, ownCgroup: "0::/system.slice/x.service\n",
                                         uid: { $0 == "alice" ? 1001 : nil })
        #expect(fromUser.path == "/sys/fs/cgroup/unified/user.slice/user-1001.slice/user@1001.service/app.slice")
        config.appSlice = "test.slice/app.slice"
        #expect(try AppSlice.find(config, mountinfo: mountinfo, ownCgroup: own, uid: { _ in nil }).path
                == "/sys/fs/cgroup/unified/test.slice/app.slice")
        #expect(throws: AdoptFailure.self) {
            try AppSlice.find(AdoptConfig(), mountinfo: mountinfo, ownCgroup: "0::/system.slice/x.service\n", uid: { _ in nil })
        }
        #expect(throws: AdoptFailure.self) { try AppSlice.find(AdoptConfig(), mountinfo: "", ownCgroup: own, uid: { _ in nil }) }
    }

    @Test func theRailsRefuseTheDesktopOtherUsersAndTheDaemonsOwnLine() {
        let rails = AdoptRails(uid: 1000, configured: ["org.example.Chat"], protected: [1, 50])
        #expect(rails.excluded(appID: "org.example.Editor") == nil)
        #expect(rails.excluded(appID: "ORG.EXAMPLE.CHAT") != nil)
        #expect(rails.excluded(appID: "mako") != nil)
        #expect(rails.excluded(appID: "x", unit: "pipewire") != nil)
        #expect(rails.refuses([200, 201], uidOf: { _ in 1000 }) == nil)
        #expect(rails.refuses([200, 50], uidOf: { _ in 1000 }) != nil)
        #expect(rails.refuses([200, 201], uidOf: { $0 == 201 ? 0 : 1000 }) != nil)
        #expect(AdoptRails.underSessionSlice("/sys/fs/cgroup/user.slice/user@1000.service/session.slice/org.gnome.Shell.service"))
        #expect(!AdoptRails.underSessionSlice("/sys/fs/cgroup/user.slice/user@1000.service/app.slice/app-x-1.scope"))
    }

    @Test func theProcessTreeGivesDescendantsAndAncestors() {
        let tree = ProcessTree(parents: [1: 0, 10: 1, 11: 10, 12: 11, 13: 10, 20: 1])
        #expect(tree.subtree(of: 10) == [10, 11, 12, 13])
        #expect(tree.ancestors(of: 12) == [11, 10, 1])
        #expect(tree.subtree(of: 99) == [])
        let live = ProcessTree.read()
        #expect(live.ancestors(of: getpid()).contains(1) || live.ancestors(of: getpid()).isEmpty == false)
    }

    @Test func theLedgerReadsWhatItWrites() {
        let text = "scope /sys/fs/cgroup/unified/a/app-x-1.scope\npid 42 123456\nnonsense\npid x 1\n"
        let entries = AdoptionLedger.parse(text.split(separator: "\n"))
        #expect(entries == [.scope("/sys/fs/cgroup/unified/a/app-x-1.scope"), .process(RecordedProcess(pid: 42, startTime: 123456))])
        let tree = AdoptionLedger.Entry.processScope(RecordedProcess(pid: 7, startTime: 99),
                                                     scope: "/sys/fs/cgroup/u/lifecycled.slice/lifecycled-adopted-a\\x2db-7.scope")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        AdoptionLedger(stateDirectory: dir).write([tree, .process(RecordedProcess(pid: 8, startTime: 1))])
        let written = (try? String(contentsOfFile: dir + "/adopted", encoding: .utf8)) ?? ""
        #expect(AdoptionLedger.parse(written.split(separator: "\n")) == [tree, .process(RecordedProcess(pid: 8, startTime: 1))])
        #expect(tree.pid == 7 && tree.scopePath?.hasSuffix("a\\x2db-7.scope") == true)
        #expect(AdoptionLedger.parse("treescope 7 99\ntreescope x 1 /a\n".split(separator: "\n")) == [])
    }

    /// The stop ledger appends a switch's lines rather than writing every app's again, and a later daemon reads
    /// the lines in order: after many stops and continues of one app, the file stays small, and what a new daemon
    /// continues is exactly the processes still recorded as stopped. Real processes (`sleep`) stopped with
    /// SIGSTOP, a real file.
    @Test func theStopLedgerAppendsEachChangeAndANewDaemonContinuesWhatHolds() throws {
        let directory = NSTemporaryDirectory() + "stop-ledger-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var sleepers: [Process] = []
        for _ in 0..<3 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sleep")
            process.arguments = ["300"]
            try process.run()
            sleepers.append(process)
        }
        defer { for process in sleepers { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() } }
        let (front, kept, other) = (sleepers[0].processIdentifier, sleepers[1].processIdentifier, sleepers[2].processIdentifier)
        func state(_ pid: pid_t) -> Character? { ProcessTable.state(of: pid) }
        func waitFor(_ pid: pid_t, _ wanted: Character) -> Bool {
            for _ in 0..<500 where state(pid) != wanted { usleep(2_000) }
            return state(pid) == wanted
        }

        let ledger = StopLedger(stateDirectory: directory)
        ledger.record("kept", pids: [kept])
        kill(kept, SIGSTOP)
        ledger.record("other", pids: [other])
        kill(other, SIGSTOP)
        func inode() -> ino_t {
            var status = stat()
            return stat(directory + "/stopped", &status) == 0 ? status.st_ino : 0
        }
        let before = inode()
        ledger.record("front", pids: [front])
        kill(front, SIGSTOP)
        ledger.continueAll(of: "front")
        #expect(before != 0 && inode() == before, "one app's stop and continue are appended: the others' lines are not written again")
        for _ in 0..<200 {
            ledger.record("front", pids: [front])
            kill(front, SIGSTOP)
            ledger.continueAll(of: "front")
        }
        ledger.continueAll(of: "other")
        #expect(waitFor(kept, "T") && waitFor(other, "S") && waitFor(front, "S"))
        let lines = try String(contentsOfFile: directory + "/stopped", encoding: .utf8).split(separator: "\n")
        #expect(lines.count <= 2 * 1 + 64 + 2, "appended and compacted: \(lines.count) lines for one stopped process")
        #expect(StopLedger.parse(lines).map(\.process.pid) == [kept])

        // The daemon is gone (as after a crash); the next one continues what the lines still hold.
        let next = StopLedger(stateDirectory: directory)
        next.continueLeftovers()
        #expect(waitFor(kept, "S"), "the process left stopped is continued")
        #expect(!FileManager.default.fileExists(atPath: directory + "/stopped"))
        #expect(StopLedger.parse(["a 10 1", "b 11 1", "a -", "a 12 1", "c -"]).map(\.process.pid) == [11, 12])
    }

    /// A recorded process is continued only while its pid still has the start time written down: one whose pid
    /// now names another process (recorded here with a start time it never had) stays as it is, while the others
    /// of the same app are continued and reported as having been stopped. Real processes (`sleep`), SIGSTOP.
    @Test func theStopLedgerContinuesOnlyTheProcessesItRecorded() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        let first = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "300"]))
        let second = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "300"]))
        let stranger = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "300"]))
        for pid in [first, second, stranger] { kill(pid, SIGSTOP) }
        #expect(eventually { [first, second, stranger].allSatisfy { ProcessTable.state(of: $0) == "T" } })
        let started = try #require(ProcessTable.startTime(of: stranger))
        let recorded = try [first, second].map { pid in try #require(RecordedProcess(running: pid)) }
        let entries = recorded.map { StopLedger.Entry(app: "a", process: $0) }
            + [StopLedger.Entry(app: "a", process: RecordedProcess(pid: stranger, startTime: started + 1))]

        let continued = StopLedger.continueEach(entries, procRoot: "/proc")
        #expect(continued == [first, second])
        #expect(eventually { ProcessTable.state(of: first) == "S" && ProcessTable.state(of: second) == "S" })
        usleep(50_000)
        #expect(ProcessTable.state(of: stranger) == "T", "a pid whose start time differs is not signalled")
        kill(stranger, SIGCONT)
    }

    /// The record files of a crashed daemon (stopped processes, original priorities): each write is the whole file,
    /// an empty record removes it, and each ledger reads back the lines it wrote. Real files in a temporary directory.
    @Test func recordFilesHoldTheirLinesAndGoWhenEmpty() throws {
        let directory = NSTemporaryDirectory() + "record-file-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/stopped"
        let file = RecordFile(path, loss: "nothing, in a test")
        file.write(["notes 42 123", "mail 43 456", "broken x 1"])
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "notes 42 123\nmail 43 456\nbroken x 1\n")
        #expect(StopLedger.parse(file.read()) == [StopLedger.Entry(app: "notes", process: RecordedProcess(pid: 42, startTime: 123)),
                                                  StopLedger.Entry(app: "mail", process: RecordedProcess(pid: 43, startTime: 456))])
        let priorities = [OriginalPriorities.Process(process: RecordedProcess(pid: 42, startTime: 123), nice: 5, oomScoreAdj: -100)]
        let weights = ["/sys/fs/cgroup/a b/cpu.weight": "100"]
        file.write(OriginalPriorities.lines(priorities, weights))
        let parsed = OriginalPriorities.parse(file.read())
        #expect(parsed.processes == priorities && parsed.files == weights)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["stopped"], "no temporary left")
        file.write([])
        #expect(!FileManager.default.fileExists(atPath: path), "nothing recorded: no file")
        #expect(file.read().isEmpty)
    }

    @Test func aRecordedProcessIsRunningOnlyWithItsOwnStartTime() throws {
        let me = try #require(RecordedProcess(running: getpid()))
        #expect(me.isRunning())
        #expect(!RecordedProcess(pid: getpid(), startTime: me.startTime + 1).isRunning(), "a pid reused by another process")
        #expect(RecordedProcess(Substring("0"), Substring("1")) == nil)
    }
}

private extension String {
    func replacingLast(_ old: String, _ new: String) -> String {
        guard let range = self.range(of: old, options: .backwards) else { return self }
        return replacingCharacters(in: range, with: new)
    }
}
