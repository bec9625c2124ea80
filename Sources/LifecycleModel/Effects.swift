/// Monotonic time (since an arbitrary origin, e.g. boot), as the daemon's clock reads it.
public typealias MonotonicTime = Duration

/// The timers an app can have armed; at most one of each kind. Arming one replaces it.
public enum TimerKind: String, Sendable, Equatable, CaseIterable {
    /// The deadline of the callback being waited on.
    case ack
    /// Launch timeout while waiting for the client's hello.
    case hello
    /// The background grace time before suspension.
    case grace
    /// The delay before an automatic restart.
    case restart
    /// Between SIGTERM and SIGKILL.
    case kill
    /// `backgroundTimeWillExpire`, shortly before the background task time runs out.
    case taskWarning
    /// The background task time is over: suspended even with tasks open.
    case taskDeadline
    /// A suspended app's next background wake (`ResumeEverySec=`).
    case resumeEvery
    /// The end of a background wake (`ResumeForSec=`) of an app that gets no `performFetch`.
    case fetchWindow
    /// A suspended app's memory is to be reclaimed (`ReclaimAfterSec=`).
    case reclaim
}

/// How a process ended, from `waitid`.
public enum ExitStatus: Sendable, Equatable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)
    /// A process that is not the daemon's child (re-adopted from a previous daemon): only its parent learns how it
    /// ended. Counts as a failure for `Restart=on-failure`.
    case unknown

    public var isSuccess: Bool { self == .exited(0) }

    public var description: String {
        switch self {
        case .exited(let code): "exited with status \(code)"
        case .signaled(let signal): "killed by signal \(signal)"
        case .unknown: "ended with an unknown status (not lifecycled's child)"
        }
    }
}

/// A signal the model asks the daemon to send to the app's process group.
public enum TerminationSignal: String, Sendable, Equatable {
    case terminate = "SIGTERM"
    case kill = "SIGKILL"
}

/// One message to deliver, with its deadline: the client acknowledges each one.
public struct Delivery: Sendable, Equatable {
    public var id: Int
    public var message: Message
    public var deadline: Duration

    /// What is delivered.
    public enum Message: Sendable, Equatable {
        /// An application-delegate callback.
        case app(LifecycleCallback, LaunchOptions?)
        /// A scene-delegate callback for session `scene`; `sceneWillConnect` carries the connection.
        case scene(SceneCallback, scene: String, connection: SceneConnection?)
        /// `application(_:configurationForConnecting:options:)`: the ack names the configuration;
        /// `proposed` is the one used without an answer (asked for, used last time, or the role's default).
        case configurationForConnecting(scene: String, role: String, proposed: String, options: JSONValue)
        /// `application(_:didDiscardSceneSessions:)`.
        case didDiscardSceneSessions([String])
        /// `application(_:performFetchWithCompletionHandler:)`: a background wake; the ack ends it.
        case performFetch
    }

    public init(id: Int, message: Message, deadline: Duration) {
        self.id = id
        self.message = message
        self.deadline = deadline
    }

    /// An application-delegate callback.
    public init(id: Int, callback: LifecycleCallback, deadline: Duration, launchOptions: LaunchOptions? = nil) {
        self.init(id: id, message: .app(callback, launchOptions), deadline: deadline)
    }

    /// The application-delegate callback, nil for the scene messages.
    public var callback: LifecycleCallback? {
        if case .app(let callback, _) = message { callback } else { nil }
    }

    public var launchOptions: LaunchOptions? {
        if case .app(_, let options) = message { options } else { nil }
    }

    /// The message's wire name (`didBecomeActive`, `sceneWillConnect`, `configurationForConnecting`, …).
    public var name: String {
        switch message {
        case .app(let callback, _): callback.rawValue
        case .scene(let callback, _, _): callback.rawValue
        case .configurationForConnecting: "configurationForConnecting"
        case .didDiscardSceneSessions: "didDiscardSceneSessions"
        case .performFetch: "performFetch"
        }
    }
}

/// What `sceneWillConnect` hands the scene: its session's role and configuration, the options of the
/// connection, and the state saved at its last `sceneDidEnterBackground`.
public struct SceneConnection: Sendable, Equatable {
    public var role: String
    public var configuration: String
    public var options: JSONValue
    public var savedState: JSONValue?
    public init(role: String, configuration: String, options: JSONValue, savedState: JSONValue?) {
        self.role = role
        self.configuration = configuration
        self.options = options
        self.savedState = savedState
    }
}

