import LifecycleModel
import LifecycleProtocol

/// The configuration in force and its changes: the first load at start, the reload (SIGHUP, `lifectl reload`: only
/// apps whose configuration changed are touched, and only files without an error are applied), lifecycled.conf's
/// daemon-wide settings and the system sources they start, and each app's `AutoLaunch=`. It decides which apps come
/// and go; the registry adds and forgets them.
final class ConfigReload: AppObserver {
    private unowned let host: any DaemonHost
    private let loop: EventLoop
    private let directory: String
    private let environment: [String: String]
    private let serviceManager: ServiceManager
    private let registry: AppRegistry
    private let placement: any ProcessPlacement
    private let processes: ProcessSupervisor
    private let persistence: Persistence
    private let externalApps: ExternalApps
    private let adoption: Adoption
    private let display: DisplayFollower
    private let audio: AudioFollower
    /// The configuration in force, with the diagnostics of the last load (which a failed reload may not have applied).
    private(set) var config = LoadedConfig(daemon: DaemonConfig(), apps: [:], diagnostics: [])
    /// The files the last load did not apply, with what was done instead.
    private(set) var rejected: [ReloadPlan.RejectedFile] = []
    /// Apps whose file is there but has not loaded: a state file a previous daemon left for one is kept until the
    /// file loads (the app takes its state back) or is gone (the file is deleted).
    private(set) var unloadedApps: Set<String> = []
    /// The settings the running sources were started with: they start anew only when these change.
    private var sourcesConfig: SourcesConfig?
    /// The real system sources of notifications (clock, time zone, locale, battery, memory pressure, preferences).
    private(set) var sources: SystemSources?

    /// `lifectl status`'s config problems: each diagnostic of the last load, then each file it did not apply.
    var problems: [String] { config.diagnostics.map(\.description) + rejected.map(\.description) }

    init(host: any DaemonHost, loop: EventLoop, directory: String, environment: [String: String],
         serviceManager: ServiceManager, registry: AppRegistry, observers: AppObservers, placement: any ProcessPlacement,
         processes: ProcessSupervisor, persistence: Persistence, externalApps: ExternalApps, adoption: Adoption,
         display: DisplayFollower, audio: AudioFollower) {
        self.host = host
        self.loop = loop
        self.directory = directory
        self.environment = environment
        self.serviceManager = serviceManager
        self.registry = registry
        self.placement = placement
        self.processes = processes
        self.persistence = persistence
        self.externalApps = externalApps
        self.adoption = adoption
        self.display = display
        self.audio = audio
        observers.add(self)
    }

    /// The first load: every configured app is added, none launched yet.
    func load() {
        let fresh = ConfigLoader.load(directory: directory)
        let plan = ReloadPlan.initial(fresh)
        report(fresh.diagnostics, plan.rejected)
        config = fresh
        applyDaemonConfig()
        for appConfig in plan.added { add(appConfig) }
        unloadedApps = Set(plan.rejected.compactMap { ReloadPlan.appName(of: $0.file) })
        Log.info("\(registry.count) apps configured: \(registry.names.joined(separator: ", "))")
    }

    /// SIGHUP and `lifectl reload`: read the config again; only apps whose configuration changed are touched, and a
    /// file with an error is not applied (`ReloadPlan`). Returns what was done, nil when the daemon is stopping.
    @discardableResult
    func reload() -> ReloadPlan? {
        guard !host.stopping else { return nil }
        serviceManager.reloading()
        defer { serviceManager.ready { [unowned host] in host.statusLine() } }
        let fresh = ConfigLoader.load(directory: directory)
        let plan = ReloadPlan.reload(inForce: registry.configured, fresh: fresh)
        report(fresh.diagnostics, plan.rejected)
        config.diagnostics = fresh.diagnostics
        guard let daemonConfig = plan.daemon else {
            Log.error("Failed to reload the configuration: nothing applied, every app keeps the configuration it runs with")
            return plan
        }
        // A file that is back (or was never gone) cancels a removal still waiting for the app to stop.
        for app in registry.all where !plan.removed.contains(app.name) { app.removeWhenStopped = false }
        // Added apps launch together, as at start-up.
        processes.launchingTogether {
            for appConfig in plan.changed {
                guard registry.runtime(appConfig.name) != nil else { continue }
                registry.configure(appConfig.name, appConfig)
                watchPreferences(of: appConfig)
                Log.info("\(appConfig.name): configuration changed; new settings apply from now on, Exec= at the next launch")
            }
            for appConfig in plan.added {
                add(appConfig)
                Log.info("\(appConfig.name): added")
                if unloadedApps.contains(appConfig.name), let app = registry.runtime(appConfig.name) {
                    persistence.restoreKept(app)
                }
                autoLaunch(appConfig.name)
            }
        }
        for name in plan.removed { remove(name) }
        let stillUnloaded = Set(plan.rejected.compactMap { ReloadPlan.appName(of: $0.file) }).filter { registry.runtime($0) == nil }
        for name in unloadedApps.subtracting(stillUnloaded) where fresh.apps[name] == nil { persistence.removeKept(name) }
        unloadedApps = stillUnloaded
        config = LoadedConfig(daemon: daemonConfig, apps: registry.configured, diagnostics: fresh.diagnostics)
        config.adoptSettings = fresh.adoptSettings
        applyDaemonConfig()
        display.apply(daemonConfig.display, environment: environment)
        adoption.apply(config)
        let changed = (plan.changed.map(\.name) + plan.added.map(\.name) + plan.removed).sorted()
        let summary = changed.isEmpty ? "nothing changed" : "changed " + changed.joined(separator: ", ")
        if plan.rejected.isEmpty {
            Log.notice("Reloaded the configuration: \(summary)")
        } else {
            Log.error("Reloaded the configuration: \(summary); not applied: \(plan.rejected.map(\.file).joined(separator: ", "))")
        }
        return plan
    }

