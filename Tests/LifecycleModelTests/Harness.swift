import Testing
@testable import LifecycleModel

/// Swift Testing has an `ExitStatus` of its own (for exit tests); in these tests the name means the model's.
typealias ExitStatus = LifecycleModel.ExitStatus

/// Drives a `Supervisor` the way the daemon does: one input at a time, with a clock, recording every effect.
///
/// In `cooperative` mode it also plays a well-behaved app for every app: it says hello after each spawn of a
/// protocol app, acknowledges every callback at once, and exits with status 0 on SIGTERM. Apps listed in
/// `unresponsive` are hung instead: no hello, no ack, SIGTERM ignored. SIGKILL always ends the process.
/// Replies are fed in the order the effects asked for them, each as a separate input, as the daemon's loop would.
struct Harness {
    var model = Supervisor()
    private(set) var now: MonotonicTime = .zero
    /// Every effect of every input, in order, but the saves.
    private(set) var log: [Effect] = []
    /// The apps each input asked the daemon to save, in order (`SavedStateTests` checks them; the other tests
    /// compare the lifecycle's effects, which the saves would only repeat).
    private(set) var saves: [[String]] = []
    var cooperative = false
    var unresponsive: Set<String> = []
    /// Scenes: what the cooperative client answers to configurationForConnecting, by scene.
    var configurationAnswers: [String: String] = [:]
    /// Scenes: the state the cooperative client saves at sceneDidEnterBackground, by scene.
    var savedStates: [String: JSONValue] = [:]

    /// The cooperative client's answer riding on its ack.
    func answer(to delivery: Delivery) -> AckReply {
        switch delivery.message {
        case .configurationForConnecting(let scene, _, _, _): AckReply(configuration: configurationAnswers[scene])
        case .scene(.sceneDidEnterBackground, let scene, _): AckReply(savedState: savedStates[scene])
        default: AckReply()
        }
    }

    init(_ apps: [String: AppPolicy]) {
        for (name, policy) in apps.sorted(by: { $0.key < $1.key }) { model.add(name, policy: policy) }
    }

    init(_ names: String..., policy: AppPolicy = AppPolicy()) {
        self.init(Dictionary(uniqueKeysWithValues: names.map { ($0, policy) }))
    }

    // MARK: Inputs

    /// Apply a request; returns its own effects (not those of the cooperative replies that follow).
    @discardableResult
    mutating func request(_ request: Request, _ app: String, origin: String = "lifectl") throws(RequestError) -> [Effect] {
        let effects = record(try model.handle(request, for: app, origin: origin, now: now))
        return effects
    }

    /// Feed an event; returns its own effects (not those of the cooperative replies that follow).
    @discardableResult
    mutating func event(_ event: Event) -> [Effect] {
        record(model.handle(event, now: now))
    }

    /// Let time pass. Timers are not simulated: a test fires them with `fire`, after `advance` when time matters.
    mutating func advance(by duration: Duration) { now += duration }

    @discardableResult
    mutating func hello(_ app: String) -> [Effect] { event(.hello(app: app)) }

    /// Acknowledge the callback the app is waiting on.
    @discardableResult
    mutating func ack(_ app: String) -> [Effect] {
        guard let id = inFlight(app)?.id else {
            Issue.record("\(app) has no callback in flight to acknowledge")
            return []
        }
        return event(.ack(app: app, id: id))
    }

    @discardableResult
    mutating func fire(_ timer: TimerKind, _ app: String) -> [Effect] { event(.timerFired(app: app, timer)) }

    @discardableResult
    mutating func exit(_ app: String, _ status: ExitStatus = .exited(0)) -> [Effect] { event(.exited(app: app, status)) }

    /// Run `body` with the harness cooperating, then restore the previous mode.
    @discardableResult
    mutating func cooperating<T>(_ body: (inout Harness) throws -> T) rethrows -> T {
        let previous = cooperative
        cooperative = true
        defer { cooperative = previous }
        return try body(&self)
    }

    /// Play the cooperative app for effects already returned (e.g. by a request checked on its own), and for all that follows.
    mutating func cooperate(after effects: [Effect]) {
        cooperating { h in
            for reply in h.replies(to: effects) { h.event(reply) }
        }
    }

    /// Fire every deadline an `unresponsive` app is waiting on (ack, hello, kill), as the clock would, until none
    /// is left; the other apps cooperate meanwhile. SIGKILL ends a process, so this always comes to rest.
    mutating func runOutDeadlines() {
        cooperating { h in
            var fired = true
            while fired {
                fired = false
                for name in h.model.apps.keys.sorted() {
                    let app = h.model.apps[name]!
                    let timer: TimerKind? =
                        if app.awaiting != nil { .ack }
                        else if app.plan.first == .awaitHello, app.policy.speaksProtocol, !app.muted { .hello }
                        else if app.run.termination == .signalled { .kill }
                        else { nil }
                    guard let timer else { continue }
                    h.advance(by: .seconds(30))
                    h.fire(timer, name)
                    fired = true
                }
            }
        }
    }

