import CSupport
import Glibc
import LifecycleModel

/// The apps' processes: spawning them (side by side when several launch together), watching their exits and the
/// kernel's stop and continue reports, and cleaning up after them. Stops and continues themselves are
/// `Suspension`'s; where the processes live is the `ProcessPlacement`'s.
final class ProcessSupervisor {
    private let loop: EventLoop
    private unowned let host: any DaemonHost
    private let suspension: Suspension
    private let fdStore: FDStore
    private let retired: RetiredSources
    /// The daemon's environment: PATH to find `Exec=`, and what apps inherit.
    private let environment: [String: String]
    /// RUNTIME_DIR/app.sock, given to clients as LIFECYCLE_SOCKET when it listens.
    var appSocketPath: String?
    /// Launches started inside `launchingTogether`, not finished yet; nil outside it.
    private var launchBatch: [LaunchInFlight]?
    /// At most this many launches of a batch are in flight (descriptors, memory): the oldest is finished first.
    static let launchBatchLimit = 64

    init(loop: EventLoop, host: any DaemonHost, suspension: Suspension,
         fdStore: FDStore, retired: RetiredSources, environment: [String: String]) {
        self.loop = loop
        self.host = host
        self.suspension = suspension
        self.fdStore = fdStore
        self.retired = retired
        self.environment = environment
        abandoned = AbandonedHolds(loop: loop)
        watchHold = { [unowned loop] (fd, handler) throws(SystemError) in try loop.watch(fd: fd, events: IOEvents.readable, handler) }
    }

    // MARK: Spawn

    /// A launch whose child is being spawned: what `finishLaunch` needs once its pid is known. It owns the
    /// descriptors made for the child until then: a failed launch closes them by dropping it.
    struct PreparedLaunch {
        let name: String
        let launch: LaunchOptions
        let pair: (daemon: FileDescriptor, child: FileDescriptor)?
        let output: (child: FileDescriptor, reader: FileDescriptor?)?
        let token: String
    }

    /// A launch spawned as usual (not held): its preparation and its spawn, on a worker or done.
    private struct LaunchInFlight {
        let prepared: PreparedLaunch
        let spawn: Result<PendingSpawn, SystemError>
        var name: String { prepared.name }
    }

    /// Children that never became an app's (a held spawn that failed, or whose app went), ended and reaped.
    let abandoned: AbandonedHolds
    /// How a held launch's hold is watched: the loop's `watch`, which only a test replaces, to make it fail as the
    /// loop does when it cannot take one more descriptor.
    var watchHold: (_ fd: Int32, _ handler: @escaping (UInt32) -> Void) throws(SystemError) -> EventSource

