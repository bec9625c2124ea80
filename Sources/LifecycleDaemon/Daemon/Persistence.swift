import CSupport
import Glibc
import LifecycleModel

/// The apps' state files in RUNTIME_DIR/state: which apps are to be saved and when, and, at start, taking back
/// what a previous daemon left (re-adoption), so that no process it started stays stopped without a daemon that
/// knows it.
final class Persistence: AppKeeper {
    private let loop: EventLoop
    private unowned let host: any DaemonHost
    private let store: StateStore
    private let placement: any ProcessPlacement
    private let processes: ProcessSupervisor
    private let externalApps: ExternalApps
    private let fdStore: FDStore
    private let retired: RetiredSources
    /// The apps whose state file is to be saved when the callback returns, each once (`AppRuntime.dirty`).
    private var dirty: [AppRuntime] = []
    private var saveScheduled = false
    /// Apps whose file was written less than `writeInterval` ago and changed since only in what the model keeps
    /// (sessions, queues): written once the interval is over, with every change made meanwhile.
    private var held: [AppRuntime] = []
    /// Each app's last write: when, and what of it a next daemon needs at once to find and continue its process.
    private var lastWrite: [String: (at: Duration, identity: ProcessIdentityKey)] = [:]
    private var heldTimer: LoopTimer?

    /// The shortest time between two writes of one app's file for changes of the model's state alone. A client that
    /// keeps its app busy (a burst of scene requests and acks) changes it at every message; the file is written
    /// again at most this often, while a change of the process (a launch, an exit, a suspension) is written at once.
    static let writeInterval: Duration = .milliseconds(250)

    /// What of an app's file must never wait: its process, how it is stopped, its client's token, and whether it
    /// runs. A next daemon that reads an older one of these could signal the wrong process or leave one stopped.
    struct ProcessIdentityKey: Equatable {
        var pid: pid_t?
        var suspendedWith: SuspendMechanism?
        var token: String?
        var state: AppState?
    }

    init(loop: EventLoop, host: any DaemonHost, store: StateStore, placement: any ProcessPlacement,
         processes: ProcessSupervisor, externalApps: ExternalApps, fdStore: FDStore, retired: RetiredSources) {
        self.loop = loop
        self.host = host
        self.store = store
        self.placement = placement
        self.processes = processes
        self.externalApps = externalApps
        self.fdStore = fdStore
        self.retired = retired
    }

    // MARK: Saving

    /// The save runs once the current callback returns (`EventLoop.afterCallback`): every change one event made,
    /// one file per app, before the loop waits again; or, for an app written less than `writeInterval` ago whose
    /// process did not change, once that interval is over.
    func markDirty(_ app: AppRuntime) {
        guard flag(app), !saveScheduled else { return }
        saveScheduled = true
        loop.afterCallback { [unowned self] in
            self.saveScheduled = false
            self.writeChanged()
        }
    }

    /// What the current callback changes is written once it returns, with every held app: a control request's
    /// answer and the files agree, as a person who acts on that answer expects after a crash. Only clients' bursts
    /// wait for `writeInterval`.
    func writeAfterThisCallback() {
        loop.afterCallback { [unowned self] in self.saveDirty() }
    }

    /// Saves every app in `apps` now (the daemon hands its apps over).
    func saveNow(_ apps: some Sequence<AppRuntime>) {
        for app in apps { _ = flag(app) }
        saveDirty()
    }

    /// The app is forgotten (`AppRegistry`): nothing of it is saved any more, and its file goes.
    func forgetting(_ app: AppRuntime) {
        app.dirty = false
        dirty.removeAll { $0 === app }
        held.removeAll { $0 === app }
        lastWrite[app.name] = nil
        store.remove(app.name)
    }

    /// An app whose file loads again after its state was kept (`restorePreviousRun(keepingStateOf:)`): the model
    /// takes back its saved state, not running (its processes were released), before anything launches it.
    func restoreKept(_ app: AppRuntime) {
        guard let persisted = store.loadAll().apps.first(where: { $0.name == app.name }) else { return }
        Log.info("\(app.name): took back the saved state kept while its file did not load")
        host.handle(.adopt(app: app.name, persisted.snapshot, running: false, processesStopped: nil))
    }

    /// The file of an app whose state was kept is gone: the app is removed for good.
    func removeKept(_ name: String) {
        guard host.runtime(name) == nil else { return }
        store.remove(name)
    }

    /// Puts `app` on the list of apps to save, once; false if it was there.
    private func flag(_ app: AppRuntime) -> Bool {
        // An adopted app has no state file: the next daemon adopts it afresh (`AdoptionLedger`).
        guard !app.dirty, !app.config.policy.adopted else { return false }
        app.dirty = true
        dirty.append(app)
        return true
    }

