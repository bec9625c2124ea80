import LifecycleModel

/// `AutoLaunch=`: whether the daemon starts an app by itself when it starts, and into which state.
public enum AutoLaunch: String, Sendable, Equatable, CaseIterable {
    /// Started only on request (`lifectl launch`, a focus request).
    case no
    /// Launched into inactive.
    case yes
    /// Launched straight into the background.
    case background
    /// Launched and given focus.
    case focus
}

/// `SuspendMethod=`: how a backgrounded app is stopped once its grace time is over.
public enum SuspendMethod: String, Sendable, Equatable, CaseIterable {
    /// `SIGSTOP` to the app's process group.
    case signal
    /// The cgroup freezer: the processes are frozen without a signal they, their parent or a debugger could see.
    case freezer
}

/// `MemoryLow=`: how much of an app's memory the kernel reclaims last while the app is in the foreground (cgroup2
/// `memory.low`); in the background and suspended it has none.
public enum MemoryProtection: Sendable, Equatable {
    /// All of it (`max`).
    case infinity
    /// Up to this many bytes; 0 is no protection.
    case bytes(UInt64)

    /// The value of a cgroup's memory.low.
    var cgroupValue: String {
        switch self {
        case .infinity: "max"
        case .bytes(let count): String(count)
        }
    }

    /// The value of systemd's MemoryLow= on the bus, where infinity is the largest number.
    var unitValue: UInt64 {
        switch self {
        case .infinity: .max
        case .bytes(let count): count
        }
    }
}

/// `ExternalFrom=`: which processes of `ExternalUser=` may attach as an external app (`External=yes`). In both
/// cases the attaching process must lead its own process group, and that group (with its cgroup, for `cgroup`) is
/// what the daemon stops, continues and kills.
public enum ExternalFrom: String, Sendable, Equatable, CaseIterable {
    /// The process leads its process group, and every process in that group runs as `ExternalUser=`.
    case processGroup = "process-group"
    /// As `process-group`, and the process is in the app's cgroup (`lifectl status` shows it), where whoever
    /// started it placed it; the whole cgroup is then the app.
    case cgroup
}

/// What `[Defaults]` in `lifecycled.conf` gives every app, before the app's own file overrides it.
public struct AppDefaults: Sendable, Equatable {
    public var policy: AppPolicy
    public var suspendMethod: SuspendMethod
    public var memoryLow: MemoryProtection

    public init(policy: AppPolicy = AppPolicy(), suspendMethod: SuspendMethod = .signal, memoryLow: MemoryProtection = .infinity) {
        self.policy = policy
        self.suspendMethod = suspendMethod
        self.memoryLow = memoryLow
    }
}

/// One supervised app, as `apps/NAME.conf` describes it. docs/CONFIG.md documents every key.
public struct AppConfig: Sendable, Equatable {
    /// The file name without `.conf`; matches `[A-Za-z0-9][A-Za-z0-9_.-]{0,63}`.
    public var name: String
    /// `Description=`.
    public var description: String?
    /// `Exec=`, split into argv; `exec[0]` is the program (absolute, relative, or a name the daemon looks up in `PATH`).
    /// Never empty in a loaded config.
    public var exec: [String]
    /// `WorkingDirectory=`, an absolute path.
    public var workingDirectory: String?
    /// `Environment=`: `KEY=VALUE` strings in the order keys first appeared, each key once with its last value.
    public var environment: [String]
    /// `User=`: a name or a numeric id, resolved by the daemon.
    public var user: String?
    /// `Group=`: a name or a numeric id, resolved by the daemon.
    public var group: String?
    /// `AutoLaunch=`.
    public var autoLaunch: AutoLaunch
    /// `SuspendMethod=`.
    public var suspendMethod: SuspendMethod
    /// `MemoryLow=`: the app's memory protection while it is in the foreground.
    public var memoryLow: MemoryProtection = .infinity
    /// `Protocol=`, `Restart=` and the timing keys.
    public var policy: AppPolicy
    /// `PreferencesFile=`: an absolute path; its changes on disk are posted to this app as `userDefaultsDidChange`.
    public var preferencesFile: String?
    /// `ExternalUser=` (with `External=yes`): the user whose processes may attach as this app, as written.
    public var externalUser: String?
    /// `ExternalUser=` resolved to a uid by the loader; set in every loaded external app.
    public var externalUID: UInt32?
    /// `ExternalFrom=`.
    public var externalFrom: ExternalFrom = .processGroup
    /// `AppId=`: the Wayland app_id or X11 WM_CLASS of the app's windows, for windows another process opens.
    public var appID: String?
    /// `External=yes`: the daemon never starts this app; a process someone else started attaches on the app socket.
    public var external: Bool { policy.external }
    /// `AppId=` and no `Exec=`: the settings of an app that is only ever adopted (`[Adopt]`), never launched.
    public var adoptOnly: Bool { exec.isEmpty && !external && appID != nil }

