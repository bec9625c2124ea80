import Testing
@testable import LifecycleDaemon

/// The environment an app starts with: a small clean one, as systemd gives its services, plus its `Environment=`.
@Suite struct SpawnEnvironmentTests {
    private let daemon = ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TZ": "UTC", "HOME": "/root", "USER": "root",
                          "LOGNAME": "root", "XDG_RUNTIME_DIR": "/run/user/0", "SECRET": "x", "LISTEN_FDS": "3"]

    @Test func onlyTheWellKnownVariablesOfTheDaemonReachTheApp() {
        let environment = ProcessSupervisor.environment(for: AppConfig(name: "a", exec: ["a"]), credentials: nil, daemon: daemon)
        #expect(environment == ["PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TZ=UTC", "HOME=/root", "USER=root", "LOGNAME=root",
                                "XDG_RUNTIME_DIR=/run/user/0"])
    }

    @Test func anAppRunAsAnotherUserGetsThatUsersNamesAndHomeInsteadOfTheDaemons() {
        let credentials = Credentials(uid: 1000, gid: 1000, groups: [], userName: "alice", home: "/home/alice")
        let environment = ProcessSupervisor.environment(for: AppConfig(name: "a", exec: ["a"]), credentials: credentials, daemon: daemon)
        #expect(environment == ["PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TZ=UTC", "HOME=/home/alice", "USER=alice", "LOGNAME=alice"])
    }

    @Test func theAppsEnvironmentSettingReplacesAVariableOfTheSameNameAndComesLast() {
        let config = AppConfig(name: "a", exec: ["a"], environment: ["LANG=de_DE.UTF-8", "MODE=demo"])
        let environment = ProcessSupervisor.environment(for: config, credentials: nil, daemon: ["PATH": "/bin", "LANG": "C.UTF-8"])
        #expect(environment == ["PATH=/bin", "LANG=de_DE.UTF-8", "MODE=demo"])
    }
}
