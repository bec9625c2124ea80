import LifecycleModel

// Every key lifecycled understands, as a table of (section, key, parser, destination): adding a key is one line
// here and one entry in docs/CONFIG.md.

extension ConfigLoader {
    /// One `Key=` of one section: how its value is parsed and where the result goes.
    struct Key<Target>: Sendable {
        let section: String
        let name: String
        /// Parses `value` into `target`. An empty value resets the key to what `baseline` (the state before the
        /// file was read: the built-in defaults, or `[Defaults]` for an app) has, as systemd's empty assignments do.
        let apply: @Sendable (_ value: String, _ target: inout Target, _ baseline: Target) throws(ConfigSyntaxError) -> Void
        /// The value in effect, as a diagnostic names it after rejecting a new one ("using 10s");
        /// nil for keys whose value is too long or too free-form to repeat.
        let current: @Sendable (Target) -> String?

        /// A key whose value replaces the one before it.
        static func value<Value>(
            _ section: String, _ name: String, _ destination: WritableKeyPath<Target, Value> & Sendable,
            _ parse: @escaping @Sendable (String) throws(ConfigSyntaxError) -> Value,
            shown show: (@Sendable (Value) -> String)? = nil
        ) -> Key {
            Key(
                section: section, name: name,
                apply: { value, target, baseline throws(ConfigSyntaxError) in
                    target[keyPath: destination] = value.isEmpty ? baseline[keyPath: destination] : try parse(value)
                },
                current: { target in show.map { $0(target[keyPath: destination]) } })
        }

        /// The same key applied to the part of a larger value at `path`: `[Defaults]` keys act on
        /// `DaemonConfig.defaults`.
        func lifted<Outer>(_ path: WritableKeyPath<Outer, Target> & Sendable) -> Key<Outer> {
            let apply = self.apply
            let current = self.current
            return Key<Outer>(
                section: section, name: name,
                apply: { value, target, baseline throws(ConfigSyntaxError) in
                    try apply(value, &target[keyPath: path], baseline[keyPath: path])
                },
                current: { target in current(target[keyPath: path]) })
        }
    }

    /// The keys `[Defaults]` and an app file share, so one table entry serves both.
    protocol SharedSettings {
        var policy: AppPolicy { get set }
        var suspendMethod: SuspendMethod { get set }
        var memoryLow: MemoryProtection { get set }
    }

    /// The keys of an app's `[Lifecycle]`, which `[Defaults]` also takes.
    static func lifecycleKeys<Target: SharedSettings>(in section: String) -> [Key<Target>] {
        [
            .value(section, "BackgroundTimeSec", \.policy.backgroundTime,
                   { text throws(ConfigSyntaxError) in try parseDuration(text, allowInfinity: true) }, shown: formatDuration),
            .value(section, "SuspendMethod", \.suspendMethod, parseChoice, shown: { $0.rawValue }),
            .value(section, "LaunchTimeoutSec", \.policy.launchTimeout, parseFiniteDuration, shown: formatDuration),
            .value(section, "AckTimeoutSec", \.policy.ackTimeout, parseFiniteDuration, shown: formatDuration),
            .value(section, "TimeoutStopSec", \.policy.stopTimeout, parseFiniteDuration, shown: formatDuration),
            .value(section, "BackgroundTaskTimeSec", \.policy.backgroundTaskTime, parseFiniteDuration, shown: formatDuration),
            .value(section, "ExpirationWarningSec", \.policy.expirationWarning, parseFiniteDuration, shown: formatDuration),
            .value(section, "BackgroundModes", \.policy.backgroundModes, parseBackgroundModes,
                   shown: { $0.isEmpty ? "" : $0.sorted().joined(separator: " ") }),
            .value(section, "QueueLimit", \.policy.queueLimit, parsePositiveCount, shown: { String($0) }),
            .value(section, "OnlyOnBattery", \.policy.onlyOnBattery, parseBoolean, shown: formatBoolean),
            .value(section, "ResumeEverySec", \.policy.resumeEvery, parseResumeEvery, shown: formatDuration),
            .value(section, "ResumeForSec", \.policy.resumeFor, parseFiniteDuration, shown: formatDuration),
            .value(section, "Reclaim", \.policy.reclaim, parseBoolean, shown: formatBoolean),
            .value(section, "ReclaimAfterSec", \.policy.reclaimAfter, parseFiniteDuration, shown: formatDuration),
            .value(section, "MemoryLow", \.memoryLow, parseMemoryProtection, shown: formatMemoryProtection),
        ]
    }

    /// `ResumeEverySec=`: 0 and infinity both mean no wakes, since a wake every 0 s would never let the app sleep.
    static func parseResumeEvery(_ text: String) throws(ConfigSyntaxError) -> Duration? {
        try parseDuration(text, allowInfinity: true).flatMap { $0 > .zero ? $0 : nil }
    }

