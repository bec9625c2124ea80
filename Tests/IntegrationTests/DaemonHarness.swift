import Foundation
import Glibc
import LifecycleModel
import LifecycleProtocol
import Synchronization
import Testing

/// A real lifecycled in a temporary runtime and config directory, with real client processes.
/// Everything it starts is stopped and everything it creates is removed in `stop()`, even when a test fails.
final class DaemonHarness {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    /// The products sit beside the test bundle (.build/<config>/).
    static let products = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    static let pythonClient = repository.appendingPathComponent("Examples/python/lifecycle_client.py").path
    /// Plays systemd's part (notify socket, fd store, restarts): a `start(wrapper:)` for the daemon.
    static let fakeServiceManager = repository.appendingPathComponent("Tests/Fixtures/fake_service_manager.py").path
    private static let counter = Atomic<Int>(0)

    let root: URL
    let configDirectory: URL
    let runtimeDirectory: URL
    let recordFile: URL
    let logFile: URL
    private var daemon: Process?
    /// A unique name so that parallel runs and leftovers never share cgroups.
    let tag: String

    init() throws {
        tag = "t\(getpid())-\(Self.counter.add(1, ordering: .relaxed).newValue)"
        root = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("lifecycled-it-\(tag)")
        configDirectory = root.appendingPathComponent("config")
        runtimeDirectory = root.appendingPathComponent("run")
        recordFile = root.appendingPathComponent("record.jsonl")
        logFile = root.appendingPathComponent("daemon.log")
        try FileManager.default.createDirectory(at: configDirectory.appendingPathComponent("apps"), withIntermediateDirectories: true)
        // The machine-wide sources are off unless a test asks for them: another test target sets the clock
        // (to test the clock source), which would otherwise post significantTimeChange into unrelated tests.
        try daemonConfig("")
        // World-readable, so that the unprivileged-user test can reach the control socket.
        chmod(root.path, 0o755)
    }

    /// Write `apps/NAME.conf`. `Environment=LIFECYCLE_RECORD=` is added so every client records what it receives.
    func app(_ name: String, _ text: String) throws {
        let withRecord = text.replacingOccurrences(of: "[App]\n", with: "[App]\nEnvironment=LIFECYCLE_RECORD=\(recordFile.path)\n")
        try withRecord.write(to: configDirectory.appendingPathComponent("apps/\(name).conf"), atomically: true, encoding: .utf8)
    }

    /// A copy of `path` in the harness's world-readable directory, for an app that runs as another user: the
    /// checkout itself may sit in a directory only root can enter.
    func readableByAll(_ path: String) throws -> String {
        let copy = root.appendingPathComponent(URL(fileURLWithPath: path).lastPathComponent)
        if !FileManager.default.fileExists(atPath: copy.path) {
            try FileManager.default.copyItem(atPath: path, toPath: copy.path)
            chmod(copy.path, 0o755)
        }
        return copy.path
    }

    func removeApp(_ name: String) throws {
        try FileManager.default.removeItem(at: configDirectory.appendingPathComponent("apps/\(name).conf"))
    }

