import Foundation
import Glibc
import LifecycleModel
import LifecycleProtocol
import Testing

/// Misbehaving clients on the app socket (Tests/Fixtures/hostile_client.py writes raw bytes to its LIFECYCLE_FD):
/// each gets the answer docs/PROTOCOL.md section 14 gives it, a well-behaved app beside it is served as before,
/// and the daemon's memory and descriptors stay bounded (read from /proc, not from the daemon).
@Suite("hostile clients on the app socket", .serialized)
struct HostileClientTests {
    static let fixture = DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/hostile_client.py").path
    let python = DaemonHarness.pythonClient

    func hostile(_ mode: String, _ extra: String = "", lifecycle: String = "BackgroundTimeSec=infinity") -> String {
        "[App]\nExec=\(Self.fixture) \(mode) \(extra)\n\n[Lifecycle]\n\(lifecycle)\n"
    }

    var good: String { "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n" }

    /// A daemon with the hostile app `bad` and the well-behaved `good` (active first), then `body`, then proof that
    /// `good` is still served: it goes to the background and comes back, with every message.
    func withHostile(_ bad: String, daemonConfig: String? = nil, _ body: (DaemonHarness) throws -> Void) throws {
        try DaemonHarness.running(["bad": bad, "good": good], daemonConfig: daemonConfig) { daemon in
            try daemon.control("focus", "good")
            try body(daemon)
            let before = daemon.types("good").count
            try daemon.control("background", "good")
            try daemon.control("focus", "good")
            #expect(Array(daemon.types("good").dropFirst(before))
                    == ["willResignActive", "didEnterBackground", "willEnterForeground", "didBecomeActive"])
            #expect(try daemon.status("good").protocol == "lifecycle")
        }
    }

    /// Launches `bad`, waits for the daemon's error to it (its message starts with `expected`) and for the
    /// connection to end; the app is then silent and still managed: suspend stops it (state T), resume continues it.
    func expectDisconnected(_ daemon: DaemonHarness, error expected: String) throws {
        try daemon.control("launch", "bad")
        try daemon.waitUntil("the daemon answers with an error and hangs up") {
            daemon.types("bad").contains("error") && daemon.types("bad").contains { $0 == "eof" || $0 == "reset" }
        }
        let error = try #require(daemon.records("bad").first { $0.type == "error" })
        #expect(error.message?.hasPrefix(expected) == true, "got \(error.message ?? "no message")")
        try daemon.waitUntil("bad is silent") { try daemon.status("bad").protocol == "silent" }
        #expect(daemon.log.contains("bad: protocol error: \(expected)"))
        try expectManagedWithoutMessages(daemon)
    }

    func expectManagedWithoutMessages(_ daemon: DaemonHarness) throws {
        let pid = try #require(try daemon.status("bad").pid)
        try daemon.control("suspend", "bad")
        try daemon.waitUntil("bad is stopped") { Kernel.state(pid) == "T" }
        try daemon.control("resume", "bad")
        try daemon.waitUntil("bad runs again") { Kernel.state(pid) != "T" }
        #expect(try daemon.status("bad").pid == pid, "not killed: managed without messages")
    }

    // MARK: Protocol errors: one error message, then the connection is closed

    @Test("a line over 65536 bytes without its newline: error 'line longer than 65536 bytes', disconnected")
    func oversizedPartialLineIsRefused() throws {
        try withHostile(hostile("oversized")) { daemon in
            try expectDisconnected(daemon, error: "line longer than 65536 bytes")
        }
    }

    @Test("a complete line over 65536 bytes: the same error")
    func oversizedCompleteLineIsRefused() throws {
        try withHostile(hostile("oversized-line")) { daemon in
            try expectDisconnected(daemon, error: "line longer than 65536 bytes")
        }
    }

    @Test("bytes that are not UTF-8: error 'not a JSON object', disconnected")
    func invalidUTF8IsRefused() throws {
        try withHostile(hostile("invalid-utf8")) { daemon in
            try daemon.control("launch", "bad")
            try daemon.waitUntil("the daemon hangs up") { daemon.types("bad").contains { $0 == "eof" || $0 == "reset" } }
            let error = try #require(daemon.records("bad").first { $0.type == "error" })
            #expect(error.message?.hasPrefix("not a JSON object: ") == true, "\(error.message ?? "")")
            try daemon.waitUntil("bad is silent") { try daemon.status("bad").protocol == "silent" }
            try expectManagedWithoutMessages(daemon)
        }
    }

    @Test("a line that is not JSON: error 'not a JSON object: …', disconnected")
    func invalidJSONIsRefused() throws {
        try withHostile(hostile("invalid-json")) { daemon in
            try expectDisconnected(daemon, error: #"not a JSON object: '{"type":"ack",'"#)
        }
    }

    @Test("JSON that is not an object, or an object without type: an error each, disconnected")
    func nonObjectsAreRefused() throws {
        try withHostile(hostile("not-object")) { daemon in
            try daemon.control("launch", "bad")
            try daemon.waitUntil("the daemon hangs up") { daemon.types("bad").contains { $0 == "eof" || $0 == "reset" } }
            let error = try #require(daemon.records("bad").first { $0.type == "error" })
            #expect(error.message?.isEmpty == false)
            try expectManagedWithoutMessages(daemon)
        }
        try withHostile(hostile("no-type")) { daemon in
            try expectDisconnected(daemon, error: "missing field 'type'")
        }
    }

    @Test("an unknown message type: error naming it and the known ones, disconnected")
    func unknownTypeIsRefused() throws {
        try withHostile(hostile("unknown-type")) { daemon in
            try expectDisconnected(daemon, error: "unknown message type 'selfDestruct' (expected one of: hello, ack, observe, post")
        }
    }

    @Test("a field of the wrong type: error 'bad field', disconnected")
    func badFieldIsRefused() throws {
        try withHostile(hostile("bad-field")) { daemon in
            try daemon.control("launch", "bad")
            try daemon.waitUntil("the daemon hangs up") { daemon.types("bad").contains { $0 == "eof" || $0 == "reset" } }
            let error = try #require(daemon.records("bad").first { $0.type == "error" })
            #expect(error.message?.hasPrefix("bad field 'id'") == true, "\(error.message ?? "")")
        }
    }

    @Test("a second hello: error 'second hello', disconnected")
    func secondHelloIsRefused() throws {
        try withHostile(hostile("second-hello")) { daemon in
            try expectDisconnected(daemon, error: "second hello")
        }
    }

    @Test("a hello for a protocol the daemon does not speak: error, disconnected, never welcomed")
    func unknownProtocolVersionIsRefused() throws {
        try withHostile(hostile("bad-version")) { daemon in
            try expectDisconnected(daemon, error: "protocol 2 is not spoken here (this daemon speaks 1)")
            #expect(!daemon.types("bad").contains("hello"))
        }
    }

    @Test("a message before hello: error 'message before hello', disconnected")
    func messageBeforeHelloIsRefused() throws {
        try withHostile(hostile("before-hello")) { daemon in
            try expectDisconnected(daemon, error: "message before hello")
        }
    }

    // MARK: Ignored

    @Test("acks for ids never sent, and a second ack, are ignored: the client stays connected and is served")
    func unknownAcksAreIgnored() throws {
        try withHostile(hostile("unknown-ack")) { daemon in
            try daemon.control("launch", "bad")
            try daemon.control("background", "bad")
            #expect(try daemon.status("bad").protocol == "lifecycle")
            #expect(try daemon.status("bad").deadlineMisses == 0)
            #expect(daemon.types("bad") == ["hello", "didFinishLaunching", "didEnterBackground"])
        }
    }

    @Test("a client that never says hello is managed without messages after LaunchTimeoutSec, not killed")
    func clientWithoutHelloBecomesSilent() throws {
        try withHostile(hostile("no-hello", lifecycle: "BackgroundTimeSec=infinity\nLaunchTimeoutSec=1")) { daemon in
            try daemon.control("launch", "bad")
            try daemon.waitUntil("bad is silent") { try daemon.status("bad").protocol == "silent" }
            #expect(try daemon.status("bad").state.rawValue == "inactive")
            #expect(daemon.types("bad").isEmpty, "no message is sent to a client that did not say hello")
            try expectManagedWithoutMessages(daemon)
            try daemon.control("terminate", "bad")
            #expect(try daemon.status("bad").state.rawValue == "notRunning")
        }
    }

    // MARK: Floods and clients that do not read

    @Test("a flood of messages does not starve the daemon: other apps and lifectl are served while it lasts")
    func floodDoesNotStarveOthers() throws {
        try withHostile(hostile("flood")) { daemon in
            let daemonPID = try #require(daemon.daemonPID)
            try daemon.control("launch", "bad")
            // The flood runs for as long as the app does; measure the daemon while it runs.
            let rssBefore = try ProcessMeter.residentKiB(daemonPID)
            let listingBefore = try ProcessMeter.quietDescriptors(daemonPID, daemon)
            let fdsBefore = ProcessMeter.counted(listingBefore)
            for _ in 0..<5 {
                try daemon.control("background", "good")
                try daemon.control("focus", "good")
                #expect(try daemon.list().count == 2)
            }
            #expect(try daemon.status("bad").protocol == "lifecycle", "a flood of valid lines is not an error")
            // The last lifectl's connection may still be open on the daemon's side until it reads the hang-up.
            let listingAfter = { (try? ProcessMeter.descriptors(daemonPID)) ?? [:] }
            #expect(ProcessMeter.settles(daemonPID, at: fdsBefore), "descriptors: \(ProcessMeter.difference(listingBefore, listingAfter()))")
            let rssAfter = try ProcessMeter.residentKiB(daemonPID)
            if !ProcessMeter.isSanitized(daemonPID) {
                #expect(rssAfter < rssBefore + 8 * 1024, "RSS \(rssBefore) KiB before, \(rssAfter) KiB after")
            }
            try daemon.control("terminate", "bad")
        }
    }

    @Test("a client that stops reading is dropped when its buffer is full, then managed without messages")
    func clientThatDoesNotReadIsDropped() throws {
        let config = "[NotificationTypes]\nblob=none\n"
        try withHostile(hostile("no-read", "--count 60 --size 60000"), daemonConfig: config) { daemon in
            let daemonPID = try #require(daemon.daemonPID)
            try daemon.control("launch", "bad")
            try daemon.waitUntil("bad is dropped") { try daemon.status("bad").protocol == "silent" }
            #expect(daemon.log.contains("does not read"))
            try expectManagedWithoutMessages(daemon)
            try daemon.control("terminate", "bad")
            if !ProcessMeter.isSanitized(daemonPID) { #expect(try ProcessMeter.residentKiB(daemonPID) < 64 * 1024) }
        }
    }

    // MARK: Clients that will not end

    @Test("a client that ignores SIGTERM is killed with SIGKILL after TimeoutStopSec, with its children; also when suspended")
    func clientIgnoringSIGTERMIsKilled() throws {
        let stubborn = "[App]\nExec=\(python) --ignore-sigterm --children 2\n\n[Lifecycle]\nBackgroundTimeSec=infinity\nTimeoutStopSec=1\n"
        try withHostile(stubborn) { daemon in
            for suspended in [false, true] {
                try daemon.control("launch", "bad", "--background")
                let pid = try #require(try daemon.status("bad").pid)
                try daemon.waitUntil("its children run") { Kernel.group(pid).count == 3 }
                let group = Kernel.group(pid)
                if suspended {
                    try daemon.control("suspend", "bad")
                    try daemon.waitUntil("bad is stopped") { group.allSatisfy { Kernel.state($0) == "T" } }
                }
                try daemon.control("terminate", "bad")
                #expect(try daemon.status("bad").state.rawValue == "notRunning")
                try daemon.waitUntil("every process of bad is gone") {
                    group.allSatisfy { Kernel.state($0) == nil || Kernel.state($0) == "Z" }
                }
                #expect(daemon.log.contains("bad: did not exit within 1s of SIGTERM; sending SIGKILL"))
            }
        }
    }

    // MARK: The app socket (RUNTIME_DIR/app.sock): strangers that connect and say nothing

    @Test("app.sock: idle connections are bounded (64 waiting at once) and closed after the hello timeout")
    func appSocketIdleStrangersAreBounded() throws {
        try DaemonHarness.running(["good": good]) { daemon in
            let daemonPID = try #require(daemon.daemonPID)
            try daemon.control("focus", "good")
            let listingBefore = try ProcessMeter.quietDescriptors(daemonPID, daemon)
            let fdsBefore = ProcessMeter.counted(listingBefore)
            let socket = daemon.runtimeDirectory.appendingPathComponent("app.sock").path
            // 80 connections from root (held by the global limit alone; another user's are capped at 8 sooner:
            // ExternalAppTests) that never speak: how many the daemon closed at once, and how many
            // were still open 7 s later (past its 5 s hello timeout).
            let script = """
                import json, select, socket, sys, time
                conns = []
                for _ in range(80):
                    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); conns.append(s)
                def ended(s):
                    # The daemon's last words (an error line, or nothing), once the connection is over; None if open.
                    data = b""
                    while select.select([s], [], [], 0)[0]:
                        chunk = s.recv(65536)
                        if not chunk:
                            return data
                        data += chunk
                    return None
                time.sleep(1)
                at_once = [s for s in conns if ended(s) is not None]
                time.sleep(6)
                rest = [ended(s) for s in conns if s not in at_once]
                print(json.dumps({"atOnce": len(at_once), "stillOpen": rest.count(None),
                                  "timedOut": sum(1 for r in rest if r is not None and b"no hello within" in r)}))
                """
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = ["-c", script, socket]
            let out = Pipe()
            process.standardOutput = out
            try process.run()
            let line = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            struct Result: Decodable { var atOnce: Int; var stillOpen: Int; var timedOut: Int }
            let result = try JSONDecoder().decode(Result.self, from: Data(line.utf8))
            #expect(result.atOnce == 16, "connections past the 64 waiting are closed at once: \(line)")
            #expect(result.stillOpen == 0 && result.timedOut == 64, "the waiting ones get an error after the hello timeout: \(line)")
            #expect(ProcessMeter.settles(daemonPID, at: fdsBefore),
                    "descriptors: \(ProcessMeter.difference(listingBefore, (try? ProcessMeter.descriptors(daemonPID)) ?? [:]))")
            #expect(try daemon.status("good").protocol == "lifecycle")
        }
    }

    // MARK: Memory and descriptors over many hostile clients

    @Test("memory and descriptors stay bounded over rounds of every kind of hostile client")
    func resourcesStayBoundedAcrossHostileClients() throws {
        let modes = ["oversized", "invalid-json", "unknown-type", "second-hello", "before-hello", "no-read"]
        var apps: [String: String] = ["good": good]
        for mode in modes {
            apps[mode] = hostile(mode, mode == "no-read" ? "--count 40 --size 60000" : "")
        }
        try DaemonHarness.running(apps, daemonConfig: "[NotificationTypes]\nblob=none\n") { daemon in
            let daemonPID = try #require(daemon.daemonPID)
            try daemon.control("focus", "good")
            func round() throws {
                for mode in modes {
                    try daemon.control("launch", mode)
                    try daemon.waitUntil("\(mode) is silent") { try daemon.status(mode).protocol == "silent" }
                    try daemon.control("terminate", mode)
                }
            }
            try round()
            try round()
            let rss = try ProcessMeter.residentKiB(daemonPID)
            let listing = try ProcessMeter.quietDescriptors(daemonPID, daemon)
            let fds = ProcessMeter.counted(listing)
            for _ in 0..<4 { try round() }
            let rssAfter = try ProcessMeter.residentKiB(daemonPID)
            let listingAfter = { (try? ProcessMeter.descriptors(daemonPID)) ?? [:] }
            #expect(ProcessMeter.settles(daemonPID, at: fds), "no descriptor leaks: \(ProcessMeter.difference(listing, listingAfter()))")
            // Four more rounds drop four 1 MiB buffers of the no-read client; none of it may stay.
            if !ProcessMeter.isSanitized(daemonPID) {
                #expect(rssAfter < rss + 2 * 1024, "RSS \(rss) KiB after two rounds, \(rssAfter) KiB after six")
            }
        }
    }
}

