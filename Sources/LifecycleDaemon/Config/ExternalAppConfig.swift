import Glibc
import LifecycleModel

// `External=yes` (docs/CONFIG.md, "External apps"): the checks that tie the external keys together, run on an app
// file after its keys were applied. Safe by default: an external app that names no user is not loaded at all.

extension ConfigLoader {
    /// Keys of `[App]` that mean nothing for an app lifecycled never starts.
    static let keysWithoutMeaningForExternalApps = [
        "Exec", "WorkingDirectory", "Environment", "User", "Group", "AutoLaunch",
        "Restart", "RestartSec", "RestartMaxDelaySec", "StartLimitBurst", "StartLimitIntervalSec",
    ]

    /// Checks and completes an app after its keys were read: for an external app, resolves `ExternalUser=` into
    /// `externalUID` and drops what does not apply (with a warning per key its file sets); for any other app,
    /// warns about external keys without `External=yes`. Returns false (with an error diagnostic saying why) when
    /// the app cannot be loaded.
    static func checkExternal(_ app: inout AppConfig, items: [KeyFileItem], file: String,
                              resolveUser: (String) -> UInt32?, diagnostics: inout [ConfigDiagnostic]) -> Bool {
        var section: String?
        var assignments: [(key: String, line: Int)] = []
        for item in items {
            switch item {
            case .section(let name, _): section = name
            case .assignment(let key, _, let line) where section == "App": assignments.append((key, line))
            case .assignment: break
            }
        }
        guard app.external else {
            for (key, line) in assignments where key == "ExternalUser" || key == "ExternalFrom" {
                diagnostics.append(ConfigDiagnostic(severity: .warning, file: file, line: line, key: key,
                                                    message: "applies only with External=yes, ignoring"))
            }
            app.externalUser = nil
            return true
        }
        func refuse(_ message: String) -> Bool {
            diagnostics.append(ConfigDiagnostic(severity: .error, file: file, message: "\(message), app '\(app.name)' not loaded"))
            return false
        }
        guard let user = app.externalUser else {
            return refuse("External=yes needs ExternalUser=, the one user whose processes may attach as this app"
                + " (a name or a uid; root only when it says root or 0)")
        }
        guard let uid = resolveUser(user) else {
            return refuse("ExternalUser=\(user): no such user")
        }
        guard app.policy.speaksProtocol else {
            return refuse("External=yes needs Protocol=lifecycle (an external app attaches with its hello)")
        }
        guard app.policy.scenes == nil else {
            return refuse("External=yes does not support [Scenes] yet")
        }
        for (key, line) in assignments where keysWithoutMeaningForExternalApps.contains(key) {
            diagnostics.append(ConfigDiagnostic(
                severity: .warning, file: file, line: line, key: key,
                message: "does not apply to an external app (External=yes: lifecycled never starts it), ignoring"))
        }
        app.externalUID = uid
        app.exec = []
        app.workingDirectory = nil
        app.environment = []
        app.user = nil
        app.group = nil
        app.autoLaunch = .no
        app.policy.restart = .no
        return true
    }

    /// `ExternalUser=` as the system knows it: a number is taken as the uid it says (as systemd's `User=` does),
    /// a name is looked up in the user database (getpwnam_r, as `User=` is); nil for a name nobody has.
    public static func systemUserID(_ user: String) -> UInt32? {
        if let uid = UInt32(user) { return uid }
        return (try? passwdEntry { getpwnam_r(user, $0, $1, $2, $3) })?.uid
    }
}