    /// The restart keys of an app's `[App]`, which `[Defaults]` also takes.
    static func restartKeys<Target: SharedSettings>(in section: String) -> [Key<Target>] {
        [
            .value(section, "Restart", \.policy.restart, parseChoice, shown: { $0.rawValue }),
            .value(section, "RestartSec", \.policy.restartDelay, parseFiniteDuration, shown: formatDuration),
            .value(section, "RestartMaxDelaySec", \.policy.restartMaxDelay, parseFiniteDuration, shown: formatDuration),
            .value(section, "StartLimitBurst", \.policy.startLimitBurst, parseCount, shown: { String($0) }),
            .value(section, "StartLimitIntervalSec", \.policy.startLimitInterval, parseFiniteDuration, shown: formatDuration),
        ]
    }

    /// `[Sources]` of `lifecycled.conf`: the real system sources of notifications.
    static let sourcesKeys: [Key<DaemonConfig>] = [
        .value("Sources", "TimeChange", \.sources.timeChange, parseBoolean, shown: formatBoolean),
        .value("Sources", "LocaleChange", \.sources.locale, parseBoolean, shown: formatBoolean),
        .value("Sources", "Battery", \.sources.battery, parseBoolean, shown: formatBoolean),
        .value("Sources", "MemoryPressure", \.sources.memoryPressure, parseBoolean, shown: formatBoolean),
        .value("Sources", "UserDefaults", \.sources.userDefaults, parseBoolean, shown: formatBoolean),
        .value("Sources", "LocaltimeFile", \.sources.localtimePath, parseAbsolutePath, shown: { $0 }),
        .value("Sources", "LocaleFiles", \.sources.localeFiles, parseAbsolutePaths, shown: { $0.joined(separator: " ") }),
        .value("Sources", "PowerSupplyDirectory", \.sources.powerSupplyPath, parseAbsolutePath, shown: { $0 }),
        .value("Sources", "PressureFile", \.sources.pressureFile, parseAbsolutePath, shown: { $0 }),
        .value("Sources", "PressureTrigger", \.sources.pressureTrigger, parsePressureTrigger, shown: { $0 }),
        .value("Sources", "Audio", \.sources.audio, parseBoolean, shown: formatBoolean),
        .value("Sources", "AudioServer", \.sources.audioServer, { text throws(ConfigSyntaxError) in text }, shown: { $0 ?? "" }),
        .value("Sources", "AudioSilenceSec", \.sources.audioSilence,
               { text throws(ConfigSyntaxError) in try parseDuration(text, allowInfinity: true) }, shown: formatDuration),
    ]

    /// `[Memory]` of `lifecycled.conf`.
    static let memoryKeys: [Key<DaemonConfig>] = [
        .value("Memory", "TerminateAfterSec", \.memory.terminateAfter, parseFiniteDuration, shown: formatDuration),
        .value("Memory", "EpisodeGapSec", \.memory.episodeGap, parseFiniteDuration, shown: formatDuration),
    ]

    /// `[Display]` of `lifecycled.conf`: the display server the states follow.
    static let displayKeys: [Key<DaemonConfig>] = [
        .value("Display", "Source", \.display.source, parseChoice, shown: { $0.rawValue }),
        .value("Display", "SwaySocket", \.display.swaySocket, { text throws(ConfigSyntaxError) in try parseAbsolutePath(text) },
               shown: { $0 ?? "" }),
        .value("Display", "X11Display", \.display.x11Display, { text throws(ConfigSyntaxError) in text }, shown: { $0 ?? "" }),
        .value("Display", "GnomeGraceSec", \.display.gnomeGrace, parseFiniteDuration, shown: formatDuration),
    ]

    /// `[Control]` of `lifecycled.conf`: who may change states through the control socket.
    static let controlKeys: [Key<DaemonConfig>] = [
        .value("Control", "Group", \.controlGroup, { text throws(ConfigSyntaxError) in try parseUserOrGroup(text) },
               shown: { $0 ?? "" }),
        .value("Control", "Bus", \.bus, parseChoice, shown: { $0.rawValue }),
        .value("Control", "AuthenticationTimeoutSec", \.authenticationTimeout, parseFiniteDuration, shown: formatDuration),
    ]

    /// `lifecycled.conf`. (`[NotificationTypes]` has free-form keys, the type names: see `parseNotificationTypes`.)
    static let daemonKeys: [Key<DaemonConfig>] =
        (restartKeys(in: "Defaults") + lifecycleKeys(in: "Defaults")).map { $0.lifted(\DaemonConfig.defaults) } + sourcesKeys
        + memoryKeys + controlKeys + displayKeys + adoptKeys

