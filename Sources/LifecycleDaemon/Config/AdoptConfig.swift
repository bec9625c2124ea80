import LifecycleModel

/// `[Adopt]` of `lifecycled.conf`: the apps the desktop starts, managed without a file of their own
/// (docs/CONFIG.md, "Adoption"). Off unless `Scopes=` or `Windows=` says yes.
public struct AdoptConfig: Sendable, Equatable {
    /// `Scopes=`: the transient units desktop launchers make under the user's `app.slice`.
    public var scopes = false
    /// `Windows=`: the process behind a window that no configured or adopted app owns.
    public var windows = false
    /// `ScopeTrees=`: an adopted window's process tree goes into a scope of its own (`TreeScopes`), a change the
    /// daemon cannot give back, so only when asked.
    public var scopeTrees = false
    /// `User=`: whose session a daemon running as root adopts from (a name or a uid).
    public var user: String?
    /// `AppSlice=`: the slice to watch, relative to the cgroup2 mount; overrides the search.
    public var appSlice: String?
    /// `Exclude=`: app ids (or scope unit names) never adopted, besides `AdoptRails.builtInExclusions`.
    public var exclude: [String] = []
    /// `BackgroundTimeSec=`: the grace time of adopted apps (an app's own file may say otherwise).
    public var backgroundTime: Duration? = .seconds(30)
    /// `OnlyOnBattery=`, `ResumeEverySec=`, `ResumeForSec=`: the rails of adopted apps that have no file of their
    /// own, as `[Lifecycle]` has them for one app.
    public var onlyOnBattery = false
    public var resumeEvery: Duration?
    public var resumeFor: Duration = .seconds(10)
    /// `Reclaim=`, `ReclaimAfterSec=`: whether and when a suspended adopted app's memory leaves RAM, with the
    /// defaults of `[Lifecycle]`.
    public var reclaim = AppPolicy().reclaim
    public var reclaimAfter = AppPolicy().reclaimAfter
    /// `MemoryLow=`: the memory protection of adopted apps in the foreground (an app's own file may say otherwise).
    public var memoryLow: MemoryProtection = .infinity

    public init() {}

    /// Whether anything is adopted at all.
    public var enabled: Bool { scopes || windows }
}

extension ConfigLoader {
    /// `[Adopt]` of `lifecycled.conf`.
    static let adoptKeys: [Key<DaemonConfig>] = [
        .value("Adopt", "Scopes", \.adopt.scopes, parseBoolean, shown: formatBoolean),
        .value("Adopt", "Windows", \.adopt.windows, parseBoolean, shown: formatBoolean),
        .value("Adopt", "ScopeTrees", \.adopt.scopeTrees, parseBoolean, shown: formatBoolean),
        .value("Adopt", "User", \.adopt.user, { text throws(ConfigSyntaxError) in try parseUserOrGroup(text) },
               shown: { $0 ?? "" }),
        .value("Adopt", "AppSlice", \.adopt.appSlice, parseSlicePath, shown: { $0 ?? "" }),
        .value("Adopt", "Exclude", \.adopt.exclude, { text throws(ConfigSyntaxError) in try splitWords(text) },
               shown: { $0.joined(separator: " ") }),
        .value("Adopt", "BackgroundTimeSec", \.adopt.backgroundTime,
               { text throws(ConfigSyntaxError) in try parseDuration(text, allowInfinity: true) }, shown: formatDuration),
        .value("Adopt", "OnlyOnBattery", \.adopt.onlyOnBattery, parseBoolean, shown: formatBoolean),
        .value("Adopt", "ResumeEverySec", \.adopt.resumeEvery, parseResumeEvery, shown: formatDuration),
        .value("Adopt", "ResumeForSec", \.adopt.resumeFor, parseFiniteDuration, shown: formatDuration),
        .value("Adopt", "Reclaim", \.adopt.reclaim, parseBoolean, shown: formatBoolean),
        .value("Adopt", "ReclaimAfterSec", \.adopt.reclaimAfter, parseFiniteDuration, shown: formatDuration),
        .value("Adopt", "MemoryLow", \.adopt.memoryLow, parseMemoryProtection, shown: formatMemoryProtection),
    ]

    /// `AppSlice=`: a cgroup path below the cgroup2 mount, with or without its leading `/`; never one that climbs
    /// out of the hierarchy.
    static func parseSlicePath(_ text: String) throws(ConfigSyntaxError) -> String {
        let parts = text.split(separator: "/")
        guard !parts.isEmpty, !parts.contains(where: { $0 == ".." || $0 == "." }) else {
            throw .invalidChoice(text, expected: ["a path below the cgroup2 mount, such as user.slice/user-1000.slice/user@1000.service/app.slice"])
        }
        return parts.joined(separator: "/")
    }
}
