import LifecycleModel
import LifecycleProtocol

// What lifectl prints for `scenes [APP]`; the scene verbs themselves are parsed in LifectlCommand.

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
