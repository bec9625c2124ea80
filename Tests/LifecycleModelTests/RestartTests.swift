import Testing
@testable import LifecycleModel

/// Exits the daemon did not ask for, and `Restart=` with systemd's backoff and start limit.
@Suite("Exits and restarts")
struct RestartTests {
    static let statuses: [ExitStatus] = [.exited(0), .exited(1), .signaled(11)]

    @Test("Restart= decides whether an exit is followed by a restart",
          arguments: RestartPolicy.allCases, statuses)
    func restartPolicy(_ restart: RestartPolicy, _ status: ExitStatus) throws {
        var h = Harness("a", policy: .with { $0.restart = restart })
        try h.bring("a", to: .inactive)

        let exited = h.exit("a", status)

        let restarts = restart == .always || (restart == .onFailure && status != .exited(0))
        #expect(h.state("a") == .notRunning)
        #expect(exited.contains(.transition(app: "a", from: .inactive, to: .notRunning, reason: "\(status)")))
        if restarts {
            #expect(exited.notes == [.restartScheduled(after: .milliseconds(100), attempt: 2, limit: 5, within: .seconds(10))])
            #expect(exited.armed(.restart) == [.milliseconds(100)])
            let fired = h.fire(.restart, "a")
            #expect(fired.first == .spawn(app: "a", options: LaunchOptions(launchedBy: "restart")))
            #expect(h.state("a") == .inactive)
        } else {
            #expect(exited.notes == [])
            #expect(exited.armed(.restart) == [])
        }
    }

    /// Crash "a" right after each (re)start, `crashes` times; returns the restart delays the model chose.
    static func crashLoop(_ h: inout Harness, crashes: Int) -> [Duration] {
        var delays: [Duration] = []
        for _ in 0..<crashes {
            let exited = h.exit("a", .exited(1))
            guard let delay = exited.armed(.restart).first else { break }
            delays.append(delay)
            h.advance(by: delay)
            h.fire(.restart, "a")
        }
        return delays
    }

