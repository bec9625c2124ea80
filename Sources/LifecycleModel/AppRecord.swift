/// The model's view of one app.
public struct AppRecord: Sendable {
    public let name: String
    public internal(set) var policy: AppPolicy
    public internal(set) var state: AppState = .notRunning
    public internal(set) var stateSince: MonotonicTime = .zero
    /// Callbacks whose deadline passed without an ack, over the app's life in this daemon.
    public internal(set) var deadlineMisses = 0
    /// Launches of this app in this daemon (the first and every restart).
    public internal(set) var launches = 0
    /// The previous run ended in the background or suspended (UIKit's launch option).
    public internal(set) var terminatedInBackground = false

    /// The steps queued for the app, with what they lead to.
    var plan = Plan()
    /// What lives for one run of the process; an exit starts a fresh one.
    var run: Run
    var grace = GraceClock.idle
    var restart = RestartPlan.none
    var nextMessageID = 1
    /// Every id sent on this run is below this. The state file records the bound instead of each id, so that a
    /// message costs no write: the bound moves a block of ids at a time (`Supervisor.messageIDBlock`).
    var messageIDBound = 1
    /// Start times inside the start-limit window.
    var recentStarts: [MonotonicTime] = []

    /// When the app last entered the background: its background task time counts from here.
    public internal(set) var enteredBackgroundAt: MonotonicTime?
    /// Background tasks that were still open when their time ran out.
    public internal(set) var taskOverruns = 0
    /// When the app last left the foreground: jetsam terminates the least recently used first.
    public internal(set) var lastForeground: MonotonicTime = .zero
    /// Terminations while suspended, under memory pressure.
    public internal(set) var memoryTerminations = 0
    /// Scene sessions (apps with `[Scenes]`), in creation order. They outlive connections and processes.
    public internal(set) var sessions: [SceneSession] = []
    var nextSceneNumber = 1
    var activations = 0
    /// Sessions discarded while the app could not hear it: told when it next runs (UIKit does the same).
    var discardedUntold: [String] = []

    init(name: String, policy: AppPolicy) {
        self.name = name
        self.policy = policy
        run = Run(queueLimit: policy.queueLimit)
    }

    /// The client said hello on this run.
    public var connected: Bool { run.link == .connected }
    /// A protocol app that never said hello, or hung up: managed without messages.
    public var muted: Bool { run.link == .muted }
    /// The message whose ack is awaited.
    var awaiting: Delivery? {
        get { run.inFlight?.delivery }
        set { run.inFlight = newValue.map { InFlight(delivery: $0) } }
    }
    /// Notifications held while the app cannot receive them (suspended, or not connected yet).
    public internal(set) var queue: NotificationQueue {
        get { run.queue }
        set { run.queue = newValue }
        _modify { yield &run.queue }
    }
    /// The notification types the client observes (it says so in hello or observe).
    public internal(set) var observing: Set<String> {
        get { run.observing }
        set { run.observing = newValue }
        _modify { yield &run.observing }
    }
    /// Open background tasks, in the order they began.
    public internal(set) var tasks: [BackgroundTask] {
        get { run.tasks.list }
        set { run.tasks.list = newValue }
    }

    /// Time left in the background for its tasks; nil in the foreground (the time starts on entering the background).
    public func backgroundTimeRemaining(now: MonotonicTime) -> Duration? {
        guard state == .background, let enteredBackgroundAt else { return nil }
        return max(.zero, policy.backgroundTaskTime - (now - enteredBackgroundAt))
    }

    /// Nothing in flight: no step queued, no ack awaited, no termination under way.
    public var isSettled: Bool { plan.isEmpty && awaiting == nil && run.termination != .signalled }

    /// Termination was asked for on this run (it may still be delivering willTerminate).
    public var isTerminating: Bool { run.termination != .none }

    /// The callback whose ack is awaited, if any.
    public var awaitingCallback: LifecycleCallback? { awaiting?.callback }

    var canMessage: Bool { policy.speaksProtocol && connected && !muted }

    /// The state the app will be in once its queued work is done; requests are judged against it.
    var projectedState: AppState {
        if run.termination.isUnderway { return .notRunning }
        return plan.projectedState(from: state, sessions: sessions, inFlight: run.inFlight?.catchUp == true ? nil : awaiting)
    }

    public var usesScenes: Bool { policy.scenes != nil }

    /// Between its `awaitFocus` and its `endFocusClaim`: this app's claim is the one the focus queue serves.
    var holdsFocusClaim: Bool { plan.holdsFocusClaim }