    // MARK: Arrange

    /// Bring a settled, not-yet-launched app into `state` through ordinary requests and a cooperative client.
    /// `.failed` needs a policy whose start limit one crash exhausts (see `crashOnceFails`).
    mutating func bring(_ app: String, to state: AppState) throws {
        try cooperating { h throws in
            switch state {
            case .notRunning: break
            case .inactive: try h.request(.launch(background: false), app)
            case .active: try h.request(.focus, app)
            case .background: try h.request(.launch(background: true), app)
            case .suspended:
                try h.request(.launch(background: true), app)
                try h.request(.suspend, app)
            case .failed:
                try h.request(.launch(background: false), app)
                h.exit(app, .exited(1))
            }
        }
        try #require(self.state(app) == state && model.apps[app]!.isSettled, "could not bring \(app) to \(state)")
    }

    // MARK: Observations

    func state(_ app: String) -> AppState { model.apps[app]!.state }
    func record(of app: String) -> AppRecord { model.apps[app]! }
    /// The callback delivery whose ack the model waits for.
    func inFlight(_ app: String) -> Delivery? { model.apps[app]!.awaiting }

    /// The callbacks sent so far, across apps, in order, from `log` index `start` on.
    func sends(from start: Int = 0) -> [Sent] {
        log[start...].compactMap { effect in
            if case .send(let app, let delivery) = effect { delivery.callback.map { Sent(app, $0) } } else { nil }
        }
    }

    /// The states `app` went through, from `log` index `start` on.
    func transitions(of app: String, from start: Int = 0) -> [AppState] {
        log[start...].compactMap { effect in
            if case .transition(app, _, let to, _) = effect { to } else { nil }
        }
    }

    /// Replays the log and returns every moment (log index) at which more than one app was active.
    func momentsWithSeveralActiveApps() -> [Int] {
        var states: [String: AppState] = [:]
        var moments: [Int] = []
        for (index, effect) in log.enumerated() {
            guard case .transition(let app, _, let to, _) = effect else { continue }
            states[app] = to
            if states.values.count(where: { $0 == .active }) > 1 { moments.append(index) }
        }
        return moments
    }

    // MARK: Notifications

    /// This harness from here on, for checks of what follows: the log starts empty, and `types` are declared
    /// beyond the system's as `NotificationCatalog(extra:)` does.
    func handedOver(declaring types: [String: Coalescing] = [:]) -> Harness {
        var next = self
        next.log = []
        next.model.catalog = NotificationCatalog(extra: types)
        return next
    }

    /// Post a notification; its effects are logged (and answered, when cooperating) like any other input's.
    @discardableResult
    mutating func post(_ type: String, _ payload: JSONValue, to app: String?,
                       from origin: PostOrigin = .daemon) throws(PostError) -> Outcome {
        var outcome = try model.post(type, payload: payload, to: app, from: origin, now: now)
        outcome.effects = record(outcome.effects)
        return outcome
    }

    // MARK: Cooperation

    /// Log an input's effects, set its saves apart, and reply as the cooperative client; returns the effects
    /// without the saves.
    @discardableResult
    mutating func record(_ all: [Effect]) -> [Effect] {
        var effects: [Effect] = []
        var saved: [String] = []
        for effect in all {
            if case .save(let app) = effect { saved.append(app) } else { effects.append(effect) }
        }
        saves.append(saved)
        log += effects
        guard cooperative else { return effects }
        for reply in replies(to: effects) { event(reply) }
        return effects
    }

    private func replies(to effects: [Effect]) -> [Event] {
        effects.compactMap { effect in
            switch effect {
            case .signal(let app, .kill): .exited(app: app, .signaled(9))
            case .spawn(let app, _) where unresponsive.contains(app): nil
            case .send(let app, _) where unresponsive.contains(app): nil
            case .signal(let app, .terminate) where unresponsive.contains(app): nil
            case .spawn(let app, _) where model.apps[app]!.policy.speaksProtocol: .hello(app: app)
            case .send(let app, let delivery): .ack(app: app, id: delivery.id, reply: answer(to: delivery))
            case .signal(let app, .terminate): .exited(app: app, .exited(0))
            default: nil
            }
        }
    }
}

/// One callback sent to one app, for order checks across apps.
struct Sent: Equatable, CustomStringConvertible {
    let app: String
    let callback: LifecycleCallback
    init(_ app: String, _ callback: LifecycleCallback) {
        self.app = app
        self.callback = callback
    }
    var description: String { "\(app).\(callback)" }
}

// MARK: Policies

