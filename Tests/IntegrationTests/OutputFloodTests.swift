import Foundation
import Glibc
import LifecycleModel
import Testing

/// Apps' output without a journal: the daemon reads it from a pipe and writes it to its stderr. An app that floods
/// its output must not hold the loop or fill the log, and what is written keeps every byte the app wrote.
@Suite("apps' output on the daemon's stderr", .serialized)
struct OutputFloodTests {
    let python = DaemonHarness.pythonClient

    /// A Python program as an app file's `Exec=`, written beside the config so that it needs no quoting.
    func script(_ daemon: DaemonHarness, _ name: String, _ code: String) throws -> String {
        let path = daemon.root.appendingPathComponent("\(name).py").path
        try code.write(toFile: path, atomically: true, encoding: .utf8)
        return "/usr/bin/python3 \(path)"
    }

    /// The lines of the log that are `app`'s own output, without the prefix: the daemon's own lines about the app
    /// have the same prefix, and those of these tests' apps never have a space.
    func output(_ daemon: DaemonHarness, _ app: String) -> [Substring] {
        daemon.log.split(separator: "\n", omittingEmptySubsequences: false)
            .filter { $0.hasPrefix("\(app): ") }
            .map { $0.dropFirst(app.count + 2) }
            .filter { !$0.contains(" ") }
    }

    /// The lines `app`'s reports say were dropped.
    func dropped(_ daemon: DaemonHarness, _ app: String) -> Int {
        let pattern = try! Regex("\(app): ([0-9]+) lines? of output dropped")
        return daemon.log.matches(of: pattern).compactMap { Int($0.output[1].substring ?? "") }.reduce(0, +)
    }

    @Test("`yes` and a 15 MB burst beside a client: lifectl answers, focus switches complete, SIGTERM is acted on, and the log holds a count of what was dropped")
    func aFloodingAppNeitherHoldsTheLoopNorFillsTheLog() throws {
        let daemon = try DaemonHarness()
        defer { daemon.stop() }
        let burst = try script(daemon, "burst", """
            import sys
            sys.stdout.write(("b" * 99 + "\\n") * 150000)
            sys.stdout.flush()
            """)
        try daemon.app("yes", "[App]\nExec=/usr/bin/yes\nProtocol=none\nAutoLaunch=background\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
        try daemon.app("burst", "[App]\nExec=\(burst)\nProtocol=none\nAutoLaunch=background\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
        try daemon.app("good", "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
        try daemon.app("other", "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
        try daemon.start()
        try daemon.waitUntil("yes floods") { output(daemon, "yes").count > 100 }
        // At the burst's end of file, what it wrote is all in the log or in the count.
        try daemon.waitUntil("the burst is over", timeout: 120) { dropped(daemon, "burst") > 0 }

        // The timeouts bound a hung test: before the budget, the loop never came back from the flood.
        for _ in 0..<5 {
            try daemon.control("focus", "good", "--timeout", "30")
            try daemon.control("focus", "other", "--timeout", "30")
            #expect(try daemon.lifectl("status", "--timeout", "30").status == 0)
        }
        #expect(try daemon.status("other").state == .active)
        #expect(try daemon.status("good").state == .background)
        #expect(try daemon.status("yes").state == .background, "the flooding app is not punished for it")

        let pid = try #require(daemon.daemonPID)
        kill(pid, SIGTERM)
        try daemon.waitUntil("the daemon exits on SIGTERM", timeout: 60) { !daemon.isDaemonRunning }

        // Each interval writes at most its burst, and every line that was not written is counted.
        let size = (try? FileManager.default.attributesOfItem(atPath: daemon.logFile.path)[.size] as? Int) ?? 0
        #expect(size < 16 << 20, "the log is \(size) bytes")
        // Whether `yes` loses lines depends on how fast the loop reads it against the burst: the burst's own count,
        // below, is exact either way.
        let burstLines = output(daemon, "burst")
        #expect(burstLines.allSatisfy { $0 == String(repeating: "b", count: 99) })
        #expect(burstLines.count + dropped(daemon, "burst") == 150000,
                "\(burstLines.count) written, \(dropped(daemon, "burst")) dropped")
    }

    @Test("lines longer than the 4096-byte buffer reach the log whole, cut in pieces, no byte lost")
    func longLinesKeepEveryByte() throws {
        let daemon = try DaemonHarness()
        defer { daemon.stop() }
        // Each line is a run of the alphabet: a lost, doubled or moved byte changes the pieces.
        let long = try script(daemon, "long", """
            import sys, time, string
            def line(n):
                return "".join(string.ascii_letters[i % 52] for i in range(n))
            for n in (4095, 4096, 4097, 8192, 8193, 20000, 3):
                sys.stdout.write(line(n) + "\\n")
                sys.stdout.flush()
                time.sleep(0.05)
            sys.stdout.write(line(5000))
            sys.stdout.flush()
            """)
        try daemon.app("long", "[App]\nExec=\(long)\nProtocol=none\nAutoLaunch=background\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
        try daemon.start()
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        func line(_ count: Int) -> String { String((0..<count).map { letters[$0 % 52] }) }
        func pieces(_ text: String) -> [String] {
            let bytes = Array(text.utf8)
            return stride(from: 0, to: bytes.count, by: 4096).map { String(decoding: bytes[$0..<min(bytes.count, $0 + 4096)], as: UTF8.self) }
        }
        let expected = [4095, 4096, 4097, 8192, 8193, 20000, 3, 5000].flatMap { pieces(line($0)) }
        try daemon.waitUntil("the app's output is in the log") { output(daemon, "long").count >= expected.count }
        let logged = output(daemon, "long").map(String.init)
        #expect(logged.map(\.utf8.count) == expected.map(\.utf8.count))
        #expect(logged == expected, "a piece differs")
    }
}
