import Foundation
import Glibc
import Testing

/// The daemon holds two descriptors per running app: it raises its soft RLIMIT_NOFILE to the hard limit (systemd
/// gives services 1024:524288), and its apps get the soft limit it was started with.
@Suite("the descriptor limit", .serialized)
struct DescriptorLimitTests {
    /// The soft and hard "Max open files" of /proc/PID/limits.
    func openFilesLimit(_ pid: pid_t) throws -> (soft: String, hard: String) {
        let limits = try String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8)
        let line = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        let words = line.split(separator: " ", omittingEmptySubsequences: true)
        return (String(words[3]), String(words[4]))
    }

    @Test("started with 1024:4096, the daemon runs with 4096 and its apps with 1024:4096")
    func daemonRaisesItsOwnLimitAndAppsGetTheOriginal() throws {
        let prlimit = try #require(["/usr/bin/prlimit", "/bin/prlimit"].first { FileManager.default.isExecutableFile(atPath: $0) }, "prlimit (util-linux)")
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("plain", "[App]\nExec=/bin/sleep 1000\nProtocol=none\nAutoLaunch=yes\n")
        try harness.start(wrapper: [prlimit, "--nofile=1024:4096", "--"])
        let daemon = try #require(harness.daemonPID)
        let daemonLimit = try openFilesLimit(daemon)
        #expect(daemonLimit.soft == "4096" && daemonLimit.hard == "4096")
        try harness.waitUntil("the app runs") { (try? harness.status("plain").pid) != nil }
        let app = try #require(try harness.status("plain").pid)
        let appLimit = try openFilesLimit(app)
        #expect(appLimit.soft == "1024" && appLimit.hard == "4096")
        #expect(harness.log.contains("descriptor limit raised from 1024 to 4096; apps get 1024"))
    }
}
