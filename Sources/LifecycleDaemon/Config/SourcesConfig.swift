/// `[Sources]` of `lifecycled.conf`: which real system sources of notifications `SystemSources` runs, and the
/// files it watches (paths, so tests and containers can point them at their own trees). docs/CONFIG.md
/// documents every key.
public struct SourcesConfig: Sendable, Equatable {
    /// `TimeChange=`: `significantTimeChange` (clock set, local midnight, time zone).
    public var timeChange = true
    /// `LocaleChange=`: `currentLocaleDidChange`.
    public var locale = true
    /// `Battery=`: `batteryLevelDidChange` and `batteryStateDidChange`.
    public var battery = true
    /// `MemoryPressure=`: the PSI trigger behind `didReceiveMemoryWarning`.
    public var memoryPressure = true
    /// `UserDefaults=`: `userDefaultsDidChange` for apps with `PreferencesFile=`.
    public var userDefaults = true
    /// `LocaltimeFile=`: the file whose replacement means the time zone changed.
    public var localtimePath = "/etc/localtime"
    /// `LocaleFiles=`: files of `KEY=value` lines (systemd's and Debian's) whose change means the locale changed.
    public var localeFiles = ["/etc/locale.conf", "/etc/default/locale"]
    /// `PowerSupplyDirectory=`: one subdirectory per supply, with `type`, `capacity` and `status` files.
    public var powerSupplyPath = "/sys/class/power_supply"
    /// `PressureFile=`: the system's memory PSI file, or a cgroup2 `memory.pressure`.
    public var pressureFile = "/proc/pressure/memory"
    /// `PressureTrigger=`: written to `pressureFile`: `some|full STALL_US WINDOW_US`.
    /// 150 ms of stall in a 2 s window. The window is a multiple of 2 s because the kernel takes other windows
    /// only from a process with CAP_SYS_RESOURCE (without it, `some 150000 1000000` fails with EINVAL).
    public var pressureTrigger = "some 150000 2000000"
    /// `Audio=`: apps with a playing stream on the sound server are not suspended while they play.
    public var audio = true
    /// `AudioServer=`: the sound server to ask, in libpulse's syntax (`unix:/run/user/1000/pulse/native`);
    /// nil: `$PULSE_SERVER`, or libpulse's default for the daemon's user.
    public var audioServer: String?
    /// `AudioSilenceSec=`: a stream that plays only silence this long no longer keeps its app awake. Long enough
    /// for the silence between tracks or in a quiet passage, short enough that a stream left open on nothing lets
    /// its app go within half a minute. nil (`infinity`): levels are not read, and silence keeps an app awake.
    public var audioSilence: Duration? = .seconds(30)

    public init() {}
}
