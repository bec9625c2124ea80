import Foundation
import Glibc

/// A real PulseAudio server for the audio tests: a null sink and a native-protocol socket in a directory of its
/// own, run as `nobody` (PulseAudio refuses to run as root outside `--system` mode, which does not load modules
/// from a file), with anonymous access so that the root daemon and the apps' `pacat` can connect.
final class PulseServer: SoundServerHarness {
    let directory: String
    var socket: String { directory + "/native" }
    /// libpulse's server string.
    var address: String { "unix:" + socket }

    init() throws {
        directory = "/tmp/lifecycled-pulse-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        guard mkdir(directory, 0o755) == 0, mkdir(directory + "/home", 0o755) == 0 else {
            throw HarnessError("cannot create \(directory): errno \(errno)")
        }
        let script = """
            load-module module-null-sink sink_name=null
            load-module module-native-protocol-unix socket=\(socket) auth-anonymous=1
            set-default-sink null

            """
        try script.write(toFile: directory + "/test.pa", atomically: true, encoding: .utf8)
        guard let nobody = getpwnam("nobody") else { throw HarnessError("no user nobody") }
        for path in [directory, directory + "/home"] { chown(path, nobody.pointee.pw_uid, nobody.pointee.pw_gid) }
    }

    /// Starts the server and waits until it accepts connections. A missing `pulseaudio` fails the test:
    /// `make test-deps` installs it. The server daemonizes (its parent returns once it is ready), so that the test
    /// process holds no child running as another user; it is stopped through its pid file.
    func start() throws {
        guard let binary = ["/usr/bin/pulseaudio", "/bin/pulseaudio"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw HarnessError("pulseaudio is not installed (make test-deps installs it)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        // Another user may not enter the test's working directory (a checkout under a private directory).
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", binary,
                             "--daemonize=yes", "--exit-idle-time=-1", "-n", "-F", directory + "/test.pa",
                             "--use-pid-file=yes", "--log-target=file:" + directory + "/log"]
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = directory + "/home"
        environment["XDG_RUNTIME_DIR"] = directory
        environment.removeValue(forKey: "PULSE_SERVER")
        environment.removeValue(forKey: "DISPLAY")
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw HarnessError("pulseaudio did not start (status \(process.terminationStatus)): "
                               + ((try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? ""))
        }
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if FileManager.default.fileExists(atPath: socket), pid != nil { return }
            usleep(50_000)
        }
        throw HarnessError("pulseaudio did not create \(socket)")
    }

    /// The server's pid, from the pid file it writes in its runtime directory.
    var pid: pid_t? {
        (try? String(contentsOfFile: directory + "/pulse/pid", encoding: .utf8))
            .flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    func sinkInputs() throws -> Int {
        try HeadlessSway.run("/usr/bin/pactl", ["--server=" + address, "list", "short", "sink-inputs"])
            .split(separator: "\n").count
    }

    func stop() {
        guard let pid else { return }
        kill(pid, SIGTERM)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, kill(pid, 0) == 0 { usleep(50_000) }
        if kill(pid, 0) == 0 { kill(pid, SIGKILL) }
        try? FileManager.default.removeItem(atPath: directory + "/pulse/pid")
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

extension Kernel {
    /// The children of `pid` (its main thread's), from /proc.
    static func children(_ pid: pid_t) -> [pid_t] {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8) else { return [] }
        return text.split(separator: " ").compactMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// The program name of `pid` (/proc/PID/comm).
    static func command(_ pid: pid_t) -> String? {
        (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
