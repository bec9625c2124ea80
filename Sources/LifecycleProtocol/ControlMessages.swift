import LifecycleModel

// The control protocol (docs/CONTROL.md): lifectl ↔ the daemon over RUNTIME_DIR/control.sock, one request and one
// reply per line, or a stream of lines after `watch` (WatchEvents.swift).

/// A request from lifectl.
public struct ControlRequest: Sendable, Equatable {
    /// A query (`list`, `status`, `scenes`, `watch`), `post`, `reload`, `simulate-memory-pressure`, or a
    /// lifecycle verb: `launch`, `focus`, `deactivate`, `background`, `suspend`, `resume`, `terminate`, `scene-*`.
    public var verb: String
    public var app: String?
    /// For `launch`: straight into the background.
    public var background: Bool?
    /// For `post`: the notification type and its payload.
    public var name: String?
    public var data: JSONValue?
    /// For the `scene-*` verbs: the scene session, and for `scene-open` its role and configuration.
    public var scene: String?
    public var role: String?
    public var configuration: String?

    public init(verb: String, app: String? = nil, background: Bool? = nil, name: String? = nil, data: JSONValue? = nil,
                scene: String? = nil, role: String? = nil, configuration: String? = nil) {
        self.verb = verb
        self.app = app
        self.background = background
        self.name = name
        self.data = data
        self.scene = scene
        self.role = role
        self.configuration = configuration
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
        case "scene-open": .openScene(role: role, configuration: configuration, options: .object(["origin": "lifectl"]))
        case "scene-focus": scene.map(Request.focusScene)
        case "scene-background": scene.map(Request.backgroundScene)
        case "scene-close": scene.map(Request.closeScene)
        case "scene-discard": scene.map(Request.discardScene)
        default: nil
        }
    }

    public static let lifecycleVerbs = ["launch", "focus", "deactivate", "background", "suspend", "resume", "terminate",
                                        "scene-open", "scene-focus", "scene-background", "scene-close", "scene-discard"]
    /// Verbs that change something but are not lifecycle requests.
    public static let otherVerbs = ["post", "simulate-memory-pressure", "reload"]
    /// Changing verbs that lifectl spells otherwise on its command line: `resume-all` is `lifectl resume --all`.
    public static let spelledOtherwise = ["resume-all"]
    /// Verbs that change nothing; anyone who can reach the socket may use them.
    public static let queryVerbs = ["list", "status", "scenes", "watch"]
    /// The control protocol's version (docs/CONTROL.md). Requests carry none: later versions only add verbs and
    /// optional fields. The daemon says its version in `status` (`daemon.controlProtocol`) and in `watch`'s `ready`.
    public static let protocolVersion = 1
}

/// One app as `lifectl list --json` shows it.
public struct AppStatus: Sendable, Equatable {
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
    /// Notification entries held while it sleeps (one per type) and the posts folded into them.
    public var queuedNotifications = 0
    public var queuedPosts = 0
    /// The notification types the client observes.
    public var observing: [String] = []
    /// Open background tasks.
    public var backgroundTasks: [TaskStatus] = []
    /// Seconds left in the background for its tasks; nil in the foreground.
    public var backgroundTimeRemaining: Double?
    public var taskOverruns = 0
    /// `BackgroundModes=`: never suspended for its grace time.
    public var backgroundModes: [String] = []
    /// Terminated while suspended under memory pressure, in this daemon's life.
    public var memoryTerminations = 0
    /// The last run ended in the background (its next launch options say so).
    public var terminatedInBackground = false
    /// Its scene sessions, for apps with `[Scenes]` (nil for the others).
    public var scenes: [SceneStatus]?
    /// For an app adopted from the desktop (`[Adopt]`): `scope UNIT` or `process PID`; nil for a configured app.
    public var adopted: String?
    /// Its last memory reclaim while suspended (`Reclaim=`), nil before the first one.
    public var reclaim: ReclaimStatus?

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

/// A suspended app's last memory reclaim: its memory before and after (bytes, from /proc/PID/status of each of its
/// processes), how it was done, and how long it took.
public struct ReclaimStatus: Sendable, Equatable {
    /// `memory.reclaim` (the app's cgroup2 group) or `process_madvise` (each process's private mappings).
    public var method: String
    /// `running`, `done`, `stopped` (the app ran again or ended first), or `failed`.
    public var outcome: String
    /// Whether the machine had swap: without it only file pages leave RAM.
    public var swap: Bool
    /// When it began: RFC 3339, UTC.
    public var began: String
    /// Resident memory (RssAnon + RssFile + RssShmem) and memory in swap (VmSwap) before it began.
    public var residentBefore: UInt64
    public var swappedBefore: UInt64
    /// Anonymous resident memory (RssAnon) before: the part only swap can take.
    public var anonymousBefore: UInt64
    /// The same once it ended; nil while it runs, or when the process it measured is gone.
    public var residentAfter: UInt64?
    public var swappedAfter: UInt64?
    public var anonymousAfter: UInt64?
    /// How long it took, nil while it runs.
    public var seconds: Double?

