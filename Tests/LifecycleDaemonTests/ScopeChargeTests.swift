import CSupport
import CSystemd
import Foundation
import Glibc
import LifecycleModel
import TestSupport
import Testing
@testable import LifecycleDaemon

/// An app launched into a systemd scope runs none of its program before the kernel shows it in the scope: cgroup2
/// charges a page to the cgroup its process was in when it touched it, for good, so an app that ran first in the
/// daemon's cgroup would stay charged to the daemon's service. The launch goes through the real spawn path
/// (`ProcessSupervisor` with the scope placement) and real processes; the app is `Tests/Fixtures/first_cgroup.sh`,
/// whose first act appends its own cgroup2 line to the fake manager's record, in order with the fake's own lines.
///
/// What is not real: PID 1 here is not systemd, so systemd's manager is `Tests/Fixtures/fake_systemd_bus.c` (real
/// D-Bus through sd-bus). In its mode `place`, it carries out the start of a scope as systemd's start job does, some
/// time after its answer: it makes the scope's cgroup in a real cgroup2 hierarchy (this hybrid machine's
/// /sys/fs/cgroup/unified) and moves the process there. The VM of `make test-systemd` runs the real thing.
@Suite(.serialized) struct ScopeChargeTests {
    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/first_cgroup.sh").path
    /// How long the fake's start job takes to move the process, after the fake answered.
    static let startJobDelay = 300

    /// What each test works on: the fake manager, the cgroup2 directory the scopes go under, the loop, the port, the
    /// supervisor and the app, not launched yet.
    private final class Launch {
        let bus: FakeSystemdBus
        let root: String
        let loop: EventLoop
        let port = FakePort()
        let processes: ProcessSupervisor
        let suspension: Suspension
        let app: AppRuntime

        init(mode: (String) -> String, callTimeout: Duration = .seconds(5)) throws {
            let unified = "/sys/fs/cgroup/unified"
            try #require(cs_is_cgroup2(unified) == 1, "this machine's cgroup2 hierarchy is at \(unified)")
            root = unified + "/lifecycled-charge-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            try makeDirectory(root)
            bus = try FakeSystemdBus(mode: mode(root))
            loop = try EventLoop()
            let manager = try SystemdManagerBus.connect(loop: loop, environment: [SystemdJob.busOverrideVariable: bus.address],
                                                        callTimeout: callTimeout)
            let placement = ScopePlacement(bus: manager, loop: loop, mount: root)
            suspension = Suspension(loop: loop, host: port)
            processes = ProcessSupervisor(loop: loop, host: port, suspension: suspension,
                                          fdStore: FDStore(serviceManager: ServiceManager(environment: [:])),
                                          retired: RetiredSources(loop: loop), environment: [:])
            var policy = AppPolicy()
            policy.speaksProtocol = false
            app = AppRuntime(name: "demo", config: AppConfig(name: "demo", exec: ["/bin/sh", ScopeChargeTests.fixture, bus.recordFile.path],
                                                             policy: policy),
                             place: placement)
            port.apps["demo"] = app
        }

        /// The scope's cgroup as /proc/PID/cgroup names it.
        var scopeLine: String { "0::" + ScopeUnits.cgroupPath(app: "demo", mount: root).dropFirst("/sys/fs/cgroup/unified".count) }

        /// Runs the loop's callbacks until `done` holds, for `limit` at most; returns whether it held.
        @discardableResult
        func run(until done: () -> Bool, limit: Duration = .seconds(20)) -> Bool {
            let deadline = ContinuousClock.now + limit
            while !done() && ContinuousClock.now < deadline { _ = sd_event_run(loop.event, 10_000) }
            return done()
        }

        /// The app's first line, once it wrote it.
        func firstLine() -> String? { bus.requests.first { $0.hasPrefix("0::") } }

        /// The app's process ends, the scopes' cgroups go, and the fake stops.
        func end() {
            if let pid = app.pid {
                kill(-pid, SIGKILL)
                run(until: { port.inputs.contains { $0.hasPrefix("event exited") } }, limit: .seconds(10))
            }
            for path in [ScopeUnits.cgroupPath(app: "demo", mount: root), root + "/" + ScopeUnits.slice, root] {
                for _ in 0..<100 where rmdir(path) != 0 && errno == EBUSY { usleep(10_000) }
            }
            bus.stop()
        }
    }

