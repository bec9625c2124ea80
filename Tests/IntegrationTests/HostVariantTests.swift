import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// The real daemon on hosts other than this one: each starts in a private mount namespace (`unshare`) whose
/// /sys/fs/cgroup is what that host has, so the daemon's detection meets it as it would at boot. The apps, the
/// signals and /proc are real and seen from outside the namespace; the memory squeeze is a real cgroup limit.
@Suite("host variants: no cgroups, v1 only, a real memory squeeze", .serialized)
struct HostVariantTests {
    let python = DaemonHarness.pythonClient
    static let squeeze = DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/memory_squeeze.py").path

    /// Runs the daemon in a new mount namespace after `mounts` (shell commands) rebuilt its /sys/fs/cgroup.
    /// `unshare` and `sh` exec, so the harness's pid is the daemon's, and its SIGTERM reaches it.
    static func namespace(_ mounts: String) -> [String] {
        ["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c",
         "set -e; mount -t tmpfs lifecycled-test /sys/fs/cgroup; \(mounts) exec \"$@\"", "sh"]
    }

    /// Whether this process may make a mount namespace and mount cgroup filesystems in it.
    static let canUnshare = geteuid() == 0 && access("/usr/bin/unshare", X_OK) == 0

    /// Whether the v1 hierarchy of `controller` is mounted here: only then can the namespace mount it again (the
    /// kernel reuses a hierarchy for the same controller set, and makes no new one while the controller is bound).
    static func isV1Mounted(_ controller: Substring) -> Bool {
        ((try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? "").split(separator: "\n").contains {
            let fields = $0.split(separator: " ")
            return fields.count > 3 && fields[1] == "/sys/fs/cgroup/\(controller)" && fields[2] == "cgroup"
                && fields[3].split(separator: ",").contains(controller)
        }
    }

    static let hasV1Freezer = canUnshare && isV1Mounted("freezer")
    static let hasV1CPU = canUnshare && isV1Mounted("cpu")

    /// A writable v1 memory hierarchy (this hybrid host's memory controller) and a kernel that accounts PSI.
    static let canSqueeze = geteuid() == 0 && access("/sys/fs/cgroup/memory", W_OK) == 0
        && FileManager.default.fileExists(atPath: "/sys/fs/cgroup/memory/memory.limit_in_bytes")
        && FileManager.default.fileExists(atPath: "/proc/pressure/memory")

    /// `some total=` of /proc/pressure/memory, read directly.
    static func memoryStallMicroseconds() -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/pressure/memory", encoding: .utf8),
              let some = text.split(separator: "\n").first(where: { $0.hasPrefix("some ") }),
              let total = some.split(separator: " ").first(where: { $0.hasPrefix("total=") }) else { return nil }
        return UInt64(total.dropFirst("total=".count))
    }

    func client(_ lifecycle: String = "BackgroundTimeSec=infinity") -> String {
        "[App]\nExec=\(python)\n\n[Lifecycle]\n\(lifecycle)\n"
    }

    /// The daemon with `apps`, started under `wrapper`, stopped and cleaned up after `body`.
    func withDaemon(_ apps: [String: String], wrapper: [String], daemonConfig: String? = nil,
                    _ body: (DaemonHarness) throws -> Void) throws {
        let daemon = try DaemonHarness()
        defer { daemon.stop() }
        for (name, text) in apps { try daemon.app(name, text) }
        if let daemonConfig { try daemon.daemonConfig(daemonConfig) }
        try daemon.start(wrapper: wrapper)
        try body(daemon)
        #expect(daemon.isDaemonRunning, "the daemon must still be running at the end of the test")
    }