    /// Sessions that queued work will discard: gone for every later request.
    var pendingDiscards: Set<String> { plan.discards }

    func sessionIndex(_ id: String) -> Int? { sessions.firstIndex { $0.id == id } }

    /// Each session's scene state once queued work is done (nil: disconnected), in `sessions` order.
    var projectedSceneStates: [SceneActivationState?] { plan.projectedSceneStates(sessions: sessions, inFlight: awaiting) }

    /// Focus moves between two scenes of this app (see `Plan.focusHandingOver`).
    var focusHandingOver: Bool { plan.focusHandingOver }
}


/// How the daemon speaks with the app's client on one run.
public enum ClientLink: Sendable, Equatable {
    /// No hello yet: notifications are held, filtered when the client says what it observes.
    case awaitingHello
    /// The client said hello.
    case connected
    /// It never said hello within the launch timeout, or hung up: managed without messages.
    case muted
}

/// Where the termination of one run stands. Each later case implies the ones before it were passed or skipped.
enum Termination: Sendable, Equatable {
    case none
    /// Asked for (willTerminate may still be on its way): the exit is not a crash, whenever it comes.
    case requested
    /// SIGTERM sent, the kill timer armed: nothing more runs until the exit.
    case signalled
    /// SIGKILL sent (the launch watchdog, or jetsam): nothing more runs until the exit. `requested`: the exit is not
    /// a crash (jetsam, or a termination asked for before the watchdog fired).
    case killed(requested: Bool)

    /// The exit that ends the run was asked for: no restart follows it.
    var isRequested: Bool {
        switch self {
        case .none: false
        case .requested, .signalled: true
        case .killed(let requested): requested
        }
    }

    /// A signal is on its way: the app's queue no longer runs.
    var isUnderway: Bool {
        switch self {
        case .none, .requested: false
        case .signalled, .killed: true
        }
    }
}

/// The background grace time of an app with nothing to do in the background.
enum GraceClock: Sendable, Equatable {
    case idle
    /// Its timer runs.
    case armed
    /// It ran out while background tasks were open: suspended as soon as they end (or their time runs out).
    case over
}

/// What follows an exit that was not asked for.
enum RestartPlan: Sendable, Equatable {
    case none
    /// The restart timer runs; `refocus`: the app held (or waited for) focus, and takes it again if nobody else has.
    case scheduled(refocus: Bool)
}

/// The message in flight.
struct InFlight: Sendable, Equatable {
    var delivery: Delivery
    /// The transition it belongs to was abandoned (the app was stopped by someone else): its ack moves nothing.
    var abandoned = false
    /// A callback of the catch-up (Supervisor+CatchUp.swift): the app is in its state already, so its ack moves nothing.
    var catchUp = false
}

/// Everything that lives for one run of the app's process. An exit replaces it whole.
struct Run: Sendable {
    var link = ClientLink.awaitingHello
    var termination = Termination.none
    var inFlight: InFlight?
    var queue: NotificationQueue
    var observing: Set<String> = []
    var tasks = BackgroundTasks.none
    /// What the client last heard of, when the app may have moved on without it (a late first hello, a re-adoption,
    /// a hang-up): its next hello is told the way from there (Supervisor+CatchUp.swift).
    var told: Told?
    /// In a background wake (`ResumeEverySec=`): suspended again when it ends.
    var waking = false

    init(queueLimit: Int) { queue = NotificationQueue(limit: queueLimit) }
}

/// The open background tasks of one run, with their time's warning and deadline timers: the timers run only while
/// tasks are open, so they can be armed only beside a list that holds some.
enum BackgroundTasks: Sendable, Equatable {
    case none
    /// Open, their time not counted (in the foreground, in an app never suspended for its grace, or after the deadline).
    case open([BackgroundTask])
    /// Open in the background, the warning and deadline timers armed.
    case timed([BackgroundTask])

    /// The tasks in the order they began. Setting a list keeps the timers as they are while tasks stay open;
    /// emptying it leaves none (cancel the timers first: they would be forgotten).
    var list: [BackgroundTask] {
        get {
            switch self {
            case .none: []
            case .open(let tasks), .timed(let tasks): tasks
            }
        }
        set {
            switch self {
            case _ where newValue.isEmpty: self = .none
            case .timed: self = .timed(newValue)
            case .none, .open: self = .open(newValue)
            }
        }
    }
}