    /// Starts the app's process. Returns why it could not be started when that is known at once (outside
    /// `launchingTogether`, every failure is); a failure found later is queued as `spawnFailed`.
    @discardableResult
    func spawn(_ app: AppRuntime, _ launch: LaunchOptions) -> String? {
        let name = app.name, config = app.config
        let procsFiles = app.place.prepareLaunch(app)
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        guard let executable = resolveExecutable(config.exec[0], path: path) else {
            return "executable '\(config.exec[0])' not found (PATH=\(path))"
        }
        let credentials: Credentials?
        do {
            credentials = try lookupCredentials(user: config.user, group: config.group)
        } catch {
            return "\(error)"
        }

        var pair: (daemon: FileDescriptor, child: FileDescriptor)?
        if config.policy.speaksProtocol {
            var fds: [Int32] = [-1, -1]
            guard cs_socketpair_cloexec(&fds) == 0 else {
                return "Failed to create the client socket: \(String(cString: strerror(errno)))"
            }
            pair = (FileDescriptor(owning: fds[0], path: "the client socket of \(name)"),
                    FileDescriptor(owning: fds[1], path: "the child's end of the client socket of \(name)"))
        }
        // The app's stdout and stderr: a journal stream under its name, or a pipe the daemon prefixes onto its stderr.
        var output: (child: FileDescriptor, reader: FileDescriptor?)?
        if Log.toJournal, let stream = Journal.stream(identifier: name) {
            output = (stream, nil)
        } else {
            var fds: [Int32] = [-1, -1]
            if cs_pipe_cloexec(&fds) == 0 {
                output = (FileDescriptor(owning: fds[1], path: "the output pipe of \(name)"),
                          FileDescriptor(owning: fds[0], path: "the output of \(name)"))
            }
        }
        var childEnvironment = Self.environment(for: config, credentials: credentials, daemon: environment)
        childEnvironment.append("LIFECYCLE_APP=\(name)")
        // The token is handed over at spawn too, so that a client whose socketpair dies with the daemon before its
        // first hello (which would have told it the token) can still reconnect and be caught up.
        let token = makeToken()
        if pair != nil {
            childEnvironment.append("LIFECYCLE_FD=3")
            if let appSocketPath {
                childEnvironment.append("LIFECYCLE_SOCKET=\(appSocketPath)")
                childEnvironment.append("LIFECYCLE_TOKEN=\(token)")
            }
        }

        let request = SpawnRequest(executable: executable, argv: config.exec, environment: childEnvironment,
                                   workingDirectory: config.workingDirectory, credentials: credentials,
                                   inheritedFD: pair?.child.rawValue, cgroupProcsFiles: procsFiles,
                                   outputFD: output?.child.rawValue)
        let prepared = PreparedLaunch(name: name, launch: launch, pair: pair, output: output, token: token)
        if app.place.holdsLaunch(app) { return hold(app, prepared, request) }
        let onWorker = launchBatch != nil
        let started = LaunchInFlight(prepared: prepared,
                                     spawn: Result { () throws(SystemError) in try startSpawn(request, onWorker: onWorker) })
        guard launchBatch != nil else { return finishLaunch(started) }
        launchBatch?.append(started)
        if let batch = launchBatch, batch.count > Self.launchBatchLimit {
            launchBatch?.removeFirst()
            if let failure = finishLaunch(batch[0]) { host.handle(.event(.spawnFailed(app: batch[0].name, reason: failure))) }
        }
        return nil
    }

    /// Runs `body` (which launches apps) with the children spawned on worker threads, so that they set themselves
    /// up side by side while the next apps are prepared, and finishes every launch before returning. The model
    /// has moved each app already; its pid, output, connection and priority are set when its launch finishes. A
    /// launch held for its place (`hold`) is not in the batch: it finishes when its child reports, later.
    func launchingTogether(_ body: () -> Void) {
        guard launchBatch == nil else { return body() }
        launchBatch = []
        body()
        let batch = launchBatch ?? []
        launchBatch = nil
        // Every launch is finished before the model hears of a failure: its effects may touch the other apps.
        var failed: [(name: String, reason: String)] = []
        for started in batch {
            if let failure = finishLaunch(started) { failed.append((started.name, failure)) }
        }
        for launch in failed { host.handle(.event(.spawnFailed(app: launch.name, reason: launch.reason))) }
    }

    /// Returns why the child could not be started, or nil once it runs.
    private func finishLaunch(_ started: LaunchInFlight) -> String? {
        guard let app = host.runtime(started.name) else { return nil }
        let pid: pid_t
        do {
            pid = try started.spawn.get().wait()
        } catch {
            return "\(error)"
        }
        launched(app, started.prepared, pid: pid)
        return nil
    }