    /// The nice value of /proc/PID/stat (field 19).
    func nice(_ pid: pid_t) -> Int? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(close, offsetBy: 2)...].split(separator: " ")
        return fields.count > 16 ? Int(fields[16]) : nil
    }

    func cgroupLines(_ pid: pid_t) -> [Substring] {
        ((try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)) ?? "").split(separator: "\n")
    }

    @Test("no cgroups at all: the daemon says it uses process groups, nice and SIGSTOP, and every state works",
          .enabled(if: canUnshare, "needs root and unshare(1) to give the daemon a /sys/fs/cgroup with nothing in it"))
    func noCgroupsAtAll() throws {
        try withDaemon(["a": client(), "b": client()], wrapper: Self.namespace("")) { daemon in
            let status = try daemon.lifectl("status").stdout
            #expect(status.contains("cgroups: none"), "\(status)")
            for line in ["background priority: nice 0 → 10", "suspend: SIGSTOP to the process group (no cgroup freezer)"] {
                #expect(status.contains(line), "lifectl status says: \(line)")
                #expect(daemon.log.contains(line), "the log says: \(line)")
            }
            #expect(daemon.log.contains("cgroup layout: none"))

            try daemon.control("launch", "a")
            #expect(try daemon.status("a").state.rawValue == "inactive")
            try daemon.control("focus", "a")
            #expect(try daemon.status("a").state.rawValue == "active")
            let pid = try #require(try daemon.status("a").pid)
            #expect(getpgid(pid) == pid, "the app's process group is its handle")
            #expect(!cgroupLines(pid).contains { $0.contains("lifecycled") }, "no group of the daemon's: \(cgroupLines(pid))")
            #expect(nice(pid) == 0)

            try daemon.control("focus", "b")
            #expect(try daemon.status("a").state.rawValue == "background")
            #expect(nice(pid) == 10, "background priority through nice")
            try daemon.control("suspend", "a")
            try daemon.waitUntil("a is stopped") { Kernel.state(pid) == "T" }
            try daemon.waitUntil("the daemon confirmed the stop from /proc") {
                daemon.log.contains("a: suspended with signal: 1 process stopped")
            }
            try daemon.control("resume", "a")
            try daemon.waitUntil("a runs again") { Kernel.state(pid) != "T" }
            #expect(try daemon.status("a").state.rawValue == "background")
            try daemon.control("focus", "a")
            #expect(nice(pid) == 0)
            #expect(daemon.types("a").suffix(3) == ["didEnterBackground", "willEnterForeground", "didBecomeActive"])

            try daemon.control("terminate", "a")
            try daemon.waitUntil("a is gone") { !Kernel.exists(pid) }
            #expect(try daemon.status("a").state.rawValue == "notRunning")
            #expect(daemon.types("a").last == "willTerminate")
        }
    }

    @Test("only the v1 freezer: apps are suspended with freezer.state (FROZEN, in D) and thawed",
          .enabled(if: hasV1Freezer, "needs root, unshare(1) and a mounted v1 freezer hierarchy to mount again"))
    func onlyTheV1Freezer() throws {
        let mounts = "mkdir /sys/fs/cgroup/freezer; mount -t cgroup -o freezer lifecycled-test /sys/fs/cgroup/freezer;"
        let frozen = "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\nSuspendMethod=freezer\n"
        var parentGroup: String?
        try withDaemon(["frozen": frozen, "other": client()], wrapper: Self.namespace(mounts)) { daemon in
            let status = try daemon.lifectl("status").stdout
            #expect(status.contains("cgroups: v1"), "\(status)")
            #expect(status.contains("suspend (freezer): cgroup v1 freezer.state"), "\(status)")
            #expect(status.contains("background priority: nice 0 → 10"), "no cpu controller: nice, \(status)")
            #expect(daemon.log.contains("cgroup layout: v1"))

            try daemon.control("focus", "frozen")
            let pid = try #require(try daemon.status("frozen").pid)
            // The hierarchy is the host's own freezer hierarchy, mounted again: its path reads the same here.
            let line = try #require(cgroupLines(pid).first { $0.split(separator: ":").dropFirst().first == "freezer" })
            let group = String(line.split(separator: ":", maxSplits: 2)[2])
            #expect(group.hasSuffix("/app-frozen"), "the app is in its freezer group: \(line)")
            let state = "/sys/fs/cgroup/freezer\(group)/freezer.state"
            parentGroup = "/sys/fs/cgroup/freezer" + group.dropLast("/app-frozen".count)
            func freezerState() -> String {
                ((try? String(contentsOfFile: state, encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
            }
            #expect(freezerState() == "THAWED")

            try daemon.control("focus", "other")
            try daemon.control("suspend", "frozen")
            #expect(try daemon.status("frozen").state.rawValue == "suspended")
            // The freeze is confirmed, and logged, after the answer: FREEZING until the task is scheduled and stops.
            try daemon.waitUntil("the v1 freeze is logged") { daemon.log.contains("frozen: suspended with freezer (v1): 1 process stopped") }
            #expect(freezerState() == "FROZEN")
            #expect(Kernel.state(pid) == "D", "a v1-frozen task sleeps uninterruptibly")

            try daemon.control("resume", "frozen")
            #expect(freezerState() == "THAWED")
            try daemon.waitUntil("frozen runs again") { Kernel.state(pid) != "D" }
            try daemon.control("focus", "frozen")
            #expect(daemon.types("frozen").suffix(2) == ["willEnterForeground", "didBecomeActive"])

            // Terminated while frozen: thawed first, or SIGTERM would wait in the freezer for ever.
            try daemon.control("background", "frozen")
            try daemon.control("suspend", "frozen")
            try daemon.waitUntil("frozen again") { freezerState() == "FROZEN" }
            try daemon.control("terminate", "frozen")
            try daemon.waitUntil("frozen is gone") { !Kernel.exists(pid) }
            #expect(try daemon.status("frozen").state.rawValue == "notRunning")
        }
        // The app's group lives as long as its configuration; the daemon's stop removes it and the parent.
        let parent = try #require(parentGroup)
        #expect(!FileManager.default.fileExists(atPath: parent), "\(parent) is removed at the daemon's stop")
    }

    @Test("a v1-only host (cpu and freezer): background weighs the app's v1 cpu group, suspension freezes it",
          .enabled(if: hasV1Freezer && hasV1CPU, "needs root, unshare(1) and mounted v1 cpu and freezer hierarchies"))
    func v1CPUAndFreezer() throws {
        let mounts = "for c in cpu freezer; do mkdir /sys/fs/cgroup/$c; mount -t cgroup -o $c lifecycled-test /sys/fs/cgroup/$c; done;"
        let app = "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\nSuspendMethod=freezer\n"
        try withDaemon(["a": app, "b": client()], wrapper: Self.namespace(mounts)) { daemon in
            let status = try daemon.lifectl("status").stdout
            #expect(status.contains("cgroups: v1"), "\(status)")
            #expect(status.contains("background priority: cgroup v1 cpu.shares 1024 → 128"), "\(status)")
            #expect(status.contains("suspend (freezer): cgroup v1 freezer.state"), "\(status)")
            try daemon.control("focus", "a")
            let pid = try #require(try daemon.status("a").pid)
            let line = try #require(cgroupLines(pid).first { $0.split(separator: ":").dropFirst().first == "cpu" })
            let shares = "/sys/fs/cgroup/cpu\(line.split(separator: ":", maxSplits: 2)[2])/cpu.shares"
            func read() -> String {
                ((try? String(contentsOfFile: shares, encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
            }
            #expect(shares.hasSuffix("/app-a/cpu.shares") && read() == "1024", "\(shares): \(read())")
            #expect(nice(pid) == 0)
            try daemon.control("focus", "b")
            #expect(read() == "128")
            #expect(nice(pid) == 0, "the cgroup weighs the CPU: nice is left alone")
            try daemon.control("suspend", "a")
            // Confirmed after the answer: the task shows D once it is scheduled and stops in the freezer.
            try daemon.waitUntil("a is frozen") { Kernel.state(pid) == "D" }
            try daemon.control("resume", "a")
            try daemon.control("focus", "a")
            #expect(read() == "1024")
        }
    }

    @Test("across a daemon crash on either host: a stopped or frozen app stays so, is re-adopted suspended, and resumes",
          .enabled(if: hasV1Freezer, "needs root, unshare(1) and a mounted v1 freezer hierarchy to mount again"),
          arguments: ["", "mkdir /sys/fs/cgroup/freezer; mount -t cgroup -o freezer lifecycled-test /sys/fs/cgroup/freezer;"])
    func acrossADaemonCrash(mounts: String) throws {
        let app = "[App]\nExec=\(python)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\nSuspendMethod=freezer\n"
        let daemon = try DaemonHarness()
        defer { daemon.stop() }
        try daemon.app("kept", app)
        try daemon.start(wrapper: Self.namespace(mounts))
        try daemon.control("launch", "kept", "--background")
        try daemon.control("suspend", "kept")
        let pid = try #require(try daemon.status("kept").pid)
        // The v1 freezer holds its tasks in D; with no freezer, SIGSTOP leaves them in T.
        let held: Character = mounts.isEmpty ? "T" : "D"
        try daemon.waitUntil("kept is held") { Kernel.state(pid) == held }

        try daemon.crash()
        #expect(Kernel.state(pid) == held, "nothing lets the app run while no daemon supervises it")
        try daemon.start(wrapper: Self.namespace(mounts), keepLog: true)
        try daemon.waitForState("kept", "suspended")
        #expect(try daemon.status("kept").pid == pid)
        #expect(daemon.log.contains("kept: re-adopted process \(pid) in state suspended"), "\(daemon.log)")
        try daemon.control("resume", "kept")
        try daemon.waitUntil("kept runs again") { Kernel.state(pid) == "S" || Kernel.state(pid) == "R" }
        try daemon.control("focus", "kept")
        #expect(try daemon.status("kept").state.rawValue == "active")
        try daemon.control("terminate", "kept")
        try daemon.waitUntil("kept is gone") { !Kernel.exists(pid) }
    }

    @Test("a real memory squeeze: the PSI trigger fires, every app is warned, then suspended apps go, oldest first",
          .enabled(if: canSqueeze, "needs root, a writable v1 memory hierarchy and /proc/pressure/memory"))
    func realMemorySqueeze() throws {
        // The memory controller of this hybrid host is v1's (cgroup2 has none to give memory.high): a small
        // memory.limit_in_bytes on the squeezing app alone, which reads a file four times its limit in a loop.
        let tag = "lifecycled-squeeze-\(getpid())"
        let memoryGroup = "/sys/fs/cgroup/memory/\(tag)"
        let file = URL(fileURLWithPath: "/var/tmp/\(tag).data")
        try FileManager.default.createDirectory(atPath: memoryGroup, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: file) }
        try "32M".write(toFile: memoryGroup + "/memory.limit_in_bytes", atomically: false, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        let writer = try FileHandle(forWritingTo: file)
        let chunk = Data((0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) })
        for _ in 0..<128 { writer.write(chunk) }
        // Written back before the squeeze starts: the app drops the clean pages from the cache, never dirty ones.
        try writer.synchronize()
        try writer.close()

        let hog = "[App]\nExec=/usr/bin/python3 \(Self.squeeze) \(memoryGroup) \(file.path)\nProtocol=none\n"
        let config = "[Sources]\nMemoryPressure=yes\n\n[Memory]\nTerminateAfterSec=0\n"
        defer {
            // The group can go only once its last process has: the harness's stop kills the hog first.
            for _ in 0..<250 where rmdir(memoryGroup) != 0 { usleep(20_000) }
        }
        try withDaemon(["old": client(), "recent": client(), "front": client(), "hog": hog], wrapper: [], daemonConfig: config) { daemon in
            #expect(daemon.log.contains("source didReceiveMemoryWarning: PSI trigger 'some 150000 2000000' on /proc/pressure/memory"),
                    "the trigger is on: \(daemon.log)")
            try daemon.control("focus", "old")
            try daemon.control("focus", "recent")
            try daemon.control("focus", "front")
            try daemon.control("suspend", "old")
            try daemon.control("suspend", "recent")
            let oldPID = try #require(try daemon.status("old").pid)

            let stalledBefore = try #require(Self.memoryStallMicroseconds())
            try daemon.control("focus", "hog")
            func group(_ file: String) -> String {
                ((try? String(contentsOfFile: memoryGroup + "/" + file, encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
            }
            do {
                try daemon.waitUntil("the squeeze warned every app", timeout: 60) {
                    daemon.records("front").contains { $0.type == "notification" && $0.name == "didReceiveMemoryWarning" }
                }
            } catch {
                throw HarnessError("\(error)\n--- the squeeze: \(group("memory.failcnt")) failures, \(group("memory.usage_in_bytes")) bytes, "
                                   + "stalls \(Self.memoryStallMicroseconds().map { $0 - stalledBefore } ?? 0) µs")
            }
            // The daemon logs the warning after its last send, which a client may have recorded first.
            try daemon.waitUntil("the warning is logged") { daemon.log.contains("Memory pressure: sent didReceiveMemoryWarning to") }
            try daemon.waitUntil("old was terminated for memory", timeout: 60) {
                daemon.log.contains("old: terminated while suspended to relieve memory pressure (jetsam)")
            }
            try daemon.waitUntil("its process is gone") { !Kernel.exists(oldPID) }
            // Nothing simulated it: the kernel counted real stalls, past the trigger's threshold.
            #expect(try #require(Self.memoryStallMicroseconds()) - stalledBefore > 150_000)
            let log = daemon.log
            if let recent = log.range(of: "recent: terminated while suspended to relieve memory pressure") {
                #expect(log.range(of: "old: terminated while suspended")!.lowerBound < recent.lowerBound, "least recently used first")
            }
            #expect(try daemon.status("hog").state.rawValue == "active", "never the active app")
            #expect(try daemon.status("front").state.rawValue == "background", "only suspended apps are terminated")
            try daemon.control("terminate", "hog")
        }
    }
}
