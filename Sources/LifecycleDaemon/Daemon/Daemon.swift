import CSupport
import CSystemd
import Glibc
import LifecycleModel
import LifecycleProtocol

public struct DaemonOptions: Sendable {
    public var configDirectory: String
    public var runtimeDirectory: String
    /// The environment apps inherit PATH and the locale from, and in which `Exec=` names are looked up.
    public var environment: [String: String]

    public init(configDirectory: String, runtimeDirectory: String, environment: [String: String]) {
        self.configDirectory = configDirectory
        self.runtimeDirectory = runtimeDirectory
        self.environment = environment
    }
}

public let daemonVersion = "0.1.0"

/// The supervisor: one event loop, the pure model, and the I/O that carries out the model's effects.
/// Everything here runs on the loop's thread; nothing is shared, so nothing is locked.
public final class Daemon {
    let loop: EventLoop
    let options: DaemonOptions
    let cgroups: CgroupSupport
    var model = Supervisor()
    /// Every configured app, by name. Looked up through `runtime(_:)` on the hot paths.
    var apps: [String: AppRuntime] = [:] {
        didSet { recentApps = (nil, nil) }
    }
    /// The two apps found last by `runtime(_:)`: an event concerns one app or two, looked up many times each
    /// (by the effects the model returns); comparing a name costs a few instructions, the dictionary hashes it whole.
    private var recentApps: (AppRuntime?, AppRuntime?) = (nil, nil)
    var config: LoadedConfig
    let coder = LineCoder()
    let startedAt: Duration
    var control: ControlServer?
    /// RUNTIME_DIR/app.sock, where clients reconnect after a restart of the daemon.
    var appSocket: AppSocketServer?
    /// Pidfds the service manager passed back (FDNAME=pidfd-NAME), by app, until re-adoption takes them.
    private var storedPidfds: [String: Int32] = [:]
    /// The real system sources of notifications (clock, time zone, locale, battery, memory pressure, preferences).
    var sources: SystemSources?
    var stopping = false
    private var signalSources: [EventSource] = []
    private var events: [Event] = []
    private var draining = false
    /// Sources that fired their last event; freed on the next iteration, not inside their own callback.
    private var retired: [EventSource] = []
    private var retireSource: EventSource?
    let serviceManager: ServiceManager
    /// LIFECYCLED_TEST_PAUSE_AFTER=KIND:APP[:MESSAGE] (fault tests only): stop the daemon itself (SIGSTOP)
    /// right after performing an effect of that kind for that app, e.g. `stopProcess:c` or
    /// `send:a:willResignActive`, so that a test can `kill -9` it in the middle of a transition. Never set in
    /// production; logged as a warning when it fires.
    private let pauseAfter: PauseHook?

    struct PauseHook {
        var kind: String
        var app: String
        var message: String?
        func matches(_ effect: Effect) -> Bool {
            guard effect.kindName == kind, effect.app == app else { return false }
            guard let message else { return true }
            if case .send(_, let delivery) = effect { return delivery.name == message }
            return false
        }
    }
    /// The session a waiting `scene open` created, for its reply.
    private var openedScenes: [ObjectIdentifier: String] = [:]
    /// RUNTIME_DIR/state: what a restarted daemon needs to take its apps back.
    let stateStore: StateStore
    /// The apps whose state file is to be saved when the callback returns, each once (`AppRuntime.dirty`): a set of
    /// names hashed each name at each effect that changes the state (8k of an app switch's 250k instructions).
    private var dirtyApps: [AppRuntime] = []
    private var saveScheduled = false

    public init(options: DaemonOptions) throws(SystemError) {
        self.options = options
        loop = try EventLoop()
        startedAt = loop.now
        cgroups = CgroupSupport.detect(groupName: cgroupGroupName(runtimeDirectory: options.runtimeDirectory))
        config = LoadedConfig(daemon: DaemonConfig(), apps: [:], diagnostics: [])
        serviceManager = ServiceManager(environment: options.environment)
        stateStore = StateStore(runtimeDirectory: options.runtimeDirectory)
        pauseAfter = options.environment["LIFECYCLED_TEST_PAUSE_AFTER"].flatMap { text in
            let parts = text.split(separator: ":").map(String.init)
            return parts.count >= 2 ? PauseHook(kind: parts[0], app: parts[1], message: parts.count > 2 ? parts[2] : nil) : nil
        }
    }

    private func pauseForTest(_ effect: Effect) {
        Log.warning("LIFECYCLED_TEST_PAUSE_AFTER: pausing after \(effect.kindName) for \(effect.app ?? "-") (a fault-test hook)")
        raise(SIGSTOP)
    }

    /// Start serving: sockets, config, auto-launch, READY=1; then run the loop until stopped.
    /// Returns the exit code.
    public func run() throws(SystemError) -> Int32 {
        Log.info("lifecycled \(daemonVersion) starting (pid \(getpid()), config \(options.configDirectory), runtime \(options.runtimeDirectory))")
        if let reason = cgroups.fallbackReason { Log.notice("cgroups: \(reason)") }
        Log.info("cgroup layout: \(cgroups.layout.rawValue)")
        for line in cgroups.mechanisms { Log.info("  \(line)") }

        let passed = ServiceManager.passedSockets()
        if passed["control"] == nil { try makeDirectory(options.runtimeDirectory) }
        control = try ControlServer(daemon: self, path: RuntimeDirectory.controlSocket(in: options.runtimeDirectory),
                                    passedFD: passed["control"])
        do {
            appSocket = try AppSocketServer(daemon: self, path: RuntimeDirectory.appSocket(in: options.runtimeDirectory))
        } catch {
            Log.error("Failed to open the app socket: \(error); clients cannot reconnect after a restart of lifecycled")
        }
        // Client connections the service manager kept for us (FDSTORE=1) while the previous daemon died.
        let storedConnections = passed.filter { $0.key.hasPrefix(Self.storedConnectionPrefix) }
        for (fdName, fd) in passed where fdName.hasPrefix(Self.storedPidfdPrefix) {
            storedPidfds[String(fdName.dropFirst(Self.storedPidfdPrefix.count))] = fd
        }
        for (name, fd) in passed where name != "control" && !name.hasPrefix(Self.storedConnectionPrefix)
            && !name.hasPrefix(Self.storedPidfdPrefix) {
            Log.warning("Ignoring the passed socket '\(name)' (fd \(fd)): only 'control' is used")
        }

        for signal in [SIGTERM, SIGINT] {
            signalSources.append(try loop.onSignal(signal) { [unowned self] in self.shutdown() })
        }
        signalSources.append(try loop.onSignal(SIGHUP) { [unowned self] in self.reload() })

        config = ConfigLoader.load(directory: options.configDirectory)
        report(config.diagnostics)
        applyDaemonConfig()
        for name in config.apps.keys.sorted() { add(config.apps[name]!) }
        Log.info("\(apps.count) apps configured: \(apps.keys.sorted().joined(separator: ", "))")
        do {
            try stateStore.prepare()
        } catch {
            Log.error("Failed to prepare the state directory: \(error); a restart of lifecycled will not find its apps")
        }
        restorePreviousRun()
        dropUnusedPidfds()
        attachStoredConnections(storedConnections)
        launchingTogether {
            for name in apps.keys.sorted() where model.app(name)?.state.isRunning != true { autoLaunch(name) }
        }

        serviceManager.ready { [unowned self] in self.statusLine() }
        return loop.run()
    }

    // MARK: Apps

    private func add(_ appConfig: AppConfig) {
        model.add(appConfig.name, policy: appConfig.policy)
        apps[appConfig.name] = AppRuntime(name: appConfig.name, config: appConfig)
        if appConfig.external { prepareExternal(appConfig.name) }
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
        model.catalog = NotificationCatalog(extra: config.daemon.notificationTypes)
        model.memoryWarningGrace = config.daemon.memory.terminateAfter
        model.memoryEpisodeGap = config.daemon.memory.episodeGap
        guard sources == nil || sourcesConfig != config.daemon.sources else { return }
        sources?.stop()
        sourcesConfig = config.daemon.sources
        sources = SystemSources(
            loop: loop, config: config.daemon.sources,
            post: { [unowned self] type, payload, app in self.sourcePosted(type, payload: payload, to: app) },
            memoryPressure: { [unowned self] reading in
                self.memoryPressure(reading: ["someAvg10": .number(reading.someAvg10), "fullAvg10": .number(reading.fullAvg10)])
            })
        for line in sources?.descriptions ?? [] { Log.info("source \(line)") }
        for app in apps.values { watchPreferences(of: app.config) }
    }