    /// The test process's own cgroup2 line: the daemon's cgroup.
    private var daemonLine: String {
        get throws { try #require(try readKernelFile("/proc/self/cgroup").split(separator: "\n").map(String.init).first { $0.hasPrefix("0::") }) }
    }

    @Test func anAppsFirstActHappensInItsScopeNotInTheDaemonsCgroup() throws {
        let t = try Launch(mode: { "place \($0) \(Self.startJobDelay)" })
        defer { t.end() }
        #expect(t.processes.spawn(t.app, LaunchOptions(launchedBy: "lifectl")) == nil)
        #expect(t.run(until: { t.firstLine() != nil }), "the app ran: \(t.bus.requests)")

        let requests = t.bus.requests
        let daemon = try daemonLine
        #expect(t.firstLine() == t.scopeLine, "its first act saw its scope, not the daemon's \(daemon)")
        let placed = try #require(requests.firstIndex(of: "Placed app-lifecycled-demo.scope"), "\(requests)")
        let ran = try #require(requests.firstIndex { $0.hasPrefix("0::") })
        #expect(placed < ran, "it ran once systemd's start job had moved it: \(requests)")
        #expect(t.app.cgroup?.unifiedPath == ScopeUnits.cgroupPath(app: "demo", mount: t.root))
        #expect(!t.port.inputs.contains { $0.hasPrefix("event spawnFailed") })
    }

    @Test func aHeldLaunchsPidIsSavedForTheNextDaemonOnceItIsKnown() throws {
        let t = try Launch(mode: { "place \($0) \(Self.startJobDelay)" })
        defer { t.end() }
        #expect(t.processes.spawn(t.app, LaunchOptions(launchedBy: "lifectl")) == nil)
        // The model's transition came with the spawn, before any pid: a state file saved then names none.
        #expect(t.app.pid == nil && t.port.dirtied.isEmpty)
        #expect(t.run(until: { t.app.pid != nil }), "the child reported its pid")
        #expect(t.port.dirtied == ["demo"], "the state file is saved again, with the pid, once it is known")
    }

    @Test func anAppWhoseScopeFailsStillRunsOnceTheFailureIsKnown() throws {
        let t = try Launch(mode: { _ in "refuse \(Self.startJobDelay)" })
        defer { t.end() }
        #expect(t.processes.spawn(t.app, LaunchOptions(launchedBy: "lifectl")) == nil)
        #expect(t.run(until: { t.firstLine() != nil }), "the app ran: \(t.bus.requests)")

        let requests = t.bus.requests
        let daemon = try daemonLine
        #expect(t.firstLine() == daemon, "without a scope it runs where the daemon is")
        let refused = try #require(requests.firstIndex(of: "StartTransientUnit app-lifecycled-demo.scope"), "\(requests)")
        let ran = try #require(requests.firstIndex { $0.hasPrefix("0::") })
        #expect(refused < ran, "it waited for systemd's answer: \(requests)")
        #expect(t.app.cgroup == nil, "placed by its process group alone")
        #expect(t.app.pid.map { getpgid($0) == $0 } == true)
    }

    @Test func aHeldLaunchThatFailsBeforeItIsHeldIsAFailedSpawnAndLeavesNoChild() throws {
        let t = try Launch(mode: { "place \($0) 0" })
        defer { t.end() }
        t.app.config.workingDirectory = "/nonexistent/directory"
        #expect(t.processes.spawn(t.app, LaunchOptions(launchedBy: "lifectl")) == nil, "the failure comes from the child")
        #expect(t.run(until: { t.port.inputs.contains { $0.hasPrefix("event spawnFailed(app: \"demo\"") } }), "\(t.port.inputs)")
        let failure = t.port.inputs.first { $0.hasPrefix("event spawnFailed") } ?? ""
        #expect(failure.contains("No such file or directory"), "\(failure)")
        #expect(t.app.pid == nil && t.app.launchHold == nil)
        #expect(!t.bus.requests.contains("StartTransientUnit app-lifecycled-demo.scope"), "no scope for a process that never was the app's")
        #expect(t.run(until: { unexecutedChildren() == 0 }), "the failed child is reaped")
    }

    /// This process's children that never exec'd: they still bear the name of the held spawn's thread that made them.
    /// Found by their parent process in /proc/PID/stat, not through the threads' children files: a held spawn's
    /// thread ends as its child does, and the child moves to another thread's list meanwhile, so a read of those
    /// files one after another can miss it.
    private func unexecutedChildren() -> Int {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { entry in
            guard Int32(entry) != nil, let stat = try? readKernelFile("/proc/\(entry)/stat"),
                  let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return stat[stat.index(after: open)..<close].hasPrefix("held spawn") && fields.count > 1 && Int32(fields[1]) == getpid()
        }.count
    }

    /// The names of this process's threads that are held spawns' (`cs_spawn_held`).
    private func heldSpawnThreads() -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { ((try? readKernelFile("/proc/self/task/\($0)/comm")) ?? "").hasPrefix("held spawn") }.count
    }