    /// The child `pid` is the app's: its output, its watch, its connection and its priority.
    private func launched(_ app: AppRuntime, _ prepared: PreparedLaunch, pid: pid_t) {
        let name = prepared.name, pair = prepared.pair, output = prepared.output, launch = prepared.launch
        let config = app.config
        // The child has its copies: the daemon's go now, so that the app's exit reads as an end of file at once.
        try? pair?.child.close()
        if let output {
            try? output.child.close()
            if let reader = output.reader {
                let log = app.outputLog ?? AppOutputLog(app: name, loop: loop)
                app.outputLog = log
                app.output = try? OutputReader(fd: reader, log: log, loop: loop)
            }
        }
        app.began(pid: pid, token: prepared.token)
        app.place.began(app)
        do {
            app.child = try loop.watchChild(pid: pid) { [unowned self] code, status in
                self.childChanged(name, pid: pid, code: code, status: status)
            }
            fdStore.storePidfd(app, pid: pid)
            if let pair {
                app.connection = try host.openConnection(name, fd: pair.daemon)
                fdStore.storeConnection(app, fd: pair.daemon.rawValue)
            }
        } catch {
            Log.error("Failed to watch \(name) (pid \(pid)): \(error); killing it")
            kill(-pid, SIGKILL)
            if app.child == nil { abandoned.take(nil, pid: pid) }
        }
        // The priority of the state the model has moved the app to by now (a launch together with others finishes
        // after its transitions, which found no pid to apply it to).
        if let state = host.record(name)?.state, let priority = PriorityClass(state) {
            apply(priority, to: app, pid: pid)
        }
        Log.event(.launch, .info, "\(name): started pid \(pid): \(config.exec.joined(separator: " "))"
            + (launch.launchedBy == "lifectl" ? "" : " (\(launch.launchedBy))"),
                  [("LIFECYCLE_APP", name), ("LIFECYCLE_PID", String(pid)), ("LIFECYCLE_LAUNCHED_BY", launch.launchedBy),
                   ("LIFECYCLE_EXEC", config.exec.joined(separator: " "))])
    }

    // MARK: Held launches

    /// Starts a child that waits before execve until the app's place holds it (`AppPlace.holdsLaunch`): a page it
    /// touches is charged to the cgroup it is in then, for good. The child reports its pid while it waits, and the
    /// launch finishes then (`heard`); the loop never waits for it.
    private func hold(_ app: AppRuntime, _ prepared: PreparedLaunch, _ request: SpawnRequest) -> String? {
        let spawn: HeldSpawn
        do {
            spawn = try startHeldSpawn(request)
        } catch {
            return "\(error)"
        }
        let hold = LaunchHold(spawn: spawn, launch: prepared, abandoned: abandoned)
        do {
            hold.watch = try watchHold(spawn.socket.rawValue) { [unowned self, weak app, weak hold] _ in
                guard let app, let hold else { return }
                self.heard(hold, of: app)
            }
        } catch {
            // The child reads an end of file when it is set up, exits, and is reaped once its report tells its pid.
            hold.abandon(reaping: nil)
            return "Failed to watch the hold of \(spawn.executable): \(error)"
        }
        app.launchHold = hold
        return nil
    }

    /// What a held launch's child or thread reported (`HeldSpawn.Report`).
    private func heard(_ hold: LaunchHold, of app: AppRuntime) {
        while true {
            switch hold.spawn.nextReport() {
            case .nothing:
                return
            case .held(let pid):
                guard hold.pid == nil, app.launchHold === hold, host.runtime(app.name) === app, let launch = hold.launch else {
                    return drop(hold, of: app, reaping: pid)
                }
                hold.pid = pid
                hold.launch = nil
                launched(app, launch, pid: pid)
                // The state file names the pid, for the next daemon to take the app back after a crash: the model's
                // transition, long done, saved none.
                host.markDirty(app.name)
                // A stop asked for before the pid was known reaches the child now, while it is still held.
                if let signal = hold.pendingSignal, app.pid == pid {
                    hold.pendingSignal = nil
                    suspension.signal(app, signal)
                }
            case .failed(let pid, let code):
                let error = SystemError(operation: "spawn \(hold.spawn.executable)", errno: code)
                guard hold.pid == nil else {
                    // Its execve failed after the release: its exit, watched already, ends the app.
                    Log.warning("\(app.name): \(error)")
                    continue
                }
                drop(hold, of: app, reaping: pid)
                host.handle(.event(.spawnFailed(app: app.name, reason: "\(error)")))
                return
            case .ended:
                drop(hold, of: app, reaping: nil)
                // Ended without a word: what no spawn does but one whose report could not be sent.
                if hold.pid == nil, hold.launch != nil {
                    host.handle(.event(.spawnFailed(app: app.name, reason: "Failed to spawn \(hold.spawn.executable): it ended before it reported")))
                }
                return
            }
        }
    }