    private var sourcesConfig: SourcesConfig?

    private func sourcePosted(_ type: String, payload: JSONValue, to app: String?) {
        do {
            let outcome = try model.post(type, payload: payload, to: app, now: loop.now)
            perform(outcome.effects)
            drain()
            Log.info("\(type)\(app.map { " for \($0)" } ?? ""): \(outcome.delivered) delivered, \(outcome.queued) queued")
        } catch {
            Log.warning("Failed to post \(type) from its source: \(error)")
        }
    }

    private func autoLaunch(_ name: String) {
        guard let app = runtime(name) else { return }
        let request: Request
        switch app.config.autoLaunch {
        case .no: return
        case .yes: request = .launch(background: false)
        case .background: request = .launch(background: true)
        case .focus: request = .focus
        }
        do {
            perform(try model.handle(request, for: name, origin: "autoLaunch", now: loop.now))
        } catch {
            Log.warning("Failed to auto-launch \(name): \(error)")
        }
        drain()
    }

    /// Apply a lifectl request; the reply goes out when the app settles (or at once on refusal).
    func handle(_ request: Request, for name: String, from client: ControlClient) {
        guard !stopping else { return client.reply(.failure("lifecycled is shutting down")) }
        runtime(name)?.waiters.append(client)
        do {
            let effects = try model.handle(request, for: name, origin: "lifectl", now: loop.now)
            for case .sceneOpened(name, let scene) in effects {
                openedScenes[ObjectIdentifier(client)] = scene
            }
            perform(effects)
        } catch {
            // Only this request's entry: earlier requests of the same connection still wait for their replies.
            if let index = runtime(name)?.waiters.lastIndex(where: { $0 === client }) { runtime(name)?.waiters.remove(at: index) }
            client.reply(.failure(error.description))
        }
        drain()
    }

    // MARK: Events

    /// Feed an event to the model and carry out what it decides. Events raised while effects are
    /// being performed (a spawn that fails, a client that hangs up) queue behind the current one.
    func dispatch(_ event: Event) {
        events.append(event)
        drain()
    }

    /// `apps[name]`, trying the two apps found last first.
    @inline(__always)
    func runtime(_ name: String) -> AppRuntime? {
        if let app = recentApps.0, app.name == name { return app }
        if let app = recentApps.1, app.name == name {
            recentApps = (app, recentApps.0)
            return app
        }
        guard let app = apps[name] else { return nil }
        recentApps = (app, recentApps.0)
        return app
    }

    func drain() {
        guard !draining else { return }
        draining = true
        defer { draining = false }
        while !events.isEmpty {
            let event = events.removeFirst()
            perform(model.handle(event, now: loop.now))
        }
    }

    func perform(_ effects: [Effect]) {
        for effect in effects {
            defer { if let pauseAfter, pauseAfter.matches(effect) { pauseForTest(effect) } }
            switch effect {
            case .spawn(let name, let options): spawn(name, options)
            case .send(let name, let delivery): send(name, delivery)
            case .stopProcess(let name): suspend(name)
            case .continueProcess(let name): resume(name)
            case .signal(let name, let signal): self.signal(name, signal)
            case .armTimer(let name, let kind, let delay): timer(name, kind)?.arm(after: delay)
            case .cancelTimer(let name, let kind): runtime(name)?.timers[kind]?.cancel()
            case .transition(let name, let from, let to, let reason): transitioned(name, from, to, reason)
            case .note(let name, let note): log(name, note)
            case .settled(let name): settled(name)
            case .notify(let name, let delivery):
                runtime(name)?.connection?.send(coder.encode(ServerMessage.notification(delivery)))
            case .taskBegan(let name, let task, let remaining):
                runtime(name)?.connection?.send(coder.encode(ServerMessage.backgroundTaskBegan(
                    task: task.id, name: task.name, remainingMs: remaining.map(milliseconds))))
                Log.info("\(name): began background task \(task.id) '\(task.name)'" + (remaining.map { ", \(describe($0)) left" } ?? " (in the foreground)"))
            case .taskExpiring(let name, let tasks, let remaining):
                runtime(name)?.connection?.send(coder.encode(ServerMessage.backgroundTimeWillExpire(
                    tasks: tasks, remainingMs: milliseconds(remaining))))
                Log.notice("\(name): background time runs out in \(describe(remaining)); open tasks: \(tasks.map(\.name).joined(separator: ", "))")
            case .sceneOpened: break  // read by `handle(_:for:from:)`, which knows who asked
            case .save(let name): markDirty(name)
            }
        }
    }

    private func timer(_ name: String, _ kind: TimerKind) -> LoopTimer? {
        guard let app = runtime(name) else { return nil }
        if let timer = app.timers[kind] { return timer }
        do {
            // The ack deadline is armed and met on every callback: its cancel is lazy (LoopTimer).
            let timer = try LoopTimer(loop: loop, lazyCancel: kind == .ack) { [unowned self] in
                self.dispatch(.timerFired(app: name, kind))
            }
            app.timers[kind] = timer
            return timer
        } catch {
            Log.error("Failed to create the \(kind) timer of \(name): \(error)")
            return nil
        }
    }

    // MARK: Processes

    private func spawn(_ name: String, _ launch: LaunchOptions) {
        guard let app = runtime(name) else { return }
        let config = app.config
        if app.cgroup == nil && cgroups.layout != .none {
            do {
                app.cgroup = try cgroups.makeAppCgroup(app: name)
            } catch {
                Log.warning("Failed to create the cgroup of \(name): \(error); using its process group alone")
            }
        }
        // The child joins the cgroup before it execs, while this daemon waits for that exec (CLONE_VFORK): in a
        // cgroup left frozen (a frozen app killed by jetsam, someone else's freeze) it would freeze there and the
        // daemon with it, for good. The soak test found this; the cgroup is thawed first, always.
        if app.cgroup?.isNew == true {
            app.cgroup?.isNew = false  // from its second launch on, it may have been left frozen
        } else {
            thawIfFrozen(app)
        }
        let path = options.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        guard let executable = resolveExecutable(config.exec[0], path: path) else {
            events.append(.spawnFailed(app: name, reason: "executable '\(config.exec[0])' not found (PATH=\(path))"))
            return
        }
        let credentials: Credentials?
        do {
            credentials = try lookupCredentials(user: config.user, group: config.group)
        } catch {
            events.append(.spawnFailed(app: name, reason: "\(error)"))
            return
        }

        var pair: (daemon: Int32, child: Int32)?
        if config.policy.speaksProtocol {
            var fds: [Int32] = [-1, -1]
            guard cs_socketpair_cloexec(&fds) == 0 else {
                events.append(.spawnFailed(app: name, reason: "Failed to create the client socket: \(String(cString: strerror(errno)))"))
                return
            }
            pair = (fds[0], fds[1])
        }
        // The app's stdout and stderr: a journal stream under its name, or a pipe the daemon prefixes onto its stderr.
        var output: (child: Int32, reader: Int32?)?
        if Log.toJournal, let stream = Journal.stream(identifier: name) {
            output = (stream, nil)
        } else {
            var fds: [Int32] = [-1, -1]
            if cs_pipe_cloexec(&fds) == 0 { output = (fds[1], fds[0]) }
        }
        var environment = baseEnvironment(for: config, credentials: credentials)
        environment.append("LIFECYCLE_APP=\(name)")
        if pair != nil {
            environment.append("LIFECYCLE_FD=3")
            if let appSocket { environment.append("LIFECYCLE_SOCKET=\(appSocket.path)") }
        }

        let request = SpawnRequest(executable: executable, argv: config.exec, environment: environment,
                                   workingDirectory: config.workingDirectory, credentials: credentials,
                                   inheritedFD: pair?.child, cgroupProcsFiles: app.cgroup?.procsFiles ?? [],
                                   outputFD: output?.child)
        let onWorker = launchBatch != nil
        let started = LaunchInFlight(name: name, launch: launch, pair: pair, output: output,
                                     spawn: Result { () throws(SystemError) in try startSpawn(request, onWorker: onWorker) })
        if launchBatch != nil {
            launchBatch?.append(started)
            // Bounded: the oldest launch is finished before more than 64 are in flight (descriptors, memory).
            if let batch = launchBatch, batch.count > 64 {
                launchBatch?.removeFirst()
                finishLaunch(batch[0])
            }
        } else {
            finishLaunch(started)
        }
    }

