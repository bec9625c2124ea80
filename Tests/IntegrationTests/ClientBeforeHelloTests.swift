import Foundation
import Glibc
import Testing

/// A client whose inherited connection dies with the daemon (`kill -9`) before its first hello: the Swift library
/// writes its hello to a dead socketpair, connects again through LIFECYCLE_SOCKET with the LIFECYCLE_TOKEN it was
/// started with, and the next daemon catches it up from the launch it never heard of. (The C and Python libraries
/// have the same test in clients/tests/test_catch_up.py.)
@Suite("a client that had not said hello when the daemon crashed", .serialized)
struct ClientBeforeHelloTests {
    @Test("the Swift library reconnects with LIFECYCLE_TOKEN and hears didFinishLaunching, then didBecomeActive")
    func swiftClientReconnectsBeforeItsFirstHello() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let go = harness.root.appendingPathComponent("say-hello")
        let notes = DaemonHarness.products.appendingPathComponent("notes-example").path
        try harness.app("notes", "[App]\nExec=\(notes)\n"
            + "Environment=NOTES_STATE_FILE=\(harness.root.path)/notes.json NOTES_HELLO_WHEN=\(go.path)\n"
            + "[Lifecycle]\nBackgroundTimeSec=infinity\nLaunchTimeoutSec=1\n")
        try harness.start()
        try harness.control("focus", "notes")
        try harness.waitUntil("notes active without its client") { try harness.status("notes").state.rawValue == "active" }
        let pid = try #require(try harness.status("notes").pid)
        #expect(harness.records("notes").isEmpty, "the client has not said hello yet")

        try harness.crash()
        try harness.start(keepLog: true)
        #expect(try harness.status("notes").pid == pid, "re-adopted, not restarted")
        _ = FileManager.default.createFile(atPath: go.path, contents: Data())

        try harness.waitUntil("the catch-up") { harness.types("notes").last == "didBecomeActive" }
        #expect(harness.types("notes") == ["didFinishLaunching", "didBecomeActive"])
        #expect(harness.log.contains("notes: its client reconnected"))
        #expect(try harness.status("notes").state.rawValue == "active")
    }
}
