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
}

/// How a process ended, from `waitid`.
public enum ExitStatus: Sendable, Equatable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)

    public var isSuccess: Bool { self == .exited(0) }

    public var description: String {
        switch self {
        case .exited(let code): "exited with status \(code)"
        case .signaled(let signal): "killed by signal \(signal)"
        }
    }
}

/// A signal the model asks the daemon to send to the app's process group.
public enum TerminationSignal: String, Sendable, Equatable {
    case terminate = "SIGTERM"
    case kill = "SIGKILL"
}

/// One callback to deliver, with its deadline.
public struct Delivery: Sendable, Equatable {
    public var id: Int
    public var callback: LifecycleCallback
    public var deadline: Duration
    public var launchOptions: LaunchOptions?

    public init(id: Int, callback: LifecycleCallback, deadline: Duration, launchOptions: LaunchOptions? = nil) {
        self.id = id
        self.callback = callback
        self.deadline = deadline
        self.launchOptions = launchOptions
    }
}

/// Noteworthy things that are not transitions; the daemon logs them (and later, journals them).
public enum Note: Sendable, Equatable {
    case deadlineMissed(LifecycleCallback, id: Int)
    /// didFinishLaunching was not acknowledged in time: killed, as iOS's launch watchdog does.
    case launchWatchdog
    /// No hello within the launch timeout: managed from now on without messages.
    case noHello
    case restartScheduled(after: Duration, attempt: Int)
    case startLimitHit(starts: Int, within: Duration)
    case stoppedExternally
    case continuedExternally
    case spawnFailed(String)
    case killTimeout
    /// Background tasks still open when their time ran out: suspended anyway.
    case taskOverrun([String])
    /// Suspended (by request, or stopped by someone else) while holding background tasks.
    case tasksAbandoned([String])
    /// Memory pressure: `didReceiveMemoryWarning` went to the running apps.
    case memoryWarning(apps: Int)
    /// Memory pressure persisted after the warnings: terminated while suspended (jetsam).
    case terminatedForMemory(residentBytes: UInt64?)
    /// Memory pressure persisted, and no suspended app was left to terminate.
    case nothingToTerminate
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
}

/// Inputs from the world: the client, the timers and the kernel.
public enum Event: Sendable, Equatable {
    case hello(app: String)
    case ack(app: String, id: Int)
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

/// A request the model does not allow from the app's state.
public struct RequestError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        case unknownApp
        case notAllowed(hint: String?)
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
        case .notAllowed(let hint):
            var base = "cannot \(request) '\(app)': it is \(state?.rawValue ?? "unknown")"
            if let becoming { base += ", becoming \(becoming.rawValue)" }
            return hint.map { "\(base) (\($0))" } ?? base
        }
    }
}
