import LifecycleModel
import LifecycleProtocol
@testable import LifecycleDaemon

/// A fake of the daemon's port (`DaemonHost`), for testing an owner without a daemon: the owner's inputs go to a
/// real model and are recorded, and nothing the model decides is performed (no processes, no sockets). Mocked
/// because an owner alone has no daemon to talk to, not because the machine lacks anything.
final class FakePort: DaemonHost {
    var model = Supervisor()
    /// Each input's kind and app, in order (`Input` carries no equality of its own).
    private(set) var inputs: [String] = []
    /// The apps as the owner under test sees them; the registry's when one is given.
    var apps: [String: AppRuntime] = [:]
    var registry: AppRegistry?
    var stopping = false
    /// Apps whose focus and background the display server carries out instead of the model.
    var displayCarries: Set<String> = []
    private(set) var clock: MonotonicTime = .zero

    var now: MonotonicTime { clock }
    func runtime(_ name: String) -> AppRuntime? { registry?.runtime(name) ?? apps[name] }
    var appNames: [String] { registry?.names ?? apps.keys.sorted() }
    func record(_ name: String) -> AppRecord? { model.app(name) }
    func withRecord<Result>(_ name: String, _ body: (borrowing AppRecord) -> Result) -> Result? { model.withApp(name, body) }
    func snapshot(of name: String) -> AppSnapshot? { model.snapshot(of: name) }
    func hasOpenTask(app: String, id: Int) -> Bool { model.hasOpenTask(app: app, id: id) }
    var records: [AppRecord] { model.records }

    @discardableResult
    func handle(_ input: Input, at: MonotonicTime?) -> Outcome {
        inputs.append(Self.describe(input))
        return model.handle(input, now: clock)
    }

    func openConnection(_ app: String, fd: FileDescriptor) throws(SystemError) -> Connection {
        throw SystemError(operation: "open a connection in a test", errno: 95)
    }

    func terminateAll() { handle(.shutdown) }
    func backgroundModes(of name: String) -> Set<String> { model.backgroundModes(of: name) }
    func throughDisplay(_ request: Request, for name: String) -> Bool { displayCarries.contains(name) }
    /// The apps whose state file the owner asked to save, in order.
    private(set) var dirtied: [String] = []
    func markDirty(_ name: String) { dirtied.append(name) }
    var adoptConfig: AdoptConfig { AdoptConfig() }
    func adoptWindows(_ windows: [DisplayWindow], gone: [Int64], ownership: WindowOwnership) -> Bool { false }
    func memoryPressure(reading: JSONValue) {}
    func statusLine() -> String { "" }
    func daemonStatus() -> DaemonStatus {
        StatusReport.daemon(pid: 1, options: DaemonOptions(configDirectory: "/nonexistent", runtimeDirectory: "/nonexistent", environment: [:]),
                            cgroups: CgroupSupport(layout: .none), configErrors: [], uptime: .zero, sources: [], catalog: model.catalog)
    }

    static func describe(_ input: Input) -> String {
        switch input {
        case .event(let event): "event \(event)"
        case .request(let request, let app, let origin): "request \(request) \(app) from \(origin)"
        case .add(let app, _): "add \(app)"
        case .configure(let app, let policy): "configure \(app) backgroundTime \(policy.backgroundTime.map { "\($0)" } ?? "infinity")"
        case .remove(let app): "remove \(app)"
        case .attach(let app, let launchedBy): "attach \(app) by \(launchedBy)"
        case .release(let app): "release \(app)"
        case .launchFailed(let app, _): "launchFailed \(app)"
        case .adopt(let app, _, _, _): "adopt \(app)"
        case .settings: "settings"
        case .display, .displayForgotten, .audio, .power, .post, .shutdown: "\(input)"
        }
    }
}

/// Whoever waits for a request's answer, recording the replies.
final class RecordingWaiter: RequestWaiter {
    private(set) var replies: [ControlReply] = []
    func reply(_ reply: ControlReply) { replies.append(reply) }
}

/// Records what the observers are told.
final class RecordingObserver: AppObserver {
    private(set) var changes: [String] = []
    func appChanged(_ change: AppChange) {
        switch change {
        case .added(let name): changes.append("added \(name)")
        case .removed(let name): changes.append("removed \(name)")
        default: break
        }
    }
}

/// Records which apps the registry forgets, and whether each was still in the table when told.
final class RecordingKeeper: AppKeeper {
    unowned let port: FakePort
    private(set) var forgotten: [String] = []
    init(port: FakePort) { self.port = port }
    func forgetting(_ app: AppRuntime) {
        forgotten.append(app.name + (port.runtime(app.name) === app ? " (still held)" : " (gone already)"))
    }
}