    @Test("the restart delay doubles with every start inside the start-limit window")
    func backoffDoubles() throws {
        var h = Harness("a", policy: .with {
            $0.restart = .onFailure
            $0.startLimitBurst = 10
            $0.startLimitInterval = .seconds(60)
        })
        try h.request(.launch(background: false), "a")

        let delays = Self.crashLoop(&h, crashes: 6)

        #expect(delays == [100, 200, 400, 800, 1600, 3200].map { .milliseconds($0) })
        #expect(h.log.notes.compactMap { if case .restartScheduled(_, let attempt, _, _) = $0 { attempt } else { nil } }
                == [2, 3, 4, 5, 6, 7])
    }

    @Test("the doubling stops at RestartMaxDelaySec")
    func backoffCapped() throws {
        var h = Harness("a", policy: .with {
            $0.restart = .always
            $0.restartDelay = .seconds(1)
            $0.restartMaxDelay = .seconds(3)
            $0.startLimitBurst = 10
            $0.startLimitInterval = .seconds(60)
        })
        try h.request(.launch(background: false), "a")

        let delays = Self.crashLoop(&h, crashes: 5)

        #expect(delays == [1, 2, 3, 3, 3].map { .seconds($0) })
    }

    @Test("after StartLimitBurst starts within StartLimitIntervalSec the app is failed")
    func startLimit() throws {
        var h = Harness("a", policy: .with {
            $0.restart = .always
            $0.startLimitBurst = 3
            $0.startLimitInterval = .seconds(10)
        })
        try h.request(.launch(background: false), "a")
        #expect(Self.crashLoop(&h, crashes: 2).count == 2)

        let exited = h.exit("a", .exited(1))

        #expect(exited.notes == [.startLimitHit(starts: 3, within: .seconds(10))])
        #expect(exited.armed(.restart) == [])
        #expect(exited.contains(.transition(app: "a", from: .notRunning, to: .failed,
                                            reason: "start limit hit: 3 starts within 10.0 seconds")))
        #expect(h.state("a") == .failed)
        #expect(h.record(of: "a").launches == 3)
    }

    @Test("starts older than StartLimitIntervalSec do not count, nor lengthen the delay")
    func oldStartsForgotten() throws {
        var h = Harness("a", policy: .with {
            $0.restart = .always
            $0.startLimitBurst = 2
            $0.startLimitInterval = .seconds(10)
        })
        try h.request(.launch(background: false), "a")
        #expect(Self.crashLoop(&h, crashes: 1) == [.milliseconds(100)])
        h.advance(by: .seconds(11))

        let exited = h.exit("a", .exited(1))

        #expect(h.state("a") == .notRunning)
        #expect(exited.armed(.restart) == [.milliseconds(100)])
    }

    /// "a" with `Restart=always`, `StartLimitBurst=2`, crashed into `failed`.
    static func failed() throws -> Harness {
        var h = Harness("a", policy: .with {
            $0.restart = .always
            $0.startLimitBurst = 2
            $0.startLimitInterval = .seconds(10)
        })
        try h.request(.launch(background: false), "a")
        _ = crashLoop(&h, crashes: 2)
        try #require(h.state("a") == .failed)
        return h
    }

    @Test("a manual launch of a failed app works and resets the start limit")
    func launchResetsFailed() throws {
        var h = try Self.failed()

        let launched = try h.request(.launch(background: false), "a")
        #expect(launched.first == .spawn(app: "a", options: LaunchOptions(launchedBy: "lifectl")))
        #expect(h.state("a") == .inactive)

        let exited = h.exit("a", .exited(1))
        #expect(exited.armed(.restart) == [.milliseconds(100)], "one start since the reset: restarted")
        #expect(h.state("a") == .notRunning)
    }

    @Test("terminate of a failed app resets it to notRunning, and its start limit")
    func terminateResetsFailed() throws {
        var h = try Self.failed()

        let reset = try h.request(.terminate, "a")
        #expect(reset.contains(.transition(app: "a", from: .failed, to: .notRunning, reason: "reset by terminate")))
        #expect(h.state("a") == .notRunning)

        try h.request(.launch(background: false), "a")
        let exited = h.exit("a", .exited(1))
        #expect(exited.armed(.restart) == [.milliseconds(100)])
        #expect(h.state("a") == .notRunning)
    }

    @Test("terminatedInBackground is set when the previous run ended in the background or suspended",
          arguments: [(AppState.inactive, false), (.active, false), (.background, true), (.suspended, true)])
    func terminatedInBackground(_ state: AppState, _ expected: Bool) throws {
        var h = Harness("a", policy: .with { $0.restart = .onFailure })
        try h.bring("a", to: state)

        h.exit("a", .signaled(9))
        let restarted = h.fire(.restart, "a")

        #expect(h.record(of: "a").terminatedInBackground == expected)
        #expect(restarted.first == .spawn(app: "a", options: LaunchOptions(launchedBy: "restart",
                                                                          terminatedInBackground: expected)))
        h.exit("a", .exited(0))
        let relaunched = try h.request(.focus, "a")
        #expect(relaunched.first == .spawn(app: "a", options: LaunchOptions(launchedBy: "lifectl")),
                "the restarted run ended in the foreground")
    }

    @Test("a requested terminate in the background also sets terminatedInBackground")
    func terminatedInBackgroundOnRequest() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        try h.cooperating { h throws in try h.request(.terminate, "a") }

        let launched = try h.request(.launch(background: false), "a")

        #expect(launched.first == .spawn(app: "a", options: LaunchOptions(launchedBy: "lifectl",
                                                                         terminatedInBackground: true)))
    }

    @Test("a spawn failure acts like an exit with status 127", arguments: RestartPolicy.allCases)
    func spawnFailed(_ restart: RestartPolicy) throws {
        var h = Harness("a", policy: .with { $0.restart = restart })
        try h.request(.focus, "a")

        let failed = h.event(.spawnFailed(app: "a", reason: "No such file or directory"))

        #expect(failed.notes.first == .spawnFailed("No such file or directory"))
        #expect(failed.contains(.transition(app: "a", from: .inactive, to: .notRunning, reason: "exited with status 127")))
        #expect(failed.armed(.restart) == (restart == .no ? [] : [.milliseconds(100)]))
        #expect(h.model.projectedState(of: "a") == .notRunning)
    }

    @Test("an app that crashes while it held focus gets it back when it restarts")
    func restartRefocuses() throws {
        var h = Harness("a", policy: .with { $0.restart = .onFailure })
        try h.bring("a", to: .active)
        h.exit("a", .signaled(11))
        #expect(h.model.activeApp == nil)

        h.cooperating { h in h.fire(.restart, "a") }

        #expect(h.state("a") == .active)
    }

    @Test("an app that crashes while waiting for focus gets it back when it restarts")
    func restartRefocusesQueued() throws {
        var h = Harness("a", policy: .with { $0.restart = .onFailure })
        try h.request(.focus, "a")
        h.hello("a")

        h.exit("a", .exited(2))
        h.cooperating { h in h.fire(.restart, "a") }

        #expect(h.state("a") == .active)
    }

    @Test("an app killed by the launch watchdog while waiting for focus gets it back when it restarts")
    func watchdogRestartRefocuses() throws {
        var h = Harness("a", policy: .with { $0.restart = .onFailure })
        try h.request(.focus, "a")
        h.hello("a")
        h.fire(.ack, "a")
        h.exit("a", .signaled(9))

        h.cooperating { h in h.fire(.restart, "a") }

        #expect(h.state("a") == .active)
    }

    @Test("a restart does not take focus from an app that got it meanwhile")
    func restartDoesNotStealFocus() throws {
        var h = Harness(["a": .with { $0.restart = .onFailure }, "b": AppPolicy()])
        try h.bring("a", to: .active)
        h.exit("a", .signaled(11))
        try h.bring("b", to: .active)

        h.cooperating { h in h.fire(.restart, "a") }

        #expect(h.state("a") == .inactive)
        #expect(h.state("b") == .active)
    }

    @Test("a background app restarts into the foreground as inactive, not active")
    func backgroundRestartIsInactive() throws {
        var h = Harness("a", policy: .with { $0.restart = .always })
        try h.bring("a", to: .background)
        h.exit("a", .exited(0))

        h.cooperating { h in h.fire(.restart, "a") }

        #expect(h.state("a") == .inactive)
    }

    @Test("a manual launch while a restart is scheduled cancels the restart timer")
    func launchCancelsRestart() throws {
        var h = Harness("a", policy: .with { $0.restart = .always })
        try h.bring("a", to: .inactive)
        h.exit("a")

        let launched = try h.request(.launch(background: false), "a")

        #expect(launched.first == .cancelTimer(app: "a", .restart))
        #expect(launched.contains(.spawn(app: "a", options: LaunchOptions(launchedBy: "lifectl"))))
    }

    @Test("terminate while a restart is scheduled cancels it")
    func terminateCancelsRestart() throws {
        var h = Harness("a", policy: .with { $0.restart = .always })
        try h.bring("a", to: .inactive)
        h.exit("a")

        let terminated = try h.request(.terminate, "a")

        #expect(terminated == [.cancelTimer(app: "a", .restart), .settled(app: "a")])
    }

    @Test("a restart timer with no restart scheduled launches nothing", arguments: ["never launched", "cancelled"])
    func strayRestartTimer(_ situation: String) throws {
        var h = Harness("a", policy: .with { $0.restart = .always })
        if situation == "cancelled" {
            try h.bring("a", to: .inactive)
            h.exit("a")
            try h.request(.terminate, "a")
        }

        let fired = h.fire(.restart, "a")

        #expect(!fired.contains { if case .spawn = $0 { true } else { false } })
        #expect(h.state("a") == .notRunning)
    }

    @Test("the restart timer of a failed app launches nothing")
    func restartTimerWhenFailed() throws {
        var h = try Self.failed()

        let fired = h.fire(.restart, "a")

        #expect(!fired.contains { if case .spawn = $0 { true } else { false } })
        #expect(h.state("a") == .failed)
    }
}
