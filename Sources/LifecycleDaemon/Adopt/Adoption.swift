import Glibc
import LifecycleModel

/// The daemon's owner of adopted apps (`[Adopt]`, docs/CONFIG.md "Adoption"): processes the desktop started, which
/// no file configures, managed like unaware apps (priorities, the grace time, suspension, focus from the display)
/// and never launched, restarted or terminated on the daemon's own account. It holds the rails (`AdoptRails`), the
/// record that lets the next daemon thaw what this one froze (`AdoptionLedger`), and lets every adopted app go,
/// thawed and continued, when the daemon stops or a reload stops adopting it.
final class Adoption {
    private unowned let host: any DaemonHost
    private let loop: EventLoop
    private let registry: AppRegistry
    private let display: DisplayFollower
    /// The processes stopped for adopted apps, continued when they are let go and by `resume --all`.
    private let stopLedger: StopLedger
    private let watcher: DirectoryWatcher
    private(set) var config = AdoptConfig()
    /// The configuration in force, for the adopted apps' own settings and the defaults.
    private var loaded = LoadedConfig(daemon: DaemonConfig(), apps: [:], diagnostics: [])
    private lazy var scopes = ScopeAdoption(adoption: self, watcher: watcher)
    private lazy var windows = WindowAdoption(adoption: self, loop: loop)
    /// `ScopeTrees=`: the scopes adopted windows' process trees go into.
    private let treeScopes: TreeScopes
    private let ledger: AdoptionLedger
    /// What adopted apps had before the daemon weighed them, given back when they are let go.
    private let originals: OriginalPriorities
    /// What adopted process trees' launches left orphaned, shared so that each process is read once.
    private let orphans = Orphans()
    /// Refusals already logged, by what was refused: each is logged once.
    private var refusalsLogged: Set<String> = []
    /// What each adopted app is, for the ledger and status.
    private(set) var places: [String: AdoptionLedger.Entry] = [:]
    /// The app id each adopted app was adopted by, for its settings (`[App] AppId=` without `Exec=`).
    private var appIDs: [String: String] = [:]

    init(host: any DaemonHost, loop: EventLoop, registry: AppRegistry, display: DisplayFollower, stopLedger: StopLedger,
         stateDirectory: String, environment: [String: String], managerBus: SystemdManagerBus?) {
        self.host = host
        treeScopes = TreeScopes(loop: loop, environment: environment, shared: managerBus)
        self.loop = loop
        self.registry = registry
        self.display = display
        self.stopLedger = stopLedger
        watcher = DirectoryWatcher(loop: loop)
        ledger = AdoptionLedger(stateDirectory: stateDirectory)
        originals = OriginalPriorities(stateDirectory: stateDirectory)
    }

    /// At start, before the configuration: what a previous daemon left frozen or stopped is thawed and continued.
    func recoverPreviousRun() {
        ledger.thawLeftovers()
        stopLedger.continueLeftovers()
        originals.giveBackLeftovers()
    }

    /// The configuration's `[Adopt]`, at start and at every reload: adoption starts or stops, adopted apps that an
    /// exclusion now names are let go, and the others take the new grace time and their files' settings.
    func apply(_ loaded: LoadedConfig) {
        let new = loaded.daemon.adopt
        let old = config
        config = new
        self.loaded = loaded
        if !new.scopes && scopes.running {
            releaseAll(where: { place in if case .scope = place { true } else { false } }, reason: "Scopes= is off now")
            scopes.stop()
        }
        if !new.windows && old.windows {
            releaseAll(where: { place in place.isProcess }, reason: "Windows= is off now")
        }
        // Trees already in a scope keep it: the daemon cannot move them back.
        treeScopes.apply(enabled: new.windows && new.scopeTrees, user: new.user)
        if new.exclude != old.exclude || new.user != old.user {
            refusalsLogged = []
            windows.reconsider()
            let rails = rails()
            for (name, place) in places.sorted(by: { $0.key < $1.key }) {
                var unit: String?
                if case .scope(let path) = place { unit = path.split(separator: "/").last.map(String.init) }
                if let why = rails.excluded(appID: appIDs[name] ?? name, unit: unit) { release(name, reason: why) }
            }
        }
        // The grace time and the apps' own settings may have changed: every adopted app takes them from now on.
        for (name, appID) in appIDs {
            let (policy, _, memoryLow) = settings(for: appID)
            guard var adopted = registry.runtime(name)?.config else { continue }
            adopted.policy = policy
            adopted.memoryLow = memoryLow
            registry.configure(name, adopted)
        }
        if new.scopes && (!scopes.running || new.appSlice != old.appSlice || new.user != old.user) {
            // Another slice: the units of the old one are watched no more, so their apps are let go first.
            if scopes.running {
                releaseAll(where: { place in if case .scope = place { true } else { false } }, reason: "the app slice changed")
            }
            scopes.stop()
            scopes.start(new)
        }
        // After the scopes: a window whose process is in a scope is the scope's.
        if new.windows && !old.windows { display.refresh() }
    }

