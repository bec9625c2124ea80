import Foundation
import Glibc

/// A real polkitd (Debian's polkitd) serving a `PrivateBus` as its system bus (`DBUS_SYSTEM_BUS_ADDRESS`), in a
/// mount namespace of its own (unshare) where the project's action file (share/polkit-1/actions) and the test's
/// rules stand in for /usr/share/polkit-1/actions and /etc/polkit-1/rules.d: polkitd reads only those fixed
/// directories, and the bind mounts give it the test's files without installing anything into the machine.
/// Killed in `stop()`, which ends the namespace with it.
final class PolkitDaemon {
    let directory: URL
    let logFile: URL
    private let bus: PrivateBus
    private var process: Process?
    /// polkitd's pid (unshare and sh exec it), for the tests that stop and continue it.
    var pid: pid_t { process?.processIdentifier ?? 0 }

    /// `rules` is a polkit rules file (JavaScript), the only one in /etc/polkit-1/rules.d for this polkitd.
    init(bus: PrivateBus, directory: URL, rules: String) throws {
        self.bus = bus
        self.directory = directory
        logFile = directory.appendingPathComponent("polkitd.log")
        let actions = directory.appendingPathComponent("actions"), rulesDirectory = directory.appendingPathComponent("rules.d")
        for folder in [directory, actions, rulesDirectory] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            // polkitd drops to its own user before it reads them.
            chmod(folder.path, 0o755)
        }
        let policy = DaemonHarness.repository.appendingPathComponent("share/polkit-1/actions/org.lifecycled.policy")
        try FileManager.default.copyItem(at: policy, to: actions.appendingPathComponent("org.lifecycled.policy"))
        try rules.write(to: rulesDirectory.appendingPathComponent("50-lifecycled-test.rules"), atomically: true, encoding: .utf8)
        for file in [actions.appendingPathComponent("org.lifecycled.policy"), rulesDirectory.appendingPathComponent("50-lifecycled-test.rules")] {
            chmod(file.path, 0o644)
        }
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        process.arguments = ["--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                             "mount --bind \"$1\" /usr/share/polkit-1/actions && mount --bind \"$2\" /etc/polkit-1/rules.d && exec /usr/lib/polkit-1/polkitd",
                             "sh", actions.path, rulesDirectory.path]
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address
        process.environment = environment
        let log = try FileHandle(forWritingTo: logFile)
        process.standardOutput = log
        process.standardError = log
        try process.run()
        self.process = process
        try wait("polkitd owns org.freedesktop.PolicyKit1") {
            guard process.isRunning else { throw HarnessError("polkitd exited: \(self.log)") }
            return try bus.run("busctl", ["status", "org.freedesktop.PolicyKit1"]).status == 0
        }
    }

    var log: String { (try? String(contentsOf: logFile, encoding: .utf8)) ?? "" }

    func stop() {
        if let process, process.isRunning {
            kill(process.processIdentifier, SIGCONT)
            PrivateBus.end(process)
        }
    }

    /// A real authentication agent, pkttyagent, registered for process `pid` (its `--process`), in a pseudo-terminal
    /// of script(1) since it asks for the password on a terminal. Its input is a pipe nobody writes to: the person
    /// asked never answers. What it shows goes to `output`; returned once polkitd has registered it. End it with
    /// `end(agent:)`.
    func agent(for pid: pid_t, output: URL) throws -> (agent: Process, input: Pipe) {
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["--quiet", "--flush", "--command", "/usr/bin/pkttyagent --process \(pid)", "/dev/null"]
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = bus.address
        process.environment = environment
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = FileHandle.nullDevice
        try process.run()
        try wait("polkitd registers the agent for process \(pid)") {
            log.contains("Registered Authentication Agent for unix-process:\(pid):")
        }
        return (process, input)
    }

    /// Kills pkttyagent and what it runs, then script: pkttyagent outlives script (a hangup does not end it), and
    /// Foundation's wait for script does not return while it lives.
    static func end(agent: Process) {
        guard agent.isRunning else { return }
        var descendants: [pid_t] = []
        var next = Kernel.children(of: agent.processIdentifier)
        while let pid = next.popLast() {
            descendants.append(pid)
            next += Kernel.children(of: pid)
        }
        for pid in descendants.reversed() { kill(pid, SIGKILL) }
        PrivateBus.end(agent)
    }

    private func wait(_ what: String, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if try condition() { return }
            usleep(20_000)
        }
        throw HarnessError("timed out waiting until \(what)\n--- polkitd log ---\n\(log)")
    }
}
