import FoundationEssentials
import LifecycleModel

// The control protocol: lifectl ↔ the daemon over RUNTIME_DIR/control.sock, one request and one reply per line.

/// A request from lifectl.
public struct ControlRequest: Codable, Sendable, Equatable {
    /// `list`, `status`, or a lifecycle verb: `launch`, `focus`, `deactivate`, `background`,
    /// `suspend`, `resume`, `terminate`.
    public var verb: String
    public var app: String?
    /// For `launch`: straight into the background.
    public var background: Bool?

    public init(verb: String, app: String? = nil, background: Bool? = nil) {
        self.verb = verb
        self.app = app
        self.background = background
    }

    /// The model request for a lifecycle verb, nil for queries and unknown verbs.
    public var lifecycleRequest: Request? {
        switch verb {
        case "launch": .launch(background: background ?? false)
        case "focus": .focus
        case "deactivate": .deactivate
        case "background": .background
        case "suspend": .suspend
        case "resume": .resume
        case "terminate": .terminate
        default: nil
        }
    }

    public static let lifecycleVerbs = ["launch", "focus", "deactivate", "background", "suspend", "resume", "terminate"]
    /// Verbs that change nothing; anyone who can reach the socket may use them.
    public static let queryVerbs = ["list", "status"]
}

/// One app as `lifectl list --json` shows it.
public struct AppStatus: Codable, Sendable, Equatable {
    public var name: String
    public var state: AppState
    public var pid: Int32?
    /// When the app entered its state: RFC 3339, UTC.
    public var since: String
    /// Seconds spent in the state so far.
    public var sinceSeconds: Double
    /// `lifecycle` (speaks the protocol, connected), `waiting` (not connected yet), `none`, or `silent`
    /// (a protocol app that never said hello or hung up: managed without messages).
    public var `protocol`: String
    public var launches: Int
    public var deadlineMisses: Int
    /// The callback whose ack is awaited, if any.
    public var awaiting: String?
    /// How suspension is done for this app: `signal`, `freezer (cgroup2)`, `freezer (v1)`.
    public var suspendMethod: String
    /// The app's own cgroup, if it has one.
    public var cgroup: String?

    public init(name: String, state: AppState, pid: Int32?, since: String, sinceSeconds: Double, protocol: String,
                launches: Int, deadlineMisses: Int, awaiting: String?, suspendMethod: String, cgroup: String?) {
        self.name = name
        self.state = state
        self.pid = pid
        self.since = since
        self.sinceSeconds = sinceSeconds
        self.protocol = `protocol`
        self.launches = launches
        self.deadlineMisses = deadlineMisses
        self.awaiting = awaiting
        self.suspendMethod = suspendMethod
        self.cgroup = cgroup
    }
}

/// The daemon itself, as `lifectl status` shows it.
public struct DaemonStatus: Codable, Sendable, Equatable {
    public var pid: Int32
    public var version: String
    public var configDirectory: String
    public var runtimeDirectory: String
    /// `cgroup2`, `hybrid`, `v1`, or `none`.
    public var cgroupLayout: String
    /// How each priority class is applied, e.g. `background: cgroup v1 cpu.shares=128, oom_score_adj=500`.
    public var mechanisms: [String]
    public var configErrors: [String]
    public var uptimeSeconds: Double

    public init(pid: Int32, version: String, configDirectory: String, runtimeDirectory: String, cgroupLayout: String,
                mechanisms: [String], configErrors: [String], uptimeSeconds: Double) {
        self.pid = pid
        self.version = version
        self.configDirectory = configDirectory
        self.runtimeDirectory = runtimeDirectory
        self.cgroupLayout = cgroupLayout
        self.mechanisms = mechanisms
        self.configErrors = configErrors
        self.uptimeSeconds = uptimeSeconds
    }
}

/// The daemon's answer to one control request.
public struct ControlReply: Codable, Sendable, Equatable {
    public var ok: Bool
    /// For failures: what went wrong, in a sentence naming the app, its state and the request.
    public var error: String?
    public var apps: [AppStatus]?
    public var daemon: DaemonStatus?

    public init(ok: Bool, error: String? = nil, apps: [AppStatus]? = nil, daemon: DaemonStatus? = nil) {
        self.ok = ok
        self.error = error
        self.apps = apps
        self.daemon = daemon
    }

    public static func failure(_ message: String) -> ControlReply { ControlReply(ok: false, error: message) }
}
