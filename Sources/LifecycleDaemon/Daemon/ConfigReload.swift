import LifecycleModel
import LifecycleProtocol

/// The configuration in force and its changes: the first load at start, the reload (SIGHUP, `lifectl reload`: only
/// apps whose configuration changed are touched, and only files without an error are applied), lifecycled.conf's
/// daemon-wide settings and the system sources they start, and each app's `AutoLaunch=`.
final class ConfigReload {
    private unowned let daemon: Daemon
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

    init(daemon: Daemon) {
        self.daemon = daemon
    }

    /// The first load: every configured app is added, none launched yet.
    func load() {
        let fresh = ConfigLoader.load(directory: daemon.options.configDirectory)
        let plan = ReloadPlan.initial(fresh)
        report(fresh.diagnostics, plan.rejected)
        config = fresh
        applyDaemonConfig()
        for appConfig in plan.added { add(appConfig) }
        unloadedApps = Set(plan.rejected.compactMap { ReloadPlan.appName(of: $0.file) })
        Log.info("\(daemon.apps.count) apps configured: \(daemon.apps.keys.sorted().joined(separator: ", "))")
    }

    /// SIGHUP and `lifectl reload`: read the config again; only apps whose configuration changed are touched, and a
    /// file with an error is not applied (`ReloadPlan`). Returns what was done, nil when the daemon is stopping.
    @discardableResult
    func reload() -> ReloadPlan? {
        guard !daemon.stopping else { return nil }
        daemon.serviceManager.reloading()
        defer { daemon.serviceManager.ready { [unowned daemon] in daemon.statusLine() } }
        let fresh = ConfigLoader.load(directory: daemon.options.configDirectory)
        let plan = ReloadPlan.reload(inForce: configuredApps(), fresh: fresh)
        report(fresh.diagnostics, plan.rejected)
        config.diagnostics = fresh.diagnostics
        guard let daemonConfig = plan.daemon else {
            Log.error("Failed to reload the configuration: nothing applied, every app keeps the configuration it runs with")
            return plan
        }
        // A file that is back (or was never gone) cancels a removal still waiting for the app to stop.
        for app in daemon.apps.values where !plan.removed.contains(app.name) { app.removeWhenStopped = false }
        // Added apps launch together, as at start-up.
        daemon.processes.launchingTogether {
            for appConfig in plan.changed {
                guard let app = daemon.runtime(appConfig.name) else { continue }
                app.config = appConfig
                daemon.model.setPolicy(appConfig.policy, for: appConfig.name)
                watchPreferences(of: appConfig)
                Log.info("\(appConfig.name): configuration changed; new settings apply from now on, Exec= at the next launch")
            }
            for appConfig in plan.added {
                add(appConfig)
                Log.info("\(appConfig.name): added")
                if unloadedApps.contains(appConfig.name), let app = daemon.runtime(appConfig.name) {
                    daemon.persistence.restoreKept(app)
                }
                autoLaunch(appConfig.name)
            }
        }
        for name in plan.removed { remove(name) }
        let stillUnloaded = Set(plan.rejected.compactMap { ReloadPlan.appName(of: $0.file) }).filter { daemon.apps[$0] == nil }
        for name in unloadedApps.subtracting(stillUnloaded) where fresh.apps[name] == nil { daemon.persistence.removeKept(name) }
        unloadedApps = stillUnloaded
        config = LoadedConfig(daemon: daemonConfig, apps: configuredApps(), diagnostics: fresh.diagnostics)
        config.adoptSettings = fresh.adoptSettings
        applyDaemonConfig()
        daemon.display.apply(daemonConfig.display, environment: daemon.options.environment)
        daemon.adoption.apply(daemonConfig.adopt)
        let changed = (plan.changed.map(\.name) + plan.added.map(\.name) + plan.removed).sorted()
        let summary = changed.isEmpty ? "nothing changed" : "changed " + changed.joined(separator: ", ")
        if plan.rejected.isEmpty {
            Log.notice("Reloaded the configuration: \(summary)")
        } else {
            Log.error("Reloaded the configuration: \(summary); not applied: \(plan.rejected.map(\.file).joined(separator: ", "))")
        }
        return plan
    }

    /// The apps the configuration holds: adopted apps have no file, and a reload never removes them as if theirs
    /// were gone (`Adoption` lets them go).
    private func configuredApps() -> [String: AppConfig] {
        daemon.apps.filter { !$0.value.config.policy.adopted }.mapValues(\.config)
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
        guard daemon.model.app(name)?.state.isRunning == true else { return daemon.forget(name) }
        daemon.runtime(name)?.removeWhenStopped = true
        Log.info("\(name): removed from the configuration; terminating it")
        daemon.handle(.request(.terminate, app: name, origin: "reload"))
    }

    /// The app's `AutoLaunch=`, asked of the model as a request from "autoLaunch".
    func autoLaunch(_ name: String) {
        guard let app = daemon.runtime(name) else { return }
        let request: Request
        switch app.config.autoLaunch {
        case .no: return
        case .yes: request = .launch(background: false)
        case .background: request = .launch(background: true)
        case .focus: request = .focus
        }
        if let refusal = daemon.handle(.request(request, app: name, origin: "autoLaunch")).refusal {
            Log.warning("Failed to auto-launch \(name): \(refusal)")
        }
    }

    /// The app left the configuration: its preferences file is no longer watched.
    func forget(_ name: String) {
        sources?.unwatchPreferences(app: name)
    }

    private func add(_ appConfig: AppConfig) {
        daemon.adoption.yieldName(appConfig.name)
        daemon.model.add(appConfig.name, policy: appConfig.policy)
        let app = AppRuntime(name: appConfig.name, config: appConfig, place: daemon.placement)
        daemon.apps[appConfig.name] = app
        if appConfig.external { daemon.externalApps.prepare(app) }
        watchPreferences(of: appConfig)
        daemon.observers.tell(.added(appConfig.name))
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
        daemon.model.catalog = NotificationCatalog(extra: config.daemon.notificationTypes)
        daemon.model.memoryWarningGrace = config.daemon.memory.terminateAfter
        daemon.model.memoryEpisodeGap = config.daemon.memory.episodeGap
        daemon.audio.apply(config.daemon.sources)
        guard sources == nil || sourcesConfig != config.daemon.sources else { return }
        sources?.stop()
        sourcesConfig = config.daemon.sources
        sources = SystemSources(
            loop: daemon.loop, config: config.daemon.sources,
            post: { [unowned self] type, payload, app in self.sourcePosted(type, payload: payload, to: app) },
            memoryPressure: { [unowned daemon] reading in
                daemon.memoryPressure(reading: ["someAvg10": .number(reading.someAvg10), "fullAvg10": .number(reading.fullAvg10)])
            })
        sources?.powerChanged = { [unowned daemon] onBattery in
            Log.info("power: \(onBattery ? "on battery" : "on external power")")
            daemon.handle(.power(onBattery: onBattery))
        }
        daemon.handle(.power(onBattery: sources?.onBattery ?? false))
        for line in sources?.descriptions ?? [] { Log.info("source \(line)") }
        for app in daemon.apps.values { watchPreferences(of: app.config) }
    }

    private func sourcePosted(_ type: String, payload: JSONValue, to app: String?) {
        let outcome = daemon.handle(.post(type: type, payload: payload, to: app, from: .daemon))
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
