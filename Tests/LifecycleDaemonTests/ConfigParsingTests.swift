import LifecycleModel
import Testing
@testable import LifecycleDaemon

private func parseApp(_ text: String, name: String = "notes", defaults: AppDefaults = AppDefaults())
    -> (AppConfig?, [ConfigDiagnostic]) {
    ConfigLoader.parseApp(name: name, text: text, file: "apps/\(name).conf", defaults: defaults)
}

@Suite struct ConfigAppParsingTests {
    @Test func everyKeyIsParsed() throws {
        let text = """
            # The notes app.
            [App]
            Description=Notes, the example app
            Exec=/usr/bin/notes --data "/var/lib/my notes"
            WorkingDirectory=/var/lib/notes
            Environment=LANG=C.UTF-8 "GREETING=hello world"
            User=notes
            Group=1000
            Restart=on-failure
            RestartSec=250ms
            RestartMaxDelaySec=1min
            StartLimitBurst=3
            StartLimitIntervalSec=30s
            Protocol=none
            AutoLaunch=background

            [Lifecycle]
            BackgroundTimeSec=infinity
            SuspendMethod=freezer
            LaunchTimeoutSec=40
            AckTimeoutSec=2.5
            TimeoutStopSec=1min 30s
            """
        let (app, diagnostics) = parseApp(text)

        #expect(diagnostics == [])
        var policy = AppPolicy()
        policy.speaksProtocol = false
        policy.backgroundTime = nil
        policy.launchTimeout = .seconds(40)
        policy.ackTimeout = .milliseconds(2500)
        policy.stopTimeout = .seconds(90)
        policy.restart = .onFailure
        policy.restartDelay = .milliseconds(250)
        policy.restartMaxDelay = .seconds(60)
        policy.startLimitBurst = 3
        policy.startLimitInterval = .seconds(30)
        #expect(app == AppConfig(
            name: "notes", exec: ["/usr/bin/notes", "--data", "/var/lib/my notes"],
            description: "Notes, the example app", workingDirectory: "/var/lib/notes",
            environment: ["LANG=C.UTF-8", "GREETING=hello world"], user: "notes", group: "1000",
            autoLaunch: .background, suspendMethod: .freezer, policy: policy))
    }

    @Test func keysNotSetTakeTheModelDefaults() throws {
        let (app, diagnostics) = parseApp("[App]\nExec=notes\n")

        #expect(diagnostics == [])
        let loaded = try #require(app)
        #expect(loaded == AppConfig(name: "notes", exec: ["notes"]))
        #expect(loaded.policy == AppPolicy())
        #expect(loaded.autoLaunch == .no)
        #expect(loaded.suspendMethod == .signal)
        #expect(loaded.policy.speaksProtocol)
    }

    @Test func defaultsSectionValuesPropagateAndAppKeysOverrideThem() throws {
        var defaults = AppDefaults()
        defaults.policy.backgroundTime = .seconds(30)
        defaults.policy.restart = .always
        defaults.policy.ackTimeout = .seconds(1)
        defaults.suspendMethod = .freezer
        let text = """
            [App]
            Exec=notes
            Restart=no
            [Lifecycle]
            BackgroundTimeSec=3
            """

        let (app, _) = parseApp(text, defaults: defaults)

        let loaded = try #require(app)
        #expect(loaded.policy.restart == .no)
        #expect(loaded.policy.backgroundTime == .seconds(3))
        #expect(loaded.policy.ackTimeout == .seconds(1))
        #expect(loaded.suspendMethod == .freezer)
    }

    @Test func lastAssignmentWinsForOrdinaryKeys() throws {
        let (app, _) = parseApp("[App]\nExec=first\nExec=second --flag\nUser=a\nUser=b\n")

        #expect(app?.exec == ["second", "--flag"])
        #expect(app?.user == "b")
    }

    @Test func environmentAccumulatesAndLaterAssignmentsOfAKeyWin() throws {
        let text = """
            [App]
            Exec=notes
            Environment=A=1 B=2
            Environment=C=3
            Environment=A=one "D=with space" B=
            """

        let (app, diagnostics) = parseApp(text)

        #expect(diagnostics == [])
        #expect(app?.environment == ["A=one", "B=", "C=3", "D=with space"])
    }

    @Test func emptyAssignmentResetsToTheDefault() throws {
        var defaults = AppDefaults()
        defaults.policy.restartDelay = .seconds(2)
        let text = """
            [App]
            Exec=notes
            Environment=A=1
            Environment=
            Environment=B=2
            RestartSec=5
            RestartSec=
            Description=x
            Description=
            """

        let (app, diagnostics) = parseApp(text, defaults: defaults)

        #expect(diagnostics == [])
        #expect(app?.environment == ["B=2"])
        #expect(app?.policy.restartDelay == .seconds(2))
        #expect(app?.description == nil)
    }

    @Test func invalidValueIsReportedAndTheDefaultStays() throws {
        let text = """
            [App]
            Exec=notes

            [Lifecycle]
            # Grace time.

            BackgroundTimeSec=tenn
            LaunchTimeoutSec=infinity
            """

        let (app, diagnostics) = parseApp(text)

        #expect(app?.policy.backgroundTime == .seconds(10))
        #expect(app?.policy.launchTimeout == .seconds(20))
        #expect(diagnostics.map(\.description) == [
            "apps/notes.conf:7: BackgroundTimeSec=: invalid duration 'tenn' (expected e.g. 10, 500ms, 1min 30s, infinity), using 10s",
            "apps/notes.conf:8: LaunchTimeoutSec=: infinity is not allowed here (expected e.g. 10, 500ms, 1min 30s), using 20s",
        ])
        #expect(diagnostics.allSatisfy { $0.severity == .error })
        #expect(diagnostics.first?.key == "BackgroundTimeSec")
        #expect(diagnostics.first?.line == 7)
    }

    @Test func invalidValueKeepsTheEarlierValue() throws {
        let (app, diagnostics) = parseApp("[App]\nExec=notes\nRestart=always\nRestart=sometimes\n")

        #expect(app?.policy.restart == .always)
        #expect(diagnostics.map(\.description) == [
            "apps/notes.conf:4: Restart=: invalid value 'sometimes' (expected no, on-failure or always), using always",
        ])
    }

    @Test func everyEnumeratedKeyRejectsOtherWords() throws {
        let text = """
            [App]
            Exec=notes
            Protocol=grpc
            AutoLaunch=true
            StartLimitBurst=-1
            WorkingDirectory=relative/dir
            User=two words
            Group=4294967295
            Environment=NOEQUALS
            Environment=1X=digit
            [Lifecycle]
            SuspendMethod=SIGSTOP
            """

        let (app, diagnostics) = parseApp(text)

        let loaded = try #require(app)
        #expect(loaded == AppConfig(name: "notes", exec: ["notes"]))
        #expect(diagnostics.map(\.key) == [
            "Protocol", "AutoLaunch", "StartLimitBurst", "WorkingDirectory", "User", "Group", "Environment", "Environment",
            "SuspendMethod",
        ])
        #expect(diagnostics.map(\.line) == [3, 4, 5, 6, 7, 8, 9, 10, 12])
        #expect(diagnostics.allSatisfy { $0.severity == .error })
        #expect(diagnostics[0].message == "invalid value 'grpc' (expected lifecycle or none), using lifecycle")
        #expect(diagnostics[3].message == "'relative/dir' is not an absolute path, ignoring")
    }

    @Test func execQuotingErrorIsReportedAndAnEarlierExecStays() throws {
        let (app, diagnostics) = parseApp("[App]\nExec=notes --ok\nExec=notes \"--broken\n")

        #expect(app?.exec == ["notes", "--ok"])
        #expect(diagnostics.map(\.description) == [#"apps/notes.conf:3: Exec=: unterminated " quote, ignoring"#])
    }

    @Test func appWithoutValidExecIsNotLoaded() throws {
        let (missing, missingDiagnostics) = parseApp("[App]\nDescription=nothing to run\n")
        let (broken, brokenDiagnostics) = parseApp("[App]\nExec='unterminated\n")
        let (empty, _) = parseApp("[App]\nExec=\"\" arg\n")

        #expect(missing == nil)
        #expect(missingDiagnostics.map(\.description) == ["apps/notes.conf: no valid Exec= in [App], app 'notes' not loaded"])
        #expect(broken == nil)
        #expect(brokenDiagnostics.count == 2)
        #expect(brokenDiagnostics.allSatisfy { $0.severity == .error })
        #expect(empty == nil)
    }

    @Test func unknownSectionAndKeyAreWarningsAndIgnored() throws {
        let text = """
            [App]
            Exec=notes
            Colour=blue
            exec=other
            [Lifecycle]
            Restart=always
            [Service]
            ExecStart=/bin/false
            """

        let (app, diagnostics) = parseApp(text)

        #expect(app == AppConfig(name: "notes", exec: ["notes"]))
        #expect(diagnostics.map(\.severity) == [.warning, .warning, .warning, .warning])
        #expect(diagnostics.map(\.description) == [
            "apps/notes.conf:3: Colour=: unknown key in [App], ignoring",
            "apps/notes.conf:4: exec=: unknown key in [App] (did you mean Exec=?), ignoring",
            "apps/notes.conf:6: Restart=: unknown key in [Lifecycle] (Restart= belongs in [App]), ignoring",
            "apps/notes.conf:7: unknown section [Service], ignoring it and the keys under it (known: [App], [Lifecycle], [Scenes])",
        ])
    }

    @Test func badLineIsReportedAndTheRestOfTheFileLoads() throws {
        let text = """
            [App]
            Exec=notes
            this line is nonsense
            =value without key
            [Lifecycle
            BackgroundTimeSec=1
            [Lifecycle]
            AckTimeoutSec=1
            """

        let (app, diagnostics) = parseApp(text)

        #expect(app?.policy.ackTimeout == .seconds(1))
        #expect(app?.policy.backgroundTime == .seconds(10), "keys under a malformed header are skipped")
        #expect(diagnostics.map(\.line) == [3, 4, 5])
        #expect(diagnostics.allSatisfy { $0.severity == .error && $0.key == nil })
        #expect(diagnostics[0].description
            == "apps/notes.conf:3: 'this line is nonsense' is not a [Section], a Key=value or a comment, ignoring line")
    }

    @Test func assignmentBeforeAnySectionIsAWarning() {
        let (app, diagnostics) = parseApp("Exec=notes\n")

        #expect(app == nil)
        #expect(diagnostics.first?.description == "apps/notes.conf:1: Exec=: assignment outside of any section, ignoring")
        #expect(diagnostics.first?.severity == .warning)
    }

    @Test func invalidAppNameIsRejected() {
        let (app, diagnostics) = parseApp("[App]\nExec=notes\n", name: "-notes")

        #expect(app == nil)
        #expect(diagnostics.map(\.severity) == [.error])
    }

    @Test(arguments: ["n", "Notes", "0day", "my-app_2.beta", String(repeating: "a", count: 64)])
    func validAppNamesAreAccepted(name: String) {
        #expect(ConfigLoader.isValidAppName(name))
    }

    @Test(arguments: ["", "-x", "_x", ".x", "a b", "a/b", "é", String(repeating: "a", count: 65)])
    func invalidAppNamesAreRejected(name: String) {
        #expect(!ConfigLoader.isValidAppName(name))
    }
}

