import Glibc
import LifecycleModel

/// The daemon's owner of the display source: it starts the configured source, turns each picture into per-app
/// facts by the window-to-app rule, feeds them to the model, and carries lifectl's focus and background out through
/// the display server, which stays the one source of truth (the state changes when it reports the change).
final class DisplayFollower {
    private unowned let host: any DaemonHost
    private let loop: EventLoop
    /// Whose requests the display server did not answer in time are answered with their app's status.
    private let requests: ControlRequests
    private(set) var source: (any DisplaySource)?
    /// `Source=dbus`'s source, made with the bus API (nil when the daemon offers none).
    var dbusSource: (any DisplaySource)?
    /// What `[Display] Source=` asked for, when no source runs for it (for the status line).
    private var unavailable: String?
    /// `[Display]` as in force: a reload that changes it starts the source anew.
    private var running = DisplayConfig()
    /// `Source=` as configured, for the status line (`auto` says so beside what it picked).
    private var chosen = DisplayConfig.Source.none
    private var answerTimers: [String: LoopTimer] = [:]
    /// The owner of each window's process, kept while the apps stay the same.
    private let owners = ProcessOwners()
    /// The rule for the running apps, made again only once an app was added, removed, launched or ended, or the
    /// configuration reloaded (then every window is counted again): a picture is not worth a read of every app.
    private var rule: WindowOwnership? {
        didSet { if rule == nil { heard = nil } }
    }
    /// The windows as reported, and the facts the rule makes of them.
    private var tally = WindowTally()
    /// The facts the model heard last; nil once the rule changed, so that the next picture is heard whatever it
    /// shows. A picture that changes none of them (a title, the stacking order, another program's window) is not
    /// handed on, so that such events cost the model nothing.
    private var heard: DisplayFacts?
    /// How long a request asked of the display server waits for it to report the change.
    static let answerTimeout: Duration = .seconds(3)

    init(loop: EventLoop, host: any DaemonHost, requests: ControlRequests) {
        self.loop = loop
        self.host = host
        self.requests = requests
    }

