import Foundation
import Glibc

/// A real PipeWire with its PulseAudio service for the audio tests: `pipewire`, the session manager `wireplumber`
/// (which links a stream to a sink; without it every stream stays corked) and `pipewire-pulse`, in a runtime
/// directory of their own and on a private session bus (WirePlumber exits without one), with a null sink made by
/// PipeWire's config (this machine has no sound hardware). PipeWire runs as root, so no other user is involved.
///
/// Nothing here can hang a test: every child writes to a file, every wait is bounded, and `stop()` kills and
/// reaps every process with SIGKILL (the test runner blocks SIGTERM and its children inherit the mask, so a
/// WirePlumber, `dbus-daemon` or a `dbus-run-session` never sees a SIGTERM) before it removes the directory.
final class PipeWireServer: SoundServerHarness {
    let directory: String
    var runtimeDirectory: String { directory + "/run" }
    var socket: String { runtimeDirectory + "/pulse/native" }
    /// libpulse's server string.
    var address: String { "unix:" + socket }
    /// Whether WirePlumber runs: without it no stream is linked to a sink, and every stream stays corked.
    let sessionManager: Bool
    private var bus: PrivateBus?
    private var processes: [Process] = []

    init(sessionManager: Bool = true) throws {
        self.sessionManager = sessionManager
        directory = "/tmp/lifecycled-pipewire-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        for path in ["", "/run", "/home", "/config/pipewire/pipewire.conf.d", "/config/wireplumber/main.lua.d",
                     "/config/wireplumber/bluetooth.lua.d"] {
            try FileManager.default.createDirectory(atPath: directory + path, withIntermediateDirectories: true)
        }
        // The null sink is a node PipeWire makes from its own config, there from its start.
        let sink = """
            context.objects = [
                { factory = adapter
                    args = {
                        factory.name     = support.null-audio-sink
                        node.name        = "null"
                        node.description = "Null sink"
                        media.class      = "Audio/Sink"
                        audio.position   = [ FL FR ]
                    }
                }
            ]

            """
        try sink.write(toFile: directory + "/config/pipewire/pipewire.conf.d/50-null-sink.conf", atomically: true, encoding: .utf8)
        // No device monitors: there are no devices, ALSA's reserves its cards on the bus and bluez's looks for the
        // system bus. The file sorts before 90-enable-all.lua, which reads these flags.
        try "alsa_monitor.enabled = false\nv4l2_monitor.enabled = false\nlibcamera_monitor.enabled = false\n"
            .write(toFile: directory + "/config/wireplumber/main.lua.d/60-no-monitors.lua", atomically: true, encoding: .utf8)
        try "bluez_monitor.enabled = false\n"
            .write(toFile: directory + "/config/wireplumber/bluetooth.lua.d/60-no-monitors.lua", atomically: true, encoding: .utf8)
    }

    /// Starts the bus, PipeWire, WirePlumber and pipewire-pulse, and waits until the PulseAudio service names the
    /// null sink as its default: WirePlumber chose it, so it runs and links streams (without WirePlumber, until the
    /// service answers). Missing packages fail the test (`make test-deps` installs them). On failure everything
    /// started is stopped again.
    func start() throws {
        for program in ["pipewire", "wireplumber", "pipewire-pulse", "dbus-daemon", "pactl"]
        where access("/usr/bin/" + program, X_OK) != 0 {
            throw HarnessError("\(program) is not installed (make test-deps installs it)")
        }
        do {
            let bus = try PrivateBus(directory: URL(fileURLWithPath: directory + "/bus"))
            self.bus = bus
            try spawn("pipewire", bus: bus)
            // Started before PipeWire's socket is there, WirePlumber exits and pipewire-pulse runs on unconnected.
            try waitUntil("pipewire listens") { FileManager.default.fileExists(atPath: runtimeDirectory + "/pipewire-0") }
            if sessionManager { try spawn("wireplumber", bus: bus) }
            try spawn("pipewire-pulse", bus: bus)
            // pactl fails while pipewire-pulse is not listening yet: not yet.
            if sessionManager {
                try waitUntil("WirePlumber has chosen the null sink") { (try? info())?.contains("Default Sink: null\n") == true }
            } else {
                try waitUntil("pipewire-pulse answers") { (try? info()) != nil }
            }
        } catch {
            stop()
            throw error
        }
    }

    /// One server process, its output into `NAME.log` beside it.
    private func spawn(_ program: String, bus: PrivateBus) throws {
        let log = directory + "/\(program).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/" + program)
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        var environment = ProcessInfo.processInfo.environment
        for key in ["PULSE_SERVER", "PULSE_RUNTIME_PATH", "PIPEWIRE_REMOTE", "PIPEWIRE_RUNTIME_DIR", "PIPEWIRE_CONFIG_DIR",
                    "DISPLAY", "WAYLAND_DISPLAY"] {
            environment.removeValue(forKey: key)
        }
        environment["XDG_RUNTIME_DIR"] = runtimeDirectory
        environment["HOME"] = directory + "/home"
        environment["XDG_CONFIG_HOME"] = directory + "/config"
        environment["XDG_STATE_HOME"] = directory + "/home/state"
        environment["DBUS_SESSION_BUS_ADDRESS"] = bus.address
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        process.standardError = process.standardOutput
        try process.run()
        processes.append(process)
    }

    /// Polls `condition` with a bound; fails at once, with the servers' logs, when one of them has exited.
    private func waitUntil(_ what: String, _ condition: () throws -> Bool) throws {
        var exited: Process?
        let held = try DaemonHarness.poll(timeout: 20) {
            exited = processes.first { !$0.isRunning }
            return try exited == nil && condition()
        }
        guard !held else { return }
        let logs = ["pipewire", "wireplumber", "pipewire-pulse"].map { name in
            "--- \(name).log ---\n" + ((try? String(contentsOfFile: directory + "/\(name).log", encoding: .utf8)) ?? "")
        }
        let cause = exited.map { "\($0.executableURL?.lastPathComponent ?? "a server") exited with \($0.terminationStatus)" }
        throw HarnessError("PipeWire: \(cause ?? "timed out waiting until \(what)")\n" + logs.joined(separator: "\n"))
    }

    /// `pactl info`; killed after 5 s, so that a server that accepts and never answers cannot hold the test.
    func info() throws -> String { try pactl(["info"]) }

    func sinkInputs() throws -> Int {
        try pactl(["list", "short", "sink-inputs"]).split(separator: "\n").count
    }

    /// `pactl ARGUMENTS` on this server, killed after 5 s.
    func pactl(_ arguments: [String]) throws -> String {
        try HeadlessSway.run("/usr/bin/timeout", ["-s", "KILL", "5", "/usr/bin/pactl", "--server=" + address] + arguments)
    }

    /// A WAV header (16-bit mono, 8 kHz) whose data length is zero, in a file of its own: PipeWire's `pw-cat`
    /// reads such a file from a pipe as a stream of unknown length, so the header then `/dev/zero` plays for ever.
    func endlessWaveHeader() throws -> String {
        func le32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
        func le16(_ value: UInt16) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
        let header = Array("RIFF".utf8) + le32(36) + Array("WAVEfmt ".utf8) + le32(16) + le16(1) + le16(1)
            + le32(8000) + le32(16000) + le16(2) + le16(16) + Array("data".utf8) + le32(0)
        let path = directory + "/endless.wav"
        try Data(header).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Kills and reaps every server process, then the bus; removes the directory.
    func stop() {
        for process in processes.reversed() where process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        processes = []
        bus?.stop()
        bus = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    deinit { stop() }
}