@Suite struct ConfigDaemonParsingTests {
    @Test func emptyFileGivesAllDefaults() {
        let (daemon, diagnostics) = ConfigLoader.parseDaemon(text: "", file: "lifecycled.conf")

        #expect(daemon == DaemonConfig())
        #expect(daemon.defaults == AppDefaults(policy: AppPolicy(), suspendMethod: .signal))
        #expect(diagnostics == [])
    }

    @Test func everyDefaultsKeyIsParsed() {
        let text = """
            [Defaults]
            Restart=always
            RestartSec=1
            RestartMaxDelaySec=2min
            StartLimitBurst=0
            StartLimitIntervalSec=1h
            BackgroundTimeSec=5
            SuspendMethod=freezer
            LaunchTimeoutSec=60
            AckTimeoutSec=500ms
            TimeoutStopSec=3
            """

        let (daemon, diagnostics) = ConfigLoader.parseDaemon(text: text, file: "lifecycled.conf")

        #expect(diagnostics == [])
        var policy = AppPolicy()
        policy.restart = .always
        policy.restartDelay = .seconds(1)
        policy.restartMaxDelay = .seconds(120)
        policy.startLimitBurst = 0
        policy.startLimitInterval = .seconds(3600)
        policy.backgroundTime = .seconds(5)
        policy.launchTimeout = .seconds(60)
        policy.ackTimeout = .milliseconds(500)
        policy.stopTimeout = .seconds(3)
        #expect(daemon.defaults == AppDefaults(policy: policy, suspendMethod: .freezer))
    }

