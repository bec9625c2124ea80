import TestSupport
import Foundation
import Testing
@testable import LifecycleModel

/// Liveness of the focus queue and of every app's queue, by exploration: random requests arrive pipelined (the
/// daemon takes them before any client answers), the clients answer in random order across apps (in order within
/// one app, as one connection does), and now and then a deadline passes or an app crashes. Whatever happened,
/// once every client has answered everything, every app must be settled, the focus queue empty, and at most one
/// app active. A schedule that ends with work waiting forever is a daemon that never answers a request again
/// (the soak test found one: an app's resignation queued behind its own later focus claim).
///
/// The schedules come from a fixed-seed generator, so a failure names its seed and is replayed exactly.
@Suite("Focus liveness")
struct FocusLivenessTests {
    static let scenes = AppPolicy.with {
        $0.scenes = ScenePolicy(supportsMultipleScenes: true, configurations: [
            SceneConfiguration(role: "window", name: "Main"), SceneConfiguration(role: "window", name: "Editor"),
        ])
    }
    static let restarting = AppPolicy.with { $0.restart = .onFailure }
    static let single = AppPolicy.with {
        $0.scenes = ScenePolicy(supportsMultipleScenes: false, configurations: [SceneConfiguration(role: "window", name: "Main")])
    }

    @Test("when the head of the focus queue leaves it, every claim behind it is served in turn, in one input")
    func queueAdvancesPastSeveralHeads() throws {
        // x holds the head while it launches; c (Protocol=none) and t wait behind it. x crashes: c takes focus and
        // gives it up at once (nobody to ack), and t, now first, must not wait for an input that never comes.
        var h = Harness(["x": AppPolicy(), "c": .silent, "t": AppPolicy()])
        try h.request(.focus, "x")
        try h.request(.focus, "c")
        try h.request(.focus, "t")
        h.cooperating { h in
            h.hello("t")
            h.exit("x", .signaled(11))
        }
        #expect(h.state("c") == .background)
        #expect(h.state("t") == .active)
        #expect(h.model.focusQueue.isEmpty)
    }

    @Test("an app stopped by someone else gives up its focus claim and its queued transitions")
    func externalStopAbandonsClaims() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .active)
        try h.bring("b", to: .background)
        h.unresponsive = ["b"]
        try h.cooperating { h throws in try h.request(.focus, "b") }
        #expect(h.inFlight("b")?.callback == .willEnterForeground)
        h.event(.processStopped(app: "b"))
        #expect(h.state("b") == .suspended)
        #expect(h.record(of: "b").plan.isEmpty)
        #expect(h.model.focusQueue.isEmpty)
        #expect(h.state("a") == .background)
        // Continued, it is in the background (its late ack changes nothing); focus asked for again is served.
        h.unresponsive = []
        h.cooperating { h in
            h.event(.processContinued(app: "b"))
            h.ack("b")
        }
        #expect(h.state("b") == .background)
        try h.cooperating { h throws in try h.request(.focus, "b") }
        #expect(h.state("b") == .active)
    }

    @Test("every schedule of pipelined requests and answers comes to rest", arguments: 0..<8)
    func schedulesComeToRest(batch: Int) {
        print("Focus liveness: seeds \(batch * 1000)..<\(batch * 1000 + 1000)")
        for seed in UInt64(batch * 1000)..<UInt64(batch * 1000 + 1000) {
            var explorer = Explorer(seed: seed, apps: [
                "a": AppPolicy(), "b": AppPolicy(), "c": .silent, "r": Self.restarting, "s": Self.scenes, "t": Self.single,
            ])
            explorer.run(steps: 80)
            explorer.drain()
            if let problem = explorer.problem() {
                Issue.record("seed \(seed): \(problem)\n\(explorer.trace.suffix(60).joined(separator: "\n"))")
                return
            }
        }
    }
}

/// The seed of a random test: LIFECYCLE_TEST_SEED when set (to replay a failure), else a fixed one, so that every
/// run explores the same cases unless asked otherwise. Each test prints the seed it uses.
func testSeed() -> UInt64 {
    ProcessInfo.processInfo.environment["LIFECYCLE_TEST_SEED"].flatMap { UInt64($0) } ?? 0x5EED_1FEC_7C1E
}


struct Explorer {
    var model = Supervisor()
    var random: SplitMix64
    var now = MonotonicTime.zero
    let names: [String]
    /// What each app's client (or process) will answer, in order.
    var outstanding: [String: [Event]] = [:]
    var trace: [String] = []
    /// Also trace the focus queue after every input (to read a failing seed).
    var traceQueue = false
    /// The first moment two apps were active at once, or an app made a transition UIKit never makes (checked
    /// after every input, not only at rest).
    var severalActive: String?

    init(seed: UInt64, apps: [String: AppPolicy]) {
        random = SplitMix64(seed: seed)
        names = apps.keys.sorted()
        for name in names { model.add(name, policy: apps[name]!) }
    }

    mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &random)] }
    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &random) < percent }

    mutating func run(steps: Int) {
        for _ in 0..<steps {
            let waiting = names.filter { !(outstanding[$0] ?? []).isEmpty }
            if waiting.isEmpty || chance(45) {
                request()
            } else if chance(4) {
                // A deadline passes: the ack never comes (the late one is ignored by id).
                let name = pick(names)
                guard model.app(name)?.awaiting != nil else { continue }
                outstanding[name]?.removeAll { if case .ack = $0 { true } else { false } }
                feed(.timerFired(app: name, .ack))
            } else if chance(2) {
                let name = pick(names)
                guard model.app(name)?.state.isRunning == true else { continue }
                outstanding[name] = []
                feed(.exited(app: name, .signaled(11)))
            } else if chance(3) {
                // The kernel and the clock: the grace time ends, someone else stops or continues the app, or its
                // client hangs up while the process lives on.
                let name = pick(names)
                guard model.app(name)?.state.isRunning == true else { continue }
                switch Int.random(in: 0..<4, using: &random) {
                case 0: if model.app(name)?.grace == .armed { feed(.timerFired(app: name, .grace)) }
                case 1: feed(.processStopped(app: name))
                case 2: feed(.processContinued(app: name))
                default:
                    outstanding[name]?.removeAll { if case .ack = $0 { true } else { false } }
                    feed(.disconnected(app: name))
                }
            } else {
                answer(pick(waiting))
            }
        }
    }

    /// Every client answers everything it was asked, as often as it takes; grace timers fire.
    mutating func drain() {
        for _ in 0..<10_000 {
            if let name = names.first(where: { !(outstanding[$0] ?? []).isEmpty }) {
                answer(name)
            } else if let name = names.first(where: { model.app($0)?.run.termination == .signalled }) {
                feed(.timerFired(app: name, .kill))
            } else if let name = names.first(where: { model.app($0).map { $0.restart != .none } == true }) {
                feed(.timerFired(app: name, .restart))
            } else if let name = names.first(where: { model.app($0)?.state == .suspended && model.app($0)?.isSettled == false }) {
                // Stopped by someone else with work queued: it waits for a continue, which comes at last.
                feed(.processContinued(app: name))
            } else {
                return
            }
        }
    }

    func problem() -> String? {
        if let severalActive { return severalActive }
        let active = names.filter { model.app($0)?.state == .active }
        if active.count > 1 { return "several apps active: \(active)" }
        if !model.focusQueue.isEmpty { return "focus queue not empty at rest: \(model.focusQueue)" }
        for name in names {
            let app = model.app(name)!
            if !app.isSettled {
                return "\(name) not settled at rest: state \(app.state), pending \(app.plan.steps), awaiting \(String(describing: app.awaiting?.name))"
            }
        }
        return nil
    }

    mutating func request() {
        let name = pick(names)
        let sessions = model.app(name)?.sessions.map(\.id) ?? []
        let scene = sessions.isEmpty || chance(10) ? "s99" : pick(sessions)
        let request: Request = pick([
            .launch(background: false), .launch(background: true), .focus, .focus, .focus, .deactivate, .background,
            .suspend, .resume, .terminate, .openScene(role: nil, configuration: nil, options: [:]),
            .focusScene(scene), .focusScene(scene), .backgroundScene(scene), .closeScene(scene), .discardScene(scene),
        ])
        do {
            let effects = try model.handle(request, for: name, now: now)
            trace.append("request \(request) \(name): ok")
            absorb(effects)
        } catch {
            trace.append("request \(request) \(name): refused")
        }
    }

    mutating func answer(_ name: String) {
        guard var queue = outstanding[name], !queue.isEmpty else { return }
        let event = queue.removeFirst()
        outstanding[name] = queue
        feed(event)
    }

    mutating func feed(_ event: Event) {
        trace.append("event \(event)")
        absorb(model.handle(event, now: now))
    }

    /// UIKit's transitions, plus what the kernel can do to any running process (exit, a stop by someone else).
    static func allowed(_ from: AppState, _ to: AppState, reason: String) -> Bool {
        switch (from, to) {
        case (.notRunning, .inactive), (.failed, .inactive), (.inactive, .active), (.active, .inactive), (.inactive, .background),
             (.background, .inactive), (.background, .suspended), (.suspended, .background), (_, .notRunning), (_, .failed):
            true
        case (_, .suspended): reason == "stopped by someone else"
        default: false
        }
    }

    mutating func absorb(_ effects: [Effect]) {
        now += .milliseconds(1)
        let active = names.filter { model.app($0)?.state == .active }
        if active.count > 1, severalActive == nil { severalActive = "\(active) active at once after input \(trace.count)" }
        if traceQueue { trace.append("  queue \(model.focusQueue), active \(model.activeApp ?? "-")") }
        for effect in effects {
            switch effect {
            case .spawn(let app, _) where model.app(app)!.policy.speaksProtocol:
                outstanding[app, default: []].append(.hello(app: app))
            case .send(let app, let delivery):
                trace.append("  send \(app) \(delivery.name)#\(delivery.id)")
                outstanding[app, default: []].append(.ack(app: app, id: delivery.id))
            case .signal(let app, .terminate):
                outstanding[app, default: []].append(.exited(app: app, .exited(0)))
            case .signal(let app, .kill):
                outstanding[app] = [.exited(app: app, .signaled(9))]
            case .transition(let app, let from, let to, let reason):
                trace.append("  \(app): \(from) → \(to)")
                if !Self.allowed(from, to, reason: reason), severalActive == nil {
                    severalActive = "\(app) went \(from) → \(to) (\(reason)), which UIKit's lifecycle never does"
                }
            default:
                break
            }
        }
    }
}
