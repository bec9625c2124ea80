import Testing
@testable import LifecycleModel

/// `Supervisor.post`: a notification goes at once to the apps that can receive it, waits (coalesced) for the
/// ones that are suspended or not connected yet, and is dropped for the rest. A suspended app hears what it
/// missed when it runs again, before its lifecycle goes on (UIKit delivers the queued notifications first).
@Suite("Notification delivery")
struct NotificationDeliveryTests {
    // MARK: Refusals

    @Test("posting an undeclared type is refused, naming the type and the known ones")
    func unknownType() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        var p = h.handedOver(declaring: ["chat": .none])

        let error = #expect(throws: PostError.self) { try p.post("nope", ["x": 1], to: "a") }

        let known = ["batteryLevelDidChange", "batteryStateDidChange", "chat", "currentLocaleDidChange",
                     "didReceiveMemoryWarning", "significantTimeChange", "userDefaultsDidChange"]
        #expect(error == PostError(type: "nope", reason: .unknownType(known: known)))
        let description = error?.description ?? ""
        #expect(description.contains("'nope'"))
        for type in known { #expect(description.contains(type), "\(type) missing from: \(description)") }
        #expect(p.log.isEmpty)
    }

    @Test("posting to an unknown app is refused, naming the app")
    func unknownApp() throws {
        var p = Harness("a").handedOver()

        let error = #expect(throws: PostError.self) { try p.post("batteryLevelDidChange", 50, to: "ghost") }

        #expect(error == PostError(type: "batteryLevelDidChange", reason: .unknownApp("ghost")))
        #expect(error?.description == "cannot post 'batteryLevelDidChange' to 'ghost': no such app")
    }

