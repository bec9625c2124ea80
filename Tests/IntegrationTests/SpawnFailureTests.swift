import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// A request whose app cannot be started (no such `Exec=` binary, no such `User=`) fails with the reason, and
/// nothing else happens: the app stays notRunning and the focus stays where it was, with no callbacks.
@Suite("a spawn that fails is the request's answer", .serialized)
struct SpawnFailureTests {
    let python = DaemonHarness.pythonClient

    static let causes: [(name: String, config: String, reason: String)] = [
        ("missing Exec=", "[App]\nExec=/nonexistent/lifecycled-test-binary\n", "executable '/nonexistent/lifecycled-test-binary' not found"),
        ("missing User=", "[App]\nExec=/bin/sleep 300\nUser=lifecycled-no-such-user\n", "lifecycled-no-such-user"),
    ]

    @Test("launch and focus of an app that cannot start exit 1 with the reason; the active app stays active, untold",
          arguments: [0, 1])
    func failedSpawnFailsTheRequest(cause: Int) throws {
        let (label, config, reason) = Self.causes[cause]
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
        try harness.app("broken", config)
        try harness.start()
        try harness.control("focus", "a")
        try harness.waitUntil("a acknowledged didBecomeActive") { harness.types("a").contains("didBecomeActive") }
        let told = harness.types("a")

        for verb in ["launch", "focus"] {
            let output = try harness.lifectl(verb, "broken")
            #expect(output.status == 1, "\(label): lifectl \(verb) exits 1: \(output.stdout) \(output.stderr)")
            #expect(output.stderr.contains(reason), "\(label): lifectl \(verb) says why: \(output.stderr)")
            #expect(!output.stdout.contains("inactive") && !output.stdout.contains("active"), "\(label): no state printed: \(output.stdout)")
            #expect(try harness.status("broken").state.rawValue == "notRunning", "\(label) after \(verb)")
            #expect(try harness.status("a").state.rawValue == "active", "\(label): a keeps focus after \(verb) broken")
        }
        usleep(200_000)
        #expect(harness.types("a") == told, "\(label): a was told nothing")
        #expect(harness.log.contains("broken: Failed to start: "), "\(label): the failure is logged")
    }
}