    /// Saves every app that changed, those held back included (the daemon stops or hands over).
    func saveDirty() {
        let waiting = held
        held = []
        heldTimer?.cancel()
        for app in waiting where !app.dirty {
            app.dirty = true
            dirty.append(app)
        }
        writeDirty(holding: false)
    }

    /// After an event: each changed app's file is written, unless it was written less than `writeInterval` ago and
    /// its process is as that write left it; then it waits for the interval's end (`writeHeld`).
    private func writeChanged() { writeDirty(holding: true) }

    private func writeDirty(holding: Bool) {
        let saving = dirty
        dirty = []
        for app in saving { app.dirty = false }
        let now = loop.now
        var writing: [(AppRuntime, ProcessIdentityKey)] = []
        for app in saving {
            let identity = identityKey(app)
            if holding, let last = lastWrite[app.name], last.identity == identity, now - last.at < Self.writeInterval {
                if !held.contains(where: { $0 === app }) { held.append(app) }
            } else {
                held.removeAll { $0 === app }
                writing.append((app, identity))
            }
        }
        armHeldTimer()
        for (app, identity) in writing.count > 1 ? writing.sorted(by: { $0.0.name < $1.0.name }) : writing {
            let name = app.name
            guard let snapshot = host.snapshot(of: name) else { continue }
            // The start time is read once per process (it never changes), not at every save.
            let startTime = app.pid.flatMap { pid in store.savedStartTime(of: name, pid: pid) ?? ProcessTable.startTime(of: pid) }
            let persisted = PersistedApp(
                name: name, pid: app.pid, startTime: startTime,
                suspendedWith: app.suspension.mechanism.map { $0 == .signal ? "signal" : "freezer" },
                token: app.pid == nil ? nil : app.token, snapshot: snapshot)
            do {
                try store.save(persisted)
                lastWrite[name] = (at: now, identity: identity)
            } catch {
                Log.warning("\(name): Failed to save its state: \(error); a restart of lifecycled may not take it back")
            }
        }
    }

    private func identityKey(_ app: AppRuntime) -> ProcessIdentityKey {
        ProcessIdentityKey(pid: app.pid, suspendedWith: app.suspension.mechanism, token: app.pid == nil ? nil : app.token,
                           state: host.withRecord(app.name) { $0.state })
    }

    /// One timer for every held app, at the end of the earliest one's interval.
    private func armHeldTimer() {
        let due = held.compactMap { lastWrite[$0.name].map { $0.at + Self.writeInterval } }.min()
        guard let due else { heldTimer?.cancel(); return }
        if heldTimer == nil { heldTimer = try? LoopTimer(loop: loop) { [unowned self] in self.writeHeld() } }
        guard let heldTimer else {
            // Without a timer nothing may wait: the held apps are written now.
            return saveDirty()
        }
        heldTimer.arm(at: due)
    }

    /// The interval of some held apps is over: they are written, with every change they had meanwhile.
    private func writeHeld() {
        let now = loop.now
        let due = held.filter { app in lastWrite[app.name].map { now - $0.at >= Self.writeInterval } ?? true }
        held.removeAll { app in due.contains { $0 === app } }
        for app in due where !app.dirty {
            app.dirty = true
            dirty.append(app)
        }
        writeDirty(holding: true)
    }

    // MARK: Taking back a previous run

    /// Take back what a previous daemon left: apps whose process is still there and the same one (pid and
    /// start time) resume their state; anything else it left running is continued and terminated, so that no
    /// process stays stopped without a daemon that knows it.
    ///
    /// `keepingStateOf`: apps whose file is there but did not load; their processes are released like those of an
    /// app no longer configured, but their state file stays until the file loads (`restoreKept`) or is gone.
    func restorePreviousRun(keepingStateOf unloaded: Set<String> = []) {
        let (saved, problems) = store.loadAll()
        for problem in problems { Log.warning("Ignoring an unreadable state file: \(problem)") }
        for persisted in saved {
            let pid = persisted.pid.flatMap { pid in
                persisted.startTime != nil && ProcessTable.startTime(of: pid) == persisted.startTime ? pid : nil
            }.flatMap { pid in isOwn(pid, persisted.name) ? pid : nil }
            guard let app = host.runtime(persisted.name) else {
                let broken = unloaded.contains(persisted.name)
                if let pid {
                    let cgroup = placement.leftoverNames().contains(persisted.name) ? placement.leftover(persisted.name) : nil
                    release(app: persisted.name, pids: [pid], processGroup: pid, cgroup: cgroup,
                            reason: broken ? "its file did not load" : "it is no longer in the configuration")
                }
                if broken {
                    Log.notice("\(persisted.name): its file did not load; its saved state is kept until the file loads or is gone")
                } else {
                    store.remove(persisted.name)
                }
                continue
            }
            guard let pid, persisted.snapshot.state.isRunning else {
                if let old = persisted.pid, persisted.snapshot.state.isRunning {
                    Log.notice("\(app.name): its process \(old) ended while lifecycled was away")
                }
                host.handle(.adopt(app: app.name, persisted.snapshot, running: false, processesStopped: nil))
                continue
            }
            readopt(app, pid: pid, persisted)
        }
        // Processes in an app's cgroup that no state file accounts for (the state was lost, or the app's leader
        // died and left children): never left stopped either. Only the apps whose group exists can have strays;
        // the others get theirs at their first launch. A placement without groups has none (`leftoverNames`).
        let existing = placement.leftoverNames()
        for name in host.appNames where existing.contains(name) {
            guard let app = host.runtime(name), app.pid == nil, let cgroup = placement.leftover(name) else { continue }
            app.cgroup = cgroup
            let strays = cgroup.pids()
            if !strays.isEmpty, app.config.external {
                externalApps.continueStrays(app, strays, cgroup: cgroup)
            } else if !strays.isEmpty {
                release(app: name, pids: strays, processGroup: nil, cgroup: cgroup, reason: "no saved state accounts for them")
            }
        }
    }