    public init(method: String, outcome: String, swap: Bool, began: String, residentBefore: UInt64, swappedBefore: UInt64,
                residentAfter: UInt64?, swappedAfter: UInt64?, anonymousBefore: UInt64, anonymousAfter: UInt64?,
                seconds: Double?) {
        self.method = method
        self.outcome = outcome
        self.swap = swap
        self.began = began
        self.residentBefore = residentBefore
        self.swappedBefore = swappedBefore
        self.anonymousBefore = anonymousBefore
        self.residentAfter = residentAfter
        self.swappedAfter = swappedAfter
        self.anonymousAfter = anonymousAfter
        self.seconds = seconds
    }
}

/// One scene session, as `lifectl scenes --json` shows it.
public struct SceneStatus: Sendable, Equatable {
    /// The session's persistent identifier (`s1`, …).
    public var scene: String
    public var role: String
    public var configuration: String
    /// `unattached`, `foregroundInactive`, `foregroundActive`, `background`, or `disconnected`.
    public var state: String
    /// The state the client saved at its last sceneDidEnterBackground (given back at reconnection).
    public var savedState: JSONValue?
    /// True when the session has a saved state that the asker may not see (it holds the app's data: only root,
    /// the daemon's user, `[Control] Group=` and the app's own user see it); `savedState` is then left out.
    public var savedStateHidden: Bool?
    public init(scene: String, role: String, configuration: String, state: String, savedState: JSONValue?,
                savedStateHidden: Bool? = nil) {
        self.scene = scene
        self.role = role
        self.configuration = configuration
        self.state = state
        self.savedState = savedState
        self.savedStateHidden = savedStateHidden
    }
}

public struct TaskStatus: Sendable, Equatable {
    public var task: Int
    public var name: String
    public init(task: Int, name: String) {
        self.task = task
        self.name = name
    }
}

/// What a post did.
public struct PostSummary: Sendable, Equatable {
    public var delivered: Int
    public var queued: Int
    public init(delivered: Int, queued: Int) {
        self.delivered = delivered
        self.queued = queued
    }
}

/// The daemon itself, as `lifectl status` shows it.
public struct DaemonStatus: Sendable, Equatable {
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
    /// The notification sources and how each works here (or why it is off).
    public var sources: [String] = []
    /// The notification types that can be posted, with their coalescing ("batteryLevelDidChange: latest").
    public var notificationTypes: [String] = []
    /// The display server the states follow and whether it is connected ("sway at /run/user/1000/sway-ipc.sock,
    /// connected"), or why none is; nil from a daemon that predates it.
    public var display: String?
    /// The control protocol's version (`ControlRequest.protocolVersion`); nil from a daemon that predates it.
    public var controlProtocol: Int?

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
public struct ControlReply: Sendable, Equatable {
    public var ok: Bool
    /// For failures: what went wrong, in a sentence naming the app, its state and the request.
    public var error: String?
    public var apps: [AppStatus]?
    public var daemon: DaemonStatus?
    public var posted: PostSummary?
    /// For `scene-open`: the new session's identifier.
    public var scene: String?

    public init(ok: Bool, error: String? = nil, apps: [AppStatus]? = nil, daemon: DaemonStatus? = nil,
                posted: PostSummary? = nil, scene: String? = nil) {
        self.ok = ok
        self.error = error
        self.apps = apps
        self.daemon = daemon
        self.posted = posted
        self.scene = scene
    }

    public static func failure(_ message: String) -> ControlReply { ControlReply(ok: false, error: message) }
}

// Each type reads and writes itself (LineCoder): members in key order, a nil optional left out; reading ignores
// unknown members and takes null for an absent optional.

extension ControlRequest: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(verb: try fields.required("verb"), app: try fields.optional("app"),
                  background: try fields.optional("background"), name: try fields.optional("name"),
                  data: try fields.optional("data"), scene: try fields.optional("scene"), role: try fields.optional("role"),
                  configuration: try fields.optional("configuration"))
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("app", app)
        writer.member("background", background)
        writer.member("configuration", configuration)
        writer.member("data", data)
        writer.member("name", name)
        writer.member("role", role)
        writer.member("scene", scene)
        writer.member("verb", verb)
        writer.endObject()
    }
}

extension ControlReply: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(ok: try fields.required("ok"), error: try fields.optional("error"), apps: try fields.optional("apps"),
                  daemon: try fields.optional("daemon"), posted: try fields.optional("posted"),
                  scene: try fields.optional("scene"))
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("apps", apps)
        writer.member("daemon", daemon)
        writer.member("error", error)
        writer.member("ok", ok)
        writer.member("posted", posted)
        writer.member("scene", scene)
        writer.endObject()
    }
}