    /// The daemon stops (or hands over): every adopted app is thawed, continued and let go.
    func stop() {
        scopes.stop()
        releaseAll(where: { _ in true }, reason: "lifecycled stops")
        watcher.stop()
    }

    /// For `lifectl status`.
    var description: String {
        guard config.enabled else { return "off" }
        var parts: [String] = []
        if config.scopes { parts.append("scopes " + (scopes.slice.map { "in \($0.path)" } ?? "(no app slice found)")) }
        // What an adopted window's app holds, and the worker it cannot follow (`AdoptedProcessTree`).
        if config.windows {
            let scopes = treeScopes.unavailable.map { "no scopes: \($0)" } ?? "each in a scope of its own (ScopeTrees=yes)"
            parts.append("windows (members: process tree and launch session; a worker that leaves the session is not followed"
                + " in a process tree; \(scopes))")
        }
        let trees = places.values.filter { if case .process = $0 { true } else { false } }.count
        return parts.joined(separator: "; ") + ", \(places.count) adopted"
            + (trees == 0 ? "" : "; \(trees) in process trees: a worker that calls setsid() and double-forks is not followed")
    }

    /// The adoption of each adopted app as status shows it, nil for a configured app.
    func place(of name: String) -> String? {
        switch places[name] {
        case .scope(let path)?: "scope " + (path.split(separator: "/").last.map(String.init) ?? path)
        case .process(let process)?: "process \(process.pid)"
        case .processScope(let process, let scope)?: "process \(process.pid) in " + (scope.split(separator: "/").last.map(String.init) ?? scope)
        case nil: nil
        }
    }

    // MARK: Adopting

    /// The policy of an adopted app, from its own file (`[App] AppId=ID` without `Exec=`) or else from
    /// `[Defaults]` with the `[Adopt]` grace time, wakes and reclaim: unaware and never restarted either way. With
    /// the file's `SuspendMethod=`, which a scope overrides with its freezer, and the file's `MemoryLow=`, else
    /// `[Adopt]`'s.
    private func settings(for appID: String) -> (AppPolicy, SuspendMethod?, MemoryProtection) {
        let own = loaded.adoptSettings[appID]
        var policy = own?.policy ?? loaded.daemon.defaults.policy
        if own == nil {
            policy.backgroundTime = config.backgroundTime
            policy.onlyOnBattery = config.onlyOnBattery
            policy.resumeEvery = config.resumeEvery
            policy.resumeFor = config.resumeFor
            policy.reclaim = config.reclaim
            policy.reclaimAfter = config.reclaimAfter
        }
        policy.speaksProtocol = false
        policy.adopted = true
        policy.external = false
        policy.restart = .no
        policy.scenes = nil
        return (policy, own?.suspendMethod, own?.memoryLow ?? config.memoryLow)
    }

    /// `[Adopt] User=root`: root's own session is the one adopted from, windows included.
    var adoptsForRoot: Bool { config.user.flatMap(ConfigLoader.systemUserID) == 0 }

    func rails() -> AdoptRails {
        AdoptRails(uid: getuid() == 0 ? config.user.flatMap(ConfigLoader.systemUserID) ?? 0 : getuid(),
                   configured: config.exclude, protected: AdoptRails.ownLine())
    }

    func refuse(_ what: String, _ why: String) {
        guard refusalsLogged.insert(what).inserted else { return }
        Log.notice("adopt: not adopting \(what): \(why)")
    }

