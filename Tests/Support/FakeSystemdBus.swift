import Foundation
import Glibc

/// `Tests/Fixtures/fake_systemd_bus.c`, compiled with `cc` and listening on a socket, both in its own
/// directory. `mode` is what it answers (see the fixture); it is read again for each connection. `socket`: where it
/// listens instead (its directory must let `user` make the socket); `user`: the uid it runs as (through setpriv)
/// instead of the test's, as a user's manager does.
public final class FakeSystemdBus {
    public let directory: URL
    public let socket: String
    public let recordFile: URL
    public let modeFile: URL
    private let process: Process
    /// The repository, from this file's place in it (Tests/Support/).
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    public let variable = "LIFECYCLED_SYSTEMD_BUS"
    public var address: String { "unix:path=\(socket)" }

    /// Its pid, as the kernel reports it to a peer (setpriv execs the fake in place).
    public var pid: pid_t { process.processIdentifier }

    public init(mode: String, socket listening: String? = nil, user: uid_t? = nil) throws {
        directory = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("fake-systemd-bus-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Built into its own directory, which stop() removes: nothing is left behind in /tmp.
        let binary = directory.appendingPathComponent("fake_systemd_bus").path
        let source = Self.repository.appendingPathComponent("Tests/Fixtures/fake_systemd_bus.c").path
        let build = Process()
        build.executableURL = URL(fileURLWithPath: "/bin/sh")
        build.arguments = ["-c", "cc -o \"$1\" \"$2\" $(pkg-config --cflags --libs libsystemd)", "sh", binary, source]
        let err = Pipe()
        build.standardError = err
        try build.run()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        build.waitUntilExit()
        guard build.terminationStatus == 0 else {
            try? FileManager.default.removeItem(at: directory)
            throw FakeSystemdBusError("cc fake_systemd_bus.c failed: \(message)")
        }
        socket = listening ?? directory.appendingPathComponent("bus").path
        recordFile = directory.appendingPathComponent("requests")
        modeFile = directory.appendingPathComponent("mode")
        try mode.write(to: modeFile, atomically: true, encoding: .utf8)
        process = Process()
        if let user {
            // Its record is written in its own directory, as the user.
            guard chown(directory.path, user, gid_t(user)) == 0 else {
                try? FileManager.default.removeItem(at: directory)
                throw FakeSystemdBusError("chown \(directory.path): errno \(errno)")
            }
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=\(user)", "--regid=\(user)", "--clear-groups", binary, socket, recordFile.path, modeFile.path]
        } else {
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = [socket, recordFile.path, modeFile.path]
        }
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while !requests.contains("listening") && process.isRunning && Date() < deadline { usleep(10_000) }
        guard requests.contains("listening") else {
            stop()
            throw FakeSystemdBusError("fake_systemd_bus did not start listening")
        }
    }

    /// One line per question the daemon asked ("GetUnitByPID PID", "Get PATH INTERFACE PROPERTY").
    public var requests: [String] {
        ((try? String(contentsOf: recordFile, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// SIGKILL (the test runner's threads block SIGTERM, and children inherit the mask); the socket goes with
    /// the directory, so a daemon asking afterwards finds no bus. Safe to call twice.
    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: directory)
    }
}

public struct FakeSystemdBusError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
