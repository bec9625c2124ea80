import Foundation
import Glibc
import LifecycleModel
import LifecycleProtocol
import Testing

/// The rails that apply to every app, end to end: audio is never cut off (a real PulseAudio, or PipeWire with its
/// PulseAudio service, and a real `pacat`), background wakes (a plain sleeper, and the Python client's
/// performFetch), and OnlyOnBattery (a power-supply directory the test writes: this machine has no battery, so the
/// supply is mocked as files in sysfs's layout).
@Suite("the rails: audio, background wakes, battery", .serialized)
struct RailsIntegrationTests {
    let python = DaemonHarness.pythonClient

    /// An app that plays silence through `pacat` (a real stream on the server) as a child, and sleeps.
    func player(_ pulse: any SoundServerHarness, lifecycle: String) -> String {
        soundClient(pulse, "pacat --playback --raw < /dev/zero", lifecycle: lifecycle)
    }

    /// An app that runs `command`, a client of the sound server, as a child, and sleeps.
    func soundClient(_ pulse: any SoundServerHarness, _ command: String, lifecycle: String) -> String {
        "[App]\nExec=sh -c '\(command) & exec sleep 100000'\nProtocol=none\n"
            + "Environment=PULSE_SERVER=\(pulse.address)\n\n[Lifecycle]\n\(lifecycle)\n"
    }

    let marker = "[App]\nExec=/bin/sleep 100000\nProtocol=none\n\n[Lifecycle]\nBackgroundTimeSec=0.3\n"

    @Test("an app whose process plays a stream is not suspended while it plays, and is suspended after it stops",
          arguments: SoundServerKind.allCases)
    func playingAppIsNotSuspended(_ server: SoundServerKind) throws {
        let pulse = try server.start()
        defer { pulse.stop() }
        let apps = ["player": player(pulse, lifecycle: "BackgroundTimeSec=0.3"), "marker": marker]
        try DaemonHarness.running(apps, daemonConfig: "[Sources]\nAudio=yes\nAudioServer=\(pulse.address)\n") { daemon in
            try daemon.waitUntil("the daemon is connected to the sound server") {
                try daemon.lifectl("status").stdout.contains("audio: \(pulse.address), ")
            }
            // Launched in front, so that its grace time does not run out before a slow server has its stream.
            try daemon.control("launch", "player")
            let pid = try #require(try daemon.status("player").pid)
            try daemon.waitUntil("the stream plays") { daemon.log.contains("player: not suspended in the background while playing audio") }
            try daemon.control("background", "player")
            // The marker's suspension, after the same grace time, is the later event before the player is looked at.
            try daemon.control("launch", "marker", "--background")
            try daemon.waitForState("marker", "suspended")
            let state = try daemon.status("player").state
            #expect(state == .background)
            let modes = try daemon.status("player").backgroundModes
            #expect(modes == ["audio"])
            #expect(Kernel.state(pid) != "T")
            let status = try daemon.lifectl("status").stdout
            #expect(status.contains("1 playing process (player)"))

            let pacat = try #require(Kernel.children(pid).first { Kernel.command($0) == "pacat" })
            kill(pacat, SIGKILL)
            try daemon.waitForState("player", "suspended")
            #expect(Kernel.stops(pid))
            #expect(daemon.log.contains("player: its background time runs again"))
        }
    }

