import CSystemd
import Foundation
import Glibc
import LifecycleModel
import TestSupport
import Testing
@testable import LifecycleDaemon

/// The scope placement when systemd is too slow to answer the start of an app's scope: no answer is not a refusal,
/// so the app keeps its scope and its later weights and memory protection reach systemd; only a scope the kernel
/// never shows the process in is given up.
///
/// What is not real: PID 1 here is not systemd and the cgroup2 hierarchy is hybrid, so systemd's manager is
/// `Tests/Fixtures/fake_systemd_bus.c` (real D-Bus through sd-bus; it records the calls and carries none out), and the
/// scope's cgroup is a directory with a plain cgroup.procs file, which the test fills where systemd's start job would
/// move the process. The VM of `make test-systemd` (systemd/vm-squeeze.sh) runs the real thing on systemd 252.
@Suite(.serialized) struct ScopePlacementTests {
    /// How long the placement's calls wait for systemd here.
    static let callTimeout: Duration = .milliseconds(300)

    /// A process in a process group of its own, as the daemon's spawn leaves an app; SIGKILLed and reaped by `end`.
    private func sleeper() throws -> pid_t {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = [strdup("sleep"), strdup("60"), nil]
        defer { for argument in argv { free(argument) } }
        let result = posix_spawn(&pid, "/bin/sleep", nil, &attributes, argv, environ)
        try #require(result == 0, "posix_spawn sleep: \(result)")
        return pid
    }

    private func end(_ pid: pid_t) {
        kill(pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }

    /// Runs the loop's callbacks for `duration`.
    private func run(_ loop: EventLoop, for duration: Duration) {
        let deadline = ContinuousClock.now + duration
        while ContinuousClock.now < deadline {
            let left = deadline - ContinuousClock.now
            _ = sd_event_run(loop.event, UInt64(max(0, left.components.seconds * 1_000_000 + left.components.attoseconds / 1_000_000_000_000)))
        }
    }

    /// What each test works on: the fake manager, where the scopes' cgroups are, the loop, the app's process, and the
    /// placement with the app, whose scope's start is sent.
    private struct LateStart {
        let bus: FakeSystemdBus
        let mount: String
        let loop: EventLoop
        let pid: pid_t
        let placement: ScopePlacement
        let app: AppRuntime
    }

    /// Runs `body` on a placement whose manager never answers StartTransientUnit; the fake and the process end with it.
    private func withLateStart(_ body: (LateStart) throws -> Void) throws {
        let bus = try FakeSystemdBus(mode: "late-start")
        defer { bus.stop() }
        let mount = try TemporaryDirectory()
        let loop = try EventLoop()
        let pid = try sleeper()
        defer { end(pid) }
        let manager = try SystemdManagerBus.connect(loop: loop, environment: [SystemdJob.busOverrideVariable: bus.address],
                                                    callTimeout: Self.callTimeout)
        let placement = ScopePlacement(bus: manager, loop: loop, mount: mount.path)
        let app = AppRuntime(name: "demo", config: AppConfig(name: "demo", exec: ["/bin/sleep", "60"]), place: placement)
        app.began(pid: pid, token: nil)
        placement.began(app)
        try body(LateStart(bus: bus, mount: mount.path, loop: loop, pid: pid, placement: placement, app: app))
    }

    /// The properties of each SetUnitProperties the fake recorded for the app's scope.
    private func propertyCalls(_ bus: FakeSystemdBus) -> [String] {
        bus.requests.filter { $0.hasPrefix("SetUnitProperties app-lifecycled-demo.scope ") }
            .map { String($0.dropFirst("SetUnitProperties app-lifecycled-demo.scope ".count)) }
    }

    @Test func aScopeWhoseStartSystemdAnswersLateKeepsGettingItsWeightsAndMemoryProtection() throws {
        try withLateStart { t in
            var applied = t.placement.apply(.foreground, previous: nil, to: t.app, leader: t.pid, members: [])
            run(t.loop, for: Self.callTimeout * 2)
            #expect(t.bus.requests.contains("StartTransientUnit app-lifecycled-demo.scope"), "\(t.bus.requests)")
            #expect(propertyCalls(t.bus) == ["CPUWeight=100 IOWeight=100 MemoryLow=\(UInt64.max)"], "in front: all of it protected")

            // The start job runs late, after the call timed out: the kernel shows the process in the scope.
            let scope = ScopeUnits.cgroupPath(app: "demo", mount: t.mount)
            try makeDirectory(t.mount + "/lifecycled.slice")
            try makeDirectory(scope)
            #expect(FileManager.default.createFile(atPath: scope + "/cgroup.procs", contents: Data("\(t.pid)\n".utf8)))
            run(t.loop, for: .milliseconds(200))
            #expect(t.app.cgroup?.unifiedPath == scope, "the app keeps the scope systemd started late")

            applied = t.placement.apply(.background, previous: applied, to: t.app, leader: t.pid, members: [])
            run(t.loop, for: .milliseconds(200))
            #expect(propertyCalls(t.bus) == ["CPUWeight=100 IOWeight=100 MemoryLow=\(UInt64.max)", "CPUWeight=20 IOWeight=20 MemoryLow=0"],
                    "in the background, its protection is taken back through systemd")
            #expect(applied == .background)
        }
    }

    @Test func aScopeThatNeverHoldsTheProcessAfterAnUnansweredStartIsGivenUp() throws {
        try withLateStart { t in
            run(t.loop, for: Self.callTimeout + .milliseconds(100))
            #expect(t.app.cgroup != nil, "right after the call timed out, the scope may still come")
            // The sweep's looks (as long again as the call waited, and never fewer than after an answered start) find
            // the process nowhere in the scope: there is none.
            run(t.loop, for: ScopePlacement.sweepInterval * ScopePlacement.sweepTries + .milliseconds(500))
            #expect(t.app.cgroup == nil, "placed by its process group alone")
            #expect(t.placement.displayPath(of: t.app) == nil)
        }
    }
}