    /// A launch whose child is being spawned: what `finishLaunch` needs once its pid is known.
    private struct LaunchInFlight {
        let name: String
        let launch: LaunchOptions
        let pair: (daemon: Int32, child: Int32)?
        let output: (child: Int32, reader: Int32?)?
        let spawn: Result<PendingSpawn, SystemError>
    }

    /// Launches started inside `launchingTogether`, not finished yet; nil outside it.
    private var launchBatch: [LaunchInFlight]?

    /// Runs `body` (which launches apps) with the children spawned on worker threads, so that they set themselves
    /// up side by side while the next apps are prepared, and finishes every launch before returning. The model
    /// has moved each app already; its pid, output, connection and priority are set when its launch finishes.
    private func launchingTogether(_ body: () -> Void) {
        guard launchBatch == nil else { return body() }
        launchBatch = []
        body()
        let batch = launchBatch ?? []
        launchBatch = nil
        for started in batch { finishLaunch(started) }
        drain()
    }

    private func finishLaunch(_ started: LaunchInFlight) {
        let name = started.name, pair = started.pair, output = started.output, launch = started.launch
        guard let app = runtime(name) else { return }
        let config = app.config
        let pid: pid_t
        do {
            pid = try started.spawn.get().wait()
        } catch {
            if let pair { close(pair.daemon); close(pair.child) }
            if let output { close(output.child); output.reader.map { _ = close($0) } }
            events.append(.spawnFailed(app: name, reason: "\(error)"))
            return
        }
        if let pair { close(pair.child) }
        if let output {
            close(output.child)
            if let reader = output.reader { app.output = try? OutputReader(fd: reader, app: name, loop: loop) }
        }
        app.pid = pid
        app.helloed = false
        app.priority = nil
        app.token = makeToken()
        do {
            app.child = try loop.watchChild(pid: pid) { [unowned self] code, status in
                self.childChanged(name, pid: pid, code: code, status: status)
            }
            storePidfd(app, pid: pid)
            if let pair {
                var connection: Connection?
                connection = try Connection(fd: pair.daemon, loop: loop) { [unowned self] event in
                    guard let connection else { return }
                    self.clientEvent(name, connection, event)
                }
                app.connection = connection
                // Kept by the service manager too, so that the client stays connected through a crash of ours.
                app.fdStored = serviceManager.storeFD(pair.daemon, name: Self.storedConnectionPrefix + name)
            }
        } catch {
            Log.error("Failed to watch \(name) (pid \(pid)): \(error); killing it")
            kill(-pid, SIGKILL)
        }
        // The priority of the state the model has moved the app to by now (a launch together with others finishes
        // after its transitions, which found no pid to apply it to).
        if let state = model.app(name)?.state, let priority = PriorityClass(state) {
            apply(priority, to: app, pid: pid)
        }
        Log.event(.launch, .info, "\(name): started pid \(pid): \(config.exec.joined(separator: " "))"
            + (launch.launchedBy == "lifectl" ? "" : " (\(launch.launchedBy))"),
                  [("LIFECYCLE_APP", name), ("LIFECYCLE_PID", String(pid)), ("LIFECYCLE_LAUNCHED_BY", launch.launchedBy),
                   ("LIFECYCLE_EXEC", config.exec.joined(separator: " "))])
    }

    /// systemd-like: a small clean environment, not the daemon's own, plus the app's `Environment=`.
    private func baseEnvironment(for config: AppConfig, credentials: Credentials?) -> [String] {
        var environment: [String] = []
        for key in ["PATH", "LANG", "LC_ALL", "TZ", "HOME", "USER", "LOGNAME", "XDG_RUNTIME_DIR"] where credentials == nil || !["HOME", "USER", "LOGNAME", "XDG_RUNTIME_DIR"].contains(key) {
            if let value = options.environment[key] { environment.append("\(key)=\(value)") }
        }
        if let credentials {
            if let home = credentials.home { environment.append("HOME=\(home)") }
            if let user = credentials.userName { environment += ["USER=\(user)", "LOGNAME=\(user)"] }
        }
        let overridden = Set(config.environment.map { $0.prefix { $0 != "=" } })
        environment.removeAll { overridden.contains($0.prefix { $0 != "=" }) }
        return environment + config.environment
    }

    private func childChanged(_ name: String, pid: pid_t, code: Int32, status: Int32) {
        guard let app = runtime(name), app.pid == pid else { return }
        switch code {
        case Int32(CLD_EXITED), Int32(CLD_KILLED), Int32(CLD_DUMPED):
            unconfirmedStops.remove(name)
            exited(app, code == Int32(CLD_EXITED) ? .exited(status) : .signaled(status))
        case Int32(CLD_STOPPED):
            // waitid() reports a stop only while the process is stopped (a SIGCONT clears it as it is sent): the
            // stop this daemon caused is confirmed for the leader without reading /proc (see `suspend`).
            if unconfirmedStops.contains(name) && app.suspendedWith == .signal {
                return confirmStopped(name, leaderStopped: true)
            }
            // The model takes a stop only for an app it does not hold suspended: for one it does, nothing to check.
            guard model.app(name)?.state != .suspended else { return }
            // Check /proc so a stale event after our own SIGCONT is not taken for someone else's stop.
            if ProcessTable.state(of: pid) == "T" { dispatch(.processStopped(app: name)) }
        case Int32(CLD_CONTINUED):
            // While our own stop is unconfirmed, a continue is the late report of our previous SIGCONT: the new
            // SIGSTOP may not be delivered yet, so /proc still shows the process running, and taking that for
            // someone else's continue would move the app to the background as it stops (seen once in 3,000
            // back-to-back suspend/resume pairs).
            guard !(unconfirmedStops.contains(name) && app.suspendedWith != nil) else { return }
            // The model takes a continue only for a suspended app it is not terminating (the report of our own
            // resume comes when the app is in the background already): for any other, nothing to check.
            guard let record = model.app(name), record.state == .suspended, !record.isTerminating else { return }
            if ProcessTable.state(of: pid) != "T" { dispatch(.processContinued(app: name)) }
        default: break
        }
    }

    func exited(_ app: AppRuntime, _ status: ExitStatus) {
        if let pid = app.pid {
            Log.event(.exit, .info, "\(app.name): process \(pid) \(status)",
                      [("LIFECYCLE_APP", app.name), ("LIFECYCLE_PID", String(pid)), ("LIFECYCLE_EXIT", "\(status)")])
            // Whatever the app left behind in its group or cgroup goes with it (systemd's KillMode=control-group),
            // and the cgroup is not left frozen for the next launch.
            if let cgroup = app.cgroup {
                thawIfFrozen(app)
                cgroup.killAll()
            }
            kill(-pid, SIGKILL)
            // The descriptors kept for its processes' oom_score_adj (KernelFiles.swift) go with them; those of a
            // member that left earlier go as the least recently used.
            kernelFiles.withLock { cache in
                for member in Set(app.lastMembersRead + [pid]) { cache.forget(under: "/proc/\(member)") }
            }
        }
        app.pid = nil
        app.suspendedWith = nil
        app.stopCheck?.cancel()
        if let child = app.child { retire(child) }
        app.child = nil
        if let pidfd = app.pidfd { close(pidfd) }
        app.pidfd = nil
        releaseStoredConnection(app)
        releaseStoredPidfd(app)
        app.connection?.closeQuietly()
        app.connection = nil
        dispatch(.exited(app: app.name, status))
    }

    /// Frees `source` after the callback that is running now (it may be that source's own). It is disabled at once:
    /// for an I/O source that takes its descriptor out of epoll while the descriptor is still open. Closing a pidfd
    /// first and freeing its source later left the registration in epoll, since the service manager's fd store kept
    /// the same file open, and the next wait returned an event for the freed source: sd-event aborted ("Code should
    /// not be reached", process_epoll) on `systemctl stop` after a restart had handed over re-adopted apps (the real
    /// systemd test, `make test-systemd`).
    private func retire(_ source: EventSource) {
        source.disarm()
        retired.append(source)
        if retireSource == nil {
            retireSource = try? loop.deferred { [unowned self] in
                self.retired.removeAll()
                self.retireSource = nil
            }
        }
    }

    /// Apps whose suspension the daemon started and has not confirmed yet (see `childChanged`).
    private var unconfirmedStops: Set<String> = []