    public init(
        name: String,
        exec: [String],
        description: String? = nil,
        workingDirectory: String? = nil,
        environment: [String] = [],
        user: String? = nil,
        group: String? = nil,
        autoLaunch: AutoLaunch = .no,
        suspendMethod: SuspendMethod = .signal,
        policy: AppPolicy = AppPolicy(),
        preferencesFile: String? = nil
    ) {
        self.name = name
        self.exec = exec
        self.description = description
        self.workingDirectory = workingDirectory
        self.environment = environment
        self.user = user
        self.group = group
        self.autoLaunch = autoLaunch
        self.suspendMethod = suspendMethod
        self.policy = policy
        self.preferencesFile = preferencesFile
    }

    /// An app with no `Exec=` yet and every other key from `defaults`: where parsing an app file starts.
    public init(name: String, defaults: AppDefaults) {
        self.init(name: name, exec: [], suspendMethod: defaults.suspendMethod, policy: defaults.policy)
        memoryLow = defaults.memoryLow
    }
}

/// `lifecycled.conf`.
public struct DaemonConfig: Sendable, Equatable {
    /// `[Defaults]`.
    public var defaults: AppDefaults
    /// `[Sources]`.
    public var sources: SourcesConfig
    /// `[NotificationTypes]`: types beyond the system's, with their coalescing.
    public var notificationTypes: [String: Coalescing] = [:]
    /// `[Memory]`.
    public var memory = MemoryConfig()
    /// `[Control] Group=`: members of this group (a name or a number) may use the changing verbs of the control
    /// socket besides root and the daemon's user; nil: nobody else.
    public var controlGroup: String?
    /// `[Control] Bus=`: the D-Bus bus the API is offered on (docs/DBUS.md).
    public var bus: BusChoice = .auto
    /// `[Control] AuthenticationTimeoutSec=`: how long an interactive polkit check may wait for a person to
    /// authenticate before it is cancelled and the call refused.
    public var authenticationTimeout: Duration = .seconds(120)
    /// `[Display]`.
    public var display = DisplayConfig()
    /// `[Adopt]`.
    public var adopt = AdoptConfig()

    /// All defaults: what an absent `lifecycled.conf` means.
    public init() {
        defaults = AppDefaults()
        sources = SourcesConfig()
    }

    public init(defaults: AppDefaults, sources: SourcesConfig = SourcesConfig()) {
        self.defaults = defaults
        self.sources = sources
    }
}

/// Everything `ConfigLoader.load(directory:)` could load, and what it had to say about the rest.
public struct LoadedConfig: Sendable, Equatable {
    public var daemon: DaemonConfig
    /// Keyed by app name.
    public var apps: [String: AppConfig]
    /// In file order: `lifecycled.conf` first, then the app files sorted by name.
    public var diagnostics: [ConfigDiagnostic]
    /// App files with `AppId=` and no `Exec=`: settings for an app that is only ever adopted, keyed by the app id.
    public var adoptSettings: [String: AppConfig] = [:]

    public init(daemon: DaemonConfig = DaemonConfig(), apps: [String: AppConfig] = [:], diagnostics: [ConfigDiagnostic] = []) {
        self.daemon = daemon
        self.apps = apps
        self.diagnostics = diagnostics
    }
}

/// `[Memory]` of `lifecycled.conf`: what the daemon does under memory pressure (the threshold itself is
/// `[Sources] PressureTrigger=`).
public struct MemoryConfig: Sendable, Equatable {
    /// `TerminateAfterSec=`: pressure still there this long after the warnings terminates suspended apps.
    public var terminateAfter: Duration = .seconds(5)
    /// `EpisodeGapSec=`: pressure events further apart than this start over with warnings.
    public var episodeGap: Duration = .seconds(30)
    public init() {}
}