    @Test func aHeldChildIsLeftBlockedByNeitherAStopNorTheDaemonsEnd() throws {
        // systemd never answers: each child stays held for the whole test, unless something ends it.
        let t = try Launch(mode: { _ in "late-start" }, callTimeout: .seconds(120))
        defer { t.end() }
        let other = AppRuntime(name: "other", config: t.app.config, place: t.app.place)
        t.port.apps["other"] = other
        #expect(t.processes.spawn(t.app, LaunchOptions(launchedBy: "lifectl")) == nil)
        #expect(t.processes.spawn(other, LaunchOptions(launchedBy: "lifectl")) == nil)
        #expect(t.run(until: { t.app.pid != nil && other.pid != nil }), "both children reported their pids")
        let (stopped, orphaned) = (try #require(t.app.pid), try #require(other.pid))
        // A child the daemon starts meanwhile must not hold a hold socket open (every one is close-on-exec).
        var bystander: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("sleep"), strdup("300"), nil]
        defer { for argument in argv { free(argument) } }
        #expect(posix_spawn(&bystander, "/bin/sleep", nil, nil, argv, environ) == 0)
        defer { kill(bystander, SIGKILL); waitpid(bystander, nil, 0) }

        // A stop's SIGTERM to the group ends a held child, and the app's end is reported as any exit.
        kill(-stopped, SIGTERM)
        #expect(t.run(until: { t.port.inputs.contains { $0.hasPrefix("event exited(app: \"demo\"") } }), "\(t.port.inputs)")
        #expect(t.app.launchHold == nil)

        // The daemon's end goes as at its exit: the other child, still held, ends instead of running.
        other.launchHold = nil
        #expect(t.run(until: { t.port.inputs.contains { $0.hasPrefix("event exited(app: \"other\"") } }), "\(t.port.inputs)")
        let exit = t.port.inputs.first { $0.hasPrefix("event exited(app: \"other\"") } ?? ""
        #expect(exit.contains("status \(CS_HOLD_DROPPED_STATUS)"), "\(exit): it exited on its own, as a held child does")
        #expect(kill(orphaned, 0) != 0)
        #expect(t.run(until: { heldSpawnThreads() == 0 }), "no spawn's thread is left waiting")
        #expect(!t.bus.requests.contains { $0.hasPrefix("0::") }, "neither ran its program: \(t.bus.requests)")
    }

    @Test func aHeldLaunchWhoseHoldCannotBeWatchedIsAFailedSpawnAndItsChildIsReaped() throws {
        // What is not real: the failure. sd-event's watch fails when epoll takes no more descriptors (ENOSPC once the
        // user's fs.epoll.max_user_watches are used up), a limit shared with every process of the user on this machine.
        let t = try Launch(mode: { _ in "late-start" }, callTimeout: .seconds(120))
        defer { t.end() }
        t.processes.watchHold = { (_, _) throws(SystemError) in throw SystemError(operation: "watch fd", errno: ENOSPC) }
        let failure = t.processes.spawn(t.app, LaunchOptions(launchedBy: "lifectl"))
        #expect(failure?.hasPrefix("Failed to watch the hold of /bin/sh") == true, "a failed spawn, as the others: \(failure ?? "nil")")
        #expect(t.app.pid == nil && t.app.launchHold == nil)
        #expect(t.run(until: { unexecutedChildren() == 0 && t.processes.abandoned.count == 0 }), "the child ended and is reaped")
        #expect(t.run(until: { heldSpawnThreads() == 0 }), "no spawn's thread is left waiting")
        #expect(!t.bus.requests.contains { $0.hasPrefix("0::") }, "it never ran its program: \(t.bus.requests)")
    }

    @Test func aHeldChildWhoseLaunchGoesBeforeItToldItsPidEndsAndIsReaped() throws {
        // The hold goes as it does when a reload removes the app, or the app is launched again, before the child
        // reported: nothing watches the child any more, and nothing knows its pid.
        let t = try Launch(mode: { _ in "late-start" }, callTimeout: .seconds(120))
        defer { t.end() }
        #expect(t.processes.spawn(t.app, LaunchOptions(launchedBy: "lifectl")) == nil)
        #expect(t.app.pid == nil && t.app.launchHold != nil)
        t.app.launchHold = nil
        #expect(t.run(until: { t.processes.abandoned.count == 0 }), "its pid was read from its report and it was reaped")
        #expect(unexecutedChildren() == 0, "no zombie is left")
        #expect(!t.port.inputs.contains { $0.hasPrefix("event exited") }, "the model never heard of it: \(t.port.inputs)")
        #expect(!t.bus.requests.contains { $0.hasPrefix("0::") }, "it never ran its program: \(t.bus.requests)")
    }

    @Test func aStopBeforeTheHeldChildToldItsPidEndsItBeforeItRuns() throws {
        // systemd never answers: without the stop the child would wait for its scope for the whole test.
        let t = try Launch(mode: { _ in "late-start" }, callTimeout: .seconds(120))
        defer { t.end() }
        #expect(t.processes.spawn(t.app, LaunchOptions(launchedBy: "lifectl")) == nil)
        #expect(t.app.pid == nil, "the stop comes before the child's report")
        t.suspension.signal(t.app, .terminate)
        #expect(t.run(until: { t.port.inputs.contains { $0.hasPrefix("event exited(app: \"demo\"") } }), "\(t.port.inputs)")
        let exit = t.port.inputs.first { $0.hasPrefix("event exited(app: \"demo\"") } ?? ""
        #expect(exit.contains("killed by signal \(SIGTERM)"), "\(exit): the stop's SIGTERM ended it")
        #expect(!t.bus.requests.contains { $0.hasPrefix("0::") }, "it never ran its program: \(t.bus.requests)")
    }
}
