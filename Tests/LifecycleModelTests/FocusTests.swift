import Testing
@testable import LifecycleModel

/// Focus and app switches: UIKit's "did" callbacks move the app when sent, "will" callbacks when acknowledged,
/// and exactly one app is active at every moment.
@Suite("Focus and app switches")
struct FocusTests {
    /// "a" active and "b" in the background, both settled.
    static func activeAndBackground() throws -> Harness {
        var h = Harness("a", "b")
        try h.bring("a", to: .active)
        try h.bring("b", to: .background)
        return h
    }

    @Test("an app switch sends only willResignActive to the active app until it acknowledges")
    func appSwitchWaitsForResignAck() throws {
        var h = try Self.activeAndBackground()
        let start = h.log.count

        try h.request(.focus, "b")

        #expect(h.sends(from: start) == [Sent("a", .willResignActive)])
        #expect(h.state("a") == .active && h.state("b") == .background)
    }

    @Test("an app switch sends resign, then background and foreground, then become active, in that order")
    func appSwitchOrder() throws {
        var h = try Self.activeAndBackground()
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.focus, "b") }

        #expect(h.sends(from: start) == [Sent("a", .willResignActive), Sent("a", .didEnterBackground),
                                         Sent("b", .willEnterForeground), Sent("b", .didBecomeActive)])
        #expect(h.state("a") == .background && h.state("b") == .active)
        #expect(h.model.activeApp == "b")
        #expect(h.transitions(of: "a", from: start) == [.inactive, .background])
        #expect(h.transitions(of: "b", from: start) == [.inactive, .active])
    }

    @Test("the app taking focus becomes active only once the active app has resigned")
    func activationWaitsForResign() throws {
        var h = try Self.activeAndBackground()
        h.unresponsive = ["a"]

        try h.cooperating { h throws in try h.request(.focus, "b") }

        #expect(h.state("a") == .active, "a has not acknowledged willResignActive")
        #expect(h.state("b") != .active)
        #expect(h.model.activeApp == "a")

        h.cooperating { h in h.advance(by: .seconds(5)); h.fire(.ack, "a") }

        #expect(h.state("b") == .active)
        #expect(h.model.activeApp == "b")
        #expect(h.state("a") == .background)
    }

    @Test("one focus domain is one screen: an inactive app in the foreground goes to the background when another takes focus")
    func focusSendsOtherForegroundAppsToTheBackground() throws {
        var h = Harness("a", "b", "c")
        try h.bring("a", to: .active)
        try h.bring("b", to: .inactive)
        try h.bring("c", to: .background)
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.focus, "c") }

        #expect(h.sends(from: start).filter { $0.app == "b" } == [Sent("b", .didEnterBackground)])
        #expect(h.state("a") == .background && h.state("b") == .background && h.state("c") == .active)
    }

    @Test("switching to an inactive app: the active app resigns and enters the background, then it becomes active")
    func switchToInactiveApp() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .active)
        try h.bring("b", to: .inactive)
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.focus, "b") }

        #expect(h.sends(from: start) == [Sent("a", .willResignActive), Sent("a", .didEnterBackground),
                                         Sent("b", .didBecomeActive)])
        #expect(h.momentsWithSeveralActiveApps().isEmpty)
    }

    @Test("focus of a suspended app continues the process before willEnterForeground")
    func focusOfSuspendedAppContinuesFirst() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .active)
        try h.bring("b", to: .suspended)
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.focus, "b") }

        let continued = try #require(h.log[start...].firstIndex(of: .continueProcess(app: "b")))
        let foreground = try #require(h.log[start...].firstIndex {
            if case .send("b", let delivery) = $0 { delivery.callback == .willEnterForeground } else { false }
        })
        #expect(continued < foreground)
        #expect(h.transitions(of: "b", from: start) == [.background, .inactive, .active])
        #expect(h.state("a") == .background)
    }

    @Test("focus of a not-running app launches it: spawn, didFinishLaunching after hello, then didBecomeActive")
    func focusLaunches() throws {
        var h = Harness("a")
        let options = LaunchOptions(launchedBy: "lifectl")

        let launched = try h.request(.focus, "a")
        #expect(launched == [.spawn(app: "a", options: options),
                             .transition(app: "a", from: .notRunning, to: .inactive, reason: "launched by lifectl"),
                             .armTimer(app: "a", .hello, after: .seconds(20))])

        let helloed = h.hello("a")
        #expect(helloed == [.cancelTimer(app: "a", .hello)]
                + sendAndArm("a", .didFinishLaunching, id: 1, options: options))

        let launchAcked = h.ack("a")
        #expect(launchAcked == [.cancelTimer(app: "a", .ack),
                                .transition(app: "a", from: .inactive, to: .active, reason: "didBecomeActive")]
                + sendAndArm("a", .didBecomeActive, id: 2))

        let activeAcked = h.ack("a")
        #expect(activeAcked == [.cancelTimer(app: "a", .ack), .settled(app: "a")])
        #expect(h.model.activeApp == "a")
    }

    @Test("the requester of a launching focus is the launch option launchedBy")
    func focusOriginIsLaunchedBy() throws {
        var h = Harness("a")

        let effects = try h.request(.focus, "a", origin: "notes")

        #expect(effects.first == .spawn(app: "a", options: LaunchOptions(launchedBy: "notes")))
    }

    @Test("focus of a not-running app while another is active: it launches at once, and activates after the resign")
    func focusLaunchesBesideActiveApp() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .active)
        let start = h.log.count

        let effects = try h.request(.focus, "b")
        #expect(effects.contains(.spawn(app: "b", options: LaunchOptions(launchedBy: "lifectl"))))
        #expect(h.sends(from: start) == [Sent("a", .willResignActive)])

        h.hello("b")
        h.ack("b")
        #expect(h.sends(from: start) == [Sent("a", .willResignActive), Sent("b", .didFinishLaunching)])
        #expect(h.state("b") == .inactive, "a has not resigned yet")

        h.ack("a")
        #expect(h.sends(from: start) == [Sent("a", .willResignActive), Sent("b", .didFinishLaunching),
                                         Sent("a", .didEnterBackground), Sent("b", .didBecomeActive)])
        #expect(h.model.activeApp == "b")
    }

    @Test("switching back before the first switch completed ends with the last app focused")
    func switchBackMidway() throws {
        var h = try Self.activeAndBackground()

        let toB = try h.request(.focus, "b")
        let backToA = try h.request(.focus, "a")
        h.cooperate(after: toB + backToA)

        #expect(h.state("a") == .active)
        #expect(h.state("b") == .background)
        #expect(h.momentsWithSeveralActiveApps().isEmpty)
    }

    struct Script: Sendable, CustomTestStringConvertible {
        let name: String
        let steps: [(Request, String)]
        let unresponsive: Set<String>
        /// Let the deadlines of unresponsive apps pass after each step, or only once all requests are in.
        var deadlinesBetweenSteps = true
        var testDescription: String { name }
    }

    static let scripts: [Script] = [
        Script(name: "cooperative apps, round of switches",
               steps: [(.focus, "a"), (.focus, "b"), (.focus, "c"), (.focus, "a"), (.background, "a"),
                       (.focus, "c"), (.suspend, "b"), (.focus, "b"), (.deactivate, "b"), (.focus, "a")],
               unresponsive: []),
        Script(name: "b never answers, its deadlines pass",
               steps: [(.focus, "a"), (.focus, "b"), (.focus, "c"), (.focus, "b"), (.focus, "a"),
                       (.terminate, "b"), (.focus, "b")],
               unresponsive: ["b"]),
        Script(name: "requests pile up before anyone answers",
               steps: [(.launch(background: true), "a"), (.launch(background: true), "b"), (.focus, "a"),
                       (.focus, "b"), (.focus, "c"), (.focus, "a")],
               unresponsive: ["a", "b", "c"], deadlinesBetweenSteps: false),
    ]

    @Test("exactly one app is active at every moment", arguments: scripts)
    func atMostOneActive(_ script: Script) throws {
        var h = Harness("a", "b", "c")
        h.unresponsive = script.unresponsive

        for (request, app) in script.steps {
            try h.cooperating { h throws in try h.request(request, app) }
            if script.deadlinesBetweenSteps { h.runOutDeadlines() }
        }
        h.runOutDeadlines()

        #expect(h.momentsWithSeveralActiveApps().isEmpty)
        let actives = ["a", "b", "c"].filter { h.state($0) == .active }
        #expect(actives.count <= 1)
        #expect(h.model.activeApp == actives.first)
    }
}
