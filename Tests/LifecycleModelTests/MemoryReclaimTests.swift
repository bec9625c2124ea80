import Testing
@testable import LifecycleModel

/// `Reclaim=`, `ReclaimAfterSec=`: the model asks for a suspended app's memory to be reclaimed once per suspension,
/// `ReclaimAfterSec=` after the suspension began; a resume before then cancels it, one after it needs nothing.
@Suite("Memory reclaim of suspended apps")
struct MemoryReclaimTests {
    static let after = AppPolicy.with {
        $0.reclaim = true
        $0.reclaimAfter = .seconds(20)
    }

    func reclaims(_ effects: [Effect]) -> Int {
        effects.filter { $0 == .reclaimMemory(app: "a") }.count
    }

    @Test("a suspension arms the reclaim, and its timer asks for it once")
    func suspensionArmsReclaim() throws {
        var h = Harness("a", policy: Self.after)
        try h.bring("a", to: .background)

        let suspended = h.fire(.grace, "a")
        #expect(suspended.contains(.armTimer(app: "a", .reclaim, after: .seconds(20))))
        #expect(reclaims(suspended) == 0, "nothing is reclaimed before ReclaimAfterSec")

        h.advance(by: .seconds(20))
        #expect(reclaims(h.fire(.reclaim, "a")) == 1)
        #expect(h.state("a") == .suspended, "the lifecycle does not move")
    }

    @Test("a resume before ReclaimAfterSec cancels the reclaim; a late firing asks for nothing")
    func resumeCancelsReclaim() throws {
        var h = Harness("a", policy: Self.after)
        try h.bring("a", to: .suspended)

        let resumed = try h.request(.resume, "a")
        #expect(resumed.contains(.cancelTimer(app: "a", .reclaim)))
        #expect(reclaims(h.fire(.reclaim, "a")) == 0, "a firing that raced the resume finds the app running")
    }

    @Test("a resume after the reclaim needs nothing of it, and the next suspension reclaims again")
    func eachSuspensionReclaimsOnce() throws {
        var h = Harness("a", policy: Self.after)
        try h.bring("a", to: .suspended)
        #expect(reclaims(h.fire(.reclaim, "a")) == 1)

        try h.cooperating { h throws in try h.request(.resume, "a") }
        let suspended = try h.request(.suspend, "a")
        #expect(suspended.contains(.armTimer(app: "a", .reclaim, after: .seconds(20))))
        #expect(reclaims(h.fire(.reclaim, "a")) == 1)
    }

    @Test("Reclaim=no arms nothing")
    func reclaimOff() throws {
        var h = Harness("a", policy: .with { $0.reclaim = false })
        try h.bring("a", to: .suspended)
        try h.request(.resume, "a")

        #expect(h.log.allSatisfy { effect in
            switch effect {
            case .armTimer(_, .reclaim, _), .cancelTimer(_, .reclaim), .reclaimMemory: false
            default: true
            }
        })
        #expect(reclaims(h.fire(.reclaim, "a")) == 0)
    }

    @Test("an app stopped by someone else is not reclaimed: the stop is theirs")
    func externalStopIsNotReclaimed() throws {
        var h = Harness("a", policy: Self.after)
        try h.bring("a", to: .background)

        let stopped = h.event(.processStopped(app: "a"))
        #expect(stopped.armed(.reclaim).isEmpty)
    }

    @Test("an app that exits while suspended is not reclaimed")
    func exitCancelsReclaim() throws {
        var h = Harness("a", policy: Self.after)
        try h.bring("a", to: .suspended)

        let exited = h.exit("a", .signaled(9))
        #expect(exited.contains(.cancelTimer(app: "a", .reclaim)))
        #expect(reclaims(h.fire(.reclaim, "a")) == 0)
    }
}