/// Noteworthy things that are not transitions; the daemon logs them. Each carries every value its log line needs,
/// so that logging one is a pure function of the note.
public enum Note: Sendable, Equatable {
    /// The callback was not acknowledged within `after`; `misses`: deadlines the app missed so far.
    case deadlineMissed(LifecycleCallback, id: Int, after: Duration, misses: Int)
    /// A scene message or a question (configurationForConnecting) was not acknowledged in time.
    case messageDeadlineMissed(String, id: Int, after: Duration, misses: Int)
    /// didFinishLaunching was not acknowledged within `after`: killed, as iOS's launch watchdog does.
    case launchWatchdog(after: Duration)
    /// No hello within the launch timeout: managed from now on without messages.
    case noHello(after: Duration)
    /// Start `attempt` of at most `limit` within `within` (StartLimitBurst=, StartLimitIntervalSec=).
    case restartScheduled(after: Duration, attempt: Int, limit: Int, within: Duration)
    case startLimitHit(starts: Int, within: Duration)
    case stoppedExternally
    case continuedExternally
    /// Re-adoption: saved as suspended, but its processes run; taken back in the background.
    case adoptedRunning
    /// Re-adoption: saved in `saved`, a running state, but its processes are stopped (the previous daemon died
    /// mid-suspension); continued.
    case adoptedStopped(saved: AppState)
    /// Re-adoption: the running process of a previous daemon is the app's again, taken back in `state` (as saved,
    /// unless its processes said otherwise).
    case readopted(state: AppState)
    case spawnFailed(String)
    /// No exit within `after` (TimeoutStopSec=) of SIGTERM.
    case killTimeout(after: Duration)
    /// Background tasks still open when their time (`after`) ran out: suspended anyway. `overruns`: so far.
    case taskOverrun([String], after: Duration, overruns: Int)
    /// Suspended (by request, or stopped by someone else) while holding background tasks.
    case tasksAbandoned([String])
    /// Memory pressure: `didReceiveMemoryWarning` went to the running apps.
    case memoryWarning(apps: Int)
    /// Memory pressure persisted after the warnings: terminated while suspended (jetsam).
    case terminatedForMemory(residentBytes: UInt64?)
    /// Memory pressure persisted, and no suspended app was left to terminate.
    case nothingToTerminate
    /// A scene moved: logged like an app transition (nil: disconnected).
    case sceneTransition(scene: String, from: SceneActivationState?, to: SceneActivationState?, reason: String)
    /// configurationForConnecting named a configuration the app does not declare for the role: the default is used.
    case unknownSceneConfiguration(scene: String, asked: String, used: String)
    /// Sessions forgotten (discarded); the app is told when it next runs, if it is not running.
    case scenesDiscarded([String])
    /// A new session took the app to its `MaxSceneSessions=`: `scene`, the least recently used disconnected one, is
    /// discarded to make room.
    case sceneSessionReclaimed(scene: String, limit: Int)
    /// A new scene session (lifectl scene open, a client's request, or a focus with no session to reuse).
    case sceneSessionCreated(scene: String, role: String)
    /// The state an ack of sceneDidEnterBackground carried is over `SceneSession.savedStateLimit`: the one saved
    /// before is kept (sceneWillConnect carries it back, and must fit in one line).
    case savedStateTooLarge(scene: String, size: Int, limit: Int)
    /// A background wake (`ResumeEverySec=`) began: the app runs in the background for at most `for`.
    case backgroundWake(for: Duration)
    /// The app answered its `performFetch` (nil: no answer before the deadline, or no result in the ack).
    case fetchCompleted(FetchResult?)
    /// Whether the app is kept from suspension changed: nil, its grace time runs again.
    case keptRunning(KeepRunningReason?)
}

/// A background task as the client named it.
public struct BackgroundTask: Sendable, Equatable {
    public var id: Int
    public var name: String
    public init(id: Int, name: String) {
        self.id = id
        self.name = name
    }
}