    /// UIKit's background modes (UIBackgroundModes), as words: `audio`, `voip`, `location`…; any word of letters,
    /// digits and `-` is taken, since the daemon treats every mode alike (never suspended for its grace time).
    static func parseBackgroundModes(_ text: String) throws(ConfigSyntaxError) -> Set<String> {
        var modes: Set<String> = []
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
            guard word.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" }) else {
                throw .invalidChoice(String(word), expected: ["audio", "voip", "location", "…"])
            }
            modes.insert(String(word))
        }
        return modes
    }

    /// A count of at least 1.
    static func parsePositiveCount(_ text: String) throws(ConfigSyntaxError) -> Int {
        let count = try parseCount(text)
        guard count >= 1 else { throw .invalidCount(text) }
        return count
    }

    /// `[NotificationTypes]`: `typeName=latest|count|merge|none`, one line per type. Type names are
    /// identifiers (letters, digits, `_`, `.`, `-`); a system type may be declared again to change its coalescing.
    static func parseNotificationTypes(_ items: [KeyFileItem], file: String) -> ([String: Coalescing], [ConfigDiagnostic]) {
        var types: [String: Coalescing] = [:]
        var diagnostics: [ConfigDiagnostic] = []
        var inSection = false
        for item in items {
            switch item {
            case .section(let name, _):
                inSection = name == "NotificationTypes"
            case .assignment(let key, let value, let line) where inSection:
                guard let first = key.first, first.isLetter,
                      key.allSatisfy({ $0.isLetter || $0.isNumber || "_.-".contains($0) }) else {
                    diagnostics.append(ConfigDiagnostic(severity: .error, file: file, line: line, key: key,
                                                        message: "invalid notification type name, ignoring"))
                    continue
                }
                guard let coalescing = Coalescing(rawValue: value) else {
                    diagnostics.append(ConfigDiagnostic(
                        severity: .error, file: file, line: line, key: key,
                        message: "invalid coalescing '\(value)' (expected latest, count, merge or none), ignoring"))
                    continue
                }
                types[key] = coalescing
            case .assignment:
                break
            }
        }
        return (types, diagnostics)
    }

    /// `apps/NAME.conf`.
    static let appKeys: [Key<AppConfig>] = [
        .value("App", "Description", \.description, { text throws(ConfigSyntaxError) in text }),
        .value("App", "Exec", \.exec, parseCommand),
        .value("App", "WorkingDirectory", \.workingDirectory, { text throws(ConfigSyntaxError) in try parseAbsolutePath(text) }),
        Key(section: "App", name: "Environment",
            apply: { value, target, baseline throws(ConfigSyntaxError) in
                target.environment = value.isEmpty
                    ? baseline.environment : mergeEnvironment(target.environment, try parseEnvironment(value))
            },
            current: { _ in nil }),
        .value("App", "User", \.user, { text throws(ConfigSyntaxError) in try parseUserOrGroup(text) }),
        .value("App", "Group", \.group, { text throws(ConfigSyntaxError) in try parseUserOrGroup(text) }),
        .value("App", "Protocol", \.policy.speaksProtocol, parseProtocol, shown: { $0 ? "lifecycle" : "none" }),
        .value("App", "AutoLaunch", \.autoLaunch, parseChoice, shown: { $0.rawValue }),
        .value("App", "PreferencesFile", \.preferencesFile, { text throws(ConfigSyntaxError) in try parseAbsolutePath(text) }),
        .value("App", "External", \.policy.external, parseBoolean, shown: formatBoolean),
        .value("App", "ExternalUser", \.externalUser, { text throws(ConfigSyntaxError) in try parseUserOrGroup(text) }),
        .value("App", "ExternalFrom", \.externalFrom, parseChoice, shown: { $0.rawValue }),
        .value("App", "AppId", \.appID, { text throws(ConfigSyntaxError) in text }),
    ] + restartKeys(in: "App") + lifecycleKeys(in: "Lifecycle") + sceneKeys

    /// `[Scenes]`: any key here makes the app a scene app (UIKit's scene manifest).
    static let sceneKeys: [Key<AppConfig>] = [
        Key(section: "Scenes", name: "SupportsMultipleScenes",
            apply: { value, target, baseline throws(ConfigSyntaxError) in
                var scenes = target.policy.scenes ?? ScenePolicy()
                scenes.supportsMultipleScenes = value.isEmpty ? false : try parseBoolean(value)
                target.policy.scenes = scenes
            },
            current: { target in (target.policy.scenes?.supportsMultipleScenes ?? false) ? "yes" : "no" }),
        Key(section: "Scenes", name: "MaxSceneSessions",
            apply: { value, target, baseline throws(ConfigSyntaxError) in
                var scenes = target.policy.scenes ?? ScenePolicy()
                scenes.maxSessions = value.isEmpty ? ScenePolicy.defaultMaxSessions : try parsePositiveCount(value)
                target.policy.scenes = scenes
            },
            current: { target in String(target.policy.scenes?.maxSessions ?? ScenePolicy.defaultMaxSessions) }),
        // Repeatable, like Environment=: each line adds configurations; an empty value clears the list.
        Key(section: "Scenes", name: "Configuration",
            apply: { value, target, baseline throws(ConfigSyntaxError) in
                var scenes = target.policy.scenes ?? ScenePolicy()
                if value.isEmpty {
                    scenes.configurations = []
                } else {
                    for configuration in try parseSceneConfigurations(value) where !scenes.configurations.contains(configuration) {
                        scenes.configurations.append(configuration)
                    }
                }
                target.policy.scenes = scenes
            },
            current: { _ in nil }),
    ]

    /// `ROLE:NAME` words, e.g. `window:Main externalDisplay:Slides`.
    static func parseSceneConfigurations(_ text: String) throws(ConfigSyntaxError) -> [SceneConfiguration] {
        func isName(_ part: Substring) -> Bool {
            !part.isEmpty && part.count <= 64 && part.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "_.-".contains($0)) }
        }
        var configurations: [SceneConfiguration] = []
        for word in text.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
            let parts = word.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, isName(parts[0]), isName(parts[1]) else { throw .invalidSceneConfiguration(String(word)) }
            configurations.append(SceneConfiguration(role: String(parts[0]), name: String(parts[1])))
        }
        return configurations
    }

    /// A duration where `infinity` makes no sense.
    static func parseFiniteDuration(_ text: String) throws(ConfigSyntaxError) -> Duration {
        // Cannot be nil: without allowInfinity, `infinity` throws.
        try parseDuration(text, allowInfinity: false) ?? .zero
    }

    /// Applies `items` to `target` through `keys`. Unknown sections and keys are warnings; invalid values are
    /// errors and leave the value in effect unchanged.
    /// `parsedApart`: sections read by other means (free-form keys); known, but their keys are skipped here.
    static func apply<Target>(_ items: [KeyFileItem], keys: [Key<Target>], to target: inout Target, file: String,
                              parsedApart: Set<String> = []) -> [ConfigDiagnostic] {
        let baseline = target
        // Looked up per header, not built per file as a Set: a daemon reads one file per app (thousands at start-up).
        func isKnown(_ section: String) -> Bool { parsedApart.contains(section) || keys.contains { $0.section == section } }
        var diagnostics: [ConfigDiagnostic] = []
        // nil before the first header; .some(nil) in a section whose keys are skipped (unknown or malformed).
        var section: String??
        for item in items {
            switch item {
            case .section(let name, let line):
                guard let name, isKnown(name) else {
                    if let name {
                        let sections = Set(keys.map(\.section)).union(parsedApart)
                        diagnostics.append(ConfigDiagnostic(
                            severity: .warning, file: file, line: line,
                            message: "unknown section [\(name)], ignoring it and the keys under it"
                                + " (known: \(sections.sorted().map { "[\($0)]" }.joined(separator: ", ")))"))
                    }
                    section = .some(nil)
                    continue
                }
                section = parsedApart.contains(name) ? .some(nil) : name
            case .assignment(let key, let value, let line):
                guard let current = section else {
                    diagnostics.append(ConfigDiagnostic(
                        severity: .warning, file: file, line: line, key: key,
                        message: "assignment outside of any section, ignoring"))
                    continue
                }
                guard let current else { continue }
                guard let entry = keys.first(where: { $0.section == current && $0.name == key }) else {
                    diagnostics.append(ConfigDiagnostic(
                        severity: .warning, file: file, line: line, key: key,
                        message: "unknown key in [\(current)]\(hint(for: key, in: current, keys: keys)), ignoring"))
                    continue
                }
                do {
                    try entry.apply(value, &target, baseline)
                } catch {
                    let fallback = entry.current(target).map { ", using \($0)" } ?? ", ignoring"
                    diagnostics.append(ConfigDiagnostic(
                        severity: .error, file: file, line: line, key: key, message: "\(error)\(fallback)"))
                }
            }
        }
        return diagnostics
    }

    /// " (did you mean Exec=?)" for a wrong case, " (it belongs in [App])" for the wrong section.
    private static func hint<Target>(for key: String, in section: String, keys: [Key<Target>]) -> String {
        if let match = keys.first(where: { $0.section == section && $0.name.lowercased() == key.lowercased() }) {
            return " (did you mean \(match.name)=?)"
        }
        if let match = keys.first(where: { $0.name.lowercased() == key.lowercased() }) {
            return " (\(match.name)= belongs in [\(match.section)])"
        }
        return ""
    }
}

extension AppConfig: ConfigLoader.SharedSettings {}
extension AppDefaults: ConfigLoader.SharedSettings {}