    /// A launcher's unit with processes in it: adopted as the app named by its AppID, unless a rail says no.
    /// Returns the app's name.
    func adoptScope(_ unit: LauncherUnit, path: String) -> String? {
        guard !host.stopping else { return nil }
        if AdoptRails.underSessionSlice(path) { refuse(unit.unit, "it is under session.slice"); return nil }
        let rails = rails()
        if let why = rails.excluded(appID: unit.appID, unit: unit.unit) { refuse(unit.unit, why); return nil }
        let scope = AppCgroup(app: unit.appID, unifiedPath: path, cpuPath: nil, freezerPath: nil)
        let pids = scope.pids()
        guard let leader = pids.min() else { return nil }
        if let why = rails.refuses(pids, uidOf: { ProcessIdentity.realUID(of: $0) }) { refuse(unit.unit, why); return nil }
        // A window's process adopted before its launcher moved it here is the unit's now: adopted apart, it would
        // keep the window from the unit's app.
        for (name, place) in places.sorted(by: { $0.key < $1.key }) {
            if let pid = place.pid, pids.contains(pid) { release(name, reason: "its process is in \(unit.unit) now") }
        }
        guard let name = freeName(for: unit.appID) else { refuse(unit.unit, "its app id is no valid app name"); return nil }
        let (policy, _, memoryLow) = settings(for: unit.appID)
        var appConfig = AppConfig(name: name, exec: [], suspendMethod: scope.freezer == nil ? .signal : .freezer, policy: policy)
        appConfig.memoryLow = memoryLow
        let app = AppRuntime(name: name, config: appConfig, place: AdoptedScope(originals: originals))
        app.cgroup = scope
        appIDs[name] = unit.appID
        adopt(app, leader: leader, place: .scope(path),
              what: "scope \(unit.unit) (process\(pids.count == 1 ? "" : "es") \(pids.map(String.init).joined(separator: ", ")))")
        // The display's last picture may already show it (a window, or a GNOME focus mark): read it with the app.
        display.refresh()
        return name
    }

    /// A display report came: with `Windows=yes`, the processes of the windows it added or changed that no app owns
    /// are adopted. Returns whether any was (the windows are then counted again, with them).
    func adoptWindows(_ shown: [DisplayWindow], gone: [Int64], ownership: WindowOwnership) -> Bool {
        guard config.windows, !host.stopping else { return false }
        return windows.adopt(shown, gone: gone, ownership: ownership, appSlice: scopes.slice?.cgroup)
    }

    /// A window's process, checked by `WindowAdoption`, becomes the app named by its app id. Returns its name.
    func adoptWindowProcess(appID: String, pid: pid_t, pidfd: FileDescriptor, startTime: UInt64, what: String) -> String? {
        guard let name = freeName(for: appID) else { refuse("window process \(pid)", "\(what): its app id is no valid app name"); return nil }
        let (policy, method, memoryLow) = settings(for: appID)
        let tree = ProcessTree.descendants(of: pid)
        let scope = treeScopes.scope(for: name, leader: pid, members: (tree + orphans.rest(of: pid, besides: tree)).sorted())
        // In a scope, frozen as a launcher's scope is, unless its own file says otherwise.
        var appConfig = AppConfig(name: name, exec: [], suspendMethod: method ?? (scope == nil ? .signal : .freezer), policy: policy)
        appConfig.memoryLow = memoryLow
        let app = AppRuntime(name: name, config: appConfig, place: AdoptedProcessTree(originals: originals, orphans: orphans))
        app.cgroup = scope?.cgroup
        appIDs[name] = appID
        let recorded = RecordedProcess(pid: pid, startTime: startTime)
        let place = scope?.cgroup.unifiedPath.map { AdoptionLedger.Entry.processScope(recorded, scope: $0) }
            ?? AdoptionLedger.Entry.process(recorded)
        adopt(app, leader: pid, pidfd: pidfd, place: place, what: what + (scope.map { " into the scope \($0.unit)" } ?? ""))
        return name
    }

