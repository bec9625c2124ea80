// scenes-example: a Swift app with two scene configurations, built on LifecycleClient's SceneDelegate.
//
// Its lifecycled config (Config/apps/scenes.conf) declares `[Scenes]` with two window configurations:
//   Document   an editor: each scene keeps its draft and how many times it was edited
//   Inspector  a side panel: each scene counts how often it was shown
// Every scene hands its state to the daemon when it enters the background (stateRestorationActivity) and
// gets it back when its session connects again, after a `lifectl scene close`, or after a relaunch.
// Like the notes example it records each message it receives (LIFECYCLE_RECORD) for the tests and the tour.

import Glibc
import LifecycleClient
import LifecycleProtocol

/// One JSON line per message received, in the format of the Python example's recorder.
@MainActor
enum Recorder {
    struct Entry: JSONWritable {
        var app: String
        var type: String
        var t: Int64
        var pid: Int32
        var scene: String?
        var configuration: String?
        var state: JSONValue?

        func writeJSON(into writer: inout JSONWriter) {
            writer.beginObject()
            writer.member("app", app)
            writer.member("configuration", configuration)
            writer.member("pid", pid)
            writer.member("scene", scene)
            writer.member("state", state)
            writer.member("t", t)
            writer.member("type", type)
            writer.endObject()
        }
    }

    static func record(_ type: String, scene: String? = nil, configuration: String? = nil, state: JSONValue? = nil) {
        guard let path = ProcessEnvironment.get("LIFECYCLE_RECORD") else { return }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let entry = Entry(app: ProcessEnvironment.get("LIFECYCLE_APP") ?? "scenes",
                          type: type, t: Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec), pid: getpid(),
                          scene: scene, configuration: configuration, state: state)
        let line = LineCoder().encode(entry)
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return }
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    static func say(_ text: String) {
        _ = "[scenes] \(text)\n".withCString { write(1, $0, strlen($0)) }
    }
}

/// The editor window: its draft and edit count survive disconnection and relaunch through the session.
@MainActor
final class DocumentScene: SceneDelegate {
    var draft = ""
    var edits = 0

    init() {}

    func scene(_ scene: Scene, willConnectTo session: SceneSession, options: JSONValue) {
        if case .object(let saved)? = scene.restoredState {
            if case .string(let text)? = saved["draft"] { draft = text }
            if case .number(let count)? = saved["edits"] { edits = Int(count) }
        }
        Recorder.record("sceneWillConnect", scene: session.persistentIdentifier, configuration: session.configuration,
                        state: scene.restoredState)
        Recorder.say("\(session.persistentIdentifier): document connected, \(edits) edits so far")
    }

    func sceneDidBecomeActive(_ scene: Scene) {
        // The user types while the window has focus.
        edits += 1
        draft = "draft of \(scene.session.persistentIdentifier), edit \(edits)"
        Recorder.record("sceneDidBecomeActive", scene: scene.session.persistentIdentifier)
    }

    func sceneWillResignActive(_ scene: Scene) { Recorder.record("sceneWillResignActive", scene: scene.session.persistentIdentifier) }
    func sceneWillEnterForeground(_ scene: Scene) { Recorder.record("sceneWillEnterForeground", scene: scene.session.persistentIdentifier) }
    func sceneDidEnterBackground(_ scene: Scene) { Recorder.record("sceneDidEnterBackground", scene: scene.session.persistentIdentifier) }
    func sceneDidDisconnect(_ scene: Scene) { Recorder.record("sceneDidDisconnect", scene: scene.session.persistentIdentifier) }

    func stateRestorationActivity(for scene: Scene) -> JSONValue? {
        ["draft": .string(draft), "edits": .number(Double(edits))]
    }
}

/// The inspector panel: counts how often it was shown.
@MainActor
final class InspectorScene: SceneDelegate {
    var shown = 0

    init() {}

    func scene(_ scene: Scene, willConnectTo session: SceneSession, options: JSONValue) {
        if case .object(let saved)? = scene.restoredState, case .number(let count)? = saved["shown"] { shown = Int(count) }
        Recorder.record("sceneWillConnect", scene: session.persistentIdentifier, configuration: session.configuration,
                        state: scene.restoredState)
    }

    func sceneWillEnterForeground(_ scene: Scene) {
        shown += 1
        Recorder.record("sceneWillEnterForeground", scene: scene.session.persistentIdentifier)
    }

    func sceneDidBecomeActive(_ scene: Scene) { Recorder.record("sceneDidBecomeActive", scene: scene.session.persistentIdentifier) }
    func sceneWillResignActive(_ scene: Scene) { Recorder.record("sceneWillResignActive", scene: scene.session.persistentIdentifier) }
    func sceneDidEnterBackground(_ scene: Scene) { Recorder.record("sceneDidEnterBackground", scene: scene.session.persistentIdentifier) }
    func sceneDidDisconnect(_ scene: Scene) { Recorder.record("sceneDidDisconnect", scene: scene.session.persistentIdentifier) }

    func stateRestorationActivity(for scene: Scene) -> JSONValue? { ["shown": .number(Double(shown))] }
}

@MainActor
final class AppDelegate: ApplicationDelegate {
    func application(_ application: LifecycleApplication, didFinishLaunchingWithOptions options: LaunchOptions) {
        Recorder.record("didFinishLaunching")
    }

    /// An externalDisplay scene gets the inspector; windows take what was proposed (asked for, or used last time).
    func application(_ application: LifecycleApplication, configurationForConnecting session: SceneSession,
                     options: JSONValue) -> String? {
        Recorder.record("configurationForConnecting", scene: session.persistentIdentifier, configuration: session.configuration)
        return session.role == "externalDisplay" ? "Inspector" : nil
    }

    func application(_ application: LifecycleApplication, didDiscardSceneSessions sessions: [String]) {
        Recorder.record("didDiscardSceneSessions", scene: sessions.joined(separator: ","))
    }

    func applicationDidBecomeActive(_ application: LifecycleApplication) { Recorder.record("didBecomeActive") }
    func applicationWillResignActive(_ application: LifecycleApplication) { Recorder.record("willResignActive") }
    func applicationDidEnterBackground(_ application: LifecycleApplication) { Recorder.record("didEnterBackground") }
    func applicationWillEnterForeground(_ application: LifecycleApplication) { Recorder.record("willEnterForeground") }
    func applicationWillTerminate(_ application: LifecycleApplication) { Recorder.record("willTerminate") }
}

let delegate = AppDelegate()
LifecycleApplication.main(delegate: delegate, configure: { application in
    // UIKit's Info.plist scene manifest: which delegate class each configuration uses.
    application.register(DocumentScene.self, forConfiguration: "Document")
    application.register(InspectorScene.self, forConfiguration: "Inspector")
})
