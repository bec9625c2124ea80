import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// The daemon performs an input's continues before anything else it does, so that a shown window's app runs again
/// before the priorities of the transitions and another app's demotion are applied.
@Suite("the order the daemon performs effects in")
struct EffectOrderTests {
    @Test("continues come first; everything else keeps its order")
    func continuesComeFirst() {
        let effects: [Effect] = [
            .transition(app: "old", from: .active, to: .inactive, reason: "display"),
            .transition(app: "new", from: .suspended, to: .background, reason: "resumed"),
            .continueProcess(app: "new"),
            .save(app: "old"),
        ]
        #expect(Daemon.continuesFirst(effects) == [
            .continueProcess(app: "new"),
            .transition(app: "old", from: .active, to: .inactive, reason: "display"),
            .transition(app: "new", from: .suspended, to: .background, reason: "resumed"),
            .save(app: "old"),
        ])
    }

    @Test("a continue stays behind a stop or a signal of the same app before it")
    func continueStaysBehindItsAppsStop() {
        let effects: [Effect] = [
            .stopProcess(app: "a"),
            .signal(app: "b", .terminate),
            .continueProcess(app: "a"),
            .continueProcess(app: "b"),
            .continueProcess(app: "c"),
        ]
        #expect(Daemon.continuesFirst(effects) == [
            .continueProcess(app: "c"),
            .stopProcess(app: "a"),
            .signal(app: "b", .terminate),
            .continueProcess(app: "a"),
            .continueProcess(app: "b"),
        ])
    }

    @Test("a list without a continue is performed as it is")
    func noContinueNoChange() {
        let effects: [Effect] = [.stopProcess(app: "a"), .save(app: "a"), .settled(app: "a")]
        #expect(Daemon.continuesFirst(effects) == effects)
    }
}