    private func suspend(_ name: String) {
        guard let app = runtime(name), let pid = app.pid else { return }
        unconfirmedStops.insert(name)
        var mechanism = SuspendMechanism.signal
        if app.config.suspendMethod == .freezer {
            if let cgroup = app.cgroup, let kind = cgroup.freezer {
                do {
                    try cgroup.freeze()
                    mechanism = .freezer(kind)
                } catch {
                    Log.warning("\(name): Failed to freeze its cgroup: \(error); using SIGSTOP")
                }
            } else {
                Log.notice("\(name): SuspendMethod=freezer, but it has no cgroup freezer here; using SIGSTOP")
            }
        }
        // The members as the priority of the transition read them, in this same callback (`members(iteration:)`).
        let members = app.members(iteration: loop.iteration)
        if mechanism == .signal {
            kill(-pid, SIGSTOP)
            // A child that left the group (setsid) is still in the app's cgroup: it is stopped too.
            for member in membersOutsideGroup(app, leader: pid) { kill(member, SIGSTOP) }
        }
        app.suspendedWith = mechanism
        app.stopCheckStarted = loop.now
        app.stopMembers = members
        if mechanism == .signal && app.pidfd == nil {
            // Our own child: the kernel reports its stop (CLD_STOPPED, `childChanged`), which confirms it without a
            // read of /proc, and the other members are checked then. Checking /proc now, before the signal has had
            // time to land, mostly found it running and polled. The recheck stays armed, in case no report comes
            // (someone's SIGCONT cut the stop short).
            armStopCheck(app)
        } else {
            confirmStopped(name)
        }
    }

    /// The members of the app's cgroup outside its process group (a child that called setsid()), which the
    /// signal to the group does not reach. None without a cgroup: the process group is all there is. The process
    /// the daemon spawned leads its group for good (a session leader cannot change its group): no getpgid for it.
    /// Read at most once per callback (`members(iteration:)`), and not at all without a cgroup (where it would be a
    /// scan of /proc).
    private func membersOutsideGroup(_ app: AppRuntime, leader pid: pid_t) -> [pid_t] {
        guard app.cgroup != nil else { return [] }
        return app.members(iteration: loop.iteration).filter { member in
            !(member == pid && app.pidfd == nil) && getpgid(member) != pid
        }
    }

    private func armStopCheck(_ app: AppRuntime) {
        let name = app.name
        if app.stopCheck == nil {
            app.stopCheck = try? LoopTimer(loop: loop, lazyCancel: true) { [unowned self] in self.confirmStopped(name) }
        }
        app.stopCheck?.arm(after: .milliseconds(1))
    }

    /// The stop is confirmed when every process shows `T` in /proc (or the cgroup reports frozen).
    /// Signals are delivered asynchronously, so recheck briefly (typically well under a millisecond).
    /// `leaderStopped`: the kernel reported the stop of the leader (our child), so only the other processes the
    /// suspension stopped are read in /proc, and none for an app of one process.
    private func confirmStopped(_ name: String, leaderStopped: Bool = false) {
        guard let app = runtime(name), let pid = app.pid, let mechanism = app.suspendedWith else {
            unconfirmedStops.remove(name)
            return
        }
        let members = leaderStopped ? app.stopMembers : app.members(iteration: loop.iteration)
        let confirmed = switch mechanism {
        case .signal: leaderStopped ? ProcessTable.noneRunning(members.filter { $0 != pid }) : ProcessTable.allStopped(members)
        case .freezer: app.cgroup?.isFrozen() ?? false
        }
        let elapsed = loop.now - app.stopCheckStarted
        if confirmed {
            unconfirmedStops.remove(name)
            app.stopCheck?.cancel()
            let count = max(members.count, 1)
            Log.info("\(name): suspended with \(mechanism.description): \(count) process\(count == 1 ? "" : "es") stopped, confirmed after \(Int(elapsed / .microseconds(1))) µs")
        } else if elapsed < .seconds(2) {
            armStopCheck(app)
        } else {
            unconfirmedStops.remove(name)
            Log.warning("\(name): Failed to confirm the suspension within 2s: some processes are still running")
        }
    }

    private func resume(_ name: String) {
        unconfirmedStops.remove(name)
        guard let app = runtime(name), let pid = app.pid else { return }
        app.stopCheck?.cancel()
        switch app.suspendedWith {
        case .freezer:
            do { try app.cgroup?.thaw() } catch { Log.error("\(name): Failed to thaw its cgroup: \(error)") }
        case .signal, nil:
            kill(-pid, SIGCONT)
            for member in membersOutsideGroup(app, leader: pid) { kill(member, SIGCONT) }
        }
        app.suspendedWith = nil
        app.stopMembers = []
    }

    /// Thaws the app's cgroup if its freezer holds it frozen (or freezing).
    private func thawIfFrozen(_ app: AppRuntime) {
        guard let cgroup = app.cgroup, cgroup.isFreezing() else { return }
        do { try cgroup.thaw() } catch { Log.warning("\(app.name): Failed to thaw its cgroup: \(error)") }
    }

    private func signal(_ name: String, _ signal: TerminationSignal) {
        guard let app = runtime(name), let pid = app.pid else { return }
        switch signal {
        case .terminate:
            kill(-pid, SIGTERM)
        case .kill:
            // A v1-frozen task is unkillable until thawed; after SIGKILL no code of the app runs anyway.
            thawIfFrozen(app)
            app.cgroup?.killAll()
            kill(-pid, SIGKILL)
        }
        Log.info("\(name): sent \(signal.rawValue) to process group \(pid)")
    }

    // MARK: Clients

    private func send(_ name: String, _ delivery: Delivery) {
        guard let connection = runtime(name)?.connection else { return }
        connection.send(coder.encode(ServerMessage(delivery)))
        Log.debug("\(name): sent \(delivery.name) (id \(delivery.id))")
    }

    func clientEvent(_ name: String, _ connection: Connection, _ event: Connection.Event) {
        guard let app = runtime(name), app.connection === connection else { return }
        switch event {
        case .line(let line):
            let message: ClientMessage
            do {
                message = try coder.decode(ClientMessage.self, from: line)
            } catch {
                return protocolViolation(app, ProtocolError(decoding: error, line: line).message)
            }
            switch message {
            case .hello(let version, let observe, _, _):
                guard !app.helloed else { return protocolViolation(app, "second hello") }
                guard version == protocolVersion else {
                    return protocolViolation(app, "protocol \(version) is not spoken here (this daemon speaks \(protocolVersion))")
                }
                app.helloed = true
                let state = model.app(name)?.state ?? .notRunning
                connection.send(coder.encode(ServerMessage.welcome(protocol: protocolVersion, app: name, state: state,
                                                                   token: app.token)))
                if let observe { dispatch(.observe(app: name, names: Set(observe))) }
                dispatch(.hello(app: name))
            case _ where !app.helloed:
                protocolViolation(app, "message before hello")
            case .ack(let id, let configuration, let state):
                dispatch(.ack(app: name, id: id, reply: AckReply(configuration: configuration, savedState: state)))
            case .requestSceneActivation(let scene, let role, let configuration, let options):
                let request: Request = scene.map(Request.focusScene)
                    ?? .openScene(role: role, configuration: configuration, options: options ?? .object([:]))
                sceneRequest(request, from: app, type: "requestSceneActivation")
            case .requestSceneDestruction(let scene):
                sceneRequest(.discardScene(scene), from: app, type: "requestSceneDestruction")
            case .observe(let names):
                dispatch(.observe(app: name, names: Set(names)))
            case .post(let type, let payload, let target):
                do {
                    let outcome = try model.post(type, payload: payload ?? .object([:]), to: target, now: loop.now)
                    perform(outcome.effects)
                    Log.debug("\(name) posted \(type): \(outcome.delivered) delivered, \(outcome.queued) queued")
                } catch {
                    connection.send(coder.encode(ServerMessage.postFailed(name: type, message: error.description)))
                }
                drain()
            case .beginBackgroundTask(let task, let taskName):
                guard model.app(name)?.tasks.contains(where: { $0.id == task }) != true else {
                    return protocolViolation(app, "background task \(task) is already open")
                }
                dispatch(.beginBackgroundTask(app: name, task: BackgroundTask(id: task, name: taskName)))
            case .endBackgroundTask(let task):
                dispatch(.endBackgroundTask(app: name, id: task))
            }
        case .framingError(let message):
            protocolViolation(app, message)
        case .closed:
            app.connection = nil
            releaseStoredConnection(app)
            if model.app(name)?.isTerminating == true {
                Log.debug("\(name): the client closed its connection while terminating")
            } else {
                Log.notice("\(name): the client closed its connection; managing it without messages")
            }
            dispatch(.disconnected(app: name))
        }
    }

