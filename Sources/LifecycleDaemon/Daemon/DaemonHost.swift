import LifecycleModel
import LifecycleProtocol

/// The port: what the daemon's owners ask of the daemon, and all they hold of it: the apps, the model's view of
/// them, the model's one input, and the few requests that cross between owners. The daemon alone holds the model and
/// the event queue; an owner changes the model only through `handle`, so every change is performed and drained in
/// one place. Tests give an owner a fake of it.
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
    /// `body` on the model's record of the app, without copying it. `body` only reads the record: it runs while the
    /// model is held for it, and must not reach the daemon again.
    func withRecord<Result>(_ name: String, _ body: (borrowing AppRecord) -> Result) -> Result?
    /// What the state file of the app holds, as the model has it now.
    func snapshot(of name: String) -> AppSnapshot?
    /// Whether the model holds background task `id` of `app` open.
    func hasOpenTask(app: String, id: Int) -> Bool
    /// The apps' records, as the model holds them.
    var records: [AppRecord] { get }
    /// The one way into the model: takes `input`, performs what the model decides and feeds it the events that
    /// this raised, in order. An event that comes while another input is being carried out waits behind it.
    /// `at`: the time of what caused the input (a display event read later), never before the model's last input.
    /// A request that launches its app spawns first, and a spawn that fails leaves the model as it was and is
    /// the outcome's refusal.
    @discardableResult
    func handle(_ input: Input, at: MonotonicTime?) -> Outcome
    /// The client connection of `app` on `fd`, its events going to the app's session.
    func openConnection(_ app: String, fd: FileDescriptor) throws(SystemError) -> Connection
    /// The daemon stops: adopted apps are let go, and every other running app is told willTerminate and
    /// terminated.
    func terminateAll()
    /// The app's background modes now: declared, and audio while it plays.
    func backgroundModes(of name: String) -> Set<String>
    /// lifectl's focus or background asked of the display server instead of the model; false when it takes the
    /// usual way (no display source, or no window of the app).
    func throughDisplay(_ request: Request, for name: String) -> Bool
    /// The app's state file is to be saved once the callback returns.
    func markDirty(_ name: String)
    /// `[Adopt]` as in force.
    var adoptConfig: AdoptConfig { get }
    /// Each display report, after the model heard it: with `[Adopt] Windows=yes`, the processes of the windows it
    /// added or changed that no app owns become apps (`Adoption`). Returns whether any did.
    func adoptWindows(_ windows: [DisplayWindow], gone: [Int64], ownership: WindowOwnership) -> Bool
    /// Memory pressure crossed the threshold: the model warns the apps, then terminates suspended ones while it
    /// persists.
    func memoryPressure(reading: JSONValue)
    /// One line for systemd's STATUS=.
    func statusLine() -> String
    /// The daemon's part of `lifectl status`.
    func daemonStatus() -> DaemonStatus
}

extension DaemonHost {
    /// `handle(_:at:)` at the loop's now.
    @discardableResult
    func handle(_ input: Input) -> Outcome { handle(input, at: nil) }
}
