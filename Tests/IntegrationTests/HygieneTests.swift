import Foundation
import Glibc
import LifecycleModel
import LifecycleProtocol
import Testing

/// What an app gets from the daemon, read from /proc: its descriptors (stdin /dev/null, stdout and stderr, its
/// lifecycle socket as fd 3, nothing else), its environment (the documented keys, not the daemon's), its user.
@Suite("what apps inherit", .serialized)
struct HygieneTests {
    /// `sleep` opens nothing once started (its setlocale's brief open of the locale archive is over by the time
    /// the launch settled), so its /proc/PID/fd is exactly what the daemon gave it.
    func sleeper(protocol: String = "lifecycle", _ extra: String = "") -> String {
        "[App]\nExec=/bin/sleep 100000\nProtocol=\(`protocol`)\n\(extra)\n[Lifecycle]\nLaunchTimeoutSec=1\nBackgroundTimeSec=infinity\n"
    }

    func descriptors(of pid: pid_t, in daemon: DaemonHarness, expected: Set<Int32>) throws -> [Int32: String] {
        var found: [Int32: String] = [:]
        // The set settles right after exec; wait for it rather than race the program's start-up.
        try? daemon.waitUntil("pid \(pid) has exactly fds \(expected.sorted())", timeout: 10) {
            found = try ProcessMeter.descriptors(pid)
            return Set(found.keys) == expected
        }
        return found
    }

    @Test("an app's descriptors are 0 (/dev/null), 1 and 2 (its output), and 3 (its lifecycle socket), nothing else")
    func appHasOnlyItsOwnDescriptors() throws {
        try DaemonHarness.running(["a": sleeper(), "quiet": sleeper(protocol: "none")]) { daemon in
            let daemonPID = try #require(daemon.daemonPID)
            try daemon.control("launch", "a")
            try daemon.control("launch", "quiet")
            let pid = try #require(try daemon.status("a").pid)
            let fds = try descriptors(of: pid, in: daemon, expected: [0, 1, 2, 3])
            #expect(Set(fds.keys) == [0, 1, 2, 3], "\(fds)")
            #expect(fds[0] == "/dev/null", "stdin is /dev/null, not the daemon's: \(fds[0] ?? "-")")
            #expect(fds[3]?.hasPrefix("socket:") == true, "fd 3 is the lifecycle socket: \(fds[3] ?? "-")")
            // stdout and stderr go to the daemon (a pipe it reads, or a journal stream), never to the daemon's own fds.
            let daemonFDs = try ProcessMeter.descriptors(daemonPID)
            #expect(fds[1] == fds[2])
            #expect(fds[1] != daemonFDs[1] && fds[1] != daemonFDs[2], "the app's output is its own stream: \(fds[1] ?? "-")")

            let quietPID = try #require(try daemon.status("quiet").pid)
            let quiet = try descriptors(of: quietPID, in: daemon, expected: [0, 1, 2])
            #expect(Set(quiet.keys) == [0, 1, 2], "Protocol=none gets no socket: \(quiet)")
        }
    }

    @Test("every descriptor the daemon opens is close-on-exec")
    func daemonDescriptorsAreCloseOnExec() throws {
        // The daemon starts with only 0, 1 and 2 (Tests/Fixtures/clean_fds.py), so that every other descriptor
        // is one it opened itself. (What a daemon inherits is not passed on to apps either: the spawn closes
        // everything above fd 3, as the first test shows.)
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("a", sleeper())
        try harness.app("quiet", sleeper(protocol: "none"))
        let wrapper = DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/clean_fds.py").path
        try harness.start(wrapper: ["/usr/bin/env", "python3", wrapper])
        try harness.control("launch", "a")
        try harness.control("launch", "quiet")
        _ = try harness.lifectl("status")
        let wrapperPID = try #require(harness.daemonPID)
        let children = try String(contentsOfFile: "/proc/\(wrapperPID)/task/\(wrapperPID)/children", encoding: .utf8)
        let daemonPID = try #require(children.split(separator: " ").first.flatMap { pid_t($0) })
        var open: [String] = []
        for (fd, target) in try ProcessMeter.descriptors(daemonPID) where fd > 2 {
            guard let info = try? String(contentsOfFile: "/proc/\(daemonPID)/fdinfo/\(fd)", encoding: .utf8),
                  let line = info.split(separator: "\n").first(where: { $0.hasPrefix("flags:") }),
                  let flags = Int(line.split(separator: "\t").last ?? "", radix: 8) else { continue }
            if flags & Int(O_CLOEXEC) == 0 { open.append("\(fd) → \(target)") }
        }
        #expect(open.isEmpty, "not close-on-exec: \(open)")
        #expect(try ProcessMeter.descriptors(daemonPID).count > 3, "the daemon's own descriptors were looked at")
    }

    @Test("an app's environment is the documented keys and its Environment=, nothing else of the daemon's")
    func appEnvironmentIsClean() throws {
        try DaemonHarness.running(["a": sleeper(protocol: "lifecycle", "Environment=MINE=1")]) { daemon in
            try daemon.control("launch", "a")
            let pid = try #require(try daemon.status("a").pid)
            let environ = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))
            let keys = Set(environ.split(separator: 0).map { String(decoding: $0.prefix { $0 != UInt8(ascii: "=") }, as: UTF8.self) })
            // PROTOCOL.md section 2.1: the daemon's variables (its table) and the keys taken from its environment.
            let protocolText = try String(contentsOfFile: DaemonHarness.repository.appendingPathComponent("docs/PROTOCOL.md").path,
                                          encoding: .utf8)
            let table = protocolText.split(separator: "\n").filter { $0.hasPrefix("| `LIFECYCLE_") }
                .compactMap { $0.split(separator: "`").dropFirst().first.map(String.init) }
            #expect(table.contains("LIFECYCLE_FD") && table.contains("LIFECYCLE_APP"))
            let documented = Set(table + ["PATH", "LANG", "LC_ALL", "TZ", "HOME", "USER", "LOGNAME", "XDG_RUNTIME_DIR"])
                .union(["LIFECYCLE_RECORD", "MINE"])  // the app's Environment= (the harness adds LIFECYCLE_RECORD)
            #expect(keys.isSubset(of: documented), "unexpected: \(keys.subtracting(documented).sorted())")
            #expect(keys.contains("LIFECYCLE_FD") && keys.contains("LIFECYCLE_APP") && keys.contains("MINE"))
            #expect(!keys.contains("LIFECYCLED_RUNTIME_DIR"), "the daemon's own settings do not leak")
        }
    }

    @Test("User=nobody: the app runs as nobody with exactly nobody's groups, not root's",
          .enabled(if: geteuid() == 0, "changing user needs root"))
    func appRunsAsItsUserWithItsGroups() throws {
        try DaemonHarness.running(["a": sleeper(protocol: "lifecycle", "User=nobody")]) { daemon in
            try daemon.control("launch", "a")
            let pid = try #require(try daemon.status("a").pid)
            let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
            func field(_ name: String) -> [String] {
                status.split(separator: "\n").first { $0.hasPrefix(name + ":") }
                    .map { $0.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().map(String.init) } ?? []
            }
            #expect(field("Uid") == ["65534", "65534", "65534", "65534"])
            #expect(field("Gid") == ["65534", "65534", "65534", "65534"])
            #expect(field("Groups") == ["65534"], "supplementary groups are nobody's, root's are reset")
            #expect(field("CapEff").allSatisfy { $0 == "0000000000000000" }, "no capabilities")
        }
    }
}
