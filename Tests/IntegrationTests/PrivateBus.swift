import Foundation
import Glibc

/// A real, private `dbus-daemon` (Debian's dbus-daemon) on a socket of its own, with a config file written here
/// that lets anyone own names and send anything: the bus's policy is not what the D-Bus tests test, the daemon's
/// own authorization is. Stopped, and its files removed, in `stop()`.
final class PrivateBus {
    let directory: URL
    let socketPath: String
    private(set) var address = ""
    private var process: Process?
    /// The bus daemon's pid, for the tests that stop and continue it.
    var pid: pid_t { process?.processIdentifier ?? 0 }

    init(directory: URL) throws {
        self.directory = directory
        socketPath = directory.appendingPathComponent("bus.sock").path
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Reachable by nobody, for the tests that call as another user.
        chmod(directory.path, 0o755)
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>session</type>
              <listen>unix:path=\(socketPath)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
                <allow user="*"/>
              </policy>
            </busconfig>
            """
        try config.write(to: directory.appendingPathComponent("bus.conf"), atomically: true, encoding: .utf8)
        try start()
    }

    /// Starts the bus (again, on the same socket) and waits for the address it prints.
    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(directory.appendingPathComponent("bus.conf").path)", "--nofork", "--print-address"]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        self.process = process
        var printed = Data()
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = out.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw HarnessError("dbus-daemon exited without printing its address") }
            printed += chunk
        }
        address = String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `kill -9` the bus: every connection is cut at once.
    func kill() {
        guard let process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        unlink(socketPath)
    }

    func stop() {
        kill()
        try? FileManager.default.removeItem(at: directory)
    }

    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// `busctl --address=… ARGUMENTS` (or `gdbus` when `program` says so), as `uid` when given (setpriv).
    @discardableResult
    func run(_ program: String, _ arguments: [String], asUser uid: UInt32? = nil) throws -> Output {
        let process = Process()
        let command = program == "busctl" ? ["/usr/bin/busctl", "--address=\(address)"] + arguments
                                          : ["/usr/bin/gdbus"] + arguments.map { $0 == "ADDRESS" ? address : $0 }
        if let uid {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            // Another user may not enter the test's working directory (a checkout under a private directory).
            process.currentDirectoryURL = URL(fileURLWithPath: "/")
            process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"] + command
        } else {
            process.executableURL = URL(fileURLWithPath: command[0])
            process.arguments = Array(command.dropFirst())
        }
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = "/"
        process.environment = environment
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Output(status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                      stderr: String(decoding: stderr, as: UTF8.self))
    }

    /// Stops a monitor. SIGKILL: the test runner blocks SIGTERM, and its children inherit the mask.
    static func end(_ process: Process) {
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// `gdbus monitor` on the daemon's name, its lines into a file (line-buffered through stdbuf, so that a
    /// terminated monitor has written every signal it saw). Returns once gdbus has found the name's owner: it prints
    /// that and subscribes at once (its AddMatch is on the wire before the test's next request can be).
    func monitor(into file: URL) throws -> Process {
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/stdbuf")
        process.arguments = ["-oL", "/usr/bin/gdbus", "monitor", "--address", address, "--dest", "org.lifecycled.Lifecycle1"]
        process.standardOutput = try FileHandle(forWritingTo: file)
        process.standardError = FileHandle.nullDevice
        try process.run()
        let subscribed = DaemonHarness.poll(timeout: 30) {
            ((try? String(contentsOf: file, encoding: .utf8)) ?? "").contains("The name org.lifecycled.Lifecycle1 is owned by")
        }
        guard subscribed else {
            Self.end(process)
            throw HarnessError("gdbus monitor never found org.lifecycled.Lifecycle1's owner")
        }
        return process
    }
}