    @Test("a client may post only the types declared for client posts: every system type is refused, even one re-declared to change its coalescing",
          arguments: NotificationCatalog.systemTypes.keys.sorted())
    func clientsCannotPostSystemTypes(_ type: String) throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .active)
        try h.bring("b", to: .background)
        h.observe("b", type)
        var p = h.handedOver(declaring: ["chat": .none, "batteryLevelDidChange": .count])

        let error = #expect(throws: PostError.self) { try p.post(type, ["level": 1], to: "b", from: .client("a")) }

        #expect(error == PostError(type: type, reason: .systemType(clientTypes: ["chat"])))
        #expect(error?.description.contains("system notification") == true)
        #expect(p.log.isEmpty, "nothing is delivered or queued")
        let outcome = try p.post(type, ["level": 1], to: "b")
        #expect(outcome.delivered + outcome.queued == 1, "the daemon's own post of the same type goes through")
    }

    @Test("a client's post of a declared client type goes through")
    func clientsPostDeclaredTypes() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .active)
        try h.bring("b", to: .background)
        h.observe("b", "chat")
        var p = h.handedOver(declaring: ["chat": .none])

        let outcome = try p.post("chat", ["text": "hi"], to: nil, from: .client("a"))

        #expect(outcome.delivered == 1)
    }

    // MARK: Running apps

    @Test("a running, connected app that observes the type gets it at once",
          arguments: [AppState.inactive, .active, .background])
    func deliveredAtOnce(_ state: AppState) throws {
        var h = Harness("a")
        try h.bring("a", to: state)
        h.observe("a", "batteryLevelDidChange")
        var p = h.handedOver()

        let outcome = try p.post("batteryLevelDidChange", ["level": 40], to: "a")

        #expect(outcome.delivered == 1 && outcome.queued == 0)
        #expect(outcome.effects == [.notify(app: "a", NotificationDelivery(name: "batteryLevelDidChange",
                                                                          payload: ["level": 40], posts: 1))])
        #expect(p.record(of: "a").queue.isEmpty)
        #expect(p.state("a") == state)
    }

    @Test("a delivery at once has the shape of its coalescing: count has no payload, none a list of one")
    func deliveredAtOnceShapes() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        h.observe("a", "significantTimeChange", "chat", "userDefaultsDidChange")
        var p = h.handedOver(declaring: ["chat": .none])

        let counted = try p.post("significantTimeChange", ["at": 1], to: "a")
        let listed = try p.post("chat", "hello", to: "a")
        let merged = try p.post("userDefaultsDidChange", ["k": "v"], to: "a")

        #expect(counted.effects == [.notify(app: "a", NotificationDelivery(name: "significantTimeChange", posts: 1))])
        #expect(listed.effects == [.notify(app: "a", NotificationDelivery(name: "chat", payloads: ["hello"], posts: 1))])
        #expect(merged.effects == [.notify(app: "a", NotificationDelivery(name: "userDefaultsDidChange",
                                                                         payload: ["k": "v"], posts: 1))])
    }

    @Test("an app that does not observe the type does not get it", arguments: [AppState.active, .background, .suspended])
    func notObservedDropped(_ state: AppState) throws {
        var h = Harness("a")
        try h.bring("a", to: state)
        h.observe("a", "currentLocaleDidChange")
        var p = h.handedOver()

        let outcome = try p.post("batteryLevelDidChange", 10, to: "a")

        #expect(outcome == Outcome())
        #expect(p.record(of: "a").queue.isEmpty)
    }

    @Test("posting to every app delivers, queues and drops app by app")
    func postToEveryApp() throws {
        var h = Harness(["awake": AppPolicy(), "deaf": AppPolicy(), "off": AppPolicy(), "sleeper": AppPolicy(),
                         "quiet": .silent])
        try h.bring("awake", to: .background)
        try h.bring("deaf", to: .background)
        try h.bring("sleeper", to: .suspended)
        try h.bring("quiet", to: .background)
        for app in ["awake", "sleeper", "quiet", "off"] { h.observe(app, "batteryLevelDidChange") }
        var p = h.handedOver()

        let outcome = try p.post("batteryLevelDidChange", 70, to: nil)

        #expect(outcome.delivered == 1)
        #expect(outcome.queued == 1)
        #expect(outcome.effects == [.notify(app: "awake", NotificationDelivery(name: "batteryLevelDidChange",
                                                                              payload: 70, posts: 1))])
        #expect(p.record(of: "sleeper").queue.postCount == 1)
    }

    // MARK: Suspended apps

    @Test("a suspended app that observes the type gets no message; the posts wait, coalesced")
    func suspendedQueues() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        h.observe("a", "batteryLevelDidChange")
        var p = h.handedOver()

        var outcomes: [Outcome] = []
        for level in [90, 80, 70] { outcomes.append(try p.post("batteryLevelDidChange", .number(Double(level)), to: "a")) }

        #expect(outcomes.allSatisfy { $0.queued == 1 && $0.delivered == 0 && $0.effects.isEmpty })
        #expect(p.record(of: "a").queue.count == 1)
        #expect(p.record(of: "a").queue.postCount == 3)
        #expect(p.state("a") == .suspended)
    }

    @Test("resume: first the process runs again, then one message per type with the net change, in first-post order")
    func resumeFlushesInOrder() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        h.observe("a", "batteryLevelDidChange", "userDefaultsDidChange", "significantTimeChange")
        var p = h.handedOver()
        try p.post("userDefaultsDidChange", ["theme": "dark", "size": 12], to: "a")
        try p.post("batteryLevelDidChange", 90, to: "a")
        try p.post("significantTimeChange", nil, to: "a")
        try p.post("userDefaultsDidChange", ["size": 14], to: "a")
        try p.post("batteryLevelDidChange", 80, to: "a")
        try p.post("significantTimeChange", nil, to: "a")

        let resumed = try p.request(.resume, "a")

        #expect(resumed == [
            .cancelTimer(app: "a", .reclaim),
            .transition(app: "a", from: .suspended, to: .background, reason: "resumed"),
            .continueProcess(app: "a"),
            .notify(app: "a", NotificationDelivery(name: "userDefaultsDidChange", payload: ["theme": "dark", "size": 14], posts: 2)),
            .notify(app: "a", NotificationDelivery(name: "batteryLevelDidChange", payload: 80, posts: 2)),
            .notify(app: "a", NotificationDelivery(name: "significantTimeChange", payload: nil, posts: 2)),
            .armTimer(app: "a", .grace, after: .seconds(10)),
            .settled(app: "a"),
        ])
        #expect(p.record(of: "a").queue.isEmpty)
    }

    @Test("a focus request on a suspended app: continue, the queued notifications, and only then willEnterForeground")
    func focusFlushesBeforeCallbacks() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        h.observe("a", "batteryLevelDidChange", "currentLocaleDidChange")
        var p = h.handedOver()
        try p.post("currentLocaleDidChange", "fr_FR", to: "a")
        try p.post("batteryLevelDidChange", 50, to: "a")

        let focused = try p.request(.focus, "a")

        let id = try #require(p.inFlight("a")?.id)
        #expect(focused == [
            .cancelTimer(app: "a", .reclaim),
            .transition(app: "a", from: .suspended, to: .background, reason: "resumed"),
            .continueProcess(app: "a"),
            .notify(app: "a", NotificationDelivery(name: "currentLocaleDidChange", payload: "fr_FR", posts: 1)),
            .notify(app: "a", NotificationDelivery(name: "batteryLevelDidChange", payload: 50, posts: 1)),
        ] + sendAndArm("a", .willEnterForeground, id: id))

        p.cooperating { p in p.ack("a") }
        #expect(p.state("a") == .active)
        #expect(p.log.notified.count == 2, "nothing is delivered twice")
    }

    @Test("a focus request on a suspended app while another is active still delivers before the lifecycle goes on")
    func focusFlushesWhileAnotherActive() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .suspended)
        try h.bring("b", to: .active)
        h.observe("a", "batteryLevelDidChange")
        var p = h.handedOver()
        try p.post("batteryLevelDidChange", 50, to: "a")
        let start = p.log.count

        try p.cooperating { p throws in try p.request(.focus, "a") }

        let entries = Array(p.log[start...])
        let notified = try #require(entries.firstIndex { if case .notify("a", _) = $0 { true } else { false } })
        let continued = try #require(entries.firstIndex(of: .continueProcess(app: "a")))
        let firstCallback = try #require(entries.firstIndex { if case .send("a", _) = $0 { true } else { false } })
        #expect(continued < notified && notified < firstCallback)
        #expect(p.state("a") == .active && p.state("b") == .background)
    }

    @Test("a continue by someone else delivers what the app missed")
    func externalContinueFlushes() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        h.observe("a", "batteryStateDidChange")
        var p = h.handedOver()
        try p.post("batteryStateDidChange", "charging", to: "a")
        try p.post("batteryStateDidChange", "full", to: "a")

        let continued = p.event(.processContinued(app: "a"))

        #expect(continued == [
            .note(app: "a", .continuedExternally),
            .cancelTimer(app: "a", .reclaim),
            .transition(app: "a", from: .suspended, to: .background, reason: "continued by someone else"),
            .notify(app: "a", NotificationDelivery(name: "batteryStateDidChange", payload: "full", posts: 2)),
            .armTimer(app: "a", .grace, after: .seconds(10)),
            .settled(app: "a"),
        ])
    }

    @Test("a none type queued past QueueLimit delivers the newest payloads and the number dropped")
    func queueLimitOnResume() throws {
        var h = Harness("a", policy: .with { $0.queueLimit = 2 })
        try h.bring("a", to: .suspended)
        h.observe("a", "chat")
        var p = h.handedOver(declaring: ["chat": .none])
        for text in ["one", "two", "three", "four", "five"] { try p.post("chat", .string(text), to: "a") }

        let resumed = try p.request(.resume, "a")

        #expect(resumed.notified == [NotificationDelivery(name: "chat", payloads: ["four", "five"], posts: 5, dropped: 3)])
    }

    @Test("a type the app stopped observing while it slept is dropped on resume")
    func unobservedWhileSuspended() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        h.observe("a", "batteryLevelDidChange", "currentLocaleDidChange")
        var p = h.handedOver()
        try p.post("batteryLevelDidChange", 50, to: "a")
        try p.post("currentLocaleDidChange", "de_DE", to: "a")

        p.event(.observe(app: "a", names: ["currentLocaleDidChange"]))
        let resumed = try p.request(.resume, "a")

        #expect(resumed.notified.map(\.name) == ["currentLocaleDidChange"])
        #expect(p.record(of: "a").queue.isEmpty)
    }

    @Test("the catalog's coalescing decides what a suspended app hears")
    func catalogCoalescingApplies() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        h.observe("a", "batteryLevelDidChange")
        var p = h.handedOver(declaring: ["batteryLevelDidChange": .count])
        try p.post("batteryLevelDidChange", 90, to: "a")
        try p.post("batteryLevelDidChange", 80, to: "a")

        let resumed = try p.request(.resume, "a")

        #expect(resumed.notified == [NotificationDelivery(name: "batteryLevelDidChange", payload: nil, posts: 2)])
    }

    // MARK: Before hello

    @Test("before its hello an app's posts wait for any declared type; at hello only the observed ones are delivered")
    func queuedUntilHello() throws {
        var p = Harness("a").handedOver()
        try p.request(.launch(background: false), "a")

        let observed = try p.post("batteryLevelDidChange", 40, to: "a")
        let unobserved = try p.post("currentLocaleDidChange", "en_GB", to: "a")
        try p.post("batteryLevelDidChange", 35, to: "a")
        #expect(observed.queued == 1 && observed.effects.isEmpty)
        #expect(unobserved.queued == 1 && unobserved.effects.isEmpty)
        #expect(p.record(of: "a").queue.count == 2)

        p.event(.observe(app: "a", names: ["batteryLevelDidChange"]))
        let helloed = p.event(.hello(app: "a"))

        #expect(helloed == [.cancelTimer(app: "a", .hello),
                            .notify(app: "a", NotificationDelivery(name: "batteryLevelDidChange", payload: 35, posts: 2))]
                         + sendAndArm("a", .didFinishLaunching, id: 1, options: LaunchOptions(launchedBy: "lifectl")))
        #expect(p.record(of: "a").queue.isEmpty)
    }

    @Test("a hello without observations delivers nothing that was held, except memory warnings")
    func helloWithoutObservations() throws {
        var p = Harness("a").handedOver()
        try p.request(.launch(background: true), "a")
        try p.post("batteryLevelDidChange", 40, to: "a")
        try p.post(memoryWarningType, nil, to: "a")

        let helloed = p.event(.hello(app: "a"))

        // Memory warnings coalesce `latest`: the last reading (here a null payload), and how many there were.
        #expect(helloed.notified == [NotificationDelivery(name: memoryWarningType, payload: .null, posts: 1)])
        #expect(p.record(of: "a").queue.isEmpty)
    }

    // MARK: Memory warnings

    @Test("didReceiveMemoryWarning reaches every protocol app without being observed")
    func memoryWarningNeedsNoObservation() throws {
        var h = Harness(["active": AppPolicy(), "background": AppPolicy(), "sleeper": AppPolicy(), "quiet": .silent])
        try h.bring("active", to: .active)
        try h.bring("background", to: .background)
        try h.bring("sleeper", to: .suspended)
        try h.bring("quiet", to: .background)
        var p = h.handedOver()

        let outcome = try p.post(memoryWarningType, nil, to: nil)

        let warning = NotificationDelivery(name: memoryWarningType, payload: .null, posts: 1)
        #expect(outcome.delivered == 2 && outcome.queued == 1)
        #expect(outcome.effects == [.notify(app: "active", warning), .notify(app: "background", warning)])

        let resumed = try p.request(.resume, "sleeper")
        #expect(resumed.notified == [warning])
    }

    // MARK: Apps that cannot hear

    enum Deaf: String, CaseIterable, CustomTestStringConvertible {
        case protocolNone, noHello, disconnected, notRunning, failed, terminating, terminatingSuspended
        var testDescription: String { rawValue }

        /// An app "a" that observes batteryLevelDidChange but cannot hear it.
        func arrange() throws -> Harness {
            var h = Harness("a", policy: self == .protocolNone ? .silent : self == .failed ? .crashOnceFails : AppPolicy())
            switch self {
            case .protocolNone: try h.bring("a", to: .background)
            case .noHello:
                try h.request(.launch(background: false), "a")
                h.fire(.hello, "a")
            case .disconnected:
                try h.bring("a", to: .active)
                h.event(.disconnected(app: "a"))
            case .notRunning: break
            case .failed: try h.bring("a", to: .failed)
            case .terminating:
                try h.bring("a", to: .active)
                try h.request(.terminate, "a")
            case .terminatingSuspended:
                try h.bring("a", to: .suspended)
                try h.request(.terminate, "a")
            }
            h.observe("a", "batteryLevelDidChange")
            return h
        }
    }

    @Test("an app that cannot hear drops the post, memory warnings included",
          arguments: Deaf.allCases, ["batteryLevelDidChange", memoryWarningType])
    func deafAppsDrop(_ deaf: Deaf, _ type: String) throws {
        var p = (try deaf.arrange()).handedOver()

        let outcome = try p.post(type, 1, to: "a")

        #expect(outcome == Outcome())
        #expect(p.record(of: "a").queue.isEmpty)
    }

    // MARK: Exit

    @Test("after an exit the app's queue and observations are gone")
    func exitForgetsQueueAndObservations() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        h.observe("a", "batteryLevelDidChange")
        var p = h.handedOver()
        try p.post("batteryLevelDidChange", 10, to: "a")

        p.event(.exited(app: "a", .signaled(9)))
        #expect(p.record(of: "a").queue.isEmpty)
        #expect(p.record(of: "a").observing.isEmpty)

        try p.cooperating { p throws in try p.request(.focus, "a") }
        #expect(p.log.notified.isEmpty, "nothing of the previous run reaches the new one")
        let outcome = try p.post("batteryLevelDidChange", 20, to: "a")
        #expect(outcome == Outcome(), "the new run observes nothing until it says so")
    }

    // MARK: Catalog

    @Test("the catalog holds the system types with their coalescing")
    func systemCatalog() {
        let catalog = NotificationCatalog()

        #expect(catalog.types == [
            "significantTimeChange": .count,
            "currentLocaleDidChange": .latest,
            "batteryLevelDidChange": .latest,
            "batteryStateDidChange": .latest,
            "didReceiveMemoryWarning": .latest,
            "userDefaultsDidChange": .merge,
        ])
        #expect(catalog.types == NotificationCatalog.systemTypes)
        #expect(catalog.coalescing(of: memoryWarningType) == .latest)
        #expect(catalog.coalescing(of: "nope") == nil)
        #expect(Supervisor().catalog == catalog)
    }

    @Test("NotificationCatalog(extra:) adds types and overrides system ones")
    func extraCatalog() {
        let catalog = NotificationCatalog(extra: ["chat": .none, "presence": .merge, "batteryLevelDidChange": .count])

        #expect(catalog.coalescing(of: "chat") == Coalescing.none)
        #expect(catalog.coalescing(of: "presence") == .merge)
        #expect(catalog.coalescing(of: "batteryLevelDidChange") == .count)
        #expect(catalog.coalescing(of: "currentLocaleDidChange") == .latest)
        #expect(catalog.types.count == NotificationCatalog.systemTypes.count + 2)
    }
}

// MARK: Driver

extension Harness {
    /// The client says which notification types it observes (replacing the earlier set).
    @discardableResult
    mutating func observe(_ app: String, _ names: String...) -> [Effect] {
        event(.observe(app: app, names: Set(names)))
    }
}

extension Sequence where Element == Effect {
    /// The notifications delivered, in order.
    var notified: [NotificationDelivery] {
        compactMap { if case .notify(_, let delivery) = $0 { delivery } else { nil } }
    }
}
