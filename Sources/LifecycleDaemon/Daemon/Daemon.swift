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
    let coder = LineCoder()
    let startedAt: Duration
    var control: ControlServer?
    /// The D-Bus API, when `[Control] Bus=` names a bus.
    var bus: BusService?
    /// RUNTIME_DIR/app.sock, where clients reconnect after a restart of the daemon.
    var appSocket: AppSocketServer?
    private var signalSources: [EventSource] = []
    var events: [Event] = []
    /// An input is being carried out: an event that comes now waits in `events` behind it.
    var busy = false
    let serviceManager: ServiceManager
    /// The control socket's watchers and the bus follow the apps through these.
    let observers = AppObservers()
    /// LIFECYCLED_TEST_PAUSE_AFTER=KIND:APP[:MESSAGE] (fault tests only): stop the daemon itself (SIGSTOP)
    /// right after performing an effect of that kind for that app, e.g. `stopProcess:c` or
    /// `send:a:willResignActive`, so that a test can `kill -9` it in the middle of a transition. Never set in
    /// production; logged as a warning when it fires.
    private let pauseAfter: PauseHook?

    // The owners: each holds its own state, reaches the model and the event queue through the port (`DaemonHost`,
    // which this daemon is), and the owners it builds on (placement, fd store, processes) through their methods.
    /// The host's layout, the place of every configured app (adopted apps have places of their own).
    let placement: any ProcessPlacement
    /// Why apps are, or are not, in systemd scopes (`ScopePlacement.make`), for the log.
    private let placementReason: String
    /// The lines that say how apps are placed, weighed and frozen, for the log and `lifectl status`.
    var mechanisms: [String] {
        (placement as? ScopePlacement)?.mechanisms ?? cgroups.mechanisms + (cgroups.fallbackReason.map { ["fallback: \($0)"] } ?? [])
    }
    /// Held from the first moment to the last: no other daemon serves this runtime directory meanwhile.
    private let runtimeLock: RuntimeDirectoryLock
    let fdStore: FDStore
    private let retired: RetiredSources
    private let stateStore: StateStore
    /// The processes stopped for adopted apps, for the next daemon and `resume --all` (`StopLedger`).
    let stopLedger: StopLedger
    // Swift lets an owner take the daemon as its port only once every stored property has a value: the owners are
    // implicitly unwrapped, and each is set once, in `init`, in the order they depend on each other.
    private(set) var suspension: Suspension!
    private(set) var reclaimer: MemoryReclaimer!
    private(set) var processes: ProcessSupervisor!
    private(set) var sessions: ClientSessions!
    private(set) var requests: ControlRequests!
    private(set) var externalApps: ExternalApps!
    private(set) var persistence: Persistence!
    /// Every app, configured or adopted: the one place that adds and forgets them.
    private(set) var registry: AppRegistry!
    private(set) var display: DisplayFollower!
    private(set) var audio: AudioFollower!
    private(set) var adoption: Adoption!
    private(set) var configuration: ConfigReload!
    private(set) var shutdown: Shutdown!

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

    /// Throws when another daemon serves the runtime directory (`RuntimeDirectoryLock.Failure`), before anything
    /// of its (sockets, state files, cgroups) is touched, or when the loop cannot be made.
    public init(options: DaemonOptions) throws {
        self.options = options
        do {
            try makeDirectory(options.runtimeDirectory)
            runtimeLock = try RuntimeDirectoryLock(directory: options.runtimeDirectory)
        } catch let error as SystemError {
            throw RuntimeDirectoryLock.Failure.system(error)
        }
        loop = try EventLoop()
        startedAt = loop.now
        // Under systemd the apps are scopes of its own, and the daemon's cgroup is left as systemd made it (no
        // delegated subtree): the cgroupfs detection, which would take the subtree over, is skipped.
        let (scopes, scopeReason) = ScopePlacement.make(loop: loop, environment: options.environment)
        placementReason = scopeReason
        if let scopes {
            cgroups = CgroupSupport(layout: .unified)
            placement = scopes
        } else {
            cgroups = CgroupSupport.detect(groupName: cgroupGroupName(runtimeDirectory: options.runtimeDirectory))
            placement = cgroups.layout == .none ? ProcessGroupPlacement() : CgroupPlacement(cgroups)
        }
        serviceManager = ServiceManager(environment: options.environment)
        fdStore = FDStore(serviceManager: serviceManager)
        retired = RetiredSources(loop: loop)
        stateStore = StateStore(runtimeDirectory: options.runtimeDirectory)
        stopLedger = StopLedger(stateDirectory: stateStore.directory)
        pauseAfter = options.environment["LIFECYCLED_TEST_PAUSE_AFTER"].flatMap { text in
            let parts = text.split(separator: ":").map(String.init)
            return parts.count >= 2 ? PauseHook(kind: parts[0], app: parts[1], message: parts.count > 2 ? parts[2] : nil) : nil
        }
        suspension = Suspension(loop: loop, host: self, ledger: stopLedger)
        reclaimer = MemoryReclaimer(loop: loop, host: self, observers: observers)
        processes = ProcessSupervisor(loop: loop, host: self, suspension: suspension, fdStore: fdStore, retired: retired,
                                      environment: options.environment)
        sessions = ClientSessions(loop: loop, host: self, fdStore: fdStore, coder: coder)
        requests = ControlRequests(loop: loop, host: self, placement: placement)
        externalApps = ExternalApps(host: self, placement: placement, processes: processes, fdStore: fdStore)
        persistence = Persistence(loop: loop, host: self, store: stateStore, placement: placement, processes: processes,
                                  externalApps: externalApps, fdStore: fdStore, retired: retired)
        registry = AppRegistry(host: self, observers: observers, keepers: [requests, persistence])
        display = DisplayFollower(loop: loop, host: self, requests: requests)
        audio = AudioFollower(loop: loop, host: self)
        adoption = Adoption(host: self, loop: loop, registry: registry, display: display, stopLedger: stopLedger,
                            stateDirectory: stateStore.directory, environment: options.environment,
                            managerBus: (placement as? ScopePlacement)?.bus)
        observers.add(display)
        configuration = ConfigReload(host: self, loop: loop, directory: options.configDirectory, environment: options.environment,
                                     serviceManager: serviceManager, registry: registry, observers: observers,
                                     placement: placement, processes: processes, persistence: persistence,
                                     externalApps: externalApps, adoption: adoption, display: display, audio: audio)
        shutdown = Shutdown(
            loop: loop, host: self, serviceManager: serviceManager, environment: options.environment, cgroups: cgroups,
            placement: placement, persistence: persistence, requests: requests,
            stopSources: { [configuration, display, audio, adoption] in
                configuration?.sources?.stop()
                display?.stop()
                audio?.stop()
                adoption?.stop()
            },
            closeSockets: { [unowned self] in
                self.control?.close()
                self.appSocket?.close()
                self.bus?.stop()
            })
    }

    private func pauseForTest(_ effect: Effect) {
        Log.warning("LIFECYCLED_TEST_PAUSE_AFTER: pausing after \(effect.kindName) for \(effect.app ?? "-") (a fault-test hook)")
        raise(SIGSTOP)
    }

    /// Start serving: sockets, config, auto-launch, READY=1; then run the loop until stopped.
    /// Returns the exit code.
    public func run() throws(SystemError) -> Int32 {
        Log.info("lifecycled \(daemonVersion) starting (pid \(getpid()), config \(options.configDirectory), runtime \(options.runtimeDirectory))")
        if placement is ScopePlacement {
            Log.info("apps in systemd scopes: \(placementReason)")
        } else {
            Log.info("apps not in systemd scopes: \(placementReason)")
            if let reason = cgroups.fallbackReason { Log.notice("cgroups: \(reason)") }
            Log.info("cgroup layout: \(cgroups.layout.rawValue)")
        }
        for line in (placement as? ScopePlacement)?.mechanisms ?? cgroups.mechanisms { Log.info("  \(line)") }

        let passed = ServiceManager.passedSockets()
        if passed["control"] == nil { try makeDirectory(options.runtimeDirectory) }
        control = try ControlServer(context: controlContext, persistence: persistence, adoption: adoption,
                                    path: RuntimeDirectory.controlSocket(in: options.runtimeDirectory), passedFD: passed["control"])
        do {
            appSocket = try AppSocketServer(loop: loop, coder: coder, sessions: sessions, externalApps: externalApps,
                                            path: RuntimeDirectory.appSocket(in: options.runtimeDirectory))
        } catch {
            Log.error("Failed to open the app socket: \(error); clients cannot reconnect after a restart of lifecycled")
        }
        processes.appSocketPath = appSocket?.path
        // Client connections and pidfds the service manager kept for us (FDSTORE=1) while the previous daemon died.
        fdStore.takePassed(passed)

        for signal in [SIGTERM, SIGINT] {
            signalSources.append(try loop.onSignal(signal) { [unowned self] in self.shutdown.begin() })
        }
        signalSources.append(try loop.onSignal(SIGHUP) { [unowned self] in self.configuration.reload() })

        adoption.recoverPreviousRun()
        configuration.load()
        startBus()
        display.start(configuration.config.daemon.display, environment: options.environment)
        do {
            try stateStore.prepare()
        } catch {
            Log.error("Failed to prepare the state directory: \(error); a restart of lifecycled will not find its apps")
        }
        persistence.restorePreviousRun(keepingStateOf: configuration.unloadedApps)
        adoption.apply(configuration.config)
        fdStore.dropUnusedPidfds()
        sessions.attachStored(fdStore.takeConnections())
        processes.launchingTogether {
            for name in registry.names where model.state(of: name)?.isRunning != true { configuration.autoLaunch(name) }
        }

        serviceManager.ready { [unowned self] in self.statusLine() }
        return loop.run()
    }

    /// What the control socket and the D-Bus API serve requests with.
    var controlContext: ControlContext {
        ControlContext(host: self, loop: loop, coder: coder, observers: observers, requests: requests, configuration: configuration)
    }

    // MARK: Events

    func runtime(_ name: String) -> AppRuntime? { registry.runtime(name) }

    /// Feeds the queued events to the model, each carried out before the next is taken.
    func drain() {
        guard !busy else { return }
        busy = true
        defer { busy = false }
        while !events.isEmpty {
            let event = events.removeFirst()
            perform(model.handle(.event(event), now: loop.now).effects, since: loop.now)
        }
    }

    /// How late a timer the model arms may fire.
    static let timerAccuracy: Duration = .milliseconds(1)

    /// `since`: the time the model decided at, which the timers it arms count from.
    func perform(_ effects: [Effect], since: MonotonicTime) {
        for effect in Self.continuesFirst(effects) {
            defer { if let pauseAfter, pauseAfter.matches(effect) { pauseForTest(effect) } }
            switch effect {
            case .spawn(let name, let options):
                if let app = runtime(name), let failure = processes.spawn(app, options) { events.append(.spawnFailed(app: name, reason: failure)) }
            case .send(let name, let delivery): sessions.send(name, delivery)
            case .stopProcess(let name): if let app = runtime(name) { suspension.suspend(app) }
            case .continueProcess(let name):
                // Its reclaim ends first: what is left of it would only be faulted back in.
                reclaimer.stop(name)
                suspension.resume(name)
            case .reclaimMemory(let name): if let app = runtime(name) { reclaimer.start(app) }
            case .signal(let name, let signal): if let app = runtime(name) { suspension.signal(app, signal) }
            // The model's timers end what it promised (a grace time, a deadline): on time, not coalesced.
            case .armTimer(let name, let kind, let delay):
                timer(name, kind)?.arm(at: since + delay, accuracy: Self.timerAccuracy)
            case .cancelTimer(let name, let kind): runtime(name)?.timers[kind]?.cancel()
            case .transition(let name, let from, let to, let reason): transitioned(name, from, to, reason)
            case .note(let name, let note): noted(name, note)
            case .settled(let name): settled(name)
            case .save(let name):
                markDirty(name)
                observers.tell(.details(name))
            case .sceneOpened(_, let scene): requests.sceneOpened(scene)
            case .notify(let name, let delivery):
                sessions.send(name, ServerMessage.notification(delivery))
            case .taskBegan(let name, let task, let remaining):
                sessions.send(name, ServerMessage.backgroundTaskBegan(task: task.id, name: task.name, remainingMs: remaining.map(milliseconds)))
                Log.info("\(name): began background task \(task.id) '\(task.name)'" + (remaining.map { ", \(describe($0)) left" } ?? " (in the foreground)"))
            case .taskExpiring(let name, let tasks, let remaining):
                sessions.send(name, ServerMessage.backgroundTimeWillExpire(tasks: tasks, remainingMs: milliseconds(remaining)))
                Log.notice("\(name): background time runs out in \(describe(remaining)); open tasks: \(tasks.map(\.name).joined(separator: ", "))")
            }
        }
    }

    /// The processes an input continues run again before anything else it does: before the priorities of its
    /// transitions (which read the app's tree), and before another app's demotion. A continue stays behind a stop or
    /// signal of the same app earlier in the list, whose order it must keep.
    static func continuesFirst(_ effects: [Effect]) -> [Effect] {
        guard effects.contains(where: { if case .continueProcess = $0 { true } else { false } }) else { return effects }
        var first: [Effect] = []
        var rest: [Effect] = []
        var signalled: Set<String> = []
        for effect in effects {
            switch effect {
            case .continueProcess(let name) where !signalled.contains(name): first.append(effect)
            case .stopProcess(let name), .signal(let name, _):
                signalled.insert(name)
                rest.append(effect)
            default: rest.append(effect)
            }
        }
        return first + rest
    }

    private func timer(_ name: String, _ kind: TimerKind) -> LoopTimer? {
        guard let app = runtime(name) else { return nil }
        if let timer = app.timers[kind] { return timer }
        do {
            // The ack deadline is armed and met on every callback: its cancel is lazy (LoopTimer).
            let timer = try LoopTimer(loop: loop, lazyCancel: kind == .ack) { [unowned self] in
                self.handle(.event(.timerFired(app: name, kind)))
            }
            app.timers[kind] = timer
            return timer
        } catch {
            Log.error("Failed to create the \(kind) timer of \(name): \(error)")
            return nil
        }
    }

    // MARK: Effects that report

    private func transitioned(_ name: String, _ from: AppState, _ to: AppState, _ reason: String) {
        guard let app = runtime(name) else { return }
        app.sinceWall = wallClockNow()
        // A re-adoption is journaled as such (the `readopted` note), not as a transition from notRunning.
        if reason != Supervisor.readoptionReason {
            Log.event(.transition, .info, LogLines.transitionMessage(app: name, from: from, to: to, reason: reason),
                      LogLines.transitionFields(app: name, from: from, to: to, reason: reason, pid: app.pid))
        }
        processes.transitioned(app, to: to)
        // Resumed, continued by someone else, or ended: what is left of its reclaim would only be faulted back.
        if from == .suspended { reclaimer.stop(name) }
        serviceManager.statusChanged(loop: loop)
        observers.tell(.transition(app: name, from: from, to: to, reason: reason))
    }

    private func noted(_ name: String, _ note: Note) {
        log(name, note)
        if case .sceneTransition(let scene, let from, let to, let reason) = note {
            observers.tell(.sceneTransition(app: name, scene: scene, from: from, to: to, reason: reason))
        }
    }

    func log(_ name: String, _ note: Note) {
        Log.record(LogLines.line(app: name, note: note, pid: runtime(name)?.pid))
    }

    private func settled(_ name: String) {
        guard let app = runtime(name) else { return }
        requests.settled(app)
        let running = inPlace { $0.state(of: name) }?.isRunning ?? false
        if app.removeWhenStopped && !running { registry.forget(name) }
        shutdown.finishIfDone()
    }

    // MARK: Status

    /// Memory pressure crossed the threshold (a PSI trigger fired, or `lifectl simulate-memory-pressure`):
    /// the model warns the apps first, then terminates suspended ones while it persists.
    func memoryPressure(reading: JSONValue) {
        var residentBytes: [String: UInt64] = [:]
        for record in model.records where record.state == .suspended {
            residentBytes[record.name] = runtime(record.name).map { ProcessTable.residentBytes(of: $0.place.members(of: $0)) } ?? 0
        }
        handle(.event(.memoryPressure(residentBytes: residentBytes, reading: reading)))
    }

    func daemonStatus() -> DaemonStatus {
        var status = StatusReport.daemon(pid: getpid(), options: options, cgroups: cgroups, configErrors: configuration.problems,
                                         uptime: loop.now - startedAt,
                                         sources: (configuration.sources?.descriptions ?? []) + [audio.description],
                                         catalog: model.catalog)
        status.display = display.description
        status.mechanisms = mechanisms + ["adopt: \(adoption.description)", reclaimer.description]
        return status
    }

    /// One line for systemd's STATUS=.
    func statusLine() -> String {
        StatusReport.line(model.records.map { ($0.state, $0.queue.count) })
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
