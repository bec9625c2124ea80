import Foundation
import Glibc

/// The cgroup shape a systemd user manager makes for a desktop session, made by the test under the cgroup2 hierarchy
/// (`/sys/fs/cgroup/unified` on this hybrid host): `…/user@UID.service/app.slice/app-<launcher>-<AppID>-<random>.scope`,
/// with real processes of an unprivileged user moved into each scope, as systemd moves a launched app's processes.
/// No user manager runs here (this machine's PID 1 is not systemd), so the test plays its part; everything else is
/// real: the cgroups, the freezer, the processes. Removed in `stop()`.
final class FakeUserSession {
    let mount: String
    let uid: uid_t
    let gid: gid_t
    /// The session's root below the mount, unique per test.
    let base: String
    /// `AppSlice=`: the app slice, relative to the mount.
    let appSlice: String

    /// The `[Adopt]` section that adopts this session's scopes and its user's windows, with a grace of 1 s.
    var adoptingWindowsAndScopes: String {
        """
        [Adopt]
        Scopes=yes
        Windows=yes
        AppSlice=\(appSlice)
        User=\(HeadlessSway.user)
        BackgroundTimeSec=1

        """
    }
    private var processes: [Process] = []

    init(tag: String) throws {
        guard let mount = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"].first(where: {
            FileManager.default.fileExists(atPath: $0 + "/cgroup.controllers")
        }) else { throw HarnessError("no cgroup2 hierarchy is mounted") }
        self.mount = mount
        (uid, gid) = try HeadlessSway.testUser()
        base = "lifecycled-it-\(tag).slice"
        appSlice = "\(base)/user-\(uid).slice/user@\(uid).service/app.slice"
        try FileManager.default.createDirectory(atPath: mount + "/" + appSlice, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: mount + "/\(base)/user-\(uid).slice/user@\(uid).service/session.slice",
                                                withIntermediateDirectories: true)
    }

    func path(_ unit: String) -> String { mount + "/" + appSlice + "/" + unit }

    /// A unit in the app slice with `count` processes of the session's user (CPU-busy ones with `busy`), each moved
    /// into it. `asRoot`: the processes run as root instead (another user than the session's). `command`: another
    /// program than a sleep or a busy loop.
    @discardableResult
    func unit(_ unit: String, count: Int = 1, busy: Bool = false, asRoot: Bool = false,
              command: [String]? = nil) throws -> [pid_t] {
        try FileManager.default.createDirectory(atPath: path(unit), withIntermediateDirectories: true)
        var pids: [pid_t] = []
        for _ in 0..<count {
            let process = Process()
            let command = command ?? (busy ? ["/bin/sh", "-c", "while :; do :; done"] : ["/bin/sleep", "100000"])
            if asRoot {
                process.executableURL = URL(fileURLWithPath: command[0])
                process.arguments = Array(command.dropFirst())
            } else {
                process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
                // Another user may not enter the test's working directory (a checkout under a private directory).
                process.currentDirectoryURL = URL(fileURLWithPath: "/")
                process.arguments = ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--"] + command
            }
            try process.run()
            processes.append(process)
            let pid = process.processIdentifier
            // setpriv execs the command in place: the pid is the command's once it runs as the user.
            try wait("process \(pid) runs as the session's user") {
                asRoot || Kernel.uid(of: pid) == uid
            }
            try "\(pid)".write(toFile: path(unit) + "/cgroup.procs", atomically: false, encoding: .utf8)
            pids.append(pid)
        }
        return pids
    }

    /// Whether the unit's cgroup reports itself frozen (`frozen 1` in cgroup.events).
    func frozen(_ unit: String) -> Bool {
        ((try? String(contentsOfFile: path(unit) + "/cgroup.events", encoding: .utf8)) ?? "").contains("frozen 1")
    }

    /// The CPU time (utime + stime, in ticks) of `pid` from /proc/PID/stat.
    static func cpuTicks(_ pid: pid_t) -> Int {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return -1 }
        let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }

    /// Whether `pid` used no CPU over `seconds`.
    static func idle(_ pid: pid_t, over seconds: Double = 0.5) -> Bool {
        let before = cpuTicks(pid)
        usleep(useconds_t(seconds * 1_000_000))
        return cpuTicks(pid) == before
    }

    /// Whether `pid` uses some CPU within `seconds`: a process at background priority gets little of a loaded
    /// machine, so one tick is waited for rather than measured over a fixed time.
    static func runs(_ pid: pid_t, within seconds: Double = 10) -> Bool {
        let before = cpuTicks(pid)
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if cpuTicks(pid) != before { return true }
            usleep(20_000)
        }
        return false
    }

    func kill(_ pids: [pid_t]) {
        for pid in pids { Glibc.kill(pid, SIGKILL) }
        for process in processes where pids.contains(process.processIdentifier) { process.waitUntilExit() }
    }

    func wait(_ what: String, timeout: Double = 10, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return }
            usleep(10_000)
        }
        throw HarnessError("timed out waiting until \(what)")
    }

    /// Kills every process the test started, thawing first, and removes the cgroups, deepest first.
    func stop() {
        for process in processes where process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        var directories: [String] = []
        if let walker = FileManager.default.enumerator(atPath: mount + "/" + base) {
            for case let relative as String in walker {
                let full = mount + "/" + base + "/" + relative
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), isDirectory.boolValue { directories.append(full) }
            }
        }
        for directory in directories { try? "0".write(toFile: directory + "/cgroup.freeze", atomically: false, encoding: .utf8) }
        for process in processes { process.waitUntilExit() }
        for directory in directories.sorted(by: { $0.count > $1.count }) + [mount + "/" + base] { rmdir(directory) }
    }
}
