import LifecycleModel
import LifecycleProtocol

// What lifectl prints for `scenes [APP]`; the scene verbs themselves are parsed in LifectlCommand.

/// One session of one app, as `scenes --json` prints it: the session's status with its app's name.
struct SceneRow: JSONWritable {
    var app: String
    var session: SceneStatus

    func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("app", app)
        session.writeMembers(into: &writer)
        writer.endObject()
    }
}

func sceneRows(_ apps: [AppStatus]) -> [SceneRow] {
    apps.flatMap { app in (app.scenes ?? []).map { SceneRow(app: app.name, session: $0) } }
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
    let cells = rows.map { row in
        let session = row.session
        return [row.app, session.scene, session.role, session.configuration, session.state,
                session.savedState.map(\.description) ?? (session.savedStateHidden == true ? "(hidden)" : "-")].map(TerminalText.escaped)
    }
    let widths = header.indices.map { column in ([header] + cells).map { $0[column].count }.max() ?? 0 }
    for row in [header] + cells {
        var text = row.indices.map { $0 == row.count - 1 ? row[$0] : pad(row[$0], widths[$0]) }.joined(separator: "  ")
        while text.hasSuffix(" ") { text.removeLast() }
        output(text)
    }
}