    /// Whether `pid`, named by the state file of `name` and still the process the file names (its start time), is
    /// the app's own: the file alone never makes the daemon take on or signal a process (`isOwnProcess`).
    private func isOwn(_ pid: pid_t, _ name: String) -> Bool {
        let config = host.runtime(name)?.config
        let external = config?.external == true ? config?.externalUID : nil
        let processGroupAlone = host.runtime(name)?.usesProcessGroupAlone ?? false
        guard placement.isOwnProcess(pid, of: name, processGroupAlone: processGroupAlone, externalUser: external) else {
            Log.warning("\(name): its state file names process \(pid), which is not in the app's own cgroup or process group; not taking it back, and leaving it alone")
            return false
        }
        return true
    }

    private func readopt(_ app: AppRuntime, pid: pid_t, _ persisted: PersistedApp) {
        let name = app.name
        app.place.adopt(app)
        let saved: SuspendMechanism?
        switch persisted.suspendedWith {
        case "signal"?: saved = .signal
        case "freezer"?: saved = app.place.freezer(of: app).map(SuspendMechanism.freezer) ?? .signal
        default: saved = persisted.snapshot.state == .suspended ? .signal : nil
        }
        // Not our child any more (the previous daemon was its parent): its exit comes through a pidfd, the one the
        // service manager kept when there is one (the very process, whatever has its pid by now).
        let pidfd: FileDescriptor
        do throws(SystemError) {
            if let stored = fdStore.takePidfd(app, pid: pid) { pidfd = stored } else { pidfd = try openPidFD(pid) }
        } catch {
            return release(app: name, pids: [pid], processGroup: pid, cgroup: app.cgroup,
                           reason: "it cannot be watched (pidfd_open: \(String(cString: strerror(error.errno))))")
        }
        app.began(pid: pid, pidfd: pidfd, token: persisted.token)
        app.place.began(app)
        do {
            try processes.watchExit(app, pid: pid, pidfd: pidfd, what: "re-adopted process")
        } catch {
            app.processEnded()
            return release(app: name, pids: [pid], processGroup: pid, cgroup: app.cgroup, reason: "it cannot be watched: \(error)")
        }
        // What holds its processes now, whatever the file says: the model decides what that means for its state
        // (`Supervisor.adopt`), and a continue it asks for undoes this mechanism.
        let freezer = app.place.freezer(of: app)
        let frozen = freezer != nil && app.place.isFrozen(app)
        let stopped = frozen || ProcessTable.allStopped(app.place.processGroup(of: app))
        if stopped {
            app.suspension = .stopped(saved ?? (frozen ? freezer.map(SuspendMechanism.freezer) ?? .signal : .signal), members: [])
        }
        if !app.pidfdStored { fdStore.storePidfd(app, pid: pid, pidfd: pidfd) }
        host.handle(.adopt(app: name, persisted.snapshot, running: true, processesStopped: stopped))
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
        let timeout = host.runtime(name)?.config.policy.stopTimeout ?? AppPolicy().stopTimeout
        var source: EventSource?
        source = try? loop.timer { [weak self] in
            for (pid, start) in identities where start != nil && ProcessTable.startTime(of: pid) == start { kill(pid, SIGKILL) }
            if let processGroup { kill(-processGroup, SIGKILL) }
            cgroup?.killAll()
            // The group of an app no longer configured has no next launch to serve: it goes once they are reaped.
            if let cgroup, self?.host.runtime(name) == nil, !cgroup.removeOnceEmpty(within: CgroupPlacement.removalWait) {
                Log.warning("\(name): Failed to remove its cgroup \(cgroup.displayPath): processes are still in it")
            }
            if let source { self?.retired.retire(source) }
        }
        source?.arm(after: timeout)
    }
}