    /// The hold goes: a child still held exits, and `pid`, which never became the app's, is reaped.
    private func drop(_ hold: LaunchHold, of app: AppRuntime, reaping pid: pid_t?) {
        if let watch = hold.watch { retired.retire(watch) }
        hold.watch = nil
        if app.launchHold === hold { app.launchHold = nil }
        if hold.pid == nil { hold.abandon(reaping: pid) } else { hold.letGo() }
    }

    /// systemd-like: a small clean environment, not the daemon's own, plus the app's `Environment=`.
    static func environment(for config: AppConfig, credentials: Credentials?, daemon: [String: String]) -> [String] {
        let personal = ["HOME", "USER", "LOGNAME", "XDG_RUNTIME_DIR"]
        var environment: [String] = []
        for key in ["PATH", "LANG", "LC_ALL", "TZ"] + personal where credentials == nil || !personal.contains(key) {
            if let value = daemon[key] { environment.append("\(key)=\(value)") }
        }
        if let credentials {
            if let home = credentials.home { environment.append("HOME=\(home)") }
            if let user = credentials.userName { environment += ["USER=\(user)", "LOGNAME=\(user)"] }
        }
        let overridden = Set(config.environment.map { $0.prefix { $0 != "=" } })
        environment.removeAll { overridden.contains($0.prefix { $0 != "=" }) }
        return environment + config.environment
    }

    // MARK: Priority

    /// Applies the priority of `state` if it differs from the one applied; forgets it once the app stops running.
    func transitioned(_ app: AppRuntime, to state: AppState) {
        if let priority = PriorityClass(state), priority != app.priority, let pid = app.pid {
            apply(priority, to: app, pid: pid)
        }
        if !state.isRunning { app.priority = nil }
    }

    func apply(_ priority: PriorityClass, to app: AppRuntime, pid: pid_t) {
        app.priority = app.place.apply(priority, previous: app.priority, to: app, leader: pid,
                                       members: app.members(iteration: loop.iteration))
    }

    // MARK: Exits and the kernel's reports

    private func childChanged(_ name: String, pid: pid_t, code: Int32, status: Int32) {
        guard let app = host.runtime(name), app.pid == pid else { return }
        switch code {
        case Int32(CLD_EXITED), Int32(CLD_KILLED), Int32(CLD_DUMPED):
            exited(app, code == Int32(CLD_EXITED) ? .exited(status) : .signaled(status))
        case Int32(CLD_STOPPED):
            // waitid() reports a stop only while the process is stopped (a SIGCONT clears it as it is sent): the
            // stop this daemon caused is confirmed for the leader without reading /proc.
            if case .stopping(.signal, _, _) = app.suspension {
                return suspension.confirm(name, leaderStopped: true)
            }
            // Check /proc so a stale event after our own SIGCONT is not taken for someone else's stop; whether the
            // stop changes anything (not for an app already suspended) is the model's to say.
            if ProcessTable.state(of: pid) == "T" { host.handle(.event(.processStopped(app: name))) }
        case Int32(CLD_CONTINUED):
            // While our own stop is unconfirmed, a continue is the late report of our previous SIGCONT: the new
            // SIGSTOP may not be delivered yet, so /proc still shows the process running, and taking that for
            // someone else's continue would move the app to the background as it stops.
            guard !app.suspension.isStopping else { return }
            // Only an app the model holds suspended can be continued by someone else: asking it first spares the
            // report of our own resume (the app is in the background by then) a read of /proc. The model decides
            // the rest, such as a continue of our own SIGTERM's companion SIGCONT.
            guard host.record(name)?.state == .suspended else { return }
            if ProcessTable.state(of: pid) != "T" { host.handle(.event(.processContinued(app: name))) }
        default: break
        }
    }

