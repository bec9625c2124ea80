import Testing
@testable import LifecycleModel

/// UIKit's beginBackgroundTask/endBackgroundTask: an app finishing work in the background holds off its
/// suspension until the work ends or the background task time (counted from entering the background) runs out.
/// Defaults: BackgroundTimeSec 10 s, BackgroundTaskTimeSec 30 s, ExpirationWarningSec 5 s.
@Suite("Background tasks")
struct BackgroundTaskTests {
    static let upload = BackgroundTask(id: 1, name: "upload")
    static let sync = BackgroundTask(id: 2, name: "sync")

    // MARK: Beginning

    @Test("in the background, beginBackgroundTask answers the time left and arms the warning and the deadline")
    func beginInBackground() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.advance(by: .seconds(4))

        let began = h.begin("a", Self.upload)

        #expect(began == [.taskBegan(app: "a", task: Self.upload, remaining: .seconds(26)),
                          .armTimer(app: "a", .taskWarning, after: .seconds(21)),
                          .armTimer(app: "a", .taskDeadline, after: .seconds(26)),
                          .settled(app: "a")])
        #expect(h.record(of: "a").tasks == [Self.upload])
        #expect(h.record(of: "a").backgroundTimeRemaining(now: h.now) == .seconds(26))
    }

    @Test("in the foreground, beginBackgroundTask answers no remaining time and arms nothing",
          arguments: [AppState.inactive, .active])
    func beginInForeground(_ state: AppState) throws {
        var h = Harness("a")
        try h.bring("a", to: state)

        let began = h.begin("a", Self.upload)

        #expect(began == [.taskBegan(app: "a", task: Self.upload, remaining: nil), .settled(app: "a")])
        #expect(h.record(of: "a").backgroundTimeRemaining(now: h.now) == nil)
    }

    @Test("the time counts from entering the background: a second task gets what is left, and no new timers")
    func secondTaskSharesTheTime() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.advance(by: .seconds(2))
        h.begin("a", Self.upload)
        h.advance(by: .seconds(5))

        let began = h.begin("a", Self.sync)

        #expect(began == [.taskBegan(app: "a", task: Self.sync, remaining: .seconds(23)), .settled(app: "a")])
        #expect(h.record(of: "a").tasks == [Self.upload, Self.sync])
    }

    @Test("the remaining time never goes below zero")
    func remainingNotNegative() throws {
        // Grace longer than the task time, so the app is still in the background when the task begins.
        var h = Harness("a", policy: .with { $0.backgroundTime = .seconds(60) })
        try h.bring("a", to: .background)
        h.advance(by: .seconds(45))

        let began = h.begin("a", Self.upload)

        #expect(began.contains(.taskBegan(app: "a", task: Self.upload, remaining: .zero)))
        #expect(began.armed(.taskWarning) == [.zero] && began.armed(.taskDeadline) == [.zero])
    }

    @Test("a task id already open, or an app that is not running, is ignored")
    func beginIgnored() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)

        #expect(h.begin("a", BackgroundTask(id: 1, name: "again")) == [])
        #expect(h.begin("b", Self.upload) == [])
        #expect(h.record(of: "a").tasks == [Self.upload])
        #expect(h.record(of: "b").tasks == [])
    }

    // MARK: Grace and tasks

    @Test("the grace time running out with a task open does not suspend")
    func graceWithTaskDoesNotSuspend() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)
        h.advance(by: .seconds(10))

        let fired = h.fire(.grace, "a")

        #expect(!fired.contains(.stopProcess(app: "a")))
        #expect(h.state("a") == .background)
    }

    @Test("ending the last task after the grace time is over suspends at once")
    func endAfterGraceSuspends() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)
        h.begin("a", Self.sync)
        h.advance(by: .seconds(10))
        h.fire(.grace, "a")
        h.advance(by: .seconds(3))

        let endedFirst = h.end("a", Self.upload.id)
        #expect(!endedFirst.contains(.stopProcess(app: "a")), "sync is still open")
        #expect(h.state("a") == .background)

        let endedLast = h.end("a", Self.sync.id)
        #expect(endedLast == [.cancelTimer(app: "a", .taskWarning), .cancelTimer(app: "a", .taskDeadline),
                              .armTimer(app: "a", .reclaim, after: .seconds(30)),
                              .transition(app: "a", from: .background, to: .suspended,
                                          reason: "background tasks ended after the background time"),
                              .stopProcess(app: "a"), .settled(app: "a")])
        #expect(h.record(of: "a").taskOverruns == 0)
    }

    @Test("ending the task before the grace time is over leaves the grace to suspend")
    func endBeforeGraceWaitsForGrace() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)
        h.advance(by: .seconds(3))

        let ended = h.end("a", Self.upload.id)
        #expect(ended == [.cancelTimer(app: "a", .taskWarning), .cancelTimer(app: "a", .taskDeadline), .settled(app: "a")])
        #expect(h.state("a") == .background)

        h.advance(by: .seconds(7))
        let fired = h.fire(.grace, "a")
        #expect(fired.contains(.stopProcess(app: "a")))
        #expect(h.state("a") == .suspended)
    }

    @Test("ending a task that is not open is ignored")
    func endUnknownIgnored() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)

        #expect(h.end("a", 99) == [])
        #expect(h.record(of: "a").tasks == [Self.upload])
    }

    // MARK: Running out of time

    @Test("the warning names the open tasks and the time left")
    func warningNamesTasks() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)
        h.begin("a", Self.sync)
        h.advance(by: .seconds(25))

        let warned = h.fire(.taskWarning, "a")

        #expect(warned == [.taskExpiring(app: "a", tasks: [Self.upload, Self.sync], remaining: .seconds(5)),
                           .settled(app: "a")])
        #expect(h.state("a") == .background)
    }

    @Test("the deadline with tasks still open: overrun noted and counted, suspended anyway")
    func deadlineOverrun() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)
        h.begin("a", Self.sync)
        h.advance(by: .seconds(10))
        h.fire(.grace, "a")
        h.advance(by: .seconds(15))
        h.fire(.taskWarning, "a")
        h.advance(by: .seconds(5))

        let deadline = h.fire(.taskDeadline, "a")

        #expect(deadline == [.note(app: "a", .taskOverrun(["upload", "sync"], after: .seconds(30), overruns: 1)),
                             .armTimer(app: "a", .reclaim, after: .seconds(30)),
                             .transition(app: "a", from: .background, to: .suspended, reason: "background task time over"),
                             .stopProcess(app: "a"), .settled(app: "a")])
        #expect(h.record(of: "a").taskOverruns == 1)
        #expect(h.record(of: "a").tasks.isEmpty)
    }

    @Test("the deadline with tasks open suspends even while the grace time still runs (BackgroundTimeSec > BackgroundTaskTimeSec)")
    func deadlineBeforeGraceOver() throws {
        var h = Harness("a", policy: .with { $0.backgroundTime = .seconds(60) })
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)
        h.advance(by: .seconds(30))

        let deadline = h.fire(.taskDeadline, "a")

        #expect(deadline.notes == [.taskOverrun(["upload"], after: .seconds(30), overruns: 1)])
        #expect(h.record(of: "a").taskOverruns == 1)
        #expect(deadline.contains(.stopProcess(app: "a")))
        #expect(h.state("a") == .suspended)
    }

    @Test("the deadline with tasks open suspends an app whose BackgroundTimeSec is unset")
    func deadlineWithoutGrace() throws {
        var h = Harness("a", policy: .with { $0.backgroundTime = nil })
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)
        h.advance(by: .seconds(30))

        let deadline = h.fire(.taskDeadline, "a")

        #expect(deadline.notes == [.taskOverrun(["upload"], after: .seconds(30), overruns: 1)])
        #expect(h.state("a") == .suspended)
    }

    @Test("overruns add up over the app's life")
    func overrunsAccumulate() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        for round in 1...2 {
            h.begin("a", Self.upload)
            h.advance(by: .seconds(10))
            h.fire(.grace, "a")
            h.advance(by: .seconds(20))
            h.fire(.taskDeadline, "a")
            #expect(h.record(of: "a").taskOverruns == round)
            try h.cooperating { h throws in try h.request(.resume, "a") }
        }
    }

    @Test("a task timer firing after the tasks ended, or outside the background, does nothing")
    func strayTaskTimers() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)
        h.end("a", Self.upload.id)

        #expect(h.fire(.taskWarning, "a") == [.settled(app: "a")])
        #expect(h.fire(.taskDeadline, "a") == [.settled(app: "a")])
        #expect(h.state("a") == .background)
        #expect(h.record(of: "a").taskOverruns == 0)
    }

    // MARK: Tasks begun in the foreground

    @Test("a task begun in the foreground starts its time when the app enters the background")
    func foregroundTaskTimeStartsInBackground() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        h.begin("a", Self.upload)
        h.advance(by: .seconds(60))
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.background, "a") }

        #expect(h.log[start...].armed(.taskWarning) == [.seconds(25)])
        #expect(h.log[start...].armed(.taskDeadline) == [.seconds(30)])
        #expect(h.record(of: "a").enteredBackgroundAt == .seconds(60))
        #expect(h.record(of: "a").backgroundTimeRemaining(now: h.now) == .seconds(30))

        h.advance(by: .seconds(10))
        h.fire(.grace, "a")
        #expect(h.state("a") == .background, "the task holds the app up past its grace")
        h.advance(by: .seconds(20))
        let deadline = h.fire(.taskDeadline, "a")
        #expect(deadline.notes == [.taskOverrun(["upload"], after: .seconds(30), overruns: 1)])
        #expect(h.state("a") == .suspended)
    }

    @Test("leaving the background cancels the task timers, and the next entry starts the time anew")
    func leavingBackgroundCancelsTaskTimers() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)
        h.advance(by: .seconds(20))
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.focus, "a") }

        #expect(h.log[start...].filter { $0 == .cancelTimer(app: "a", .taskWarning) }.count == 1)
        #expect(h.log[start...].filter { $0 == .cancelTimer(app: "a", .taskDeadline) }.count == 1)
        #expect(h.state("a") == .active)
        #expect(h.record(of: "a").tasks == [Self.upload], "the task stays open in the foreground")

        h.advance(by: .seconds(5))
        let back = h.log.count
        try h.cooperating { h throws in try h.request(.background, "a") }
        #expect(h.log[back...].armed(.taskDeadline) == [.seconds(30)])
    }

    // MARK: Background modes

    @Test("an app with BackgroundModes is never suspended for its grace: no grace timer, no task timers")
    func backgroundModes() throws {
        var h = Harness("a", policy: .with { $0.backgroundModes = ["audio"] })
        try h.bring("a", to: .background)
        h.advance(by: .seconds(3))

        let began = h.begin("a", Self.upload)
        h.advance(by: .seconds(120))
        h.end("a", Self.upload.id)

        #expect(began == [.taskBegan(app: "a", task: Self.upload, remaining: .seconds(27)), .settled(app: "a")])
        #expect(h.log.armed(.grace) == [])
        #expect(h.log.armed(.taskWarning) == [] && h.log.armed(.taskDeadline) == [])
        #expect(h.state("a") == .background)
        #expect(!h.log.contains(.stopProcess(app: "a")))
    }

    @Test("an app with BackgroundModes can still be suspended on request")
    func backgroundModesSuspendOnRequest() throws {
        var h = Harness("a", policy: .with { $0.backgroundModes = ["audio"] })
        try h.bring("a", to: .background)

        let suspended = try h.request(.suspend, "a")

        #expect(suspended.contains(.stopProcess(app: "a")))
        #expect(h.state("a") == .suspended)
    }

    // MARK: Suspension by request

    @Test("a suspend request with tasks open notes them as abandoned and clears them")
    func suspendAbandonsTasks() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)
        h.begin("a", Self.sync)

        let suspended = try h.request(.suspend, "a")

        #expect(suspended == [.cancelTimer(app: "a", .grace),
                              .cancelTimer(app: "a", .taskWarning), .cancelTimer(app: "a", .taskDeadline),
                              .note(app: "a", .tasksAbandoned(["upload", "sync"])),
                              .armTimer(app: "a", .reclaim, after: .seconds(30)),
                              .transition(app: "a", from: .background, to: .suspended, reason: "suspend requested"),
                              .stopProcess(app: "a"), .settled(app: "a")])
        #expect(h.record(of: "a").tasks.isEmpty)
        #expect(h.record(of: "a").taskOverruns == 0)
    }

    @Test("a suspend request for an active app holding a task abandons it once it is stopped")
    func suspendActiveAbandonsTasks() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        h.begin("a", Self.upload)

        try h.cooperating { h throws in try h.request(.suspend, "a") }

        #expect(h.log.notes == [.tasksAbandoned(["upload"])])
        #expect(h.state("a") == .suspended)
        #expect(h.record(of: "a").tasks.isEmpty)
    }

    // MARK: Connection and exit

    @Test("tasks die with the client connection, their timers too")
    func disconnectEndsTasks() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)

        let disconnected = h.event(.disconnected(app: "a"))

        #expect(disconnected.contains(.cancelTimer(app: "a", .taskDeadline)))
        #expect(h.record(of: "a").tasks.isEmpty)
    }

    @Test("tasks ended by a hang-up after the grace time is over: nothing holds the app up, it is suspended")
    func disconnectAfterGraceSuspends() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)
        h.advance(by: .seconds(10))
        h.fire(.grace, "a")
        h.advance(by: .seconds(2))

        let disconnected = h.event(.disconnected(app: "a"))

        #expect(disconnected.contains(.stopProcess(app: "a")))
        #expect(h.state("a") == .suspended)
        // Whatever the fix, the app must not be left without a way to suspend.
        #expect(h.record(of: "a").tasks.isEmpty)
    }

    @Test("tasks end with the process")
    func exitEndsTasks() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.begin("a", Self.upload)

        let exited = h.exit("a", .exited(0))

        #expect(exited.contains(.cancelTimer(app: "a", .taskDeadline)))
        #expect(h.record(of: "a").tasks.isEmpty)
    }
}

extension Harness {
    /// The client calls beginBackgroundTask.
    @discardableResult
    mutating func begin(_ app: String, _ task: BackgroundTask) -> [Effect] { event(.beginBackgroundTask(app: app, task: task)) }

    /// The client calls endBackgroundTask.
    @discardableResult
    mutating func end(_ app: String, _ id: Int) -> [Effect] { event(.endBackgroundTask(app: app, id: id)) }
}
