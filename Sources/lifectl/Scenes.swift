import LifecycleModel
import LifecycleProtocol

// lifectl's scene verbs: `scene open|focus|background|close|discard APP [SCENE]` and `scenes [APP]`.

let sceneUsage = """
    Scenes (apps with [Scenes]; changes as for lifecycle verbs):
      scene open APP [--role ROLE] [--config NAME]
                                    a new scene session, connected and focused (prints its id)
      scene focus APP SCENE         focus that scene (reconnecting it); focus moves between scenes and apps
      scene background APP SCENE    that scene to the background (the app follows when it was the last one)
      scene close APP SCENE         disconnect the scene, keep its session and saved state
      scene discard APP SCENE       disconnect it and forget the session (didDiscardSceneSessions)
      scenes [APP]                  the scene sessions and their states (anyone)
    """

/// The control request of `scene SUBVERB APP [SCENE]` (the words after `scene`).
func sceneRequest(_ words: [String], role: String?, configuration: String?) -> ControlRequest {
    let subverbs = ["open", "focus", "background", "close", "discard"]
    guard let subverb = words.first else {
        fail("scene needs a subverb: \(subverbs.joined(separator: ", "))\n\n\(sceneUsage)", status: ExitStatus.usage)
    }
    guard subverbs.contains(subverb) else {
        fail("unknown scene subverb '\(subverb)' (expected one of: \(subverbs.joined(separator: ", ")))", status: ExitStatus.usage)
    }
    guard words.count >= 2 else { fail("scene \(subverb) needs an app name", status: ExitStatus.usage) }
    let app = words[1]
    if subverb == "open" {
        guard words.count == 2 else { fail("scene open takes an app, not a scene (it makes a new one)", status: ExitStatus.usage) }
        return ControlRequest(verb: "scene-open", app: app, role: role, configuration: configuration)
    }
    guard role == nil, configuration == nil else { fail("--role and --config go with scene open only", status: ExitStatus.usage) }
    guard words.count == 3 else {
        fail(words.count < 3 ? "scene \(subverb) needs an app and a scene (lifectl scenes \(app) lists them)"
             : "too many arguments: \(words.dropFirst(3).joined(separator: " "))", status: ExitStatus.usage)
    }
    return ControlRequest(verb: "scene-\(subverb)", app: app, scene: words[2])
}

/// One session of one app, as `scenes --json` prints it.
struct SceneRow: Encodable {
    var app: String
    var scene: String
    var role: String
    var configuration: String
    var state: String
    var savedState: JSONValue?
    /// The session has a saved state this user may not see (root, [Control] Group= and the app's own user may).
    var savedStateHidden: Bool?
}

func sceneRows(_ apps: [AppStatus]) -> [SceneRow] {
    apps.flatMap { app in
        (app.scenes ?? []).map {
            SceneRow(app: app.name, scene: $0.scene, role: $0.role, configuration: $0.configuration, state: $0.state,
                     savedState: $0.savedState, savedStateHidden: $0.savedStateHidden)
        }
    }
}

func sceneTable(_ apps: [AppStatus]) {
    let rows = sceneRows(apps)
    guard !rows.isEmpty else {
        if apps.isEmpty {
            output("no app uses scenes")
        } else if apps.count == 1, apps[0].scenes == nil {
            output("\(apps[0].name) does not use scenes (no [Scenes] in its config)")
        } else {
            output("no scene sessions")
        }
        return
    }
    let header = ["APP", "SCENE", "ROLE", "CONFIGURATION", "STATE", "SAVED STATE"]
    let cells = rows.map { [$0.app, $0.scene, $0.role, $0.configuration, $0.state, $0.savedState.map(\.description) ?? ($0.savedStateHidden == true ? "(hidden)" : "-")].map(TerminalText.escaped) }
    let widths = header.indices.map { column in ([header] + cells).map { $0[column].count }.max() ?? 0 }
    for row in [header] + cells {
        var text = row.indices.map { $0 == row.count - 1 ? row[$0] : pad(row[$0], widths[$0]) }.joined(separator: "  ")
        while text.hasSuffix(" ") { text.removeLast() }
        output(text)
    }
}
