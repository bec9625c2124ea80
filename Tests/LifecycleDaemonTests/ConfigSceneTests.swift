import LifecycleModel
import Testing
@testable import LifecycleDaemon

@Suite("[Scenes] in an app file")
struct ConfigSceneTests {
    private func parse(_ text: String) -> (AppConfig?, [ConfigDiagnostic]) {
        ConfigLoader.parseApp(name: "editor", text: "[App]\nExec=editor\n" + text, file: "apps/editor.conf", defaults: AppDefaults())
    }

    @Test("configurations accumulate in order, the first of a role being its default; SupportsMultipleScenes is a boolean")
    func configurationsAccumulate() throws {
        let (app, diagnostics) = parse("""
            [Scenes]
            SupportsMultipleScenes=yes
            Configuration=window:Main window:Editor
            Configuration=externalDisplay:Slides window:Main
            """)
        #expect(diagnostics == [])
        let scenes = try #require(app?.policy.scenes)
        #expect(scenes.supportsMultipleScenes)
        #expect(scenes.configurations == [SceneConfiguration(role: "window", name: "Main"), SceneConfiguration(role: "window", name: "Editor"),
                                          SceneConfiguration(role: "externalDisplay", name: "Slides")])
        #expect(scenes.defaultConfiguration(for: "window") == "Main")
        #expect(scenes.defaultConfiguration(for: "externalDisplay") == "Slides")
        #expect(scenes.defaultConfiguration(for: "carPlay") == nil)
    }

    @Test("no [Scenes] keeps the app-level lifecycle; [Scenes] without configurations offers window:Default")
    func absentAndBare() throws {
        #expect(parse("").0?.policy.scenes == nil)
        let header = try #require(parse("[Scenes]\n").0?.policy.scenes, "the section alone declares scenes")
        #expect(header == ScenePolicy())
        #expect(header.defaultConfiguration(for: "window") == "Default")
        let scenes = try #require(parse("[Scenes]\nSupportsMultipleScenes=no\n").0?.policy.scenes)
        #expect(!scenes.supportsMultipleScenes)
        #expect(scenes.defaultConfiguration(for: "window") == "Default")
    }

    @Test("a malformed configuration is an error naming the word, and the rest of the file still loads")
    func malformedConfiguration() throws {
        let (app, diagnostics) = parse("[Scenes]\nConfiguration=window:Main Editor\nConfiguration=externalDisplay:Slides\n")
        #expect(diagnostics.map(\.severity) == [.error])
        #expect(diagnostics.first?.description.contains("invalid scene configuration 'Editor' (expected ROLE:NAME") == true)
        #expect(app?.policy.scenes?.configurations == [SceneConfiguration(role: "externalDisplay", name: "Slides")])
        let (_, wrongBool) = parse("[Scenes]\nSupportsMultipleScenes=perhaps\n")
        #expect(wrongBool.map(\.severity) == [.error])
    }
}
