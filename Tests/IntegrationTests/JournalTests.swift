import Foundation
import Glibc
import LifecycleModel
import LifecycleProtocol
import Testing

/// The journal, played by Tests/Fixtures/fake_journal.py in a private mount namespace (no journald runs here):
/// the daemon's real sd_journal_sendv records and sd_journal_stream_fd streams are what the test reads.
@Suite("journal logging", .serialized)
struct JournalTests {
    static let fixture = DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/fake_journal.py").path

    struct Entry: Decodable {
        var kind: String
        var fields: [String: String]?
        var identifier: String?
        var line: String?
    }

    func entries(_ file: URL) -> [Entry] {
        guard let text = try? String(contentsOf: file, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(Entry.self, from: Data($0.utf8)) }
    }

    @Test("transitions, launches, exits and restarts are structured records; an app's output is its own stream",
          .enabled(if: geteuid() == 0, "a private mount namespace for the fake journal needs root"))
    func structuredRecordsAndAppStreams() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let record = harness.root.appendingPathComponent("journal.jsonl")
        try harness.app("notes", "[App]\nExec=\(DaemonHarness.pythonClient)\nRestart=on-failure\nRestartSec=50ms\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
        try harness.start(wrapper: ["/usr/bin/unshare", "--mount", "--propagation", "private", "--",
                                    "/usr/bin/env", "python3", Self.fixture, "--record", record.path, "--"])
        try harness.control("focus", "notes")
        let first = try #require(try harness.status("notes").pid)
        kill(first, SIGKILL)
        try harness.waitUntil("restarted") { try harness.status("notes").launches == 2 }

        try harness.waitUntil("the records arrived") {
            entries(record).contains { $0.fields?["LIFECYCLE_EVENT"] == "restart" }
        }
        let records = entries(record).compactMap(\.fields)
        let activation = try #require(records.first { $0["LIFECYCLE_TO"] == "active" })
        #expect(activation["MESSAGE_ID"] == JournalEventIDs.transition)
        #expect(activation["LIFECYCLE_APP"] == "notes" && activation["LIFECYCLE_FROM"] == "inactive")
        #expect(activation["LIFECYCLE_REASON"] == "didBecomeActive")
        #expect(activation["LIFECYCLE_PID"] == String(first))
        #expect(activation["MESSAGE"] == "notes: inactive → active (didBecomeActive)")
        #expect(activation["SYSLOG_IDENTIFIER"] == "lifecycled" && activation["PRIORITY"] == "6")
        #expect(records.contains { $0["LIFECYCLE_EVENT"] == "launch" && $0["LIFECYCLE_PID"] == String(first) })
        #expect(records.contains { $0["LIFECYCLE_EVENT"] == "exit" && $0["LIFECYCLE_EXIT"] == "killed by signal 9" })
        #expect(records.contains { $0["LIFECYCLE_EVENT"] == "restart" && $0["MESSAGE_ID"] == JournalEventIDs.restart })

        try harness.waitUntil("the app's own output came through its stream") {
            entries(record).contains { $0.kind == "stream" && $0.identifier == "notes" && $0.line == "[notes] didBecomeActive" }
        }
        #expect(!harness.log.contains("notes: inactive → active"), "with a journal, records do not go to stderr")
    }

    @Test("without a journal, the records are the same words on stderr and an app's output is prefixed with its name")
    func withoutJournalEverythingGoesToStderr() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("notes", "[App]\nExec=\(DaemonHarness.pythonClient)\n")
        try harness.start()
        try harness.control("focus", "notes")
        try harness.waitUntil("the app's output, prefixed") { harness.log.contains("notes: [notes] didBecomeActive") }
        #expect(harness.log.contains("notes: inactive → active (didBecomeActive)"))
    }
}

/// The MESSAGE_IDs the journal records carry (docs/JOURNAL.md), written out so that a change to them fails a test.
enum JournalEventIDs {
    static let transition = "5c1a9e0b7f2d4b3c8a6e1d2f3b4c5d01"
    static let restart = "5c1a9e0b7f2d4b3c8a6e1d2f3b4c5d04"
}
