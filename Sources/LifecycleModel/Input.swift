// The model's one way in: every change the daemon feeds it is an `Input`, and `Supervisor.handle(_:now:)` answers
// each with an `Outcome`. The files of the Supervisor own what each input does; this file only routes.

/// Something that changes the model: an event of an app's process or client, a request, or a fact of the world.
public enum Input: Sendable {
    /// Something happened to an app's process, its client or its timers.
    case event(Event)
    /// Someone asks something of an app; `origin` becomes `launchedBy` when the request launches it.
    case request(Request, app: String, origin: String)
    /// What the display server shows now.
    case display(DisplayFacts)
    /// The display source stopped for good: its facts no longer hold, and no app moves.
    case displayForgotten
    /// The apps with a playing stream on the sound server.
    case audio(playing: Set<String>)
    /// The machine runs on battery, or on external power.
    case power(onBattery: Bool)
    /// A notification posted by the daemon, a source, lifectl or a client; `app` nil: every app.
    case post(type: String, payload: JSONValue, to: String?, from: PostOrigin)
    /// A process the daemon did not start becomes the app (an external or adopted app).
    case attach(app: String, launchedBy: String)
    /// The model takes back an app a previous daemon saved, running or not. `processesStopped`: what the daemon
    /// found its processes to be, nil when it did not look.
    case adopt(app: String, AppSnapshot, running: Bool, processesStopped: Bool?)
    /// An adopted app is let go as it is, without a message.
    case release(app: String)
    /// The daemon stops: every running app is told willTerminate and terminated.
    case shutdown
    /// A new app, not running, under a name the model does not hold.
    case add(app: String, policy: AppPolicy)
    /// The app's settings change; they take effect from its next step on.
    case configure(app: String, policy: AppPolicy)
    /// The model forgets an app that is not running (a running one stays).
    case remove(app: String)
    /// The daemon-wide settings: the notification types and the memory policy.
    case settings(ModelSettings)
    /// The last input was a request that launched `app`, and its process could not be started: the request is
    /// undone (`LifecycleRules.launchWaitsForSpawn`) and the outcome is its refusal.
    case launchFailed(app: String, reason: String)
}

/// The model's daemon-wide settings (lifecycled.conf).
public struct ModelSettings: Sendable {
    public var catalog: NotificationCatalog
    /// Memory pressure that persists this long after the warnings terminates suspended apps.
    public var memoryWarningGrace: Duration
    /// Pressure events further apart than this start a new episode (with new warnings).
    public var memoryEpisodeGap: Duration

    public init(catalog: NotificationCatalog, memoryWarningGrace: Duration, memoryEpisodeGap: Duration) {
        self.catalog = catalog
        self.memoryWarningGrace = memoryWarningGrace
        self.memoryEpisodeGap = memoryEpisodeGap
    }
}

/// What the model made of one input.
public struct Outcome: Sendable, Equatable {
    /// What the daemon is to do, in order.
    public var effects: [Effect] = []
    /// Why the model did not take the input (a request it does not allow, a post it cannot deliver); no effects then.
    public var refusal: Refusal?
    /// A post's deliveries: delivered at once, and queued for apps that cannot hear yet.
    public var delivered = 0
    public var queued = 0

    public init(effects: [Effect] = [], refusal: Refusal? = nil) {
        self.effects = effects
        self.refusal = refusal
    }

    /// The session a request opened (`lifectl scene open`), if it opened one.
    public var openedScene: String? {
        for effect in effects { if case .sceneOpened(_, let scene) = effect { return scene } }
        return nil
    }
}

/// An input the model did not take, with the reason a person can act on.
public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
    case request(RequestError)
    case post(PostError)

    public var description: String {
        switch self {
        case .request(let error): error.description
        case .post(let error): error.description
        }
    }
}

extension Supervisor {
    /// Take one input at `now` (never before the last one's time) and return what to do about it.
    public mutating func handle(_ input: Input, now: MonotonicTime) -> Outcome {
        // Any input but the report of its failure means the launch's spawn went through: it stands.
        if case .launchFailed = input {} else if pendingLaunch != nil { launchStands() }
        let previous = self.now
        self.now = now
        startEvent()
        switch input {
        case .event(let event):
            return Outcome(effects: take(event))
        case .request(let request, let name, let origin):
            return launchingRequest(request, for: name, origin: origin, previousNow: previous)
        case .display(let facts):
            return Outcome(effects: displayChanged(facts))
        case .displayForgotten:
            display = DisplayState()
            return Outcome()
        case .audio(let playing):
            var next = conditions
            next.playingAudio = playing
            return Outcome(effects: conditionsChanged(to: next))
        case .power(let onBattery):
            var next = conditions
            next.onBattery = onBattery
            return Outcome(effects: conditionsChanged(to: next))
        case .post(let type, let payload, let app, let origin):
            do throws(PostError) {
                let posted = try post(type, payload: payload, to: app, from: origin)
                var outcome = Outcome(effects: endEvent())
                outcome.delivered = posted.delivered
                outcome.queued = posted.queued
                return outcome
            } catch {
                return Outcome(refusal: .post(error))
            }
        case .attach(let name, let launchedBy):
            do throws(RequestError) {
                return Outcome(effects: try attach(name, launchedBy: launchedBy))
            } catch {
                return Outcome(refusal: .request(error))
            }
        case .adopt(let name, let snapshot, let running, let processesStopped):
            return Outcome(effects: adopt(name, snapshot, running: running, processesStopped: processesStopped))
        case .release(let name):
            release(name)
            return Outcome()
        case .shutdown:
            return Outcome(effects: shutdown())
        case .add(let name, let policy):
            add(name, policy: policy)
            return Outcome()
        case .configure(let name, let policy):
            setPolicy(policy, for: name)
            return Outcome()
        case .remove(let name):
            remove(name)
            return Outcome()
        case .settings(let settings):
            catalog = settings.catalog
            memoryWarningGrace = settings.memoryWarningGrace
            memoryEpisodeGap = settings.memoryEpisodeGap
            return Outcome()
        case .launchFailed(let name, let reason):
            return launchFailed(name, reason: reason)
        }
    }
}
