import Testing
@testable import LifecycleModel

/// At re-adoption the kernel wins over the state file: the daemon says what it found the processes to be, and
/// the model decides the state and whether they are continued.
@Suite("Re-adoption: the kernel wins over the saved state")
struct AdoptionKernelWinsTests {
    private func snapshot(_ state: AppState) throws -> AppSnapshot {
        var h = Harness("a")
        try h.bring("a", to: .background)
        var snapshot = try #require(h.model.snapshot(of: "a"))
        snapshot.state = state
        return snapshot
    }

    @Test("saved as suspended but running: taken back in the background, nothing continued")
    func savedSuspendedButRunningIsTakenBackInTheBackground() throws {
        var next = Supervisor()
        next.add("a", policy: AppPolicy())
        let effects = next.adopt("a", try snapshot(.suspended), running: true, processesStopped: false, now: .seconds(100))
        #expect(next.app("a")?.state == .background)
        #expect(effects.first == .note(app: "a", .adoptedRunning))
        #expect(effects.contains(.note(app: "a", .readopted(state: .background))))
        #expect(!effects.contains(.continueProcess(app: "a")))
    }

    @Test("saved running but stopped: continued, and taken back in the saved state")
    func savedRunningButStoppedIsContinued() throws {
        var next = Supervisor()
        next.add("a", policy: AppPolicy())
        let effects = next.adopt("a", try snapshot(.background), running: true, processesStopped: true, now: .seconds(100))
        #expect(next.app("a")?.state == .background)
        #expect(Array(effects.prefix(3)) == [.note(app: "a", .adoptedStopped(saved: .background)),
                                             .continueProcess(app: "a"),
                                             .note(app: "a", .readopted(state: .background))])
    }

    @Test("what the kernel shows agrees with the file: no note but the re-adoption, nothing continued",
          arguments: [(AppState.suspended, true), (.background, false)])
    func agreementChangesNothing(saved: AppState, stopped: Bool) throws {
        var next = Supervisor()
        next.add("a", policy: AppPolicy())
        let effects = next.adopt("a", try snapshot(saved), running: true, processesStopped: stopped, now: .seconds(100))
        #expect(next.app("a")?.state == saved)
        #expect(effects.first == .note(app: "a", .readopted(state: saved)))
        #expect(!effects.contains(.continueProcess(app: "a")))
    }
}