    /// A client asks for one of its own scenes (UIKit's requestSceneSessionActivation/Destruction).
    /// A refusal goes back as `requestFailed`; the connection stays.
    private func sceneRequest(_ request: Request, from app: AppRuntime, type: String) {
        do {
            perform(try model.handle(request, for: app.name, origin: app.name, now: loop.now))
            Log.info("\(app.name): asked to \(request) itself")
        } catch {
            Log.notice("\(app.name): refused its \(type): \(error)")
            app.connection?.send(coder.encode(ServerMessage.requestFailed(request: type, message: error.description)))
        }
        drain()
    }

    /// A client broke the protocol: tell it what was wrong, hang up, and manage the app without messages.
    private func protocolViolation(_ app: AppRuntime, _ message: String) {
        Log.event(.protocolError, .warning,
                  "\(app.name): protocol error: \(message); disconnecting it (the app is managed without messages from now on)",
                  [("LIFECYCLE_APP", app.name), ("LIFECYCLE_REASON", message)])
        app.connection?.send(coder.encode(ServerMessage.error(message)))
        app.connection?.closeQuietly()
        app.connection = nil
        releaseStoredConnection(app)
        dispatch(.disconnected(app: app.name))
    }

    // MARK: Effects that report

    private func transitioned(_ name: String, _ from: AppState, _ to: AppState, _ reason: String) {
        guard let app = runtime(name) else { return }
        app.sinceWall = wallClockNow()
        Log.event(.transition, .info, "\(name): \(from.rawValue) → \(to.rawValue) (\(reason))",
                  [("LIFECYCLE_APP", name), ("LIFECYCLE_FROM", from.rawValue), ("LIFECYCLE_TO", to.rawValue),
                   ("LIFECYCLE_REASON", reason)] + (app.pid.map { [("LIFECYCLE_PID", String($0))] } ?? []))
        if let priority = PriorityClass(to), priority != app.priority, let pid = app.pid {
            apply(priority, to: app, pid: pid)
        }
        if !to.isRunning { app.priority = nil }
        serviceManager.statusChanged(loop: loop)
    }

    private func apply(_ priority: PriorityClass, to app: AppRuntime, pid: pid_t) {
        var previous = app.priority
        app.priority = priority
        var cpuByCgroup = false
        if let cgroup = app.cgroup {
            do {
                // Background and suspended weigh the same (PriorityClass.weightClass): between them nothing is written.
                if previous?.weightClass != priority.weightClass { try cgroup.setPriority(priority) }
                cpuByCgroup = cgroup.controlsCPU
            } catch {
                Log.debug("\(app.name): Failed to set the cgroup priority: \(error)")
                // Nice instead, now and (nothing known to be applied) at the next transition too.
                previous = nil
                app.priority = nil
            }
        }
        let failures = ProcessPriority.apply(priority, from: previous, processGroup: pid,
                                             members: app.members(iteration: loop.iteration), useNice: !cpuByCgroup)
        for failure in failures { Log.debug("\(app.name): \(failure), ignoring") }
    }

    private func log(_ name: String, _ note: Note) {
        switch note {
        case .deadlineMissed(let callback, let id, let limit, let misses):
            Log.event(.deadlineMissed, .warning,
                      "\(name): \(callback.rawValue) (id \(id)) was not acknowledged within \(describe(limit)); going on (\(misses) missed so far)",
                      [("LIFECYCLE_APP", name), ("LIFECYCLE_CALLBACK", callback.rawValue), ("LIFECYCLE_MISSES", String(misses))])
        case .launchWatchdog(let limit):
            Log.event(.deadlineMissed, .error,
                      "\(name): did not finish launching within \(describe(limit)); killing it (launch watchdog)",
                      [("LIFECYCLE_APP", name), ("LIFECYCLE_CALLBACK", "didFinishLaunching"), ("LIFECYCLE_REASON", "launch watchdog")])
        case .noHello(let limit):
            Log.notice("\(name): no hello within \(describe(limit)); managing it without messages")
        case .restartScheduled(let delay, let attempt, let burst, let interval):
            Log.event(.restart, .notice,
                      "\(name): restarting in \(describe(delay)) (start \(attempt) of at most \(burst) within \(describe(interval)))",
                      [("LIFECYCLE_APP", name), ("LIFECYCLE_RESTART_DELAY_USEC", String(milliseconds(delay) * 1000)),
                       ("LIFECYCLE_ATTEMPT", String(attempt))])
        case .startLimitHit(let starts, let within):
            Log.event(.startLimit, .error,
                      "\(name): started \(starts) times within \(describe(within)); giving up, it stays failed until `lifectl launch \(name)`",
                      [("LIFECYCLE_APP", name), ("LIFECYCLE_STARTS", String(starts))])
        case .stoppedExternally:
            Log.notice("\(name): its process was stopped by someone else; now suspended")
        case .continuedExternally:
            Log.notice("\(name): its process was continued by someone else; now in the background")
        case .spawnFailed(let reason):
            Log.error("\(name): Failed to start: \(reason)")
        case .killTimeout(let limit):
            Log.warning("\(name): did not exit within \(describe(limit)) of SIGTERM; sending SIGKILL")
        case .taskOverrun(let tasks, let limit, let overruns):
            Log.warning("\(name): background tasks still open when their \(describe(limit)) ran out: \(tasks.joined(separator: ", ")); suspending it anyway (\(overruns) overruns so far)")
        case .tasksAbandoned(let tasks):
            Log.notice("\(name): suspended with background tasks open: \(tasks.joined(separator: ", "))")
        case .memoryWarning(let count):
            Log.warning("Memory pressure: sent didReceiveMemoryWarning to \(count) apps")
        case .terminatedForMemory(let bytes):
            Log.event(.memoryTermination, .warning,
                      "\(name): terminated while suspended to relieve memory pressure (jetsam)" + (bytes.map { ", \($0 / 1024) KiB resident" } ?? ""),
                      [("LIFECYCLE_APP", name), ("LIFECYCLE_REASON", "memory pressure")]
                        + (bytes.map { [("LIFECYCLE_RSS_BYTES", String($0))] } ?? []))
        case .nothingToTerminate:
            Log.warning("Memory pressure persists, and no suspended app is left to terminate")
        case .messageDeadlineMissed(let message, let id, let limit, let misses):
            Log.event(.deadlineMissed, .warning,
                      "\(name): \(message) (id \(id)) was not acknowledged within \(describe(limit)); going on (\(misses) missed so far)",
                      [("LIFECYCLE_APP", name), ("LIFECYCLE_CALLBACK", message), ("LIFECYCLE_MISSES", String(misses))])
        case .sceneTransition(let scene, let from, let to, let reason):
            let fromName = from?.rawValue ?? "disconnected", toName = to?.rawValue ?? "disconnected"
            Log.event(.transition, .info, "\(name)/\(scene): \(fromName) → \(toName) (\(reason))",
                      [("LIFECYCLE_APP", name), ("LIFECYCLE_SCENE", scene), ("LIFECYCLE_FROM", fromName),
                       ("LIFECYCLE_TO", toName), ("LIFECYCLE_REASON", reason)])
        case .unknownSceneConfiguration(let scene, let asked, let used):
            Log.warning("\(name)/\(scene): configurationForConnecting answered '\(asked)', which its [Scenes] does not declare for the role; using '\(used)'")
        case .scenesDiscarded(let scenes):
            Log.info("\(name): discarded scene session\(scenes.count == 1 ? "" : "s") \(scenes.joined(separator: ", "))")
        case .sceneSessionCreated(let scene, let role):
            Log.info("\(name)/\(scene): new scene session (role \(role))")
        case .savedStateTooLarge(let scene, let size, let limit):
            Log.warning("\(name)/\(scene): the state saved at sceneDidEnterBackground is about \(size) bytes of JSON, over \(limit); keeping the one saved before")
        }
    }

    private func settled(_ name: String) {
        guard let app = runtime(name) else { return }
        let waiters = app.waiters
        app.waiters = []
        if !waiters.isEmpty, let status = status(of: name) {
            for waiter in waiters {
                waiter.reply(ControlReply(ok: true, apps: [status],
                                          scene: openedScenes.removeValue(forKey: ObjectIdentifier(waiter))))
            }
        }
        let running = model.state(of: name)?.isRunning ?? false
        if app.removeWhenStopped && !running { forget(name) }
        if stopping { finishShutdownIfDone() }
    }

