import Foundation
import Glibc
import Testing

/// `lifectl logs APP` under a journal: what it asks journalctl for. The journal is played by a private mount
/// namespace with `/run/systemd/journal/socket` in it and a journalctl in PATH that prints its arguments.
@Suite("lifectl logs under a journal")
struct LogsCommandTests {
    /// The arguments lifectl hands journalctl for `lifectl ARGUMENTS`.
    func journalctlArguments(_ arguments: [String]) throws -> [String] {
        let directory = try ServiceFilesTests.TemporaryDirectory()
        defer { directory.remove() }
        let fake = directory.url.appendingPathComponent("journalctl").path
        try "#!/bin/sh\nprintf '%s\\n' \"$@\"\n".write(toFile: fake, atomically: true, encoding: .utf8)
        chmod(fake, 0o755)
        let lifectl = DaemonHarness.products.appendingPathComponent("lifectl").path
        let script = "mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal && touch /run/systemd/journal/socket"
            + " && exec \"$@\""
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = directory.url.path + ":/usr/bin:/bin"
        let result = try ServiceFilesTests.Tool.run("/usr/bin/unshare", ["--mount", "--propagation", "private", "--", "/bin/sh", "-c", script,
                                                       "sh", lifectl] + arguments, environment: environment)
        #expect(result.status == 0, "\(result)")
        return result.stdout.split(separator: "\n").map(String.init)
    }

    @Test("with an app, the daemon's records about it and its own output (its stream's SYSLOG_IDENTIFIER=)",
          .enabled(if: geteuid() == 0, "a private mount namespace needs root"))
    func logsOfAnAppIncludeItsOwnOutput() throws {
        #expect(try journalctlArguments(["logs", "notes", "-f"])
                == ["-u", "lifecycled", "LIFECYCLE_APP=notes", "+", "SYSLOG_IDENTIFIER=notes", "-f"])
        #expect(try journalctlArguments(["logs"]) == ["-u", "lifecycled"], "without an app, the whole unit")
    }
}
