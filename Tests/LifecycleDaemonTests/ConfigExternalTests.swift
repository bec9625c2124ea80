import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// `External=yes`, `ExternalUser=`, `ExternalFrom=` (docs/CONFIG.md). The user database is played by `users`, so
/// that the tests do not depend on the machine's (one test reads the real one, for root).
@Suite struct ConfigExternalTests {
    static let users: [String: UInt32] = ["root": 0, "player": 1234]

    func parse(_ text: String, name: String = "player") -> (AppConfig?, [ConfigDiagnostic]) {
        ConfigLoader.parseApp(name: name, text: text, file: "apps/\(name).conf", defaults: AppDefaults(),
                              resolveUser: { Self.users[$0] ?? UInt32($0) })
    }

    @Test func externalAppNeedsNoExecAndResolvesItsUser() throws {
        let (app, diagnostics) = parse("[App]\nExternal=yes\nExternalUser=player\n")
        #expect(diagnostics == [])
        let loaded = try #require(app)
        #expect(loaded.external)
        #expect(loaded.policy.external)
        #expect(loaded.externalUser == "player")
        #expect(loaded.externalUID == 1234)
        #expect(loaded.externalFrom == .processGroup, "the default")
        #expect(loaded.exec == [])
    }

    @Test func numericUserAndCgroupAreTaken() throws {
        let (app, diagnostics) = parse("[App]\nExternal=yes\nExternalUser=4321\nExternalFrom=cgroup\n")
        #expect(diagnostics == [])
        #expect(app?.externalUID == 4321)
        #expect(app?.externalFrom == .cgroup)
    }

    @Test func missingUserIsAnErrorAndTheAppIsNotLoaded() {
        let (app, diagnostics) = parse("[App]\nExternal=yes\n")
        #expect(app == nil)
        #expect(diagnostics.map(\.severity) == [.error])
        #expect(diagnostics.first?.description == "apps/player.conf: External=yes needs ExternalUser=, the one user whose"
            + " processes may attach as this app (a name or a uid; root only when it says root or 0), app 'player' not loaded")
    }

    @Test func unknownUserIsAnErrorAndTheAppIsNotLoaded() {
        let (app, diagnostics) = parse("[App]\nExternal=yes\nExternalUser=ghost\n")
        #expect(app == nil)
        #expect(diagnostics.map(\.description) == ["apps/player.conf: ExternalUser=ghost: no such user, app 'player' not loaded"])
    }

    @Test func invalidValuesAreErrors() {
        let (app, diagnostics) = parse("[App]\nExternal=maybe\nExternalUser=-x\nExternalFrom=anywhere\n")
        #expect(app == nil, "External= stays no, and there is no Exec=")
        // Three invalid values; then, External= being no, the two external keys are warned about; then no Exec=.
        #expect(diagnostics.map(\.severity) == [.error, .error, .error, .warning, .warning, .error])
        #expect(diagnostics[0].description.contains("External=: invalid value 'maybe'"))
        #expect(diagnostics[2].description.contains("ExternalFrom=: invalid value 'anywhere'"))
        #expect(diagnostics[2].description.contains("process-group"))
        #expect(diagnostics[5].message.contains("no valid Exec="))
    }

    @Test func protocolNoneAndScenesAreRefused() {
        let (none, noneDiagnostics) = parse("[App]\nExternal=yes\nExternalUser=root\nProtocol=none\n")
        #expect(none == nil)
        #expect(noneDiagnostics.first?.message.contains("External=yes needs Protocol=lifecycle") == true)
        let (scenes, sceneDiagnostics) = parse("[App]\nExternal=yes\nExternalUser=root\n[Scenes]\nSupportsMultipleScenes=yes\n")
        #expect(scenes == nil)
        #expect(sceneDiagnostics.first?.message.contains("does not support [Scenes]") == true)
    }

    @Test func keysThatDoNotApplyAreWarnedAboutAndDropped() throws {
        let text = """
            [App]
            External=yes
            ExternalUser=player
            Exec=/usr/bin/player
            User=nobody
            AutoLaunch=focus
            Restart=always
            """
        let (app, diagnostics) = parse(text)
        let loaded = try #require(app)
        #expect(diagnostics.map(\.severity) == [.warning, .warning, .warning, .warning])
        #expect(diagnostics.map(\.key) == ["Exec", "User", "AutoLaunch", "Restart"])
        #expect(diagnostics.map(\.line) == [4, 5, 6, 7])
        #expect(diagnostics[0].message == "does not apply to an external app (External=yes: lifecycled never starts it), ignoring")
        #expect(loaded.exec == [] && loaded.user == nil && loaded.autoLaunch == .no && loaded.policy.restart == .no)
    }

    @Test func externalKeysWithoutExternalAreIgnoredWithAWarning() throws {
        let (app, diagnostics) = parse("[App]\nExec=/bin/true\nExternalUser=player\nExternalFrom=cgroup\n")
        #expect(app?.external == false)
        #expect(app?.externalUser == nil)
        #expect(diagnostics.map(\.key) == ["ExternalUser", "ExternalFrom"])
        #expect(diagnostics.allSatisfy { $0.severity == .warning && $0.message == "applies only with External=yes, ignoring" })
    }

    @Test func systemUserDatabaseResolvesRootAndNumbers() {
        #expect(ConfigLoader.systemUserID("root") == 0)
        #expect(ConfigLoader.systemUserID("4242") == 4242)
        #expect(ConfigLoader.systemUserID("no-such-user-here") == nil)
    }
}