    private func forget(_ name: String) {
        guard let app = runtime(name) else { return }
        sources?.unwatchPreferences(app: name)
        for waiter in app.waiters { waiter.reply(.failure("\(name) was removed from the configuration")) }
        app.cgroup?.remove()
        model.remove(name)
        apps[name] = nil
        app.dirty = false
        dirtyApps.removeAll { $0 === app }
        stateStore.remove(name)
        Log.info("\(name): removed")
    }

    // MARK: Status

    func status(of name: String) -> AppStatus? {
        guard let app = runtime(name) else { return nil }
        return model.withApp(name) { record in status(app, record) }
    }

    private func status(_ app: AppRuntime, _ record: borrowing AppRecord) -> AppStatus {
        let name = app.name
        let protocolState: String
        if !record.policy.speaksProtocol {
            protocolState = "none"
        } else if !record.state.isRunning {
            protocolState = "lifecycle"
        } else {
            protocolState = record.muted ? "silent" : record.connected ? "lifecycle" : "waiting"
        }
        let suspendMethod = app.suspendedWith?.description
            ?? (app.config.suspendMethod == .freezer && (app.cgroup?.freezer != nil || cgroups.canFreeze) ? "freezer" : "signal")
        var status = AppStatus(name: name, state: record.state, pid: app.pid, since: rfc3339(app.sinceWall),
                               sinceSeconds: max(0, wallClockNow() - app.sinceWall), protocol: protocolState,
                               launches: record.launches, deadlineMisses: record.deadlineMisses,
                               awaiting: record.awaitingCallback?.rawValue, suspendMethod: suspendMethod,
                               cgroup: app.cgroup?.displayPath)
        status.queuedNotifications = record.queue.count
        status.queuedPosts = record.queue.postCount
        status.observing = record.observing.sorted()
        status.backgroundTasks = record.tasks.map { TaskStatus(task: $0.id, name: $0.name) }
        status.backgroundTimeRemaining = record.tasks.isEmpty ? nil
            : record.backgroundTimeRemaining(now: loop.now).map { Double(milliseconds($0)) / 1000 }
        status.taskOverruns = record.taskOverruns
        status.backgroundModes = record.policy.backgroundModes.sorted()
        status.memoryTerminations = record.memoryTerminations
        status.terminatedInBackground = record.terminatedInBackground
        if record.usesScenes {
            status.scenes = record.sessions.map {
                SceneStatus(scene: $0.id, role: $0.role, configuration: $0.configuration,
                            state: $0.state?.rawValue ?? "disconnected", savedState: $0.savedState)
            }
        }
        return status
    }

    /// Memory pressure crossed the threshold (a PSI trigger fired, or `lifectl simulate-memory-pressure`):
    /// the model warns the apps first, then terminates suspended ones while it persists.
    func memoryPressure(reading: JSONValue) {
        var residentBytes: [String: UInt64] = [:]
        for record in model.records where record.state == .suspended {
            residentBytes[record.name] = apps[record.name].map { ProcessTable.residentBytes(of: $0.members()) } ?? 0
        }
        perform(model.handle(.memoryPressure(residentBytes: residentBytes, reading: reading), now: loop.now))
        drain()
    }

    /// lifectl post: deliver or queue, and say how many of each.
    func post(_ type: String, payload: JSONValue, to app: String?) -> ControlReply {
        do {
            let outcome = try model.post(type, payload: payload, to: app, now: loop.now)
            perform(outcome.effects)
            drain()
            Log.info("posted \(type)\(app.map { " to \($0)" } ?? ""): \(outcome.delivered) delivered, \(outcome.queued) queued")
            return ControlReply(ok: true, posted: PostSummary(delivered: outcome.delivered, queued: outcome.queued))
        } catch {
            return .failure(error.description)
        }
    }

    func allStatuses() -> [AppStatus] { apps.keys.sorted().compactMap(status(of:)) }

