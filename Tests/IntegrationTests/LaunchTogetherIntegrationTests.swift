import Foundation
import Glibc
import Testing

/// The apps a daemon launches at its start are spawned on worker threads, side by side, and each launch is
/// finished (pid, output, connection, priority) once the model has moved the app already. End to end: every app
/// runs its own program, in its own cgroup, talks on its own socket, and has the priority of its state.
@Suite("apps launched together at start-up", .serialized)
struct LaunchTogetherIntegrationTests {
    @Test("every auto-launched app gets its own process, socket, cgroup and the priority of its state")
    func autoLaunchedAppsAreEachSetUpInFull() throws {
        var apps: [String: String] = [:]
        let plain = (1...12).map { "plain\($0)" }, clients = (1...6).map { "client\($0)" }
        for name in plain {
            // Background at once: its priority (oom_score_adj 500) can only come from the launch's finish,
            // since the model moved it to the background before its pid was known.
            apps[name] = "[App]\nExec=/bin/sleep 1000\nProtocol=none\nAutoLaunch=background\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
        }
        for name in clients {
            apps[name] = "[App]\nExec=\(DaemonHarness.pythonClient)\nAutoLaunch=background\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
        }
        try DaemonHarness.running(apps) { daemon in
            try daemon.waitUntil("every client acknowledged its launch in the background") {
                try clients.allSatisfy { name in
                    try daemon.status(name).state.rawValue == "background" && daemon.types(name).contains("didEnterBackground")
                }
            }
            var pids: [String: pid_t] = [:]
            for name in plain + clients {
                let status = try daemon.status(name)
                let pid = try #require(status.pid, "\(name) has a pid")
                pids[name] = pid
                #expect(status.state.rawValue == "background", "\(name)")
                #expect(Kernel.exists(pid), "\(name)'s process runs")
                let adj = try String(contentsOfFile: "/proc/\(pid)/oom_score_adj", encoding: .utf8)
                #expect(adj.trimmingCharacters(in: .whitespacesAndNewlines) == "500", "\(name) has the background priority")
                if status.cgroup != nil {
                    let cgroups = try String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8)
                    #expect(cgroups.contains("/app-\(name)\n"), "\(name)'s process is in its own cgroup: \(cgroups)")
                }
            }
            #expect(Set(pids.values).count == pids.count, "one process per app")
            for name in plain {
                let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pids[name]!)/exe")
                #expect(exe.hasSuffix("/sleep"), "\(name) runs its own program: \(exe)")
            }
            for name in clients {
                // The hello came over the socket handed to this app as fd 3: its records carry its own name and pid.
                let hello = try #require(daemon.records(name).first { $0.type == "hello" })
                #expect(hello.pid == pids[name], "\(name) said hello from its own process")
                #expect(daemon.types(name) == ["hello", "didFinishLaunching", "didEnterBackground"], "\(name)")
            }
            for name in plain + clients {
                #expect(daemon.log.contains("\(name): started pid \(pids[name]!): "), "the launch of \(name) was logged with its pid")
            }
        }
    }
}