/// What the daemon must do, in order, after the model handled a request or an event.
public enum Effect: Sendable, Equatable {
    case spawn(app: String, options: LaunchOptions)
    case send(app: String, Delivery)
    /// Suspend: SIGSTOP to the process group, or freeze its cgroup.
    case stopProcess(app: String)
    /// Undo `stopProcess`: SIGCONT, or thaw.
    case continueProcess(app: String)
    case signal(app: String, TerminationSignal)
    case armTimer(app: String, TimerKind, after: Duration)
    case cancelTimer(app: String, TimerKind)
    /// The app's state changed; the daemon logs it and applies the new state's priority class.
    case transition(app: String, from: AppState, to: AppState, reason: String)
    case note(app: String, Note)
    /// The app has no work in flight: requests waiting for it can be answered.
    case settled(app: String)
    /// Deliver a notification (one coalesced message per type after a sleep).
    case notify(app: String, NotificationDelivery)
    /// Answer beginBackgroundTask: the time left in the background (nil: the app is in the foreground,
    /// its time starts when it enters the background).
    case taskBegan(app: String, task: BackgroundTask, remaining: Duration?)
    /// Tell the app its background time runs out soon, naming its open tasks.
    case taskExpiring(app: String, tasks: [BackgroundTask], remaining: Duration)
    /// Answer the request that opened a scene: the session it created.
    case sceneOpened(app: String, scene: String)
    /// Take the suspended app's memory out of RAM (`Reclaim=`): once per suspension, `ReclaimAfterSec=` after it
    /// began. The daemon stops the work when the app runs again or ends.
    case reclaimMemory(app: String)
    /// What the daemon keeps of the app across its own restart changed (AppSnapshot, or its process): write it.
    /// At most once per app per call, after the other effects.
    case save(app: String)
}

/// Inputs from the world: the client, the timers and the kernel.
public enum Event: Sendable, Equatable {
    case hello(app: String)
    /// The client acknowledged message `id`; `reply` carries its answer to messages that ask something.
    case ack(app: String, id: Int, reply: AckReply = AckReply())
    case timerFired(app: String, TimerKind)
    case exited(app: String, ExitStatus)
    case spawnFailed(app: String, reason: String)
    /// The process group was stopped by someone else (e.g. `kill -STOP`).
    case processStopped(app: String)
    /// The process group was continued by someone else (e.g. `kill -CONT`).
    case processContinued(app: String)
    /// The client connection went away while the process lives on: managed without messages.
    case disconnected(app: String)
    /// The client says which notification types it wants (replacing the earlier set).
    case observe(app: String, names: Set<String>)
    /// UIKit's beginBackgroundTask: `id` is chosen by the client, unique on its connection.
    case beginBackgroundTask(app: String, task: BackgroundTask)
    case endBackgroundTask(app: String, id: Int)
    /// Memory pressure crossed the threshold. `residentBytes` of the suspended apps, for jetsam's tie-break;
    /// `reading` goes to the apps with the warning.
    case memoryPressure(residentBytes: [String: UInt64], reading: JSONValue)
}

/// What `lifectl` (or a client) asks of an app.
public enum Request: Sendable, Equatable, CustomStringConvertible {
    /// A request about the app as a whole, judged against LifecycleRules' table.
    case app(AppRequest)
    /// A request that names scenes, judged against the session it names; only apps with `[Scenes]` take it.
    case scene(SceneRequest)

    public static func launch(background: Bool) -> Request { .app(.launch(background: background)) }
    public static let focus = Request.app(.focus)
    public static let deactivate = Request.app(.deactivate)
    public static let background = Request.app(.background)
    public static let suspend = Request.app(.suspend)
    public static let resume = Request.app(.resume)
    public static let terminate = Request.app(.terminate)
    public static func openScene(role: String?, configuration: String?, options: JSONValue) -> Request {
        .scene(.openScene(role: role, configuration: configuration, options: options))
    }
    public static func focusScene(_ scene: String) -> Request { .scene(.focusScene(scene)) }
    public static func backgroundScene(_ scene: String) -> Request { .scene(.backgroundScene(scene)) }
    public static func closeScene(_ scene: String) -> Request { .scene(.closeScene(scene)) }
    public static func discardScene(_ scene: String) -> Request { .scene(.discardScene(scene)) }

    public var description: String {
        switch self {
        case .app(let request): request.description
        case .scene(let request): request.description
        }
    }
}

public enum AppRequest: Sendable, Equatable, CustomStringConvertible {
    case launch(background: Bool)
    case focus
    /// An interruption: active → inactive.
    case deactivate
    case background
    case suspend
    case resume
    case terminate

    public var description: String {
        switch self {
        case .launch(let background): background ? "launch --background" : "launch"
        case .focus: "focus"
        case .deactivate: "deactivate"
        case .background: "background"
        case .suspend: "suspend"
        case .resume: "resume"
        case .terminate: "terminate"
        }
    }
}