    func daemonStatus() -> DaemonStatus {
        var status = DaemonStatus(pid: getpid(), version: daemonVersion, configDirectory: options.configDirectory,
                     runtimeDirectory: options.runtimeDirectory, cgroupLayout: cgroups.layout.rawValue,
                     mechanisms: cgroups.mechanisms + (cgroups.fallbackReason.map { ["fallback: \($0)"] } ?? []),
                     configErrors: config.diagnostics.map(\.description),
                     uptimeSeconds: Double((loop.now - startedAt) / .milliseconds(1)) / 1000)
        status.sources = sources?.descriptions ?? []
        status.notificationTypes = model.catalog.types.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.rawValue)" }
        return status
    }

    /// One line for systemd's STATUS=: "4 apps: 1 active, 1 inactive, 1 background, 1 suspended; 3 notifications queued".
    func statusLine() -> String {
        var counts: [AppState: Int] = [:]
        var queued = 0
        for record in model.records {
            counts[record.state, default: 0] += 1
            queued += record.queue.count
        }
        let parts = AppState.allCases.filter { $0 != .notRunning }.compactMap { state in
            counts[state].map { "\($0) \(state.rawValue)" }
        }
        return "\(model.records.count) apps" + (parts.isEmpty ? "" : ": " + parts.joined(separator: ", "))
            + (queued > 0 ? "; \(queued) notifications queued" : "")
    }


    // MARK: Persistence and re-adoption

    /// The save runs once the current callback returns (`EventLoop.afterCallback`): every change one event made,
    /// one file per app, before the loop waits again.
    private func markDirty(_ name: String) {
        guard let app = runtime(name), flagDirty(app) else { return }
        guard !saveScheduled else { return }
        saveScheduled = true
        loop.afterCallback { [unowned self] in
            self.saveScheduled = false
            self.saveDirtyApps()
        }
    }

    /// Puts `app` on the list of apps to save, once; false if it was there.
    private func flagDirty(_ app: AppRuntime) -> Bool {
        guard !app.dirty else { return false }
        app.dirty = true
        dirtyApps.append(app)
        return true
    }

    private func saveDirtyApps() {
        let dirty = dirtyApps
        dirtyApps = []
        for app in dirty { app.dirty = false }
        for app in dirty.count > 1 ? dirty.sorted(by: { $0.name < $1.name }) : dirty {
            let name = app.name
            guard let snapshot = model.snapshot(of: name) else { continue }
            // The start time is read once per process (it never changes), not at every save.
            let startTime = app.pid.flatMap { pid in stateStore.savedStartTime(of: name, pid: pid) ?? ProcessTable.startTime(of: pid) }
            let persisted = PersistedApp(
                name: name, pid: app.pid, startTime: startTime,
                suspendedWith: app.suspendedWith.map { $0 == .signal ? "signal" : "freezer" },
                token: app.pid == nil ? nil : app.token, snapshot: snapshot)
            do {
                try stateStore.save(persisted)
            } catch {
                Log.warning("\(name): Failed to save its state: \(error); a restart of lifecycled may not take it back")
            }
        }
    }

    /// Take back what a previous daemon left: apps whose process is still there and the same one (pid and
    /// start time) resume their state; anything else it left running is continued and terminated, so that no
    /// process stays stopped without a daemon that knows it.
    private func restorePreviousRun() {
        let (saved, problems) = stateStore.loadAll()
        for problem in problems { Log.warning("Ignoring an unreadable state file: \(problem)") }
        for persisted in saved {
            let pid = persisted.pid.flatMap { pid in
                persisted.startTime != nil && ProcessTable.startTime(of: pid) == persisted.startTime ? pid : nil
            }
            guard let app = apps[persisted.name] else {
                if let pid {
                    release(app: persisted.name, pids: [pid], processGroup: pid, cgroup: try? cgroups.makeAppCgroup(app: persisted.name),
                            reason: "it is no longer in the configuration")
                }
                stateStore.remove(persisted.name)
                continue
            }
            guard let pid, persisted.snapshot.state.isRunning else {
                if let old = persisted.pid, persisted.snapshot.state.isRunning {
                    Log.notice("\(app.name): its process \(old) ended while lifecycled was away")
                }
                perform(model.adopt(app.name, persisted.snapshot, running: false, now: loop.now))
                continue
            }
            readopt(app, pid: pid, persisted)
        }
        // Processes in an app's cgroup that no state file accounts for (the state was lost, or the app's leader
        // died and left children): never left stopped either.
        guard cgroups.layout != .none else { return }
        // Only the apps whose group exists can have strays; the others get theirs at their first launch.
        let existing = cgroups.existingAppCgroupNames()
        for name in apps.keys.sorted() where existing.contains(name) {
            guard let app = runtime(name), app.pid == nil, let cgroup = try? cgroups.makeAppCgroup(app: name) else { continue }
            app.cgroup = cgroup
            let strays = cgroup.pids()
            if !strays.isEmpty, app.config.external {
                continueExternalStrays(app, strays, cgroup: cgroup)
            } else if !strays.isEmpty {
                release(app: name, pids: strays, processGroup: nil, cgroup: cgroup, reason: "no saved state accounts for them")
            }
        }
        drain()
    }

    /// A process that is not the daemon's child (re-adopted, or external): its exit comes through its pidfd, with a
    /// status only its parent learns (reported as 255, a failure for Restart=).
    func watchExit(_ app: AppRuntime, pid: pid_t, pidfd: Int32, what: String) throws(SystemError) {
        let name = app.name
        app.child = try loop.watch(fd: pidfd, events: IOEvents.readable) { [unowned self, unowned app] _ in
            guard app.pidfd == pidfd else { return }
            Log.notice("\(name): \(what) \(pid) ended (its exit status went to its parent)")
            self.exited(app, .exited(255))
        }
    }

    private func readopt(_ app: AppRuntime, pid: pid_t, _ persisted: PersistedApp) {
        let name = app.name
        if cgroups.layout != .none && !app.usesProcessGroupAlone { app.cgroup = try? cgroups.makeAppCgroup(app: name) }
        switch persisted.suspendedWith {
        case "signal"?: app.suspendedWith = .signal
        case "freezer"?: app.suspendedWith = app.cgroup?.freezer.map(SuspendMechanism.freezer) ?? .signal
        default: app.suspendedWith = persisted.snapshot.state == .suspended ? .signal : nil
        }
        // Not our child any more (the previous daemon was its parent): its exit comes through a pidfd, the one the
        // service manager kept when there is one (the very process, whatever has its pid by now).
        let pidfd = takeStoredPidfd(name, pid: pid) ?? cs_pidfd_open(pid)
        guard pidfd >= 0 else {
            return release(app: name, pids: [pid], processGroup: pid, cgroup: app.cgroup,
                           reason: "it cannot be watched (pidfd_open: \(String(cString: strerror(errno))))")
        }
        app.pid = pid
        app.pidfd = pidfd
        app.helloed = false
        app.priority = nil
        app.token = persisted.token
        do {
            try watchExit(app, pid: pid, pidfd: pidfd, what: "re-adopted process")
        } catch {
            close(pidfd)
            app.pid = nil
            app.pidfd = nil
            return release(app: name, pids: [pid], processGroup: pid, cgroup: app.cgroup, reason: "it cannot be watched: \(error)")
        }
        // The file is saved once per loop iteration: a crash between a stop (or a continue) and that save
        // leaves the kernel ahead of the file. The kernel wins: a process is never left stopped unknowingly.
        var snapshot = persisted.snapshot
        let frozen = app.cgroup?.freezer != nil && app.cgroup?.isFrozen() == true
        let stopped = frozen || ProcessTable.allStopped(app.processGroup())
        if snapshot.state == .suspended && !stopped {
            Log.notice("\(name): saved as suspended, but its processes run; taking it back in the background")
            snapshot.state = .background
            app.suspendedWith = nil
        } else if snapshot.state != .suspended && stopped {
            Log.notice("\(name): saved as \(snapshot.state.rawValue), but its processes are stopped (the previous lifecycled died mid-suspension); continuing them")
            if frozen { try? app.cgroup?.thaw() }
            kill(-pid, SIGCONT)
            app.suspendedWith = nil
        }
        if !app.pidfdStored { storePidfd(app, pid: pid, pidfd: pidfd) }
        Log.event(.launch, .notice,
                  "\(name): re-adopted process \(pid) in state \(snapshot.state.rawValue) from the previous lifecycled",
                  [("LIFECYCLE_APP", name), ("LIFECYCLE_PID", String(pid)), ("LIFECYCLE_LAUNCHED_BY", "re-adoption")])
        perform(model.adopt(name, snapshot, running: true, now: loop.now))
    }

    /// A client reconnects on the app socket: the right token, from one of the app's own processes, for a
    /// running app that has no connection. Returns why not, or nil once `connection` is the app's.
    func reattach(_ name: String, token: String, peer pid: pid_t, connection: Connection) -> String? {
        guard let app = runtime(name), let leader = app.pid else { return "no such app is running" }
        guard let expected = app.token, constantTimeEqual(token, expected) else { return "wrong token" }
        guard getpgid(pid) == leader || app.cgroup?.pids().contains(pid) == true else {
            return "pid \(pid) is not one of its processes"
        }
        guard app.connection == nil else { return "it is connected already" }
        guard model.app(name)?.isTerminating != true else { return "it is terminating" }
        app.connection = connection
        app.helloed = false
        releaseStoredConnection(app)
        app.fdStored = serviceManager.storeFD(connection.fd, name: Self.storedConnectionPrefix + name)
        Log.notice("\(name): its client reconnected (pid \(pid))")
        return nil
    }

    /// LISTEN_FDNAMES of the client connections in the service manager's file-descriptor store.
    static let storedConnectionPrefix = "app-"
    /// LISTEN_FDNAMES of the apps' pidfds in the store.
    static let storedPidfdPrefix = "pidfd-"

    /// Under a service manager, a pidfd of the app's process goes into its fd store (then closed here: the child
    /// is watched through sd-event, a re-adopted process through `pidfd`, which stays open).
    func storePidfd(_ app: AppRuntime, pid: pid_t, pidfd given: Int32? = nil) {
        guard serviceManager.isEnabled else { return }
        let pidfd = given ?? cs_pidfd_open(pid)
        guard pidfd >= 0 else { return }
        app.pidfdStored = serviceManager.storeFD(pidfd, name: Self.storedPidfdPrefix + app.name)
        if given == nil { close(pidfd) }
    }

    private func releaseStoredPidfd(_ app: AppRuntime) {
        guard app.pidfdStored else { return }
        app.pidfdStored = false
        serviceManager.removeStoredFDs(name: Self.storedPidfdPrefix + app.name)
    }

    /// The stored pidfd of `name`, if the service manager passed one back and it is the process `pid` (the
    /// kernel's `Pid:` of the pidfd; -1 once the process has ended). It stays in the store.
    private func takeStoredPidfd(_ name: String, pid: pid_t) -> Int32? {
        guard let pidfd = storedPidfds.removeValue(forKey: name) else { return nil }
        let info = (try? readKernelFile("/proc/self/fdinfo/\(pidfd)")) ?? ""
        let stored = info.split(separator: "\n").first { $0.hasPrefix("Pid:") }?.split(separator: "\t").last.flatMap { pid_t($0) }
        guard stored == pid else {
            Log.notice("\(name): its stored pidfd is of process \(stored.map(String.init) ?? "?"), not \(pid); not used")
            close(pidfd)
            serviceManager.removeStoredFDs(name: Self.storedPidfdPrefix + name)
            return nil
        }
        _ = fcntl(pidfd, F_SETFD, FD_CLOEXEC)
        runtime(name)?.pidfdStored = true
        Log.info("\(name): took back the pidfd of process \(pid) from the service manager's store")
        return pidfd
    }

    /// Stored pidfds of apps that were not re-adopted: closed, and dropped from the store.
    private func dropUnusedPidfds() {
        for (name, pidfd) in storedPidfds {
            close(pidfd)
            serviceManager.removeStoredFDs(name: Self.storedPidfdPrefix + name)
        }
        storedPidfds = [:]
    }

    /// The app's connection is gone: the service manager need not keep it any longer.
    private func releaseStoredConnection(_ app: AppRuntime) {
        guard app.fdStored else { return }
        app.fdStored = false
        serviceManager.removeStoredFDs(name: Self.storedConnectionPrefix + app.name)
    }

    /// The connections the service manager passed back: each re-adopted app takes its own at once, and its
    /// client never notices that the daemon changed (what it sent meanwhile waits in the socket). The others
    /// are closed and dropped from the store.
    private func attachStoredConnections(_ stored: [String: Int32]) {
        for (fdName, fd) in stored.sorted(by: { $0.key < $1.key }) {
            let name = String(fdName.dropFirst(Self.storedConnectionPrefix.count))
            guard let app = runtime(name), app.pid != nil, app.connection == nil,
                  model.app(name)?.state.isRunning == true else {
                Log.info("\(name): dropping its stored connection (fd \(fd)): the app was not re-adopted")
                close(fd)
                serviceManager.removeStoredFDs(name: fdName)
                continue
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            do {
                var connection: Connection?
                connection = try Connection(fd: fd, loop: loop) { [unowned self] event in
                    guard let connection else { return }
                    self.clientEvent(name, connection, event)
                }
                app.connection = connection
                app.helloed = true
                app.fdStored = true
                Log.notice("\(name): took back its client connection from the service manager's store")
                dispatch(.hello(app: name))
            } catch {
                Log.warning("\(name): Failed to watch its stored connection: \(error)")
                close(fd)
                serviceManager.removeStoredFDs(name: fdName)
            }
        }
    }

    /// Processes a previous daemon left that this one cannot take back: thawed and continued, then SIGTERM,
    /// then SIGKILL for whoever is still there after the app's TimeoutStopSec.
    private func release(app name: String, pids: [pid_t], processGroup: pid_t?, cgroup: AppCgroup?, reason: String) {
        Log.event(.exit, .warning,
                  "\(name): process\(pids.count == 1 ? "" : "es") \(pids.map(String.init).joined(separator: ", ")) left by a previous lifecycled cannot be re-adopted (\(reason)); continuing and terminating \(pids.count == 1 ? "it" : "them")",
                  [("LIFECYCLE_APP", name), ("LIFECYCLE_REASON", reason)])
        do { try cgroup?.thaw() } catch { Log.debug("\(name): Failed to thaw its cgroup: \(error)") }
        let identities = pids.map { ($0, ProcessTable.startTime(of: $0)) }
        for pid in pids { kill(pid, SIGCONT); kill(pid, SIGTERM) }
        if let processGroup { kill(-processGroup, SIGCONT); kill(-processGroup, SIGTERM) }
        let timeout = runtime(name)?.config.policy.stopTimeout ?? AppPolicy().stopTimeout
        var source: EventSource?
        source = try? loop.timer { [weak self] in
            for (pid, start) in identities where start != nil && ProcessTable.startTime(of: pid) == start { kill(pid, SIGKILL) }
            if let processGroup { kill(-processGroup, SIGKILL) }
            cgroup?.killAll()
            if let source { self?.retire(source) }
        }
        source?.arm(after: timeout)
    }

    // MARK: Reload and shutdown

    /// SIGHUP: read the config again; only apps whose configuration changed are touched.
    func reload() {
        guard !stopping else { return }
        serviceManager.reloading()
        let fresh = ConfigLoader.load(directory: options.configDirectory)
        report(fresh.diagnostics)
        var changed: [String] = []
        // Added apps launch together, as at start-up.
        launchingTogether {
            for (name, appConfig) in fresh.apps.sorted(by: { $0.key < $1.key }) {
                if let app = runtime(name) {
                    guard app.config != appConfig else { continue }
                    app.config = appConfig
                    app.removeWhenStopped = false
                    model.setPolicy(appConfig.policy, for: name)
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
        for name in apps.keys.sorted() where fresh.apps[name] == nil {
            changed.append(name)
            if model.app(name)?.state.isRunning == true {
                runtime(name)?.removeWhenStopped = true
                Log.info("\(name): removed from the configuration; terminating it")
                perform((try? model.handle(.terminate, for: name, origin: "reload", now: loop.now)) ?? [])
                drain()
            } else {
                forget(name)
            }
        }
        config = fresh
        applyDaemonConfig()
        Log.notice("Reloaded the configuration: \(changed.isEmpty ? "nothing changed" : "changed " + changed.joined(separator: ", "))")
        serviceManager.ready { [unowned self] in self.statusLine() }
    }

    /// SIGTERM/SIGINT: every app gets willTerminate (with its deadline), suspended ones are continued so
    /// that they can exit, then SIGTERM and SIGKILL; the daemon exits when none is left. Unless systemd's job
    /// for this unit is a restart (`systemctl restart`): then the daemon hands its apps over to the next one.
    func shutdown() {
        guard !stopping else { return }
        var reason = "not under a service manager"
        if serviceManager.isEnabled {
            switch SystemdJob.stopRequest(environment: options.environment) {
            case .restart(let job):
                do {
                    return handOver(job: job, released: try cgroups.releaseControllersForNextStart())
                } catch {
                    Log.error("\(error): the delegated cgroup keeps its controllers and the next daemon could not start beside the apps; stopping every app instead")
                    reason = "a \(job) job, but the next daemon could not start in the unit's cgroup"
                }
            case .stop(let why): reason = why
            case .unanswered(let error):
                Log.warning("Failed to ask systemd whether this stop is a restart: \(error); stopping every app")
                reason = "systemd did not say it is a restart"
            }
        }
        stopping = true
        serviceManager.stopping()
        let running = model.records.filter(\.state.isRunning).count
        Log.notice("Stopping: terminating \(running) running apps (\(reason))")
        perform(model.shutdown(now: loop.now))
        drain()
        finishShutdownIfDone()
    }

    /// The stop half of a restart: the next daemon takes every app back exactly as after a crash (state files,
    /// pid and start time, the connections kept in the service manager's fd store, which a stop half of a
    /// restart does not flush). So nothing is signalled, suspended apps stay suspended, the stored connections
    /// stay stored (no FDSTOREREMOVE=1) and clients are told nothing: what they send meanwhile waits in their
    /// socket. Only waiting lifectl requests get an answer, as their connections close with this daemon.
    /// `released`: the controllers disabled in the delegated cgroup so that systemd can start the next daemon
    /// there (`releaseControllersForNextStart`).
    private func handOver(job: String, released: [String]) {
        stopping = true
        serviceManager.stopping()
        let running = apps.values.filter { model.app($0.name)?.state.isRunning == true }
        let stored = running.filter(\.fdStored).count
        Log.notice("Restarting: leaving \(running.count) apps to the next daemon (systemd's job for this unit is a \(job)); \(stored) of their connections wait in the fd store")
        if !released.isEmpty {
            Log.info("Disabled \(released.joined(separator: ", ")) for the app cgroups, so that systemd can start the next daemon in the delegated cgroup; it enables them again")
        }
        for app in apps.values {
            for waiter in app.waiters { waiter.reply(.failure("lifecycled is restarting; ask again once it is back")) }
        }
        for app in apps.values { _ = flagDirty(app) }
        saveDirtyApps()
        sources?.stop()
        control?.close()
        appSocket?.close()
        Log.notice("Handed over")
        loop.exit(code: 0)
    }

    /// Once: the settling of each app after the last one stopped calls it again (in the strace of a 1,000-app
    /// stop, every later call went through all 1,000 groups again: a read and two failing rmdirs each).
    private var shutdownFinished = false

    private func finishShutdownIfDone() {
        guard stopping, !shutdownFinished, !model.records.contains(where: { $0.state.isRunning }) else { return }
        shutdownFinished = true
        for app in apps.values {
            for waiter in app.waiters { waiter.reply(.failure("lifecycled is shutting down")) }
            app.cgroup?.remove()
        }
        cgroups.removeParent()
        sources?.stop()
        saveDirtyApps()
        control?.close()
        appSocket?.close()
        Log.notice("Stopped")
        loop.exit(code: 0)
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

/// The cgroup that holds this daemon's app cgroups. The system daemon (default runtime directory) uses
/// `lifecycled`; a daemon with its own runtime directory (a test, the demo, a user's session) gets its own
/// group, so that two daemons never share `app-NAME` cgroups and never freeze or kill each other's apps.
func cgroupGroupName(runtimeDirectory: String) -> String {
    guard runtimeDirectory != "/run/lifecycled" else { return "lifecycled" }
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a, 64 bit: short, stable, no dependency
    for byte in runtimeDirectory.utf8 {
        hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
    }
    return "lifecycled-" + String(hash, radix: 16)
}

func milliseconds(_ duration: Duration) -> Int { Int(duration / .milliseconds(1)) }

/// 128 random bits in hex (the system's CSPRNG, getrandom): an app's reconnection token.
func makeToken() -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<2).map { _ in
        let text = String(generator.next() as UInt64, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }.joined()
}

/// Compares without stopping at the first difference, so that timing does not reveal a token's prefix.
func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let (x, y) = (Array(a.utf8), Array(b.utf8))
    guard x.count == y.count else { return false }
    var difference: UInt8 = 0
    for index in x.indices { difference |= x[index] ^ y[index] }
    return difference == 0
}

/// mkdir -p with mode 0755.
func makeDirectory(_ path: String) throws(SystemError) {
    var current = ""
    for component in path.split(separator: "/") {
        current += "/" + component
        if mkdir(current, 0o755) != 0 && errno != EEXIST {
            throw SystemError(operation: "create \(current)", errno: errno)
        }
    }
}