    @Test func reclaimKeysAreParsedInDefaultsAndAnAppOverridesThem() throws {
        let (daemon, diagnostics) = ConfigLoader.parseDaemon(text: "[Defaults]\nReclaim=no\nReclaimAfterSec=2min\n",
                                                             file: "lifecycled.conf")
        #expect(diagnostics == [])
        #expect(!daemon.defaults.policy.reclaim)
        #expect(daemon.defaults.policy.reclaimAfter == .seconds(120))

        let (app, appDiagnostics) = parseApp("[App]\nExec=notes\n[Lifecycle]\nReclaim=yes\nReclaimAfterSec=0\n",
                                             defaults: daemon.defaults)
        #expect(appDiagnostics == [])
        #expect(app?.policy.reclaim == true)
        #expect(app?.policy.reclaimAfter == .zero, "0: at the suspension, as iOS compresses a suspended app at once")
    }

    @Test func reclaimAfterSecTakesNoInfinityAndKeepsItsValue() throws {
        let (app, diagnostics) = parseApp("[App]\nExec=notes\n[Lifecycle]\nReclaimAfterSec=infinity\nReclaim=maybe\n")
        #expect(diagnostics.map(\.severity) == [.error, .error])
        #expect(app?.policy.reclaimAfter == AppPolicy().reclaimAfter)
        #expect(app?.policy.reclaim == AppPolicy().reclaim)
    }

