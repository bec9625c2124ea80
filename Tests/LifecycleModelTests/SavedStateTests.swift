import Testing
@testable import LifecycleModel

/// The model tells the daemon which apps' saved state (AppSnapshot, and the process it runs) an input changed:
/// one `save` per app, after the input's other effects, and none when nothing saved changed.
@Suite("Saved state")
struct SavedStateTests {
    @Test("a launch saves the app once, after every other effect of the request")
    func launchSavesOnceAtTheEnd() throws {
        var model = Supervisor()
        model.add("a", policy: AppPolicy())

        let effects = try model.handle(.launch(background: false), for: "a", now: .zero)

        #expect(effects.count { if case .save = $0 { true } else { false } } == 1)
        #expect(effects.last == .save(app: "a"))
    }

    @Test("an input that changes nothing saved asks for no save: a hello, a timer of no consequence")
    func nothingSavedNoSave() throws {
        var h = Harness("a")
        try h.bring("a", to: .inactive)
        h.fire(.taskWarning, "a")
        #expect(h.saves.last == [])
    }

    @Test("a post queued for a suspended app saves it; a dropped one does not")
    func postsSaveWhatTheyQueue() throws {
        var h = Harness("a", "b")
        try h.bring("a", to: .suspended)
        try h.bring("b", to: .active)
        h.event(.observe(app: "a", names: ["batteryLevelDidChange"]))

        let queued = try h.post("batteryLevelDidChange", ["level": 0.5], to: "a")
        #expect(queued.queued == 1)
        #expect(h.saves.last == ["a"])

        _ = try h.post("batteryLevelDidChange", ["level": 0.4], to: "b")
        #expect(h.saves.last == [], "b does not observe the type: dropped, nothing changed")
    }

    @Test("beginning and ending a background task save the app (open tasks are saved)")
    func backgroundTasksSave() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)

        h.event(.beginBackgroundTask(app: "a", task: BackgroundTask(id: 1, name: "upload")))
        #expect(h.saves.last == ["a"])
        h.event(.endBackgroundTask(app: "a", id: 1))
        #expect(h.saves.last == ["a"])
        h.event(.endBackgroundTask(app: "a", id: 1))
        #expect(h.saves.last == [], "no such task: nothing changed")
    }

    @Test("an exit saves the app: its state and how its run ended are saved")
    func exitSaves() throws {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.exit("a", .exited(0))
        #expect(h.saves.last == ["a"])
    }

    @Test("a message alone saves nothing, yet every id sent stays below the id bound the last save recorded")
    func messageIDsAreSavedAsABound() throws {
        var h = Harness("a")
        try h.bring("a", to: .active)
        var saved = try #require(h.model.snapshot(of: "a")?.nextMessageID)
        var highestSent = 0
        for round in 0..<(Supervisor.messageIDBlock * 2) {
            let effects = round.isMultiple(of: 2) ? try h.request(.deactivate, "a") : try h.request(.focus, "a")
            for case .send(_, let delivery) in effects { highestSent = max(highestSent, delivery.id) }
            // A save here is what the daemon writes: the snapshot as it is after the input.
            if h.saves.last == ["a"] { saved = try #require(h.model.snapshot(of: "a")?.nextMessageID) }
            if round == 0 { #expect(h.saves.last == [], "willResignActive is sent before any state changes") }
            #expect(highestSent < saved, "id \(highestSent) was sent, the state file says ids stay below \(saved)")
            h.ack("a")
            if h.saves.last == ["a"] { saved = try #require(h.model.snapshot(of: "a")?.nextMessageID) }
        }
    }
}
