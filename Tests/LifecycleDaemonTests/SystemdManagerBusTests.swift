import CSupport
import Foundation
import Glibc
import Testing
@testable import LifecycleDaemon

/// The start of the scope placement's connection to systemd: its one synchronous question is bounded, and where
/// systemd does not answer the daemon places apps itself. (Scopes themselves need systemd as PID 1: the VM mode of
/// `make test-systemd` runs them.)
@Suite struct SystemdManagerBusTests {
    /// A listening socket that never accepts: the kernel completes the connection, and nobody ever answers.
    func muteSocket() throws -> (path: String, fd: Int32) {
        let path = NSTemporaryDirectory() + "mute-bus-\(getpid())-\(UUID().uuidString.prefix(8))"
        let fd = cs_unix_listen(path, 8)
        try #require(fd >= 0, "listen on \(path): errno \(-fd)")
        return (path, fd)
    }

    @Test func aBusThatNeverAnswersIsGivenUpAfterTheTimeoutNotSdBusesOwn() throws {
        let (path, fd) = try muteSocket()
        defer { close(fd); unlink(path) }
        let loop = try EventLoop()
        do {
            _ = try SystemdManagerBus.connect(loop: loop, environment: [SystemdJob.busOverrideVariable: "unix:path=\(path)"],
                                              timeout: .milliseconds(200))
            Issue.record("connected to a socket that never answers")
        } catch {
            #expect(error.description.contains("no answer from systemd within"), "\(error)")
        }
    }

    @Test func rootAsksSystemdAndAUserAsksItsOwnManager() throws {
        #expect(try SystemdManagerBus.address(environment: ["XDG_RUNTIME_DIR": "/run/user/0"], euid: 0)
                == "unix:path=/run/systemd/private")
        // systemd's private socket is root's alone: a user's service asks the manager `systemctl --user` asks.
        #expect(try SystemdManagerBus.address(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"], euid: 1000)
                == "unix:path=/run/user/1000/systemd/private")
        #expect(try SystemdManagerBus.address(environment: [SystemdJob.busOverrideVariable: "unix:path=/t", "XDG_RUNTIME_DIR": "/r"],
                                              euid: 1000) == "unix:path=/t")
        for environment in [[:], ["XDG_RUNTIME_DIR": ""], ["XDG_RUNTIME_DIR": "relative"]] {
            #expect(throws: SystemdBusError.self, "\(environment)") { try SystemdManagerBus.address(environment: environment, euid: 1000) }
        }
    }

    @Test func withoutAnAnsweringSystemdAppsAreNotPlacedInScopes() throws {
        let loop = try EventLoop()
        let (placement, reason) = ScopePlacement.make(loop: loop, environment: ["INVOCATION_ID": "x"])
        #expect(placement == nil)
        #expect(!reason.isEmpty)
        let (forced, why) = ScopePlacement.make(loop: loop, environment: ["LIFECYCLED_PLACEMENT": "cgroupfs"])
        #expect(forced == nil)
        #expect(why == "LIFECYCLED_PLACEMENT=cgroupfs")
    }
}
