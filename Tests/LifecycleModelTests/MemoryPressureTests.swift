import Testing
@testable import LifecycleModel

/// Memory pressure, as iOS's jetsam handles it: the first event of an episode warns the apps
/// (didReceiveMemoryWarning); pressure that persists past `memoryWarningGrace` (5 s) terminates suspended apps,
/// one per event, least recently used first. Events more than `memoryEpisodeGap` (30 s) apart start a new episode.
@Suite("Memory pressure and jetsam")
struct MemoryPressureTests {
    /// The warning carries the pressure reading (coalesced `latest`: the last one, and how many).
    static let warning = NotificationDelivery(name: memoryWarningType, payload: ["some": 60], posts: 1)
    static let gigabyte: UInt64 = 1 << 30

    // MARK: Warnings

    @Test("the first event warns every protocol app: delivered to the running ones, queued for the suspended ones")
    func firstEventWarns() throws {
        var h = Harness(["fg": AppPolicy(), "bg": AppPolicy(), "sleeper": AppPolicy(), "quiet": .silent, "off": AppPolicy()])
        try h.bring("fg", to: .active)
        try h.bring("bg", to: .background)
        try h.bring("sleeper", to: .suspended)
        try h.bring("quiet", to: .background)

        let effects = h.pressure(["sleeper": Self.gigabyte])

        #expect(effects == [.notify(app: "bg", Self.warning), .notify(app: "fg", Self.warning),
                            .note(app: "", .memoryWarning(apps: 3))])
        #expect(h.record(of: "sleeper").queue.postCount == 1)
        #expect(h.state("sleeper") == .suspended, "a warning does not wake a suspended app")
        #expect(h.record(of: "sleeper").memoryTerminations == 0)
    }

    @Test("a suspended app hears the warnings it slept through on resume, counted")
    func suspendedHearsWarningsOnResume() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        h.pressure()
        h.advance(by: .seconds(60))
        h.pressure()

        let resumed = try h.request(.resume, "a")

        #expect(resumed.notified == [NotificationDelivery(name: memoryWarningType, payload: ["some": 60], posts: 2)])
    }

    @Test("with no app to warn the warning note says so")
    func warningToNobody() {
        var h = Harness("a")

        #expect(h.pressure() == [.note(app: "", .memoryWarning(apps: 0))])
    }

    @Test("events within the grace after the warnings do nothing more")
    func withinGraceNothing() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .active)
        try h.bring("b", to: .suspended)
        h.pressure()

        for step in [Duration.seconds(1), .seconds(2), .milliseconds(1999)] {
            h.advance(by: step)
            #expect(h.pressure(["b": Self.gigabyte]) == [], "at \(h.now)")
        }
        #expect(h.state("b") == .suspended)
        #expect(h.record(of: "b").queue.postCount == 1, "no second warning in the episode")
    }

    // MARK: Terminations

    @Test("pressure at the end of the grace terminates a suspended app with SIGKILL, without waking it")
    func afterGraceKills() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .active)
        try h.bring("b", to: .suspended)
        h.pressure()
        h.advance(by: .seconds(5))

        let effects = h.pressure(["b": 3 * Self.gigabyte])

        #expect(effects == [.note(app: "b", .terminatedForMemory(residentBytes: 3 * Self.gigabyte)),
                            .signal(app: "b", .kill)])
        #expect(!effects.contains(.continueProcess(app: "b")))
        #expect(h.record(of: "b").memoryTerminations == 1)
        #expect(h.record(of: "b").isTerminating)
        #expect(h.state("a") == .active)
    }

    @Test("the victim's resident size is noted when known, nil when not")
    func victimSizeUnknown() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        h.pressure()
        h.advance(by: .seconds(5))

        #expect(h.pressure().notes == [.terminatedForMemory(residentBytes: nil)])
    }

    @Test("each further event terminates the next suspended app, least recently in the foreground first, never a running one")
    func leastRecentlyUsedFirst() throws {
        var h = Harness("a", "b", "c", "d")
        try h.bring("a", to: .active)
        h.advance(by: .seconds(10))
        try h.bring("b", to: .active)
        h.advance(by: .seconds(10))
        try h.bring("c", to: .active)
        try h.cooperating { h throws in
            try h.request(.suspend, "a")
            try h.request(.suspend, "b")
        }
        h.advance(by: .seconds(10))
        try h.bring("d", to: .suspended)
        #expect(h.record(of: "a").lastForeground == .seconds(10))
        #expect(h.record(of: "b").lastForeground == .seconds(20))
        #expect(h.record(of: "d").lastForeground == .seconds(30))
        // The most recently used is the largest: recency decides before size.
        let bytes = ["a": 1 * Self.gigabyte, "b": 2 * Self.gigabyte, "c": 8 * Self.gigabyte, "d": 4 * Self.gigabyte]
        h.advance(by: .seconds(10))
        h.pressure(bytes)

        var victims: [String] = []
        var last: [Effect] = []
        for _ in 0..<4 {
            h.advance(by: .seconds(5))
            last = h.pressure(bytes)
            for case .signal(let app, .kill) in last {
                victims.append(app)
                h.exit(app, .signaled(9))
            }
        }

        #expect(victims == ["a", "b", "d"])
        #expect(last == [.note(app: "", .nothingToTerminate)])
        #expect(h.state("c") == .active)
    }

    @Test("the next event terminates the next app even before the previous victim's exit is seen")
    func nextVictimBeforeExit() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .suspended)
        h.advance(by: .seconds(1))
        try h.bring("b", to: .suspended)
        h.pressure()
        h.advance(by: .seconds(5))

        let first = h.pressure()
        h.advance(by: .milliseconds(100))
        let second = h.pressure()
        h.advance(by: .milliseconds(100))
        let third = h.pressure()

        #expect(first.signals == [.kill] && first.contains(.signal(app: "a", .kill)))
        #expect(second.contains(.signal(app: "b", .kill)))
        #expect(third == [.note(app: "", .nothingToTerminate)], "no app is killed twice")
    }

    @Test("equally stale apps: the largest resident memory goes first, then by name")
    func tieBreaks() throws {
        var h = Harness("x", "y", "z", "w")
        for app in ["w", "x", "y", "z"] { try h.bring(app, to: .suspended) }
        let bytes: [String: UInt64] = ["w": 100, "x": 100, "y": 300, "z": 300]
        h.pressure(bytes)

        var victims: [String] = []
        for _ in 0..<4 {
            h.advance(by: .seconds(5))
            for case .signal(let app, .kill) in h.pressure(bytes) { victims.append(app) }
        }

        #expect(victims == ["y", "z", "w", "x"])
    }

    @Test("no suspended app to terminate: noted, and running apps are left alone",
          arguments: [AppState.active, .inactive, .background])
    func nothingToTerminate(_ state: AppState) throws {
        var h = Harness("a")
        try h.bring("a", to: state)
        h.pressure()
        h.advance(by: .seconds(5))

        let effects = h.pressure(["a": 10 * Self.gigabyte])

        #expect(effects == [.note(app: "", .nothingToTerminate)])
        #expect(h.state("a") == state)
    }

    @Test("an app already being terminated is no candidate")
    func terminatingNotCandidate() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        try h.request(.terminate, "a")
        h.pressure()
        h.advance(by: .seconds(5))

        #expect(h.pressure() == [.note(app: "", .nothingToTerminate)])
        #expect(h.record(of: "a").memoryTerminations == 0)
    }

    // MARK: Episodes

    @Test("events further apart than the episode gap start a new episode, with warnings and a new grace")
    func newEpisode() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .background)
        try h.bring("b", to: .suspended)
        h.pressure()
        h.advance(by: .seconds(30) + .milliseconds(1))

        let second = h.pressure()
        #expect(second == [.notify(app: "a", Self.warning), .note(app: "", .memoryWarning(apps: 2))])

        h.advance(by: .seconds(4))
        #expect(h.pressure() == [], "the new episode has its own grace")
        h.advance(by: .seconds(1))
        #expect(h.pressure().contains(.signal(app: "b", .kill)))
    }

    @Test("an event exactly the episode gap after the last one continues the episode")
    func gapBoundary() throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        h.pressure()
        h.advance(by: .seconds(30))

        let effects = h.pressure()

        #expect(effects.contains(.signal(app: "a", .kill)))
        #expect(!effects.notes.contains(.memoryWarning(apps: 1)))
    }

    @Test("the gap counts from the last event: steady pressure stays one episode")
    func steadyPressureOneEpisode() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .background)
        h.pressure()

        var warnings = 0
        for _ in 0..<10 {
            h.advance(by: .seconds(20))
            warnings += h.pressure().notes.count(where: { if case .memoryWarning = $0 { true } else { false } })
        }

        #expect(warnings == 0)
    }

    // MARK: After the termination

    @Test("an app terminated for memory is not restarted, even with Restart=always, and knows it on its next launch")
    func noRestartAndLaunchOption() throws {
        var h = Harness("a", policy: .with { $0.restart = .always })
        try h.bring("a", to: .suspended)
        h.pressure()
        h.advance(by: .seconds(5))
        h.pressure(["a": Self.gigabyte])

        let exited = h.exit("a", .signaled(9))

        #expect(exited.armed(.restart) == [])
        #expect(!exited.notes.contains { if case .restartScheduled = $0 { true } else { false } })
        #expect(h.state("a") == .notRunning)
        #expect(h.record(of: "a").memoryTerminations == 1)
        #expect(h.record(of: "a").terminatedInBackground)

        let launched = try h.request(.focus, "a")
        #expect(launched.first == .spawn(app: "a", options: LaunchOptions(launchedBy: "lifectl", terminatedInBackground: true)))
        h.hello("a")
        #expect(h.inFlight("a")?.launchOptions?.terminatedInBackground == true)
    }

    @Test("memory terminations add up over the app's life")
    func terminationsAccumulate() throws {
        var h = Harness("a")
        for round in 1...3 {
            try h.bring("a", to: .suspended)
            h.advance(by: .seconds(60))
            h.pressure()
            h.advance(by: .seconds(5))
            h.pressure()
            h.exit("a", .signaled(9))
            #expect(h.record(of: "a").memoryTerminations == round)
        }
    }

    @Test("a victim whose SIGKILL is under way is not continued by a resume or focus request before its exit",
          arguments: [Request.resume, .focus])
    func victimNotResumedBeforeExit(_ request: Request) throws {
        var h = Harness("a")
        try h.bring("a", to: .suspended)
        h.pressure()
        h.advance(by: .seconds(5))
        h.pressure()
        let start = h.log.count

        #expect(throws: RequestError.self) { try h.request(request, "a") }
        #expect(!h.log[start...].contains(.continueProcess(app: "a")))
        #expect(h.state("a") == .suspended)

        h.exit("a", .signaled(9))
        #expect(h.state("a") == .notRunning)
    }

    // MARK: jetsamOrder

    static func record(_ name: String, lastForeground: Duration) -> AppRecord {
        var record = AppRecord(name: name, policy: AppPolicy())
        record.lastForeground = lastForeground
        return record
    }

    @Test("jetsamOrder: least recently in the foreground first, then the largest, then by name")
    func jetsamOrder() {
        let candidates = [Self.record("recent", lastForeground: .seconds(50)),
                          Self.record("old-small", lastForeground: .seconds(10)),
                          Self.record("old-big", lastForeground: .seconds(10)),
                          Self.record("old-big-too", lastForeground: .seconds(10)),
                          Self.record("oldest", lastForeground: .seconds(1)),
                          Self.record("unmeasured", lastForeground: .seconds(10))]
        let bytes: [String: UInt64] = ["recent": 9_000, "old-small": 10, "old-big": 500, "old-big-too": 500, "oldest": 1]

        let order = Supervisor.jetsamOrder(candidates, residentBytes: bytes)

        #expect(order == ["oldest", "old-big", "old-big-too", "old-small", "unmeasured", "recent"])
    }

    @Test("jetsamOrder does not depend on the order of the candidates")
    func jetsamOrderStable() {
        let candidates = ["c", "a", "b", "d"].map { Self.record($0, lastForeground: .seconds(5)) }
        let bytes: [String: UInt64] = ["d": 7]

        #expect(Supervisor.jetsamOrder(candidates, residentBytes: bytes) == ["d", "a", "b", "c"])
        #expect(Supervisor.jetsamOrder(candidates.reversed(), residentBytes: bytes) == ["d", "a", "b", "c"])
        #expect(Supervisor.jetsamOrder([], residentBytes: bytes) == [])
    }
}

extension Harness {
    /// Memory pressure crossed the threshold.
    @discardableResult
    mutating func pressure(_ residentBytes: [String: UInt64] = [:], reading: JSONValue = ["some": 60]) -> [Effect] {
        event(.memoryPressure(residentBytes: residentBytes, reading: reading))
    }
}
