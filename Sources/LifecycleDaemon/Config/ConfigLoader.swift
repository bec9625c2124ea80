import LifecycleModel
/// Reads lifecycled's configuration: `DIR/lifecycled.conf` and one `DIR/apps/NAME.conf` per app, in systemd's
/// key-file syntax (docs/CONFIG.md). Nothing here throws for bad content or logs: every problem becomes a
/// `ConfigDiagnostic`, and the result holds everything that could be loaded. `lifecycled` calls `load(directory:)`
/// at start and on reload, and logs the diagnostics.
public enum ConfigLoader {
    /// The daemon's file, inside the config directory. Optional: absent means every default.
    public static let daemonFileName = "lifecycled.conf"
    /// The directory of app files, inside the config directory. Optional: absent means no apps.
    public static let appsDirectoryName = "apps"

    /// Loads the config directory at `directory`. A missing or unreadable directory is one error diagnostic and
    /// no apps. In `apps/`, files not ending in `.conf` and hidden files (editor locks such as `.#notes.conf`)
    /// are skipped silently; a `.conf` file whose name is not a valid app name is reported and skipped.
    /// Diagnostics name files relative to `directory`.
    public static func load(directory: String) -> LoadedConfig {
        var loaded = LoadedConfig()
        do {
            guard try isDirectory(directory) else {
                loaded.diagnostics.append(ConfigDiagnostic(
                    severity: .error, file: directory, message: "Failed to read config directory: not a directory"))
                return loaded
            }
        } catch {
            loaded.diagnostics.append(ConfigDiagnostic(
                severity: .error, file: directory, message: "Failed to read config directory: \(error)"))
            return loaded
        }
        let root = directory.hasSuffix("/") ? String(directory.dropLast()) : directory

        let daemonFile = daemonFileName
        do {
            let text = try readTextFile(root + "/" + daemonFile)
            let (daemon, diagnostics) = parseDaemon(text: text, file: daemonFile)
            loaded.daemon = daemon
            loaded.diagnostics += diagnostics
        } catch where error.isNotFound {
            // All defaults.
        } catch {
            loaded.diagnostics.append(ConfigDiagnostic(
                severity: .error, file: daemonFile, message: "Failed to read: \(error), using the defaults"))
        }

        let appsDirectory = root + "/" + appsDirectoryName
        let names: [String]
        do {
            names = try listDirectory(appsDirectory)
        } catch where error.isNotFound {
            return loaded
        } catch {
            loaded.diagnostics.append(ConfigDiagnostic(
                severity: .error, file: appsDirectoryName, message: "Failed to read app directory: \(error), no apps loaded"))
            return loaded
        }
        for fileName in names where fileName.hasSuffix(".conf") && !fileName.hasPrefix(".") {
            let appName = String(fileName.dropLast(".conf".count))
            let file = appsDirectoryName + "/" + fileName
            guard isValidAppName(appName) else {
                loaded.diagnostics.append(invalidNameDiagnostic(appName, file: file))
                continue
            }
            let text: String
            do {
                text = try readTextFile(root + "/" + file)
            } catch {
                loaded.diagnostics.append(ConfigDiagnostic(
                    severity: .error, file: file, message: "Failed to read: \(error), app '\(appName)' not loaded"))
                continue
            }
            var (app, diagnostics) = parseApp(name: appName, text: text, file: file, defaults: loaded.daemon.defaults)
            if let parsed = app, parsed.adoptOnly {
                // Keys the file does not set come from [Adopt] (its grace time) before [Defaults].
                var defaults = loaded.daemon.defaults
                defaults.policy.backgroundTime = loaded.daemon.adopt.backgroundTime
                (app, diagnostics) = parseApp(name: appName, text: text, file: file, defaults: defaults)
            }
            loaded.diagnostics += diagnostics
            if let app, let appID = app.appID, app.adoptOnly {
                loaded.adoptSettings[appID] = app
            } else if let app {
                loaded.apps[appName] = app
            }
        }
        return loaded
    }

    /// Parses the text of `lifecycled.conf`; `file` is the name diagnostics give it.
    public static func parseDaemon(text: String, file: String) -> (DaemonConfig, [ConfigDiagnostic]) {
        let (items, syntaxDiagnostics) = readKeyFile(text, file: file)
        var daemon = DaemonConfig()
        // [NotificationTypes] takes any type name as a key, so it is read apart from the key table.
        let (types, typeDiagnostics) = parseNotificationTypes(items, file: file)
        daemon.notificationTypes = types
        let keyDiagnostics = apply(items, keys: daemonKeys, to: &daemon, file: file, parsedApart: ["NotificationTypes"])
        return (daemon, sortedByLine(syntaxDiagnostics + typeDiagnostics + keyDiagnostics))
    }

    /// Parses the text of one app file. Keys the file does not set come from `defaults`.
    /// - Returns: nil (and an error diagnostic) when `name` is not a valid app name, no valid `Exec=` is left, or an
    ///   external app cannot be (no `ExternalUser=`, or one nobody has).
    /// `resolveUser` turns `ExternalUser=` into a uid (the user database, unless a test gives its own).
    public static func parseApp(name: String, text: String, file: String, defaults: AppDefaults,
                                resolveUser: (String) -> UInt32? = systemUserID) -> (AppConfig?, [ConfigDiagnostic]) {
        guard isValidAppName(name) else { return (nil, [invalidNameDiagnostic(name, file: file)]) }
        let (items, syntaxDiagnostics) = readKeyFile(text, file: file)
        var app = AppConfig(name: name, defaults: defaults)
        var diagnostics = sortedByLine(syntaxDiagnostics + apply(items, keys: appKeys, to: &app, file: file))
        // The section itself declares the scene lifecycle, as UIKit's scene manifest does, keys or not.
        if app.policy.scenes == nil, items.contains(where: { if case .section("Scenes"?, _) = $0 { true } else { false } }) {
            app.policy.scenes = ScenePolicy()
        }
        guard checkExternal(&app, items: items, file: file, resolveUser: resolveUser, diagnostics: &diagnostics) else {
            return (nil, diagnostics)
        }
        guard !app.exec.isEmpty || app.external || app.appID != nil else {
            diagnostics.append(ConfigDiagnostic(
                severity: .error, file: file, message: "no valid Exec= in [App], app '\(name)' not loaded"))
            return (nil, diagnostics)
        }
        return (app, diagnostics)
    }

    private static func invalidNameDiagnostic(_ name: String, file: String) -> ConfigDiagnostic {
        ConfigDiagnostic(
            severity: .error, file: file,
            message: "invalid app name '\(name)' (expected 1 to 64 letters, digits, '_', '.' or '-',"
                + " starting with a letter or digit), ignoring file")
    }

    /// Syntax and key diagnostics come from two passes; a reader wants them in line order. The sort is stable.
    private static func sortedByLine(_ diagnostics: [ConfigDiagnostic]) -> [ConfigDiagnostic] {
        diagnostics.enumerated()
            .sorted { ($0.element.line ?? .max, $0.offset) < ($1.element.line ?? .max, $1.offset) }
            .map(\.element)
    }
}