    /// Where a sway socket is looked for when none is given, and whose it must be. A socket the configuration or
    /// SWAYSOCK names is followed as given. One found by looking is another user's to make: a user's daemon looks
    /// in its own runtime directory and follows only its own uid's sway; a root daemon only in `[Adopt] User=`'s,
    /// and follows only that user's; without `User=` it looks nowhere. The listener's credentials are checked at
    /// every connect (`SwaySource`).
    private func swayTrust(_ config: DisplayConfig, environment: [String: String]) -> (directories: [String], owner: uid_t?) {
        if config.swaySocket != nil || !(environment["SWAYSOCK"] ?? "").isEmpty { return ([], nil) }
        if getuid() != 0 {
            let own = environment["XDG_RUNTIME_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? "/run/user/\(getuid())"
            return ([own], getuid())
        }
        guard let user = host.adoptConfig.user, let uid = ConfigLoader.systemUserID(user) else { return ([], nil) }
        return (["/run/user/\(uid)"], uid)
    }

    /// Whose X server the daemon follows, checked against the listener's credentials at every connect: root's (a
    /// system X server), the daemon's own user's, and `[Adopt] User=`'s (a user's Xorg or Xvfb). Anyone may bind the
    /// display's abstract socket name while its server is away; the kernel says who did.
    private func x11Owners() -> [uid_t] {
        var owners: [uid_t] = [0]
        if getuid() != 0 { owners.append(getuid()) }
        if let user = host.adoptConfig.user, let uid = ConfigLoader.systemUserID(user), !owners.contains(uid) { owners.append(uid) }
        return owners
    }

    /// Start following the display server `config` names (`auto` resolved against `environment`).
    func start(_ config: DisplayConfig, environment: [String: String]) {
        let (choice, address) = config.resolved(environment: environment,
                                                runtimeDirectories: swayTrust(config, environment: environment).directories)
        running = config
        chosen = config.source
        switch choice {
        case .none, .auto:
            guard config.source == .auto else { return }
            if let slice = try? findSlice(), GnomeSource.marked(slice.path) { return startGnome(config) }
            Log.info("display: Source=auto found no display server; focus follows lifectl alone")
        case .gnome:
            startGnome(config)
        case .sway:
            let (searched, owner) = swayTrust(config, environment: environment)
            guard let address = config.resolved(environment: environment, runtimeDirectories: searched).address else {
                unavailable = "sway (no socket: set SwaySocket= or SWAYSOCK)"
                return Log.warning("display: Source=sway but no sway socket is given or found"
                    + (getuid() == 0 && host.adoptConfig.user == nil ? " (a root lifecycled looks only in [Adopt] User='s runtime directory)" : "")
                    + "; focus follows lifectl alone")
            }
            let source = SwaySource(loop: loop, socketPath: address, owner: owner,
                                    locate: { config.resolved(environment: environment, runtimeDirectories: searched).address })
            self.source = source
            Log.info("display: Source=\(config.source.rawValue): following sway at \(address)")
            source.start { [unowned self] picture in self.reported(picture) }
        case .dbus:
            guard let source = dbusSource else {
                unavailable = "dbus (no D-Bus API: see [Control] Bus=)"
                return Log.warning("display: Source=dbus but the daemon offers no D-Bus API; focus follows lifectl alone")
            }
            self.source = source
            Log.info("display: Source=dbus: following SetDisplay and SetDisplayPids on \(source.address)")
            source.start { [unowned self] picture in self.reported(picture) }
        case .x11:
            guard let address else {
                unavailable = "x11 (no display: set X11Display= or DISPLAY)"
                return Log.warning("display: Source=x11 but no X display is given or found; focus follows lifectl alone")
            }
            let name: X11DisplayName
            do {
                name = try X11DisplayName(address)
            } catch {
                unavailable = "x11 (\(address) is not a local display)"
                return Log.error("display: Source=x11: \(error); focus follows lifectl alone")
            }
            let source = X11Source(loop: loop, display: address, name: name, owners: x11Owners())
            self.source = source
            Log.info("display: Source=\(config.source.rawValue): following the X server \(address)")
            source.start { [unowned self] picture in self.reported(picture) }
        }
    }

    func stop() { source?.stop() }

    private func findSlice() throws(AdoptFailure) -> AppSlice {
        let mountinfo = (try? readKernelFile("/proc/self/mountinfo")) ?? ""
        let own = (try? readKernelFile("/proc/self/cgroup")) ?? ""
        // `[Adopt]` as in force: `Source=gnome` finds the app slice as adoption does.
        return try AppSlice.find(host.adoptConfig, mountinfo: mountinfo, ownCgroup: own, uid: ConfigLoader.systemUserID)
    }

    private func startGnome(_ config: DisplayConfig) {
        let source = GnomeSource(loop: loop, grace: config.gnomeGrace) { [unowned self] () throws(AdoptFailure) in try self.findSlice() }
        self.source = source
        source.start { [unowned self] picture in self.reported(picture) }
        if !source.connected { unavailable = "gnome (no app slice to follow: see the log)"; self.source = nil }
    }

    /// A reload: a changed `[Display]` stops the source in force and starts the new one, whose first picture
    /// reconciles the apps; meanwhile they keep their states. An unchanged one is left alone, connection and all.
    func apply(_ config: DisplayConfig, environment: [String: String]) {
        rule = nil
        guard config != running else { return }
        Log.info("display: [Display] changed; leaving \(description)")
        source?.stop()
        source = nil
        unavailable = nil
        tally = WindowTally()
        host.handle(.displayForgotten)
        start(config, environment: environment)
        Log.info("display: now \(description)")
    }

    /// For `lifectl status`.
    var description: String {
        if let source {
            let picked = chosen == .auto ? " (auto)" : ""
            return "\(source.name)\(picked) at \(source.address), \(source.connected ? "connected" : "reconnecting")"
        }
        return unavailable ?? "none (focus follows lifectl alone)"
    }

    /// The last picture read again (adoption was turned on by a reload, or after the first one came).
    func refresh() {
        rule = nil
        if source?.connected == true { reported(.changes([], gone: [])) }
    }

    /// The model hears first, so that a window that shows continues its app before anything else is done in this
    /// pass; windows no app owns are adopted after, and counted again with them. A report of changes costs what it
    /// names, a whole picture a comparison with the windows as they were; a change of the apps counts every window.
    private func reported(_ picture: WindowPicture) {
        let recount = rule == nil
        let (changed, gone) = tally.take(picture, rule: ownership(), recount: recount)
        tell(at: picture.changedAt)
        if host.adoptWindows(changed, gone: gone, ownership: ownership()) {
            tally.recount(ownership())
            tell(at: nil)
        }
    }

    private func tell(at changedAt: Duration?) {
        guard tally.moved || heard == nil || tally.focusedApp != heard?.focused else { return }
        let facts = tally.facts
        tally.settle()
        guard facts != heard else { return }
        heard = facts
        host.handle(.display(facts), at: changedAt)
    }

    /// The rule, with the owner of each window's process as `owners` finds it once per process.
    func ownership() -> WindowOwnership {
        if let rule { return rule }
        owners.update(from: host)
        var apps: [WindowOwnership.App] = []
        for name in owners.names {
            apps.append(WindowOwnership.App(name: name, appID: host.runtime(name)?.config.appID, holds: { _ in false }))
        }
        let owners = owners
        let made = WindowOwnership(apps: apps, processOwner: { owners.owner(of: $0) })
        rule = made
        return made
    }

    /// lifectl's focus or background of an app with a window: asked of the display server. Returns false when the
    /// request goes the usual way instead (no source connected, or the app shows no window).
    func carryOut(_ request: Request, for name: String) -> Bool {
        guard let source, source.connected, source.canRequest, let state = host.withRecord(name, { $0.state }) else { return false }
        switch request {
        case .focus where state != .active:
            guard let window = tally.windows(of: name).first else { return false }
            source.focus(window: window.id)
        case .background where state.isForeground:
            let windows = tally.windows(of: name).filter(\.visible)
            guard !windows.isEmpty else { return false }
            for window in windows { source.hide(window: window.id) }
        default:
            return false
        }
        awaitAnswer(name)
        return true
    }

    /// A display server may ignore a request (a window rule, a lock screen): the waiting lifectl is answered with
    /// the app's state as it is after a while rather than never.
    private func awaitAnswer(_ name: String) {
        if answerTimers[name] == nil {
            // Unanswered in time: the app's waiters get its status as it is.
            answerTimers[name] = try? LoopTimer(loop: loop) { [unowned self] in
                if let app = self.host.runtime(name) { self.requests.settled(app) }
            }
        }
        answerTimers[name]?.arm(after: Self.answerTimeout)
    }
}

extension DisplayFollower: AppObserver {
    /// The apps the rule sees change when one is added or removed, or its process begins or ends (each leaves or
    /// enters notRunning).
    func appChanged(_ change: AppChange) {
        switch change {
        case .added, .removed: rule = nil
        case .transition(_, let from, let to, _) where from == .notRunning || to == .notRunning: rule = nil
        default: break
        }
    }
}
