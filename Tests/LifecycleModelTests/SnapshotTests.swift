import FoundationEssentials
import LifecycleProtocol
import Testing
@testable import LifecycleModel

/// What a restarted daemon takes back from the previous one's state file: open background tasks and the
/// time their deadline counts from, besides the state, queue and scenes the integration tests cover.
@Suite("Snapshots across the daemon's restart")
struct SnapshotTests {
    /// "a" entered the background at t=0 and began a background task at t=1 s; the snapshot is taken at t=10 s.
    static func backgroundWithTask() throws -> (Harness, AppSnapshot) {
        var h = Harness("a")
        try h.bring("a", to: .background)
        h.advance(by: .seconds(1))
        h.event(.beginBackgroundTask(app: "a", task: BackgroundTask(id: 7, name: "upload")))
        h.advance(by: .seconds(9))
        return (h, try #require(h.model.snapshot(of: "a")))
    }

    @Test("open background tasks survive the restart, and their deadline counts from when the app entered the background")
    func tasksAreTakenBack() throws {
        let (h, snapshot) = try Self.backgroundWithTask()
        #expect(snapshot.tasks == [BackgroundTask(id: 7, name: "upload")])
        let entered = try #require(h.record(of: "a").enteredBackgroundAt)

        // The next daemon starts 5 s later on the same monotonic clock.
        var next = Supervisor()
        next.add("a", policy: AppPolicy())
        let now = entered + .seconds(15)
        let effects = next.adopt("a", snapshot, running: true, now: now)

        #expect(next.app("a")?.tasks == [BackgroundTask(id: 7, name: "upload")])
        #expect(next.app("a")?.backgroundTimeRemaining(now: now) == .seconds(15))
        #expect(effects.contains(.armTimer(app: "a", .taskDeadline, after: .seconds(15))))
        #expect(effects.contains(.armTimer(app: "a", .taskWarning, after: .seconds(10))))
    }

    @Test("a task whose time ran out while no daemon watched expires at once: the app is suspended")
    func expiredTaskEndsAtOnce() throws {
        let (h, snapshot) = try Self.backgroundWithTask()
        let entered = try #require(h.record(of: "a").enteredBackgroundAt)
        var next = Harness("a")
        next.advance(by: entered + .seconds(45))
        next.cooperating { next in
            let effects = next.model.adopt("a", snapshot, running: true, now: next.now)
            #expect(effects.contains(.armTimer(app: "a", .taskDeadline, after: .zero)))
            next.hello("a")
            next.fire(.taskDeadline, "a")
        }
        #expect(next.state("a") == .suspended)
        #expect(next.record(of: "a").tasks.isEmpty)
    }

    @Test("the snapshot is JSON that round-trips, and a file of an older daemon (no tasks) still reads")
    func jsonRoundTrip() throws {
        let (_, snapshot) = try Self.backgroundWithTask()
        let coder = LineCoder()
        #expect(try coder.decode(AppSnapshot.self, from: coder.encode(snapshot)) == snapshot)

        let older = #"{"state":"background","launches":1,"deadlineMisses":0,"terminatedInBackground":false,"memoryTerminations":0,"observing":[],"queue":{"limit":64,"entries":[]},"sessions":[],"nextSceneNumber":1,"discardedUntold":[]}"#
        let decoded = try coder.decode(AppSnapshot.self, from: Array(older.utf8))
        #expect(decoded.tasks == nil)
        var next = Supervisor()
        next.add("a", policy: AppPolicy())
        _ = next.adopt("a", decoded, running: true, now: .seconds(100))
        #expect(next.app("a")?.tasks == [])
    }

    @Test("what a client that could not hear was told round-trips through JSON; a file without it reads as a client that followed")
    func toldRoundTrip() throws {
        var h = try SceneTests.focusedSceneApp()
        h.event(.disconnected(app: "w"))
        var snapshot = try #require(h.model.snapshot(of: "w"))
        #expect(snapshot.told == Told(state: .active, scenes: ["s1": .foregroundActive]))
        snapshot.told?.launch = LaunchOptions(launchedBy: "autoLaunch", background: true, terminatedInBackground: true)
        let coder = LineCoder()
        #expect(try coder.decode(AppSnapshot.self, from: coder.encode(snapshot)) == snapshot)

        snapshot.told = nil
        let without = try coder.decode(AppSnapshot.self, from: coder.encode(snapshot))
        #expect(without.told == nil)
    }
}
