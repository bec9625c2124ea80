import Testing
@testable import LifecycleModel

/// The keep-running rails: an app playing audio is treated as `BackgroundModes=audio` while it plays, and an app
/// with `OnlyOnBattery=yes` is suspended only while the machine runs on battery.
@Suite("Keep-running conditions")
struct RunConditionsTests {
    @Test("the rules name the first reason that keeps an app running, declared modes first")
    func rulesAsData() {
        let plain = AppPolicy()
        let battery = AppPolicy.with { $0.onlyOnBattery = true }
        let modes = AppPolicy.with { $0.backgroundModes = ["voip"] }
        let playing = RunConditions(playingAudio: ["a"], onBattery: true)
        #expect(LifecycleRules.keepRunning("a", policy: plain, conditions: RunConditions()) == nil)
        #expect(LifecycleRules.keepRunning("a", policy: plain, conditions: playing) == .playingAudio)
        #expect(LifecycleRules.keepRunning("b", policy: plain, conditions: playing) == nil)
        #expect(LifecycleRules.keepRunning("a", policy: modes, conditions: playing) == .backgroundModes)
        #expect(LifecycleRules.keepRunning("b", policy: battery, conditions: RunConditions(onBattery: false)) == .externalPower)
        #expect(LifecycleRules.keepRunning("b", policy: battery, conditions: RunConditions(onBattery: true)) == nil)
        #expect(LifecycleRules.effectiveBackgroundModes("a", policy: modes, conditions: playing) == ["voip", "audio"])
    }

    @Test("a stream that starts playing cancels the grace timer; the app runs on in the background")
    func playingCancelsGrace() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        #expect(h.record(of: "a").grace == .armed)

        let effects = h.record(h.model.audioChanged(playing: ["a"], now: h.now))

        #expect(effects == [.note(app: "a", .keptRunning(.playingAudio)), .cancelTimer(app: "a", .grace)])
        #expect(h.model.backgroundModes(of: "a") == ["audio"])
        #expect(h.fire(.grace, "a") == [.settled(app: "a")], "a cancelled grace timer that fires anyway changes nothing")
        #expect(h.state("a") == .background)
    }

    @Test("an app that plays when it enters the background gets no grace timer")
    func playingAppSettlesWithoutGrace() throws {
        var h = Harness("a")
        h.record(h.model.audioChanged(playing: ["a"], now: h.now))
        try h.bring("a", to: .background)

        #expect(h.log.filter { $0 == .armTimer(app: "a", .grace, after: .seconds(10)) }.isEmpty)
        #expect(h.state("a") == .background)
    }

    @Test("when the stream stops the grace time runs from then, and the app is suspended after it")
    func stoppingArmsGraceThenSuspends() throws {
        var h = Harness("a")
        h.record(h.model.audioChanged(playing: ["a"], now: h.now))
        try h.bring("a", to: .background)
        h.advance(by: .seconds(60))

        let stopped = h.record(h.model.audioChanged(playing: [], now: h.now))
        #expect(stopped == [.note(app: "a", .keptRunning(nil)), .armTimer(app: "a", .grace, after: .seconds(10)),
                            .settled(app: "a")])

        h.advance(by: .seconds(10))
        let fired = h.fire(.grace, "a")
        #expect(fired.contains(.stopProcess(app: "a")))
        #expect(h.state("a") == .suspended)
    }

    @Test("a playing app can still be suspended on request")
    func requestWinsOverAudio() throws {
        var h = Harness("a")
        h.record(h.model.audioChanged(playing: ["a"], now: h.now))
        try h.bring("a", to: .background)

        try h.request(.suspend, "a")

        #expect(h.state("a") == .suspended)
    }

    @Test("OnlyOnBattery: on external power the app runs on in the background; unplugging starts its grace time")
    func onlyOnBatteryFollowsPower() throws {
        var h = Harness("a", policy: .with { $0.onlyOnBattery = true })
        try h.bring("a", to: .background)
        #expect(h.record(of: "a").grace == .idle, "the machine starts on external power")
        #expect(h.model.keepRunningReason(of: "a") == .externalPower)

        let unplugged = h.record(h.model.powerChanged(onBattery: true, now: h.now))
        #expect(unplugged == [.note(app: "a", .keptRunning(nil)), .armTimer(app: "a", .grace, after: .seconds(10)),
                              .settled(app: "a")])
        h.fire(.grace, "a")
        #expect(h.state("a") == .suspended)
    }

    @Test("OnlyOnBattery: plugging in resumes the suspended app, and its grace timer does not run")
    func pluggingInResumes() throws {
        var h = Harness(["a": .with { $0.onlyOnBattery = true }, "b": AppPolicy()])
        h.record(h.model.powerChanged(onBattery: true, now: h.now))
        try h.bring("a", to: .suspended)
        try h.bring("b", to: .suspended)

        let pluggedIn = h.record(h.model.powerChanged(onBattery: false, now: h.now))

        #expect(pluggedIn.contains(.continueProcess(app: "a")))
        #expect(!pluggedIn.contains(.continueProcess(app: "b")), "only OnlyOnBattery apps follow the power supply")
        #expect(h.state("a") == .background)
        #expect(h.state("b") == .suspended)
        #expect(h.armed(.grace, "a", in: pluggedIn).isEmpty)
    }

    @Test("apps without OnlyOnBattery ignore the power supply")
    func plainAppsIgnorePower() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        #expect(h.record(h.model.powerChanged(onBattery: true, now: h.now)).isEmpty)
        #expect(h.record(h.model.powerChanged(onBattery: false, now: h.now)).isEmpty)
        #expect(h.record(of: "a").grace == .armed)
    }
}

extension Harness {
    func armed(_ kind: TimerKind, _ app: String, in effects: [Effect]) -> [Duration] {
        effects.compactMap { if case .armTimer(app, kind, let after) = $0 { after } else { nil } }
    }
}