    /// `lifectl reload`: the reply goes out once the reload is done, a failure naming every file not applied.
    func reloadRequested(by uid: UInt32, pid: Int32) -> ControlReply {
        Log.notice("Reload requested by uid \(uid) (pid \(pid))")
        guard let plan = reload() else { return .failure("lifecycled is shutting down") }
        guard !plan.rejected.isEmpty else { return ControlReply(ok: true) }
        let lines = plan.rejected.flatMap { file in file.errors.map { $0.description } + [file.description] }
        let head = plan.daemon == nil ? "the configuration was not reloaded:" : "the configuration was reloaded without these files:"
        return .failure(([head] + lines).joined(separator: "\n  "))
    }

    /// The app's file is gone: a running app is terminated and forgotten once it has stopped (its state file with
    /// it); a stopped one at once.
    private func remove(_ name: String) {
        guard host.withRecord(name, { $0.state.isRunning }) == true else { return registry.forget(name) }
        registry.runtime(name)?.removeWhenStopped = true
        Log.info("\(name): removed from the configuration; terminating it")
        host.handle(.request(.terminate, app: name, origin: "reload"))
    }

    /// The app's `AutoLaunch=`, asked of the model as a request from "autoLaunch".
    func autoLaunch(_ name: String) {
        guard let app = registry.runtime(name) else { return }
        let request: Request
        switch app.config.autoLaunch {
        case .no: return
        case .yes: request = .launch(background: false)
        case .background: request = .launch(background: true)
        case .focus: request = .focus
        }
        if let refusal = host.handle(.request(request, app: name, origin: "autoLaunch")).refusal {
            Log.warning("Failed to auto-launch \(name): \(refusal)")
        }
    }

    /// An app that left (`AppRegistry.forget`): its preferences file is no longer watched.
    func appChanged(_ change: AppChange) {
        if case .removed(let name) = change { sources?.unwatchPreferences(app: name) }
    }

    private func add(_ appConfig: AppConfig) {
        adoption.yieldName(appConfig.name)
        let app = AppRuntime(name: appConfig.name, config: appConfig, place: placement)
        registry.add(app)
        if appConfig.external { externalApps.prepare(app) }
        watchPreferences(of: appConfig)
    }

    private func watchPreferences(of appConfig: AppConfig) {
        if let path = appConfig.preferencesFile {
            sources?.watchPreferences(app: appConfig.name, path: path)
        } else {
            sources?.unwatchPreferences(app: appConfig.name)
        }
    }

    /// lifecycled.conf's daemon-wide settings: notification types, memory policy, and the sources (started
    /// anew when their settings changed).
    private func applyDaemonConfig() {
        host.handle(.settings(ModelSettings(catalog: NotificationCatalog(extra: config.daemon.notificationTypes),
                                            memoryWarningGrace: config.daemon.memory.terminateAfter,
                                            memoryEpisodeGap: config.daemon.memory.episodeGap)))
        audio.apply(config.daemon.sources)
        guard sources == nil || sourcesConfig != config.daemon.sources else { return }
        sources?.stop()
        sourcesConfig = config.daemon.sources
        sources = SystemSources(
            loop: loop, config: config.daemon.sources,
            post: { [unowned self] type, payload, app in self.sourcePosted(type, payload: payload, to: app) },
            memoryPressure: { [unowned host] reading in
                host.memoryPressure(reading: ["someAvg10": .number(reading.someAvg10), "fullAvg10": .number(reading.fullAvg10)])
            })
        sources?.powerChanged = { [unowned host] onBattery in
            Log.info("power: \(onBattery ? "on battery" : "on external power")")
            host.handle(.power(onBattery: onBattery))
        }
        host.handle(.power(onBattery: sources?.onBattery ?? false))
        for line in sources?.descriptions ?? [] { Log.info("source \(line)") }
        for app in registry.all { watchPreferences(of: app.config) }
    }

    private func sourcePosted(_ type: String, payload: JSONValue, to app: String?) {
        let outcome = host.handle(.post(type: type, payload: payload, to: app, from: .daemon))
        if let refusal = outcome.refusal {
            Log.warning("Failed to post \(type) from its source: \(refusal)")
        } else {
            Log.info("\(type)\(app.map { " for \($0)" } ?? ""): \(outcome.delivered) delivered, \(outcome.queued) queued")
        }
    }

    /// Each diagnostic, then what was done with each file that had an error.
    private func report(_ diagnostics: [ConfigDiagnostic], _ rejected: [ReloadPlan.RejectedFile]) {
        for diagnostic in diagnostics {
            switch diagnostic.severity {
            case .error: Log.error("config: \(diagnostic)")
            case .warning: Log.warning("config: \(diagnostic)")
            }
        }
        for file in rejected { Log.error("config: \(file)") }
        self.rejected = rejected
    }
}
