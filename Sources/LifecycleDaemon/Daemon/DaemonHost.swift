import LifecycleModel

/// What the daemon's owners (processes, sessions, persistence) ask of the daemon: the apps, the model's view of
/// them, and the model's inputs. The daemon alone holds the model and the event queue; an owner changes the model
/// only through these calls, so every change goes through `perform`.
protocol DaemonHost: AnyObject {
    /// The loop's monotonic time.
    var now: MonotonicTime { get }
    /// No new requests are taken: the daemon stops or hands its apps over.
    var stopping: Bool { get }
    func runtime(_ name: String) -> AppRuntime?
    /// Every configured app's name, sorted.
    var appNames: [String] { get }
    /// The model's record of the app.
    func record(_ name: String) -> AppRecord?
    /// `body` on the model's record of the app, without copying it.
    func withRecord<Result>(_ name: String, _ body: (borrowing AppRecord) -> Result) -> Result?
    /// What the state file of the app holds, as the model has it now.
    func snapshot(of name: String) -> AppSnapshot?
    /// Whether the model holds background task `id` of `app` open.
    func hasOpenTask(app: String, id: Int) -> Bool
    /// The apps' records, as the model holds them.
    var records: [AppRecord] { get }
    /// Feeds `event` to the model and performs what it decides, after the event in progress.
    func dispatch(_ event: Event)
    /// Queues `event` behind the event in progress, to be fed at the next `drain`.
    func queue(_ event: Event)
    func perform(_ effects: [Effect])
    /// Feeds the queued events to the model.
    func drain()
    /// A request for `name` (from lifectl, a client, the daemon): the model's effects, or why it refused.
    func request(_ request: Request, for name: String, origin: String) throws(RequestError) -> [Effect]
    /// A notification posted by a client, a source or lifectl: delivered now or queued (the effects performed,
    /// the queues marked for saving; not drained).
    func post(_ type: String, payload: JSONValue, to app: String?, from origin: PostOrigin) throws(PostError) -> PostOutcome
    /// The client connection of `app` on `fd`, its events going to the app's session.
    func openConnection(_ app: String, fd: FileDescriptor) throws(SystemError) -> Connection
    /// An external process becomes the app: the model launches it.
    func attach(_ name: String) throws(RequestError) -> [Effect]
    /// The model takes back an app a previous daemon saved, running or not (`processesStopped`: as found, when
    /// running), and the effects are performed.
    func adopt(_ name: String, _ snapshot: AppSnapshot, running: Bool, processesStopped: Bool?)
    /// The daemon stops: every running app is told willTerminate and terminated (the effects performed).
    func terminateAll()
    /// What the display server shows changed: the model moves the apps (the effects performed, the events drained).
    func displayChanged(_ facts: DisplayFacts, at: MonotonicTime)
    /// The display source in force stopped for good: the model drops its facts, and no app moves.
    func displayForgotten()
    /// The app's background modes now: declared, and audio while it plays.
    func backgroundModes(of name: String) -> Set<String>
    /// The apps with a playing stream on the sound server changed (the effects performed, the events drained).
    func audioChanged(playing: Set<String>)
    /// The machine went on battery or on external power (the effects performed, the events drained).
    func powerChanged(onBattery: Bool)
    /// lifectl's focus or background asked of the display server instead of the model; false when it takes the
    /// usual way (no display source, or no window of the app).
    func throughDisplay(_ request: Request, for name: String) -> Bool
    /// The app's state file is to be saved once the callback returns.
    func markDirty(_ name: String)
}