extension AppPolicy {
    /// Build a policy from the defaults, changing what the test is about.
    static func with(_ change: (inout AppPolicy) -> Void) -> AppPolicy {
        var policy = AppPolicy()
        change(&policy)
        return policy
    }

    /// `Protocol=none`.
    static let silent = AppPolicy.with { $0.speaksProtocol = false }

    /// `Restart=on-failure`, `StartLimitBurst=1`: the first crash exhausts the start limit, so the app is `failed`.
    static let crashOnceFails = AppPolicy.with {
        $0.restart = .onFailure
        $0.startLimitBurst = 1
    }
}

// MARK: Effect shorthands

/// The delivery of `callback` with message `id` and the default deadlines (20 s for didFinishLaunching, 5 s otherwise).
func delivery(_ callback: LifecycleCallback, id: Int, options: LaunchOptions? = nil) -> Delivery {
    Delivery(id: id, callback: callback,
             deadline: callback == .didFinishLaunching ? AppPolicy().launchTimeout : AppPolicy().ackTimeout,
             launchOptions: options)
}

/// Sending a callback with the default deadline and arming its ack timer, as the model always pairs them.
func sendAndArm(_ app: String, _ callback: LifecycleCallback, id: Int, options: LaunchOptions? = nil) -> [Effect] {
    let delivery = delivery(callback, id: id, options: options)
    return [.send(app: app, delivery), .armTimer(app: app, .ack, after: delivery.deadline)]
}

extension Sequence where Element == Effect {
    /// The signals sent, in order.
    var signals: [TerminationSignal] {
        compactMap { if case .signal(_, let signal) = $0 { signal } else { nil } }
    }

    var notes: [Note] {
        compactMap { if case .note(_, let note) = $0 { note } else { nil } }
    }

    var sentCallbacks: [LifecycleCallback] {
        compactMap { if case .send(_, let delivery) = $0 { delivery.callback } else { nil } }
    }

    /// Every message sent (app callbacks, scene callbacks, questions), as `app.name` or `app.scene.name`.
    var sentMessages: [String] {
        compactMap { effect in
            guard case .send(let app, let delivery) = effect else { return nil }
            if case .scene(_, let scene, _) = delivery.message { return "\(app).\(scene).\(delivery.name)" }
            return "\(app).\(delivery.name)"
        }
    }

    func armed(_ kind: TimerKind) -> [Duration] {
        compactMap { if case .armTimer(_, kind, let after) = $0 { after } else { nil } }
    }

    var containsSend: Bool { !sentCallbacks.isEmpty }
}

/// The tests' shorthand for the model's one input: each goes through `handle(_:now:)`, and a refusal is thrown as
/// the error the model gave.
extension Supervisor {
    mutating func handle(_ request: Request, for name: String, origin: String = "lifectl",
                         now: MonotonicTime) throws(RequestError) -> [Effect] {
        let outcome = handle(.request(request, app: name, origin: origin), now: now)
        if case .request(let error)? = outcome.refusal { throw error }
        return outcome.effects
    }

    mutating func handle(_ event: Event, now: MonotonicTime) -> [Effect] { handle(.event(event), now: now).effects }

    mutating func attach(_ name: String, launchedBy: String = "external", now: MonotonicTime) throws(RequestError) -> [Effect] {
        let outcome = handle(.attach(app: name, launchedBy: launchedBy), now: now)
        if case .request(let error)? = outcome.refusal { throw error }
        return outcome.effects
    }

    mutating func adopt(_ name: String, _ saved: AppSnapshot, running: Bool, processesStopped: Bool? = nil,
                        now: MonotonicTime) -> [Effect] {
        handle(.adopt(app: name, saved, running: running, processesStopped: processesStopped), now: now).effects
    }

    mutating func post(_ type: String, payload: JSONValue, to app: String?, from origin: PostOrigin = .daemon,
                       now: MonotonicTime) throws(PostError) -> Outcome {
        let outcome = handle(.post(type: type, payload: payload, to: app, from: origin), now: now)
        if case .post(let error)? = outcome.refusal { throw error }
        return outcome
    }

    mutating func displayChanged(_ facts: DisplayFacts, now: MonotonicTime) -> [Effect] {
        handle(.display(facts), now: now).effects
    }

    mutating func displayForgotten() { _ = handle(.displayForgotten, now: now) }

    mutating func audioChanged(playing: Set<String>, now: MonotonicTime) -> [Effect] {
        handle(.audio(playing: playing), now: now).effects
    }

    mutating func powerChanged(onBattery: Bool, now: MonotonicTime) -> [Effect] {
        handle(.power(onBattery: onBattery), now: now).effects
    }

    mutating func shutdown(now: MonotonicTime) -> [Effect] { handle(.shutdown, now: now).effects }
}
