import TestSupport
import Testing
@testable import LifecycleModel

/// AppTable finds records through an index of slots: whatever the order of inserts, writes and removals (which
/// move the last record into the removed one's slot), every name finds its own record.
@Suite("The app table")
struct AppTableTests {
    private func expectConsistent(_ table: AppTable, _ names: Set<String>, _ comment: Comment,
                                  sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(Set(table.names) == names, comment, sourceLocation: sourceLocation)
        for name in names {
            #expect(table.record(name)?.name == name, comment, sourceLocation: sourceLocation)
            #expect(table[name].name == name, comment, sourceLocation: sourceLocation)
            #expect(table[table.slot(name)].name == name, comment, sourceLocation: sourceLocation)
        }
    }

    @Test func writesRemovalsAndInsertsInAnyOrderFindEachAppsOwnRecord() {
        let seed = testSeed()
        print("AppTableTests seed \(seed) (set LIFECYCLE_TEST_SEED to replay)")
        var generator = SplitMix64(seed: seed)
        for round in 0..<200 {
            var table = AppTable()
            var names: Set<String> = []
            var launches: [String: Int] = [:]
            for step in 0..<40 {
                // Short names (stored inline in the String) and long ones (on the heap).
                let name = Int.random(in: 0..<3, using: &generator) == 0
                    ? "an-application-with-a-long-name-\(Int.random(in: 0..<6, using: &generator))"
                    : "app\(Int.random(in: 0..<6, using: &generator))"
                switch Int.random(in: 0..<3, using: &generator) {
                case 0 where !names.contains(name):
                    table.insert(AppRecord(name: name, policy: AppPolicy()))
                    names.insert(name)
                    launches[name] = 0
                case 1 where names.contains(name):
                    table.remove(name)
                    names.remove(name)
                    launches[name] = nil
                default:
                    guard names.contains(name) else { continue }
                    table[name].launches += 1
                    launches[name, default: 0] += 1
                }
                expectConsistent(table, names, "seed \(seed), round \(round), step \(step)")
                for (name, count) in launches { #expect(table[name].launches == count, "seed \(seed), round \(round), step \(step): \(name)") }
            }
        }
    }
}