    /// The app id as an app name, or the first free `ID-2`, `ID-3`… when a configured or adopted app has it.
    private func freeName(for appID: String) -> String? {
        let valid = appID.utf8.count <= 60 && appID.first.map { $0.isASCII && ($0.isLetter || $0.isNumber) } == true
            && appID.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "_.-".contains($0)) }
        guard valid else { return nil }
        if registry.runtime(appID) == nil { return appID }
        return (2...99).lazy.map { "\(appID)-\($0)" }.first { self.registry.runtime($0) == nil }
    }

    /// `pidfd`: the leader's, when the caller has one. Not the daemon's child, the leader is signalled like the
    /// other members (`Suspension` signals each member outside the leader's process group).
    private func adopt(_ app: AppRuntime, leader: pid_t, pidfd: FileDescriptor? = nil, place: AdoptionLedger.Entry, what: String) {
        let name = app.name
        places[name] = place
        app.adoptedAs = self.place(of: name)
        ledger.write(Array(places.values))
        Log.event(.launch, .notice, "\(name): adopted \(what)",
                  [("LIFECYCLE_APP", name), ("LIFECYCLE_PID", String(leader)), ("LIFECYCLE_LAUNCHED_BY", "adopted")])
        if let refusal = registry.adopt(app, leader: leader, pidfd: pidfd, launchedBy: "adopted") {
            Log.error("\(name): Failed to adopt: \(refusal)")
        }
    }

    /// A configured app takes the name of an adopted one (a reload added its file): the adopted app is let go.
    func yieldName(_ name: String) {
        if places[name] != nil { release(name, reason: "an app file of the same name is configured now") }
    }

    /// `lifectl resume --all`: every suspended app, adopted or configured, is resumed into the background (thawed,
    /// continued); its grace time starts again.
    func resumeAll() {
        for record in host.records where record.state == .suspended {
            if let refusal = host.handle(.request(.resume, app: record.name, origin: "lifectl resume --all")).refusal {
                Log.warning("\(record.name): Failed to resume: \(refusal)")
            }
        }
        // Processes stopped for an app the daemon no longer holds as suspended (let go, or ended with its leader
        // while they were stopped elsewhere in the tree): never left stopped either.
        let continued = stopLedger.continueEverything()
        if !continued.isEmpty {
            Log.notice("Continued \(continued.map(String.init).joined(separator: ", ")), stopped by lifecycled and no longer in a suspended app")
        }
    }

    // MARK: Letting go

    /// Processes came or went while some remain: the app's main process is one that still runs.
    func membersChanged(_ name: String) {
        guard let app = registry.runtime(name), let pid = app.pid, ProcessTable.state(of: pid) == nil || kill(pid, 0) != 0 else { return }
        if let next = app.place.members(of: app).min() { app.pid = next }
    }

    /// The app's last process exited: it ends, and is forgotten (the desktop owns its lifetime: no restart).
    func ended(_ name: String) {
        guard let app = registry.runtime(name), places[name] != nil else { return }
        Log.notice("\(name): its last process exited; forgotten")
        // A scope's processes outlive the tree's leader: never left frozen.
        app.place.thawIfFrozen(app)
        // Processes it left behind, stopped by this daemon, are never left stopped.
        for pid in app.processEnded() where ProcessTable.state(of: pid) == "T" { kill(pid, SIGCONT) }
        stopLedger.continueAll(of: name)
        originals.giveBack(name)
        host.handle(.event(.exited(app: name, .unknown)))
        drop(name)
        registry.forget(name)
    }

    /// Lets go of an adopted app that runs: thawed, continued, and forgotten by the model and the daemon.
    func release(_ name: String, reason: String) {
        guard let app = registry.runtime(name), places[name] != nil else { return }
        app.place.thawIfFrozen(app)
        let members = app.place.members(of: app)
        for pid in members where ProcessTable.state(of: pid) == "T" { kill(pid, SIGCONT) }
        for timer in app.timers.values { timer.cancel() }
        for pid in app.processEnded() where ProcessTable.state(of: pid) == "T" { kill(pid, SIGCONT) }
        stopLedger.continueAll(of: name)
        originals.giveBack(name)
        host.handle(.release(app: name))
        var stays = ""
        if case .processScope(_, let scope)? = places[name] {
            stays = "; its processes stay in \(scope.split(separator: "/").last.map(String.init) ?? scope), which systemd cannot move back"
        }
        Log.notice("\(name): let go (\(reason)); thawed, continued, and its priorities given back\(stays)")
        drop(name)
        registry.forget(name)
    }

    private func releaseAll(where matches: (AdoptionLedger.Entry) -> Bool, reason: String) {
        for (name, place) in places.sorted(by: { $0.key < $1.key }) where matches(place) { release(name, reason: reason) }
    }

    private func drop(_ name: String) {
        if case .scope(let path)? = places[name], let unit = path.split(separator: "/").last { scopes.forget(String(unit)) }
        windows.forget(name)
        places[name] = nil
        appIDs[name] = nil
        ledger.write(Array(places.values))
    }
}
