import Foundation
import Glibc
import LifecycleModel
import LifecycleProtocol
import Testing

/// The control socket's access rules with real users (setpriv drops lifectl to `nobody`): queries for anyone,
/// changes for root, the daemon's user and `[Control] Group=`, decided from SO_PEERCRED; the modes of the socket
/// and its directory; a cap on one user's connections. Root is needed to become another user.
@Suite("control socket security", .serialized, .enabled(if: geteuid() == 0, "becoming another user needs root"))
struct SecurityTests {
    static let nobody: uid_t = 65534
    static let nogroup: gid_t = 65534
    static let hog = DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/control_hog.py").path

    var app: String { "[App]\nExec=\(DaemonHarness.pythonClient)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n" }

    /// lifectl as `uid` with effective and real gid `gid` and no supplementary groups.
    func lifectl(_ daemon: DaemonHarness, uid: uid_t = nobody, gid: gid_t = nogroup, _ arguments: String...) throws -> DaemonHarness.Output {
        try lifectl(daemon, uid: uid, gid: gid, arguments)
    }

    func lifectl(_ daemon: DaemonHarness, uid: uid_t = nobody, gid: gid_t = nogroup, _ arguments: [String]) throws -> DaemonHarness.Output {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        // Another user may not enter the test's working directory (a checkout under a private directory).
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        process.arguments = ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups",
                             DaemonHarness.products.appendingPathComponent("lifectl").path] + arguments
        process.environment = daemon.environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return DaemonHarness.Output(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                                    stderr: String(decoding: stderr, as: UTF8.self))
    }

    @Test("nobody may list, status and scenes; every changing verb is refused with 'permission denied' and exit 1")
    func unprivilegedUserQueriesButCannotChange() throws {
        try DaemonHarness.running(["a": app]) { daemon in
            try daemon.control("focus", "a")
            for query in [["list"], ["status"], ["status", "a"], ["scenes"], ["list", "--json"]] {
                let output = try lifectl(daemon, query)
                #expect(output.status == 0, "lifectl \(query.joined(separator: " ")): \(output.stderr)")
            }
            #expect(try lifectl(daemon, ["list"]).stdout.contains("active"))
            let changing: [[String]] = [["focus", "a"], ["launch", "a"], ["deactivate", "a"], ["background", "a"],
                                        ["suspend", "a"], ["resume", "a"], ["terminate", "a"],
                                        ["post", "significantTimeChange"], ["simulate-memory-pressure"]]
            for verb in changing {
                let output = try lifectl(daemon, verb)
                #expect(output.status == 1, "lifectl \(verb.joined(separator: " ")) as nobody: \(output.status)")
                #expect(output.stderr.contains("permission denied: \(verb[0]) is for root"), "\(output.stderr)")
                #expect(output.stderr.contains("you are uid 65534"))
            }
            #expect(try daemon.status("a").state.rawValue == "active", "nothing changed")
            #expect(daemon.log.contains("Refused focus a from uid 65534 gid 65534"))
        }
    }

    @Test("a process whose gid is [Control] Group= may change states; another gid of the same user may not")
    func peerGroupIsAllowed() throws {
        try DaemonHarness.running(["a": app], daemonConfig: "[Control]\nGroup=daemon\n") { daemon in
            let refused = try lifectl(daemon, uid: Self.nobody, gid: Self.nogroup, "focus", "a")
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("members of group 'daemon'"), "the refusal names the group: \(refused.stderr)")
            #expect(try daemon.status("a").state.rawValue == "notRunning")

            let allowed = try lifectl(daemon, uid: Self.nobody, gid: 1, "focus", "a")
            #expect(allowed.status == 0, "\(allowed.stderr)")
            #expect(try daemon.status("a").state.rawValue == "active")
            #expect(daemon.log.contains("Allowed focus a for uid 65534"))
        }
    }

    @Test("a member of [Control] Group= by the group database (getgrouplist) may change states, whatever its gid")
    func groupDatabaseMemberIsAllowed() throws {
        // The daemon runs in a private mount namespace where /etc/group names nobody in a group of its own;
        // the host's group database is not touched. lifectl runs outside it, with no supplementary groups.
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let hostGroups = try String(contentsOfFile: "/etc/group", encoding: .utf8)
        let used = Set(hostGroups.split(separator: "\n").compactMap { UInt32($0.split(separator: ":", omittingEmptySubsequences: false).dropFirst(2).first ?? "") })
        let gid = try #require((4200..<4300).first { !used.contains($0) })
        let groupFile = harness.root.appendingPathComponent("group")
        try (hostGroups + (hostGroups.hasSuffix("\n") ? "" : "\n") + "lifectl-test:x:\(gid):nobody\n")
            .write(to: groupFile, atomically: true, encoding: .utf8)
        chmod(groupFile.path, 0o644)
        try harness.app("a", app)
        try harness.daemonConfig("[Control]\nGroup=lifectl-test\n")
        try harness.start(wrapper: ["/usr/bin/unshare", "--mount", "--propagation", "private", "--",
                                    "/bin/sh", "-c", "mount --bind \"$0\" /etc/group && exec \"$@\"", groupFile.path])
        let allowed = try lifectl(harness, uid: Self.nobody, gid: Self.nogroup, "focus", "a")
        #expect(allowed.status == 0, "\(allowed.stderr)\n\(harness.log)")
        #expect(try harness.status("a").state.rawValue == "active")
        #expect(harness.log.contains("Allowed focus a for uid 65534 (pid"))
        #expect(harness.log.contains("member of group 'lifectl-test'"))

        // The same group by number.
        try harness.daemonConfig("[Control]\nGroup=\(gid)\n")
        harness.reload()
        try harness.waitUntil("the reload is done") { harness.log.contains("Reloaded the configuration") }
        #expect(try lifectl(harness, uid: Self.nobody, gid: Self.nogroup, "background", "a").status == 0)
        #expect(try harness.status("a").state.rawValue == "background")
    }

    @Test("a [Control] Group= that does not exist admits nobody and is logged")
    func missingGroupAdmitsNobody() throws {
        try DaemonHarness.running(["a": app], daemonConfig: "[Control]\nGroup=no-such-group-here\n") { daemon in
            let refused = try lifectl(daemon, "focus", "a")
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("permission denied"))
            #expect(daemon.log.contains("Failed to look up group 'no-such-group-here'"))
            try daemon.control("focus", "a")  // root still may
        }
    }

    @Test("control.sock is a socket of mode 0666 owned by the daemon's user, in a directory only it can write to")
    func socketAndDirectoryModes() throws {
        try DaemonHarness.running([:]) { daemon in
            var info = stat()
            let socketPath = daemon.runtimeDirectory.appendingPathComponent("control.sock").path
            #expect(lstat(socketPath, &info) == 0)
            #expect(info.st_mode & S_IFMT == S_IFSOCK)
            #expect(info.st_mode & 0o7777 == 0o666, "mode \(String(info.st_mode & 0o7777, radix: 8))")
            #expect(info.st_uid == geteuid())
            #expect(stat(daemon.runtimeDirectory.path, &info) == 0)
            #expect(info.st_mode & 0o022 == 0, "the runtime directory is writable only by its owner: \(String(info.st_mode & 0o7777, radix: 8))")
            #expect(info.st_uid == geteuid())
        }
    }

    /// Starts the daemon directly and waits for it to exit; for start-ups that must fail.
    func runDaemonExpectingFailure(_ harness: DaemonHarness) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = DaemonHarness.products.appendingPathComponent("lifecycled")
        process.arguments = ["--config", harness.configDirectory.path]
        process.environment = harness.environment
        let err = Pipe()
        process.standardError = err
        process.standardOutput = err
        try process.run()
        let output = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }

    @Test("the daemon refuses to listen in a runtime directory others can write to, or one another user owns")
    func unsafeRuntimeDirectoryIsRefused() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try FileManager.default.createDirectory(at: harness.runtimeDirectory, withIntermediateDirectories: true)
        chmod(harness.runtimeDirectory.path, 0o777)
        var result = try runDaemonExpectingFailure(harness)
        #expect(result.status == 1)
        #expect(result.output.contains("others may write to it (mode 0777)"), "\(result.output)")
        #expect(!FileManager.default.fileExists(atPath: harness.runtimeDirectory.appendingPathComponent("control.sock").path))

        chmod(harness.runtimeDirectory.path, 0o755)
        chown(harness.runtimeDirectory.path, Self.nobody, Self.nogroup)
        result = try runDaemonExpectingFailure(harness)
        #expect(result.status == 1)
        #expect(result.output.contains("it belongs to uid 65534"), "\(result.output)")
    }

    @Test("one user holds at most 32 control connections; the next is answered with an error; root is still served")
    func connectionsPerUserAreCapped() throws {
        try DaemonHarness.running(["a": app]) { daemon in
            let daemonPID = try #require(daemon.daemonPID)
            try daemon.control("launch", "a")
            let listingBefore = try ProcessMeter.quietDescriptors(daemonPID, daemon)
            let socketPath = daemon.runtimeDirectory.appendingPathComponent("control.sock").path
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            // Another user may not enter the test's working directory (a checkout under a private directory).
            process.currentDirectoryURL = URL(fileURLWithPath: "/")
            process.arguments = ["--reuid=\(Self.nobody)", "--regid=\(Self.nogroup)", "--clear-groups",
                                 // The source goes in as -c, read here as root: the checkout may be in a directory
                                 // nobody cannot enter (a fresh clone in a mktemp -d), which the script must not need.
                                 "/usr/bin/env", "python3", "-c", try String(contentsOfFile: Self.hog, encoding: .utf8),
                                 socketPath, "40"]
            let input = Pipe(), out = Pipe()
            process.standardInput = input
            process.standardOutput = out
            try process.run()
            defer {
                try? input.fileHandleForWriting.close()
                process.waitUntilExit()
            }
            let line = try #require(String(data: out.fileHandleForReading.availableDataOrLine(), encoding: .utf8))
            struct Hog: Decodable { var open: Int; var refused: Int; var replies: [String] }
            let hog = try JSONDecoder().decode(Hog.self, from: Data(line.utf8))
            #expect(hog.open == 32 && hog.refused == 8, "\(line)")
            #expect(hog.replies.first?.contains("too many connections from uid 65534 (at most 32)") == true)
            // Root, and queries from other users, are still served while nobody holds its 32.
            try daemon.control("focus", "a")
            #expect(try daemon.lifectl("list").status == 0)
            try input.fileHandleForWriting.close()
            process.waitUntilExit()
            let listingAfter = { (try? ProcessMeter.descriptors(daemonPID)) ?? [:] }
            #expect(ProcessMeter.settles(daemonPID, at: ProcessMeter.counted(listingBefore)),
                    "the hog's connections are closed: \(ProcessMeter.difference(listingBefore, listingAfter()))")
            #expect(try lifectl(daemon, "list").status == 0, "nobody is served again")
        }
    }

    @Test("oversized and malformed control requests get an error; the daemon keeps serving")
    func malformedControlRequests() throws {
        try DaemonHarness.running(["a": app]) { daemon in
            let socketPath = daemon.runtimeDirectory.appendingPathComponent("control.sock").path
            let oversized = try RawSocket.exchange(socketPath, [UInt8](repeating: UInt8(ascii: "x"), count: 70000))
            #expect(oversized.first?.contains("malformed request: line longer than 65536 bytes") == true, "\(oversized)")
            let garbage = try RawSocket.exchange(socketPath, Array("this is not json\n{\"verb\":\"list\"}\n".utf8), lines: 2)
            #expect(garbage.first?.contains("malformed request: not a JSON object") == true, "\(garbage)")
            #expect(garbage.dropFirst().first?.contains("\"ok\":true") == true, "the connection stays after a malformed request")
            let unknown = try RawSocket.exchange(socketPath, Array("{\"verb\":\"explode\"}\n".utf8))
            #expect(unknown.first?.contains("unknown verb 'explode'") == true)
            let badUTF8 = try RawSocket.exchange(socketPath, [UInt8]("{\"verb\":\"".utf8) + [0xff, 0xfe] + [UInt8]("\"}\n".utf8))
            #expect(badUTF8.first?.contains("\"ok\":false") == true, "\(badUTF8)")
            try daemon.control("focus", "a")
        }
    }
}

extension FileHandle {
    /// Reads until a newline or end of file (Pipe has no line reader on Linux's Foundation without a RunLoop).
    func availableDataOrLine() -> Data {
        var data = Data()
        while true {
            let byte = readData(ofLength: 1)
            if byte.isEmpty || byte.first == UInt8(ascii: "\n") { return data }
            data.append(byte)
        }
    }
}

/// A raw client of a Unix stream socket: sends bytes, reads reply lines until `lines` arrived or the peer closed.
enum RawSocket {
    static func exchange(_ path: String, _ bytes: [UInt8], lines: Int = 1, timeoutMs: Int32 = 10_000) throws -> [String] {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(errno)") }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() where index < raw.count - 1 { raw[index] = byte }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw HarnessError("connect \(path): \(errno)") }
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count <= 0 { break }  // the daemon may close before taking it all (an oversized line)
            sent += count
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while received.filter({ $0 == UInt8(ascii: "\n") }).count < lines {
            var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&descriptor, 1, timeoutMs) > 0 else { break }
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            received += buffer[..<count]
        }
        return String(decoding: received, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}