    /// A process that is not the daemon's child (re-adopted, or external): its exit comes through its pidfd, with a
    /// status only its parent learns (reported as unknown, a failure for Restart=).
    /// `app.pidfd` owns `pidfd`; sd-event only watches it.
    func watchExit(_ app: AppRuntime, pid: pid_t, pidfd: FileDescriptor, what: String) throws(SystemError) {
        let name = app.name
        app.child = try loop.watch(fd: pidfd.rawValue, events: IOEvents.readable) { [unowned self, unowned app, weak pidfd] _ in
            guard let pidfd, app.pidfd === pidfd else { return }
            Log.notice("\(name): \(what) \(pid) ended (its exit status went to its parent)")
            self.exited(app, .unknown)
        }
    }

    /// A process that never became the app (its attach was refused after its end was watched): the watch and the
    /// pidfd go, and nothing is reported, since the model never heard of it.
    func forget(_ app: AppRuntime) {
        if let child = app.child { retired.retire(child) }
        app.child = nil
        app.processEnded()
    }

    private func exited(_ app: AppRuntime, _ status: ExitStatus) {
        if let pid = app.pid {
            Log.event(.exit, .info, "\(app.name): process \(pid) \(status)",
                      [("LIFECYCLE_APP", app.name), ("LIFECYCLE_PID", String(pid)), ("LIFECYCLE_EXIT", "\(status)")])
            // Whatever the app left behind in its group or cgroup goes with it (systemd's KillMode=control-group),
            // and the cgroup is not left frozen for the next launch.
            app.place.killAll(app, leader: pid)
        }
        // The child watch goes before the pidfd it watches closes (`processEnded`): its number could be reused.
        if let child = app.child { retired.retire(child) }
        app.child = nil
        app.processEnded()
        fdStore.releaseConnection(app)
        fdStore.releasePidfd(app)
        app.connection?.closeQuietly()
        app.connection = nil
        host.handle(.event(.exited(app: app.name, status)))
    }
}

/// A launch whose child waits before execve (`ProcessSupervisor.hold`): the hold, the watch on its reports, the
/// child's pid once it reported, and the launch's descriptors until then. Dropping it ends a child still held, and
/// one that never became the app's is reaped (`AbandonedHolds`), whichever way the hold went: its app removed by a
/// reload, launched again, or ended.
final class LaunchHold {
    let spawn: HeldSpawn
    var watch: EventSource?
    var pid: pid_t?
    var launch: ProcessSupervisor.PreparedLaunch?
    /// A stop's signal that came before the child's pid: sent to it once the pid is known.
    var pendingSignal: TerminationSignal?
    /// Where the child goes if the hold is dropped before it became the app's; nil once handed over or let go.
    private weak var abandoned: AbandonedHolds?

    init(spawn: HeldSpawn, launch: ProcessSupervisor.PreparedLaunch, abandoned: AbandonedHolds) {
        self.spawn = spawn
        self.launch = launch
        self.abandoned = abandoned
    }

    /// Ends the child if it is still held and has it reaped (`pid`, where known, else from its report), once.
    func abandon(reaping pid: pid_t?) {
        guard let abandoned else { return }
        self.abandoned = nil
        abandoned.take(spawn, pid: pid)
    }

    /// The child is the app's, reaped by the app's own watch.
    func letGo() { abandoned = nil }

    // The watch goes before the socket it watches closes; a child that never became the app's is reaped.
    deinit {
        watch?.cancel()
        if pid == nil { abandon(reaping: nil) }
    }
}

/// 128 random bits in hex (the system's CSPRNG, getrandom): an app's reconnection token.
func makeToken() -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<2).map { _ in
        let text = String(generator.next() as UInt64, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }.joined()
}