/// What the kernel says about a process's resources (/proc/PID/status and /proc/PID/fd).
enum ProcessMeter {
    static func residentKiB(_ pid: pid_t) throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") else {
            throw HarnessError("no VmRSS in /proc/\(pid)/status")
        }
        return kib
    }

    static func descriptors(_ pid: pid_t) throws -> [Int32: String] {
        var result: [Int32: String] = [:]
        for entry in try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd") {
            guard let fd = Int32(entry) else { continue }
            result[fd] = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(entry)")) ?? "?"
        }
        return result
    }

    static func descriptorCount(_ pid: pid_t) throws -> Int { counted(try descriptors(pid)) }

    /// The descriptors a leak would show in: all but the state files (`RUNTIME_DIR/state/NAME.json` and `.json.tmp`),
    /// which the daemon keeps open between saves of a recently saved app, two per app and a bounded number of apps,
    /// and opens at an app's first two saves, whenever those come.
    static func counted(_ listing: [Int32: String]) -> Int {
        listing.values.filter { target in
            !(target.contains("/state/") && (target.hasSuffix(".json") || target.hasSuffix(".json.tmp")))
        }.count
    }

    /// Whether the process's descriptor count comes to `count` within 10 s: a connection a client has closed is
    /// still counted until the daemon has read the hang-up, which a busy (or sanitized) daemon does a little later.
    static func settles(_ pid: pid_t, at count: Int) -> Bool {
        for _ in 0..<500 {
            if (try? descriptorCount(pid)) == count { return true }
            usleep(20_000)
        }
        return false
    }

    /// The descriptors once no lifectl connection is open on the daemon's side: lifectl has hung up when the
    /// harness gets its answer, but the daemon closes its end only when it reads the hang-up, a little later. A
    /// baseline taken before that holds a connection that then goes away. Accepted connections carry the
    /// listener's path in /proc/net/unix (state 03, connected), which tells them from the daemon's other sockets.
    static func quietDescriptors(_ pid: pid_t, _ daemon: DaemonHarness) throws -> [Int32: String] {
        let control = daemon.runtimeDirectory.appendingPathComponent("control.sock").path
        for _ in 0..<500 {
            let listing = try descriptors(pid)
            let inodes = Set(listing.values.filter { $0.hasPrefix("socket:[") }.map { String($0.dropFirst(8).dropLast()) })
            let table = (try? String(contentsOfFile: "/proc/net/unix", encoding: .utf8)) ?? ""
            let open = table.split(separator: "\n").dropFirst().contains { line in
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                return fields.count >= 8 && fields[5] == "03" && fields[7] == control && inodes.contains(String(fields[6]))
            }
            if !open { return listing }
            usleep(20_000)
        }
        throw HarnessError("a control connection stayed open on the daemon's side for 10 s")
    }

    /// What differs between two listings of a process's descriptors, for a failure's message.
    static func difference(_ before: [Int32: String], _ after: [Int32: String]) -> String {
        let gone = before.filter { after[$0.key] != $0.value }.sorted { $0.key < $1.key }.map { "-\($0.key) \($0.value)" }
        let new = after.filter { before[$0.key] != $0.value }.sorted { $0.key < $1.key }.map { "+\($0.key) \($0.value)" }
        // What the kernel says of the sockets among them (peer, path), to tell a client's connection from the rest.
        let inodes = Set((gone + new).compactMap { entry in
            entry.range(of: "socket:[").map { String(entry[$0.upperBound...].dropLast()) }
        })
        let table = ((try? String(contentsOfFile: "/proc/net/unix", encoding: .utf8)) ?? "").split(separator: "\n")
            .filter { line in inodes.contains { line.contains(" \($0)") } }
        return (gone + new).joined(separator: ", ") + (table.isEmpty ? "" : "; /proc/net/unix: " + table.joined(separator: " | "))
    }

    /// Whether the process runs under AddressSanitizer or ThreadSanitizer (`make check-sanitizers`): they reserve
    /// terabytes of address space for their shadow memory, and their quarantine of freed memory makes RSS say
    /// nothing about leaks, so the RSS checks are skipped for such a daemon (the descriptor checks still run).
    static func isSanitized(_ pid: pid_t) -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmSize:") }),
              let kib = Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first ?? "") else { return false }
        return kib > 1 << 30  // over 1 TiB
    }
}
