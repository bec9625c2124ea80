import LifecycleModel
import LifecycleProtocol

/// The configuration in force and its changes: the first load at start, SIGHUP's reload (only apps whose
/// configuration changed are touched), lifecycled.conf's daemon-wide settings and the system sources they start,
/// and each app's `AutoLaunch=`.
final class ConfigReload {
    private unowned let daemon: Daemon
    private(set) var config = LoadedConfig(daemon: DaemonConfig(), apps: [:], diagnostics: [])
    /// The settings the running sources were started with: they start anew only when these change.
    private var sourcesConfig: SourcesConfig?
    /// The real system sources of notifications (clock, time zone, locale, battery, memory pressure, preferences).
    private(set) var sources: SystemSources?

    init(daemon: Daemon) {
        self.daemon = daemon
    }

    /// The first load: every configured app is added, none launched yet.
    func load() {
        config = ConfigLoader.load(directory: daemon.options.configDirectory)
        report(config.diagnostics)
        applyDaemonConfig()
        for name in config.apps.keys.sorted() { add(config.apps[name]!) }
        Log.info("\(daemon.apps.count) apps configured: \(daemon.apps.keys.sorted().joined(separator: ", "))")
    }

    /// SIGHUP: read the config again; only apps whose configuration changed are touched.
    func reload() {
        guard !daemon.stopping else { return }
        daemon.serviceManager.reloading()
        let fresh = ConfigLoader.load(directory: daemon.options.configDirectory)
        report(fresh.diagnostics)
        var changed: [String] = []
        // Added apps launch together, as at start-up.
        daemon.processes.launchingTogether {
            for (name, appConfig) in fresh.apps.sorted(by: { $0.key < $1.key }) {
                if let app = daemon.runtime(name) {
                    guard app.config != appConfig else { continue }
                    app.config = appConfig
                    app.removeWhenStopped = false
                    daemon.model.setPolicy(appConfig.policy, for: name)
                    watchPreferences(of: appConfig)
                    changed.append(name)
                    Log.info("\(name): configuration changed; new settings apply from now on, Exec= at the next launch")
                } else {
                    add(appConfig)
                    changed.append(name)
                    Log.info("\(name): added")
                    autoLaunch(name)
                }
            }
        }
        for name in daemon.apps.keys.sorted() where fresh.apps[name] == nil {
            changed.append(name)
            if daemon.model.app(name)?.state.isRunning == true {
                daemon.runtime(name)?.removeWhenStopped = true
                Log.info("\(name): removed from the configuration; terminating it")
                daemon.perform((try? daemon.model.handle(.terminate, for: name, origin: "reload", now: daemon.loop.now)) ?? [])
                daemon.drain()
            } else {
                daemon.forget(name)
            }
        }
        config = fresh
        applyDaemonConfig()
        Log.notice("Reloaded the configuration: \(changed.isEmpty ? "nothing changed" : "changed " + changed.joined(separator: ", "))")
        daemon.serviceManager.ready { [unowned daemon] in daemon.statusLine() }
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
        do {
            daemon.perform(try daemon.model.handle(request, for: name, origin: "autoLaunch", now: daemon.loop.now))
        } catch {
            Log.warning("Failed to auto-launch \(name): \(error)")
        }
        daemon.drain()
    }

    /// The app left the configuration: its preferences file is no longer watched.
    func forget(_ name: String) {
        sources?.unwatchPreferences(app: name)
    }

    private func add(_ appConfig: AppConfig) {
        daemon.model.add(appConfig.name, policy: appConfig.policy)
        let app = AppRuntime(name: appConfig.name, config: appConfig)
        daemon.apps[appConfig.name] = app
        if appConfig.external { daemon.externalApps.prepare(app) }
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
        daemon.model.catalog = NotificationCatalog(extra: config.daemon.notificationTypes)
        daemon.model.memoryWarningGrace = config.daemon.memory.terminateAfter
        daemon.model.memoryEpisodeGap = config.daemon.memory.episodeGap
        guard sources == nil || sourcesConfig != config.daemon.sources else { return }
        sources?.stop()
        sourcesConfig = config.daemon.sources
        sources = SystemSources(
            loop: daemon.loop, config: config.daemon.sources,
            post: { [unowned self] type, payload, app in self.sourcePosted(type, payload: payload, to: app) },
            memoryPressure: { [unowned daemon] reading in
                daemon.memoryPressure(reading: ["someAvg10": .number(reading.someAvg10), "fullAvg10": .number(reading.fullAvg10)])
            })
        for line in sources?.descriptions ?? [] { Log.info("source \(line)") }
        for app in daemon.apps.values { watchPreferences(of: app.config) }
    }

    private func sourcePosted(_ type: String, payload: JSONValue, to app: String?) {
        do {
            let outcome = try daemon.post(type, payload: payload, to: app)
            daemon.drain()
            Log.info("\(type)\(app.map { " for \($0)" } ?? ""): \(outcome.delivered) delivered, \(outcome.queued) queued")
        } catch {
            Log.warning("Failed to post \(type) from its source: \(error)")
        }
    }

    private func report(_ diagnostics: [ConfigDiagnostic]) {
        for diagnostic in diagnostics {
            switch diagnostic.severity {
            case .error: Log.error("config: \(diagnostic)")
            case .warning: Log.warning("config: \(diagnostic)")
            }
        }
    }
}