    /// lifecycled.conf: `text`, after a `[Sources]` section that turns the machine-wide sources off (a test's own
    /// `[Sources]` keys come later and win).
    func daemonConfig(_ text: String) throws {
        let quiet = "[Sources]\nTimeChange=no\nLocaleChange=no\nBattery=no\nMemoryPressure=no\nAudio=no\n\n"
        try (quiet + text).write(to: configDirectory.appendingPathComponent("lifecycled.conf"), atomically: true, encoding: .utf8)
    }

    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["LIFECYCLED_RUNTIME_DIR"] = runtimeDirectory.path
        environment["PATH"] = "\(Self.products.path):\(Self.repository.path)/Examples/python:" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["NO_COLOR"] = "1"
        environment.removeValue(forKey: "NOTIFY_SOCKET")
        return environment
    }

    /// Start the daemon and wait until its control socket answers. `wrapper`: a program and its arguments
    /// that run the daemon (it is given the daemon's command line after them), e.g. the fake service manager.
    func start(wrapper: [String] = [], keepLog: Bool = false, extraEnvironment: [String: String] = [:]) throws {
        if !keepLog || !FileManager.default.fileExists(atPath: logFile.path) {
            _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        }
        let process = Process()
        let daemonCommand = [Self.products.appendingPathComponent("lifecycled").path,
                             "--config", configDirectory.path, "--log-level", "debug"]
        if let program = wrapper.first {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = Array(wrapper.dropFirst()) + daemonCommand
        } else {
            process.executableURL = URL(fileURLWithPath: daemonCommand[0])
            process.arguments = Array(daemonCommand.dropFirst())
        }
        process.environment = environment.merging(extraEnvironment) { _, extra in extra }
        let log = try FileHandle(forWritingTo: logFile)
        try log.seekToEnd()
        process.standardOutput = log
        process.standardError = log
        try process.run()
        daemon = process
        try waitUntil("the control socket answers") { (try? self.list()) != nil }
    }

    /// `kill -9` the daemon and wait until it is gone; its apps live on.
    func crash() throws {
        guard let daemon, daemon.isRunning else { throw HarnessError("the daemon is not running") }
        kill(daemon.processIdentifier, SIGKILL)
        try waitUntil("the daemon is gone") { !daemon.isRunning }
    }

    var daemonPID: pid_t? { daemon?.processIdentifier }
    var isDaemonRunning: Bool { daemon?.isRunning ?? false }

    func reload() { if let pid = daemonPID { kill(pid, SIGHUP) } }

    /// SIGTERM the daemon, wait for it, then make sure nothing it started survives, and clean up.
    func stop() {
        var pids: [pid_t] = []
        if let apps = try? list() { pids = apps.compactMap(\.pid) }
        if let daemon, daemon.isRunning {
            kill(daemon.processIdentifier, SIGTERM)
            let deadline = Date().addingTimeInterval(30)
            while daemon.isRunning && Date() < deadline { usleep(20_000) }
            if daemon.isRunning {
                kill(daemon.processIdentifier, SIGKILL)
                let killed = Date().addingTimeInterval(5)
                while daemon.isRunning && Date() < killed { usleep(20_000) }
            }
        }
        for pid in pids { kill(-pid, SIGCONT); kill(-pid, SIGKILL) }
        try? FileManager.default.removeItem(at: root)
    }

    /// The pid of the daemon answering now, as it says (`lifectl status --json`): under a service manager that
    /// restarts it, not `daemonPID`, which is the manager's.
    func answeringDaemonPID() throws -> pid_t {
        let output = try lifectl("status", "--json")
        let object = try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any]
        let pid = try #require((object?["daemon"] as? [String: Any])?["pid"] as? Int)
        return pid_t(pid)
    }

    // MARK: lifectl

    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    @discardableResult
    func lifectl(_ arguments: String..., asUser uid: UInt32? = nil) throws -> Output {
        let process = Process()
        if let uid {
            // setpriv (util-linux) drops to another user for this one command.
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            // Another user may not enter the test's working directory (a checkout under a private directory).
            process.currentDirectoryURL = URL(fileURLWithPath: "/")
            process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups",
                                 Self.products.appendingPathComponent("lifectl").path] + arguments
        } else {
            process.executableURL = Self.products.appendingPathComponent("lifectl")
            process.arguments = arguments
        }
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

    /// `lifectl ARGUMENTS` started and left running (for a request the test expects to hang, e.g. while the
    /// daemon is paused); its stderr is dropped. The caller waits for it.
    func startLifectl(_ arguments: String...) throws -> Process {
        let process = Process()
        process.executableURL = Self.products.appendingPathComponent("lifectl")
        process.arguments = arguments
        process.environment = environment
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// `lifectl VERB APP` that must succeed.
    func control(_ verb: String, _ app: String, _ extra: String...) throws {
        let arguments = [verb, app] + extra
        let process = Process()
        process.executableURL = Self.products.appendingPathComponent("lifectl")
        process.arguments = arguments
        process.environment = environment
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw HarnessError("lifectl \(arguments.joined(separator: " ")) failed (\(process.terminationStatus)): \(stderr)\n\(log)")
        }
    }

    /// `lifectl VERB APP --json` that must succeed: the app's status as it settled, which the reply carries. A status
    /// read after it may already show a timer of the daemon that fired meanwhile (a grace time, ReclaimAfterSec=).
    func settle(_ verb: String, _ app: String) throws -> AppStatus {
        let output = try lifectl(verb, app, "--json")
        guard output.status == 0 else { throw HarnessError("lifectl \(verb) \(app) failed (\(output.status)): \(output.stderr)\n\(log)") }
        guard let status = try LineCoder().decode([AppStatus].self, from: Array(output.stdout.utf8)).first(where: { $0.name == app }) else {
            throw HarnessError("lifectl \(verb) \(app) answered without the app: \(output.stdout)")
        }
        return status
    }

    func list() throws -> [AppStatus] {
        let output = try lifectl("list", "--json")
        guard output.status == 0 else { throw HarnessError("lifectl list failed: \(output.stderr)") }
        return try LineCoder().decode([AppStatus].self, from: Array(output.stdout.utf8))
    }

    func status(_ app: String) throws -> AppStatus {
        guard let status = try list().first(where: { $0.name == app }) else { throw HarnessError("no app \(app) in list") }
        return status
    }

    func waitForState(_ app: String, _ state: String, timeout: Double = 30) throws {
        try waitUntil("\(app) reaches \(state)", timeout: timeout) { (try? self.status(app).state.rawValue) == state }
    }

    // MARK: Records and logs

    struct Record: JSONReadable {
        var app: String
        var type: String
        var id: Int?
        var t: Int64
        var pid: Int32?
        var message: String?
        var launchOptions: [String: JSONValue]?
        var name: String?
        var payload: JSONValue?
        var payloads: [JSONValue]?
        var posts: Int?
        var dropped: Int?
        var remainingMs: Int?
        // Scenes: the session, the discarded ones, the configuration, the saved state (or, in the hello, the app's state).
        var scene: String?
        var scenes: [String]?
        var configuration: String?
        var state: JSONValue?

        init(json: ParsedJSON, path: String) throws(ProtocolError) {
            let fields = try JSONFields(json, path: path)
            app = try fields.required("app")
            type = try fields.required("type")
            id = try fields.optional("id")
            t = try fields.required("t")
            pid = try fields.optional("pid")
            message = try fields.optional("message")
            if case .object(let options)? = try fields.optional("launchOptions", as: JSONValue.self) { launchOptions = options }
            name = try fields.optional("name")
            payload = try fields.optional("payload")
            payloads = try fields.optional("payloads")
            posts = try fields.optional("posts")
            dropped = try fields.optional("dropped")
            remainingMs = try fields.optional("remainingMs")
            scene = try fields.optional("scene")
            scenes = try fields.optional("scenes")
            configuration = try fields.optional("configuration")
            state = try fields.optional("state")
        }
    }

    func records(_ app: String? = nil) -> [Record] {
        guard let data = try? String(contentsOf: recordFile, encoding: .utf8) else { return [] }
        let all = data.split(separator: "\n").compactMap { try? LineCoder().decode(Record.self, from: Array($0.utf8)) }
        return all.filter { app == nil || $0.app == app }.sorted { $0.t < $1.t }
    }

    func types(_ app: String) -> [String] { records(app).map(\.type) }

    var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    // MARK: Waiting

    /// Poll until `condition` holds. The timeout only bounds a hung test; nothing asserts on how long it took.
    func waitUntil(_ what: String, timeout: Double = 30, _ condition: () throws -> Bool) throws {
        guard try Self.poll(timeout: timeout, condition) else {
            throw HarnessError("timed out waiting until \(what)\n--- daemon log ---\n\(log)")
        }
    }

    /// Waits until `count` (a process's wakeups) stays the same for `quiet` seconds, at most `timeout`: the wakeups
    /// that follow the test's own requests (their answers, a coalesced save, log lines) are over. A daemon woken more
    /// often than that never gets there, and the wait fails. Returns the count it stayed at.
    static func waitForQuiet(_ what: String, quiet: Double = 1, timeout: Double = 30, _ count: () -> Int) throws -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        var last = count()
        while Date() < deadline {
            usleep(useconds_t(quiet * 1_000_000))
            let now = count()
            if now == last { return now }
            last = now
        }
        throw HarnessError("\(what) was never quiet for \(quiet) s within \(timeout) s")
    }

    /// Polls `condition` every 20 ms for at most `timeout` seconds: whether it came to hold.
    static func poll(timeout: Double, _ condition: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return true }
            usleep(20_000)
        }
        return false
    }
}

