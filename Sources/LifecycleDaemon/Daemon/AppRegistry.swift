import Glibc
import LifecycleModel

/// An owner that keeps something of each app (a waiting request, a state file): told when the registry forgets one,
/// while the app's runtime is still there to read.
protocol AppKeeper: AnyObject {
    func forgetting(_ app: AppRuntime)
}

/// The apps the daemon holds, configured and adopted, by name. The only code that adds, adopts and forgets an app
/// in the model (through the port), in the runtime table, to the observers and in the keepers (waiting requests,
/// state files): `ConfigReload` and `Adoption` decide which apps come and go, and this carries it out the same way
/// for both.
final class AppRegistry {
    private unowned let host: any DaemonHost
    private let observers: AppObservers
    private let keepers: [any AppKeeper]
    private var apps: [String: AppRuntime] = [:]
    /// The app looked up last: the effects of one event name the same app in a row, and comparing a name costs
    /// less than hashing it.
    private var last: AppRuntime?

    init(host: any DaemonHost, observers: AppObservers, keepers: [any AppKeeper]) {
        self.host = host
        self.observers = observers
        self.keepers = keepers
    }

    func runtime(_ name: String) -> AppRuntime? {
        if let last, last.name == name { return last }
        last = apps[name]
        return last
    }

    /// Every app's name, sorted.
    var names: [String] { apps.keys.sorted() }

    var all: Dictionary<String, AppRuntime>.Values { apps.values }

    var count: Int { apps.count }

    /// The settings of every app that has a file: adopted apps have none, and a reload never removes them as if
    /// theirs were gone (`Adoption` lets them go).
    var configured: [String: AppConfig] {
        apps.filter { !$0.value.config.policy.adopted }.mapValues(\.config)
    }

    /// A new app, not running, under a name no app has (the caller chose it).
    func add(_ app: AppRuntime) {
        precondition(apps[app.name] == nil, "app \(app.name) added twice")
        host.handle(.add(app: app.name, policy: app.config.policy))
        apps[app.name] = app
        observers.tell(.added(app.name))
    }

    /// A process the daemon did not start becomes a new app, running from now on (`[Adopt]`). `pidfd`: the
    /// leader's, when the caller has one. Returns the model's refusal, if it refused.
    func adopt(_ app: AppRuntime, leader: pid_t, pidfd: FileDescriptor?, launchedBy: String) -> Refusal? {
        add(app)
        app.began(pid: leader, pidfd: pidfd ?? (try? openPidFD(leader)), token: nil)
        return host.handle(.attach(app: app.name, launchedBy: launchedBy)).refusal
    }

    /// The app's settings change: from its next step on in the model, from its next launch for `Exec=`.
    func configure(_ name: String, _ config: AppConfig) {
        guard let app = apps[name] else { return }
        app.config = config
        host.handle(.configure(app: name, policy: config.policy))
    }

    /// The app goes, its process stopped or let go: its waiting requests fail, its place and its state file are
    /// removed, and the model and the observers forget it.
    func forget(_ name: String) {
        guard let app = apps[name] else { return }
        for keeper in keepers { keeper.forgetting(app) }
        app.place.remove(app)
        host.handle(.remove(app: name))
        apps[name] = nil
        if last === app { last = nil }
        Log.info("\(name): removed")
        observers.tell(.removed(name))
    }
}