extension AppStatus: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(name: try fields.required("name"), state: try fields.required("state"), pid: try fields.optional("pid"),
                  since: try fields.required("since"), sinceSeconds: try fields.required("sinceSeconds"),
                  protocol: try fields.required("protocol"), launches: try fields.required("launches"),
                  deadlineMisses: try fields.required("deadlineMisses"), awaiting: try fields.optional("awaiting"),
                  suspendMethod: try fields.required("suspendMethod"), cgroup: try fields.optional("cgroup"))
        queuedNotifications = try fields.required("queuedNotifications")
        queuedPosts = try fields.required("queuedPosts")
        observing = try fields.required("observing")
        backgroundTasks = try fields.required("backgroundTasks")
        backgroundTimeRemaining = try fields.optional("backgroundTimeRemaining")
        taskOverruns = try fields.required("taskOverruns")
        backgroundModes = try fields.required("backgroundModes")
        memoryTerminations = try fields.required("memoryTerminations")
        terminatedInBackground = try fields.required("terminatedInBackground")
        scenes = try fields.optional("scenes")
        adopted = try fields.optional("adopted")
        reclaim = try fields.optional("reclaim")
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("adopted", adopted)
        writer.member("awaiting", awaiting)
        writer.member("backgroundModes", backgroundModes)
        writer.member("backgroundTasks", backgroundTasks)
        writer.member("backgroundTimeRemaining", backgroundTimeRemaining)
        writer.member("cgroup", cgroup)
        writer.member("deadlineMisses", deadlineMisses)
        writer.member("launches", launches)
        writer.member("memoryTerminations", memoryTerminations)
        writer.member("name", name)
        writer.member("observing", observing)
        writer.member("pid", pid)
        writer.member("protocol", `protocol`)
        writer.member("queuedNotifications", queuedNotifications)
        writer.member("queuedPosts", queuedPosts)
        writer.member("reclaim", reclaim)
        writer.member("scenes", scenes)
        writer.member("since", since)
        writer.member("sinceSeconds", sinceSeconds)
        writer.member("state", state)
        writer.member("suspendMethod", suspendMethod)
        writer.member("taskOverruns", taskOverruns)
        writer.member("terminatedInBackground", terminatedInBackground)
        writer.endObject()
    }
}

extension ReclaimStatus: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(method: try fields.required("method"), outcome: try fields.required("outcome"),
                  swap: try fields.required("swap"), began: try fields.required("began"),
                  residentBefore: try fields.required("residentBefore"), swappedBefore: try fields.required("swappedBefore"),
                  residentAfter: try fields.optional("residentAfter"), swappedAfter: try fields.optional("swappedAfter"),
                  anonymousBefore: try fields.required("anonymousBefore"), anonymousAfter: try fields.optional("anonymousAfter"),
                  seconds: try fields.optional("seconds"))
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("anonymousAfter", anonymousAfter)
        writer.member("anonymousBefore", anonymousBefore)
        writer.member("began", began)
        writer.member("method", method)
        writer.member("outcome", outcome)
        writer.member("residentAfter", residentAfter)
        writer.member("residentBefore", residentBefore)
        writer.member("seconds", seconds)
        writer.member("swap", swap)
        writer.member("swappedAfter", swappedAfter)
        writer.member("swappedBefore", swappedBefore)
        writer.endObject()
    }
}

extension SceneStatus: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(scene: try fields.required("scene"), role: try fields.required("role"),
                  configuration: try fields.required("configuration"), state: try fields.required("state"),
                  savedState: try fields.optional("savedState"), savedStateHidden: try fields.optional("savedStateHidden"))
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writeMembers(into: &writer)
        writer.endObject()
    }

    /// The members alone, for an object that adds keys sorting before `configuration` (lifectl's `app`).
    public func writeMembers(into writer: inout JSONWriter) {
        writer.member("configuration", configuration)
        writer.member("role", role)
        writer.member("savedState", savedState)
        writer.member("savedStateHidden", savedStateHidden)
        writer.member("scene", scene)
        writer.member("state", state)
    }
}

extension TaskStatus: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(task: try fields.required("task"), name: try fields.required("name"))
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("name", name)
        writer.member("task", task)
        writer.endObject()
    }
}

extension PostSummary: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(delivered: try fields.required("delivered"), queued: try fields.required("queued"))
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("delivered", delivered)
        writer.member("queued", queued)
        writer.endObject()
    }
}

extension DaemonStatus: JSONReadable, JSONWritable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(pid: try fields.required("pid"), version: try fields.required("version"),
                  configDirectory: try fields.required("configDirectory"),
                  runtimeDirectory: try fields.required("runtimeDirectory"), cgroupLayout: try fields.required("cgroupLayout"),
                  mechanisms: try fields.required("mechanisms"), configErrors: try fields.required("configErrors"),
                  uptimeSeconds: try fields.required("uptimeSeconds"))
        sources = try fields.required("sources")
        notificationTypes = try fields.required("notificationTypes")
        display = try fields.optional("display")
        controlProtocol = try fields.optional("controlProtocol")
    }

    public func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("cgroupLayout", cgroupLayout)
        writer.member("configDirectory", configDirectory)
        writer.member("configErrors", configErrors)
        writer.member("controlProtocol", controlProtocol)
        writer.member("display", display)
        writer.member("mechanisms", mechanisms)
        writer.member("notificationTypes", notificationTypes)
        writer.member("pid", pid)
        writer.member("runtimeDirectory", runtimeDirectory)
        writer.member("sources", sources)
        writer.member("uptimeSeconds", uptimeSeconds)
        writer.member("version", version)
        writer.endObject()
    }
}