extension DaemonHarness {
    /// A daemon with these apps (and lifecycled.conf), started before `body` and stopped and cleaned up after it,
    /// even when it throws; it must still be running when `body` ends.
    static func running(_ apps: [String: String], daemonConfig: String? = nil,
                        _ body: (DaemonHarness) throws -> Void) throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        for (name, text) in apps { try harness.app(name, text) }
        if let daemonConfig { try harness.daemonConfig(daemonConfig) }
        try harness.start()
        try body(harness)
        #expect(harness.isDaemonRunning, "the daemon must still be running at the end of the test")
    }
}

struct HarnessError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}


// MARK: What this machine lets the daemon do, for the tests' condition traits

enum Host {
    /// The daemon makes a cgroup per app only as root and where a cgroup filesystem is writable; elsewhere it
    /// suspends with SIGSTOP.
    static let canManageCgroups: Bool = geteuid() == 0
        && ["/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/freezer", "/sys/fs/cgroup/cpu"].contains(where: writable)

    /// A writable cgroup2 hierarchy (pure, or a hybrid host's unified mount): the freezer that reaches every
    /// process of a group and lets a frozen process die of SIGKILL.
    static let hasCgroup2Freezer: Bool = geteuid() == 0
        && ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"].contains { (path: String) -> Bool in
            writable(path) && FileManager.default.fileExists(atPath: path + "/cgroup.controllers")
        }

    static func writable(_ path: String) -> Bool { access(path, W_OK) == 0 }
}