public enum SceneRequest: Sendable, Equatable, CustomStringConvertible {
    /// A new scene session, connected and brought to focus (UIKit's requestSceneSessionActivation with no
    /// session). `role` nil: `window`; `configuration`: the one asked for (the app still chooses).
    case openScene(role: String?, configuration: String?, options: JSONValue)
    /// Bring one scene to focus: reconnected first if its session is disconnected.
    case focusScene(String)
    /// One scene to the background (the app follows when it was the last one in the foreground).
    case backgroundScene(String)
    /// Disconnect a scene and keep its session (UIKit releases scenes to free resources).
    case closeScene(String)
    /// Disconnect the scene if connected, forget its session, tell the app with didDiscardSceneSessions
    /// (UIKit's requestSceneSessionDestruction).
    case discardScene(String)

    public var description: String {
        switch self {
        case .openScene: "open a scene of"
        case .focusScene(let scene): "focus scene \(scene) of"
        case .backgroundScene(let scene): "move scene \(scene) to the background in"
        case .closeScene(let scene): "close scene \(scene) of"
        case .discardScene(let scene): "discard scene \(scene) of"
        }
    }
}

/// A request the model does not allow from the app's state.
public struct RequestError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        case unknownApp
        case notAllowed(hint: String?)
        /// A scene request for an app that does not declare `[Scenes]`.
        case noScenes
        case unknownScene(String)
        /// The request launches the app, and its process could not be started (no such `Exec=`, no such `User=`, a
        /// cgroup that refuses it): the request did not happen.
        case spawnFailed(String)
    }
    public var app: String
    /// The app's state when the request came.
    public var state: AppState?
    /// The state its queued work leads to, when different: requests are judged against this one.
    public var becoming: AppState?
    public var request: Request
    public var reason: Reason

    public init(app: String, state: AppState?, becoming: AppState? = nil, request: Request, reason: Reason) {
        self.app = app
        self.state = state
        self.becoming = becoming
        self.request = request
        self.reason = reason
    }

    public var description: String {
        switch reason {
        case .unknownApp:
            return "cannot \(request) '\(app)': no such app"
        case .noScenes:
            return "cannot \(request) '\(app)': it does not use scenes (declare them in its [Scenes] section)"
        case .unknownScene(let scene):
            return "cannot \(request) '\(app)': it has no scene session '\(scene)' (lifectl scenes \(app) lists them)"
        case .spawnFailed(let reason):
            return "cannot \(request) '\(app)': failed to start it: \(reason)"
        case .notAllowed(let hint):
            var base = "cannot \(request) '\(app)': it is \(state?.rawValue ?? "unknown")"
            if let becoming { base += ", becoming \(becoming.rawValue)" }
            return hint.map { "\(base) (\($0))" } ?? base
        }
    }
}

extension Effect {
    /// The app the effect concerns ("" for daemon-wide notes).
    public var app: String? {
        switch self {
        case .spawn(let app, _), .send(let app, _), .stopProcess(let app), .continueProcess(let app), .signal(let app, _),
             .armTimer(let app, _, _), .cancelTimer(let app, _), .transition(let app, _, _, _), .note(let app, _),
             .settled(let app), .notify(let app, _), .taskBegan(let app, _, _), .taskExpiring(let app, _, _),
             .sceneOpened(let app, _), .save(let app), .reclaimMemory(let app):
            app
        }
    }

    /// The effect's case name (`spawn`, `send`, `stopProcess`, …), for logs and test hooks.
    public var kindName: String {
        switch self {
        case .spawn: "spawn"
        case .send: "send"
        case .stopProcess: "stopProcess"
        case .continueProcess: "continueProcess"
        case .signal: "signal"
        case .armTimer: "armTimer"
        case .cancelTimer: "cancelTimer"
        case .transition: "transition"
        case .note: "note"
        case .settled: "settled"
        case .notify: "notify"
        case .taskBegan: "taskBegan"
        case .taskExpiring: "taskExpiring"
        case .sceneOpened: "sceneOpened"
        case .save: "save"
        case .reclaimMemory: "reclaimMemory"
        }
    }

    /// Whether the app's saved state (AppSnapshot, its pid) may differ after this effect: timers and answers to
    /// requests are one daemon's business and need no write.
    var changesSavedState: Bool {
        switch self {
        // .note: counters, discarded and created sessions. A .send saves only when its id passes the recorded
        // bound (Supervisor.deliver).
        case .spawn, .stopProcess, .continueProcess, .transition, .note, .notify: true
        case .send, .signal, .armTimer, .cancelTimer, .settled, .taskBegan, .taskExpiring, .sceneOpened, .save,
             .reclaimMemory: false
        }
    }
}
