import LifecycleModel

/// The real system sources of the notifications UIKit queues for suspended apps (`NotificationCatalog.systemTypes`),
/// on Linux: a wall-clock timerfd that is cancelled when the clock is set, inotify on the files that hold the time
/// zone, the locale and each app's preferences, the kernel's power-supply uevents, and a PSI trigger.
///
/// None polls: each is a file descriptor the loop waits on, and the only timer is the one at the next local
/// midnight. The daemon creates one at start, on the loop's thread, and keeps it until it stops; each source that
/// cannot start (no PSI, a missing directory) is off and says why in `descriptions`, and the rest run. Nothing
/// here logs.
public final class SystemSources {
    private let watcher: DirectoryWatcher
    private var time: TimeChangeSource?
    private var locale: LocaleSource?
    private var battery: BatterySource?
    private var memory: MemoryPressureSource?
    private var preferences: PreferencesSource?
    private var stopped = false

    /// Starts every source `config` turns on.
    /// - `post(type, payload, app)`: a notification to post; `app` nil means every app that observes `type`,
    ///   else only that app (`userDefaultsDidChange`).
    /// - `memoryPressure`: called with the PSI numbers each time the trigger fires (at most once per trigger
    ///   window); whether that is a `didReceiveMemoryWarning` or a termination is the caller's decision.
    /// Both are called on the loop's thread, from the loop's callbacks, never from within this initializer.
    public init(loop: EventLoop, config: SourcesConfig,
                post: @escaping (String, JSONValue, String?) -> Void,
                memoryPressure: @escaping (MemoryPressureReading) -> Void) {
        watcher = DirectoryWatcher(loop: loop)
        // Nothing is posted once stopped, even by a callback that was already running when the daemon stopped us
        // (from within one of these very posts).
        let guardedPost: (String, JSONValue, String?) -> Void = { [weak self] type, payload, app in
            guard let self, !self.stopped else { return }
            post(type, payload, app)
        }
        let guardedMemoryPressure: (MemoryPressureReading) -> Void = { [weak self] reading in
            guard let self, !self.stopped else { return }
            memoryPressure(reading)
        }
        if config.timeChange {
            time = TimeChangeSource(loop: loop, watcher: watcher, localtimePath: config.localtimePath, post: guardedPost)
        }
        if config.locale {
            locale = LocaleSource(watcher: watcher, files: config.localeFiles, post: guardedPost)
        }
        if config.battery {
            battery = BatterySource(loop: loop, watcher: watcher, root: config.powerSupplyPath, post: guardedPost)
        }
        if config.memoryPressure {
            memory = MemoryPressureSource(loop: loop, path: config.pressureFile, trigger: config.pressureTrigger, callback: guardedMemoryPressure)
        }
        if config.userDefaults {
            preferences = PreferencesSource(watcher: watcher, post: guardedPost)
        }
    }

    deinit { stop() }

    /// One line or more per source, for the log and `lifectl status`: on and how, or off and why.
    public var descriptions: [String] {
        if stopped { return ["notification sources: stopped"] }
        var lines: [String] = []
        lines += time?.descriptions ?? ["\(TimeChangeSource.type): off (TimeChange=no)"]
        lines += locale?.descriptions ?? ["\(LocaleSource.type): off (LocaleChange=no)"]
        lines += battery?.descriptions ?? ["\(BatterySource.levelType), \(BatterySource.stateType): off (Battery=no)"]
        lines += memory?.descriptions ?? ["\(MemoryPressureSource.type): off (MemoryPressure=no)"]
        lines += preferences?.descriptions ?? ["\(PreferencesSource.type): off (UserDefaults=no)"]
        return lines
    }

    /// Whether the machine runs on battery now (false without a battery, or with `Battery=no`).
    public var onBattery: Bool { battery?.onBattery ?? false }

    /// Called on the loop's thread when the machine goes on battery (true) or on external power (false).
    public var powerChanged: ((Bool) -> Void)? {
        get { battery?.powerChanged }
        set {
            battery?.powerChanged = newValue.map { callback in { [weak self] onBattery in
                guard let self, !self.stopped else { return }
                callback(onBattery)
            } }
        }
    }

    /// Posts `userDefaultsDidChange` to `app` when the file at `path` (absolute) changes; replaces an earlier
    /// watch of that app. Does nothing when `UserDefaults=no`.
    public func watchPreferences(app: String, path: String) {
        preferences?.watch(app: app, path: path)
    }

    public func unwatchPreferences(app: String) {
        preferences?.unwatch(app: app)
    }

    /// Closes every descriptor; nothing is posted afterwards. Idempotent.
    public func stop() {
        guard !stopped else { return }
        stopped = true
        time?.stop()
        locale?.stop()
        battery?.stop()
        memory?.stop()
        preferences?.stop()
        watcher.stop()
        time = nil
        locale = nil
        battery = nil
        memory = nil
        preferences = nil
    }

    // MARK: For tests

    /// How many times the loop woke each part, by name (`inotify`, `timer`, `uevent`, `pressure`).
    var wakeups: [String: Int] {
        ["inotify": watcher.wakeups, "timer": time?.wakeups ?? 0, "uevent": battery?.wakeups ?? 0, "pressure": memory?.wakeups ?? 0]
    }

    /// Kernel uevents read so far, of any subsystem.
    var ueventsRead: Int { battery?.uevents ?? 0 }

    /// Whether the PSI trigger is registered and watched.
    var memoryPressureIsOn: Bool { memory?.isOn ?? false }
}