    @Test func appOnlyKeysAreUnknownInDefaults() {
        let (daemon, diagnostics) = ConfigLoader.parseDaemon(
            text: "[Defaults]\nExec=/bin/true\nProtocol=none\n[App]\nAutoLaunch=yes\n", file: "lifecycled.conf")

        #expect(daemon == DaemonConfig())
        #expect(diagnostics.map(\.severity) == [.warning, .warning, .warning])
        #expect(diagnostics.map(\.line) == [2, 3, 4])
    }
}

@Suite struct ConfigKeyFileTests {
    @Test func commentsBlankLinesAndWhitespaceAreIgnored() {
        let text = "\u{FEFF}# comment\n; another\n\n  [App]  \r\n  Exec  =  notes  --x  \r\n"

        let (app, diagnostics) = parseApp(text)

        #expect(diagnostics == [])
        #expect(app?.exec == ["notes", "--x"])
    }

    @Test func trailingBackslashContinuesTheLine() throws {
        let text = """
            [App]
            Exec=notes \\
              --sync \\
            # comment lines inside a continuation are skipped
              --verbose
            Description=two \\\\
            User=me
            """

        let (app, diagnostics) = parseApp(text)

        #expect(diagnostics == [])
        #expect(app?.exec == ["notes", "--sync", "--verbose"])
        #expect(app?.description == #"two \\"#, "an escaped backslash does not continue")
        #expect(app?.user == "me")
    }

    @Test func diagnosticsOnAContinuedLineNameItsFirstLine() {
        let (_, diagnostics) = parseApp("[App]\nExec=notes\nRestartSec=1 \\\n  tenn\n")

        #expect(diagnostics.map(\.line) == [3])
    }

    @Test func descriptionLeavesOutMissingParts() {
        #expect(ConfigDiagnostic(severity: .error, file: "a.conf", line: 3, key: "K", message: "m").description == "a.conf:3: K=: m")
        #expect(ConfigDiagnostic(severity: .error, file: "a.conf", key: "K", message: "m").description == "a.conf: K=: m")
        #expect(ConfigDiagnostic(severity: .error, file: "a.conf", line: 3, message: "m").description == "a.conf:3: m")
        #expect(ConfigDiagnostic(severity: .error, file: "a.conf", message: "m").description == "a.conf: m")
    }
}