// MARK: The kernel's view, read directly (not through the daemon's code)

enum Kernel {
    /// The state letter of /proc/PID/stat, nil if the process is gone.
    static func state(_ pid: pid_t) -> Character? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(close, offsetBy: 2)...].first
    }

    /// Every process whose process group is `pgid`.
    static func group(_ pgid: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(pid_t.init).filter { getpgid($0) == pgid }
    }

    static func exists(_ pid: pid_t) -> Bool { kill(pid, 0) == 0 || errno == EPERM }

    /// The real uid of `pid` (the Uid: line of /proc/PID/status), nil if the process is gone.
    static func uid(of pid: pid_t) -> uid_t? {
        ((try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? "").split(separator: "\n")
            .first { $0.hasPrefix("Uid:") }?.split(separator: "\t").dropFirst().first.flatMap { uid_t($0) }
    }

    /// The threads of `pid` whose name (/proc/PID/task/TID/comm) is `name`, by thread id.
    static func threads(of pid: pid_t, named name: String) -> [pid_t] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap(pid_t.init).sorted().filter { tid in
            (try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines) == name
        }
    }

    /// The children of `pid` (from /proc/PID/task/PID/children).
    static func children(of pid: pid_t) -> [pid_t] {
        ((try? String(contentsOfFile: "/proc/\(pid)/task/\(pid)/children", encoding: .utf8)) ?? "")
            .split(separator: " ").compactMap { pid_t($0) }
    }

    /// Whether `pid` shows `T` within a few seconds. The daemon answers a suspension once SIGSTOP is sent: from
    /// then on the process runs no code of its own, but on a loaded machine it shows `R` until it is scheduled and
    /// takes the signal.
    static func stops(_ pid: pid_t, within seconds: Double = 10) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if state(pid) == "T" { return true }
            usleep(2_000)
        }
        return state(pid) == "T"
    }
}
