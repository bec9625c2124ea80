/// What a load of the config directory does to the configuration in force, decided from that configuration and the
/// fresh load alone (pure, so that each rule is a unit test).
///
/// At a reload a file is applied only when it loads without an error. A value the loader replaced with its default,
/// or a file it could not load at all, says that the file is not what its author meant (a stray quote, a file half
/// written): the app keeps the configuration it runs with, as systemd keeps a running unit on its last good
/// configuration, and the error is reported. Only a file that is gone removes its app. An error in what every app
/// depends on (the directory, `apps/`, `lifecycled.conf`, whose `[Defaults]` every app file builds on) applies
/// nothing at all. At start there is nothing to keep: what could be loaded is loaded.
struct ReloadPlan: Equatable {
    /// The daemon-wide settings to apply; nil when the reload applies nothing.
    var daemon: DaemonConfig?
    /// New apps, sorted by name.
    var added: [AppConfig] = []
    /// Apps whose configuration changed, sorted by name.
    var changed: [AppConfig] = []
    /// Apps whose file is gone, sorted.
    var removed: [String] = []
    /// Files with an error, each with what was done instead of applying it, in the order of the load's diagnostics.
    var rejected: [RejectedFile] = []

    /// One file with an error.
    struct RejectedFile: Equatable, CustomStringConvertible {
        /// As the diagnostics name it: `lifecycled.conf`, `apps/NAME.conf`, or the directory.
        var file: String
        var errors: [ConfigDiagnostic]
        /// What happened instead: "not applied: notes keeps the configuration it runs with".
        var outcome: String

        var description: String { "\(file): \(outcome)" }
    }

    /// The first load: every app that loaded is added; the files that could not be loaded are rejected.
    static func initial(_ fresh: LoadedConfig) -> ReloadPlan {
        var plan = ReloadPlan(daemon: fresh.daemon)
        plan.added = fresh.apps.keys.sorted().map { fresh.apps[$0]! }
        plan.rejected = errorsByFile(fresh.diagnostics).compactMap { file, errors in
            guard let name = appName(of: file), fresh.apps[name] == nil else { return nil }
            return RejectedFile(file: file, errors: errors, outcome: "not loaded: app '\(name)' is left out until its file loads")
        }
        return plan
    }

    /// A reload: `inForce` is every configured app's configuration now, by name.
    static func reload(inForce: [String: AppConfig], fresh: LoadedConfig) -> ReloadPlan {
        let byFile = errorsByFile(fresh.diagnostics)
        if byFile.contains(where: { appName(of: $0.file) == nil }) {
            var plan = ReloadPlan(daemon: nil)
            plan.rejected = byFile.map { file, errors in
                RejectedFile(file: file, errors: errors, outcome: appName(of: file) == nil
                    ? "not applied: nothing of this reload is, every app keeps the configuration it runs with"
                    : "not applied")
            }
            return plan
        }
        var plan = ReloadPlan(daemon: fresh.daemon)
        var broken: Set<String> = []
        for (file, errors) in byFile {
            guard let name = appName(of: file) else { continue }
            broken.insert(name)
            let outcome = inForce[name] != nil
                ? "not applied: \(name) keeps the configuration it runs with"
                : "not applied: '\(name)' is not added until its file loads without an error"
            plan.rejected.append(RejectedFile(file: file, errors: errors, outcome: outcome))
        }
        for name in fresh.apps.keys.sorted() where !broken.contains(name) {
            let appConfig = fresh.apps[name]!
            if let current = inForce[name] {
                if current != appConfig { plan.changed.append(appConfig) }
            } else {
                plan.added.append(appConfig)
            }
        }
        plan.removed = inForce.keys.sorted().filter { fresh.apps[$0] == nil && !broken.contains($0) }
        return plan
    }

    /// The app a diagnostic's file configures (`apps/NAME.conf`), nil for any other file.
    static func appName(of file: String) -> String? {
        let prefix = ConfigLoader.appsDirectoryName + "/", suffix = ".conf"
        guard file.hasPrefix(prefix), file.hasSuffix(suffix), file.count > prefix.count + suffix.count else { return nil }
        let name = file.dropFirst(prefix.count).dropLast(suffix.count)
        return name.contains("/") ? nil : String(name)
    }

    /// The error diagnostics grouped by file, in the order the files first appear.
    private static func errorsByFile(_ diagnostics: [ConfigDiagnostic]) -> [(file: String, errors: [ConfigDiagnostic])] {
        var groups: [(file: String, errors: [ConfigDiagnostic])] = []
        for diagnostic in diagnostics where diagnostic.severity == .error {
            if let index = groups.firstIndex(where: { $0.file == diagnostic.file }) {
                groups[index].errors.append(diagnostic)
            } else {
                groups.append((diagnostic.file, [diagnostic]))
            }
        }
        return groups
    }
}