    /// A `pacat` outside every app that plays silence and names `pid` as its process (`PULSE_PROP`), as any client
    /// may: the server passes the claim on as it is.
    func impostor(_ pulse: any SoundServerHarness, claiming pid: pid_t) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "exec pacat --playback --raw < /dev/zero"]
        var environment = ProcessInfo.processInfo.environment
        environment["PULSE_SERVER"] = pulse.address
        environment["PULSE_PROP"] = "application.process.id=\(pid)"
        process.environment = environment
        try process.run()
        return process
    }

    @Test("a stream that names another app's process does not keep that app awake; the app's own stream does",
          arguments: SoundServerKind.allCases)
    func claimedPidIsNotTrusted(_ server: SoundServerKind) throws {
        let pulse = try server.start()
        defer { pulse.stop() }
        // The listener holds a connection of its own (pactl subscribe claims the pactl's pid, rightly), so that a
        // second claim of that pid is one more than the process's connections.
        let listener = soundClient(pulse, "pactl subscribe > /dev/null", lifecycle: "BackgroundTimeSec=0.3")
        let apps = ["player": player(pulse, lifecycle: "BackgroundTimeSec=0.3"), "marker": marker, "listener": listener]
        try DaemonHarness.running(apps, daemonConfig: "[Sources]\nAudio=yes\nAudioServer=\(pulse.address)\n") { daemon in
            try daemon.waitUntil("the daemon is connected to the sound server") {
                try daemon.lifectl("status").stdout.contains("audio: \(pulse.address), ")
            }
            // In front until its stream counts, so that its grace time does not run out before a slow server has it.
            try daemon.control("launch", "player")
            try daemon.waitUntil("the player's own stream counts") {
                daemon.log.contains("player: not suspended in the background while playing audio")
            }
            try daemon.control("background", "player")
            try daemon.control("launch", "marker")
            try daemon.control("launch", "listener")
            let marker = try #require(try daemon.status("marker").pid)
            let listenerPid = try #require(try daemon.status("listener").pid)
            try daemon.waitUntil("the listener's pactl is connected") {
                Kernel.children(listenerPid).contains { Kernel.command($0) == "pactl" }
            }
            let pactl = try #require(Kernel.children(listenerPid).first { Kernel.command($0) == "pactl" })
            // One impostor names the marker's leader (no connection at all), one the listener's pactl (one connection,
            // already claimed by the pactl itself).
            let impostors = [try impostor(pulse, claiming: marker), try impostor(pulse, claiming: pactl)]
            // SIGKILL: the test process blocks the signals a pacat would quit on, and its children inherit the mask.
            defer { for process in impostors { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() } }
            try daemon.waitUntil("the server has the impostors' streams") { try pulse.sinkInputs() == 3 }
            try daemon.control("background", "marker")
            try daemon.control("background", "listener")
            try daemon.waitForState("marker", "suspended")
            try daemon.waitForState("listener", "suspended")
            #expect(Kernel.stops(marker))
            #expect(!daemon.log.contains("marker: not suspended in the background while playing audio"))
            #expect(!daemon.log.contains("listener: not suspended in the background while playing audio"))
            let player = try daemon.status("player")
            #expect(player.state == .background)
            #expect(player.backgroundModes == ["audio"])
            let status = try daemon.lifectl("status").stdout
            #expect(status.contains("1 playing process, 2 playing streams of an unconfirmed process (player)"))
        }
    }

    @Test("AudioSilenceSec: a stream of zeros lets its app go after the bound; a stream of sound keeps its app awake",
          arguments: SoundServerKind.allCases)
    func silenceIsLetGo(_ server: SoundServerKind) throws {
        let pulse = try server.start()
        defer { pulse.stop() }
        // Noise from /dev/urandom stands for a tone: any non-zero peak is sound.
        let sounding = soundClient(pulse, "pacat --playback --raw < /dev/urandom", lifecycle: "BackgroundTimeSec=0.3")
        let apps = ["quiet": player(pulse, lifecycle: "BackgroundTimeSec=0.3"), "sounding": sounding]
        let config = "[Sources]\nAudio=yes\nAudioServer=\(pulse.address)\nAudioSilenceSec=2\n"
        try DaemonHarness.running(apps, daemonConfig: config) { daemon in
            try daemon.waitUntil("the daemon is connected to the sound server") {
                try daemon.lifectl("status").stdout.contains("audio: \(pulse.address), ")
            }
            // Each in front until its stream counts, so that no grace time runs out before a slow server has it.
            try daemon.control("launch", "quiet")
            try daemon.waitUntil("the quiet stream counts at first") {
                daemon.log.contains("quiet: not suspended in the background while playing audio")
            }
            try daemon.control("background", "quiet")
            try daemon.control("launch", "sounding")
            try daemon.waitUntil("the sounding stream counts") {
                daemon.log.contains("sounding: not suspended in the background while playing audio")
            }
            try daemon.control("background", "sounding")
            try daemon.waitForState("quiet", "suspended")
            let quiet = try #require(try daemon.status("quiet").pid)
            #expect(Kernel.stops(quiet))
            #expect(daemon.log.contains("quiet: its background time runs again"))
            // Longer than the bound again: the sounding app is still kept awake.
            sleep(3)
            let sounding = try daemon.status("sounding")
            #expect(sounding.state == .background)
            #expect(sounding.backgroundModes == ["audio"])
            #expect(try daemon.lifectl("status").stdout.contains("1 playing process (sounding)"))
        }
    }

    @Test("on PipeWire without its session manager a stream is never linked and stays corked: its app is suspended after its grace time")
    func unlinkedPipeWireStreamDoesNotCount() throws {
        let pipewire = try PipeWireServer(sessionManager: false)
        try pipewire.start()
        defer { pipewire.stop() }
        let apps = ["player": player(pipewire, lifecycle: "BackgroundTimeSec=0.3")]
        try DaemonHarness.running(apps, daemonConfig: "[Sources]\nAudio=yes\nAudioServer=\(pipewire.address)\n") { daemon in
            try daemon.waitUntil("the daemon is connected to the sound server") {
                try daemon.lifectl("status").stdout.contains("audio: \(pipewire.address), ")
            }
            // In front until the server has its stream: a stopped pacat would make none.
            try daemon.control("launch", "player")
            let pid = try #require(try daemon.status("player").pid)
            try daemon.waitUntil("the server has the stream") { try pipewire.sinkInputs() == 1 }
            #expect(try pipewire.pactl(["list", "sink-inputs"]).contains("Corked: yes"))
            try daemon.control("background", "player")
            try daemon.waitForState("player", "suspended")
            #expect(Kernel.stops(pid))
            #expect(!daemon.log.contains("player: not suspended in the background while playing audio"))
            #expect(try daemon.lifectl("status").stdout.contains("audio: \(pipewire.address), 0 playing processes"))
        }
    }

    /// An app that runs `command`, a client of PipeWire's own protocol, as a child, and sleeps.
    func nativeClient(_ pipewire: PipeWireServer, _ command: String, lifecycle: String) -> String {
        "[App]\nExec=sh -c '\(command) & exec sleep 100000'\nProtocol=none\n"
            + "Environment=PIPEWIRE_RUNTIME_DIR=\(pipewire.runtimeDirectory)\n\n[Lifecycle]\n\(lifecycle)\n"
    }

    @Test("on PipeWire, an app that plays through PipeWire's own protocol is kept awake; a stream that names a process whose one connection is its own is not trusted")
    func nativePipeWireStreamCounts() throws {
        let pipewire = try PipeWireServer()
        try pipewire.start()
        defer { pipewire.stop() }
        // pw-cat plays zeros from a pipe (a WAV header that gives no length, then /dev/zero) for as long as it runs.
        let player = nativeClient(pipewire, "cat \(try pipewire.endlessWaveHeader()) /dev/zero | pw-cat --playback -",
                                  lifecycle: "BackgroundTimeSec=0.3")
        // pw-mon holds one connection to PipeWire and plays nothing.
        let watcher = nativeClient(pipewire, "pw-mon > /dev/null", lifecycle: "BackgroundTimeSec=0.3")
        let apps = ["player": player, "watcher": watcher, "marker": marker]
        try DaemonHarness.running(apps, daemonConfig: "[Sources]\nAudio=yes\nAudioServer=\(pipewire.address)\n") { daemon in
            try daemon.waitUntil("the daemon is connected to the sound server") {
                try daemon.lifectl("status").stdout.contains("audio: \(pipewire.address), ")
            }
            // In front until its stream counts, so that its grace time does not run out before the server has it.
            try daemon.control("launch", "player")
            let pid = try #require(try daemon.status("player").pid)
            try daemon.waitUntil("the native stream plays") {
                daemon.log.contains("player: not suspended in the background while playing audio")
            }
            try daemon.control("background", "player")
            try daemon.control("launch", "watcher")
            let watcherPid = try #require(try daemon.status("watcher").pid)
            try daemon.waitUntil("the watcher's pw-mon is connected") {
                Kernel.children(watcherPid).contains { Kernel.command($0) == "pw-mon" }
            }
            let monitor = try #require(Kernel.children(watcherPid).first { Kernel.command($0) == "pw-mon" })
            let impostor = try impostor(pipewire, claiming: monitor)
            // SIGKILL: the test process blocks the signals a pacat would quit on, and its children inherit the mask.
            defer { kill(impostor.processIdentifier, SIGKILL); impostor.waitUntilExit() }
            try daemon.waitUntil("the server has the impostor's stream") { try pipewire.sinkInputs() == 2 }
            try daemon.control("background", "watcher")
            try daemon.waitForState("watcher", "suspended")
            #expect(!daemon.log.contains("watcher: not suspended in the background while playing audio"))
            // The marker's suspension, after the same grace time, is the later event before the player is looked at.
            try daemon.control("launch", "marker", "--background")
            try daemon.waitForState("marker", "suspended")
            let status = try daemon.status("player")
            #expect(status.state == .background)
            #expect(status.backgroundModes == ["audio"])
            #expect(Kernel.state(pid) != "T")
            #expect(try daemon.lifectl("status").stdout.contains("1 playing process, 1 playing stream of an unconfirmed process (player)"))

            let pwcat = try #require(Kernel.children(pid).first { Kernel.command($0) == "pw-cat" })
            kill(pwcat, SIGKILL)
            try daemon.waitForState("player", "suspended")
            #expect(Kernel.stops(pid))
        }
    }

    /// How many times the kernel ran any thread of `pid` (the third field of each thread's schedstat): it grows with
    /// every wakeup, of whatever cause.
    func runs(_ pid: pid_t) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.reduce(0) { total, task in
            let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8)) ?? ""
            return total + (text.split(separator: " ").dropFirst(2).first.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 0)
        }
    }

    @Test("without a sound server the rule is off, status says so and the daemon sleeps; it connects once one appears")
    func noSoundServerThenOne() throws {
        let pulse = try PulseServer()
        defer { pulse.stop() }
        try DaemonHarness.running([:], daemonConfig: "[Sources]\nAudio=yes\nAudioServer=\(pulse.address)\n") { daemon in
            try expectAsleep(daemon, waitingFor: pulse.socket)
            try pulse.start()
            try daemon.waitUntil("the daemon connects to the new server", timeout: 10) {
                try daemon.lifectl("status").stdout.contains("audio: \(pulse.address), 0 playing processes")
            }
        }
    }

    @Test("a daemon without a user's environment (a system service) waits for the system-wide sound server's socket, woken by nothing")
    func noUserEnvironmentWaitsForTheSystemServer() throws {
        let systemSocket = "/run/pulse/native"
        try #require(access(systemSocket, F_OK) != 0, "this machine runs a system-wide PulseAudio")
        let daemon = try DaemonHarness()
        defer { daemon.stop() }
        try daemon.daemonConfig("[Sources]\nAudio=yes\n")
        // Empty is unset for the daemon, as for libpulse.
        try daemon.start(extraEnvironment: ["XDG_RUNTIME_DIR": "", "PULSE_SERVER": "", "PULSE_RUNTIME_PATH": ""])
        try expectAsleep(daemon, waitingFor: systemSocket)
    }

    /// Status says there is no sound server and names the socket waited for, and nothing wakes the daemon for 4 s.
    private func expectAsleep(_ daemon: DaemonHarness, waitingFor socket: String) throws {
        try daemon.waitUntil("status says there is no sound server") {
            try daemon.lifectl("status").stdout.contains("audio: off, no sound server")
        }
        #expect(try daemon.lifectl("status").stdout.contains("waiting for \(socket) to appear"))
        let pid = try #require(daemon.daemonPID)
        // The status requests' own wakeups end with their answers.
        let before = try DaemonHarness.waitForQuiet("the daemon") { runs(pid) }
        sleep(4)
        #expect(runs(pid) == before, "the daemon woke while no sound server was there")
    }

    @Test("Audio=no: status says the rule is off")
    func audioOff() throws {
        try DaemonHarness.running([:], daemonConfig: "[Sources]\nAudio=no\n") { daemon in
            let status = try daemon.lifectl("status").stdout
            #expect(status.contains("audio: off (Audio=no)"))
        }
    }

    @Test("ResumeEverySec: a suspended sleeper wakes into the background and is stopped again, over and over")
    func sleeperWakesAndSleeps() throws {
        let app = "[App]\nExec=/bin/sleep 100000\nProtocol=none\n\n[Lifecycle]\nBackgroundTimeSec=0.2\nResumeEverySec=1\nResumeForSec=0.5\n"
        try DaemonHarness.running(["a": app]) { daemon in
            try daemon.control("launch", "a", "--background")
            try daemon.waitForState("a", "suspended")
            let pid = try #require(try daemon.status("a").pid)
            for wake in 1...2 {
                try daemon.waitUntil("wake \(wake) runs the process", timeout: 10) { Kernel.state(pid) == "S" }
                try daemon.waitUntil("wake \(wake) ends in a stop", timeout: 10) { Kernel.state(pid) == "T" }
            }
            #expect(daemon.log.contains("a: background wake for 500ms (ResumeEverySec=)"))
        }
    }

    @Test("ResumeEverySec for a protocol app: performFetch, then suspended again after its ack")
    func protocolAppFetches() throws {
        let app = "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=0.2\nResumeEverySec=1\nResumeForSec=20\n"
        try DaemonHarness.running(["a": app]) { daemon in
            try daemon.control("launch", "a", "--background")
            try daemon.waitForState("a", "suspended")
            let pid = try #require(try daemon.status("a").pid)
            try daemon.waitUntil("two fetches", timeout: 20) { daemon.types("a").filter { $0 == "performFetch" }.count >= 2 }
            try daemon.waitForState("a", "suspended")
            try daemon.waitUntil("stopped") { Kernel.state(pid) == "T" }
            #expect(daemon.log.contains("a: performFetch acknowledged (newData)"))
            // Two wakes within far less than one deadline (ResumeForSec=20): each ended at its ack.
            #expect(!daemon.log.contains("was not acknowledged"))
        }
    }

    @Test("OnlyOnBattery: on external power the app runs on; on battery it is suspended; plugging in resumes it")
    func onlyOnBatteryFollowsThePowerSupply() throws {
        // Mock: this machine has no battery, so the test writes a supply in sysfs's layout and points the daemon at it.
        let supplies = FileManager.default.temporaryDirectory.appendingPathComponent("lifecycled-power-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        let battery = supplies.appendingPathComponent("BAT0")
        try FileManager.default.createDirectory(at: battery, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: supplies) }
        func write(_ name: String, _ value: String) throws {
            try (value + "\n").write(to: battery.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        try write("type", "Battery")
        try write("capacity", "80")
        try write("status", "Charging")
        let app = "[App]\nExec=/bin/sleep 100000\nProtocol=none\n\n[Lifecycle]\nBackgroundTimeSec=0.3\nOnlyOnBattery=yes\n"
        let config = "[Sources]\nBattery=yes\nPowerSupplyDirectory=\(supplies.path)\n"
        try DaemonHarness.running(["a": app, "marker": marker], daemonConfig: config) { daemon in
            try daemon.control("launch", "a", "--background")
            let pid = try #require(try daemon.status("a").pid)
            try daemon.control("launch", "marker", "--background")
            try daemon.waitForState("marker", "suspended")
            let state = try daemon.status("a").state
            #expect(state == .background, "on external power it runs on")
            #expect(Kernel.state(pid) != "T")

            try write("status", "Discharging")
            try daemon.waitForState("a", "suspended")
            #expect(Kernel.stops(pid))

            try write("status", "Charging")
            try daemon.waitForState("a", "background")
            try daemon.waitUntil("the process runs again") { Kernel.state(pid) != "T" }
        }
    }
}
