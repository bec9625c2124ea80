import CSupport
import Foundation
import Glibc
import Testing
@testable import LifecycleDaemon

/// `ServerPeers` against the real kernel: a listener of this test's own stands for the sound server's socket, and
/// this process's connections to it are what /proc/self/fd and sock_diag show.
@Suite struct AudioServerPeersTests {
    @Test func aClaimCountsOnlyWhileTheProcessHoldsAConnectionForEachClaimant() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lifecycled-peers-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("native").path
        let listener = cs_unix_listen(path, 8)
        try #require(listener >= 0)
        defer { close(listener) }
        // Another listener's connection is not one to the server.
        let otherPath = directory.appendingPathComponent("other").path
        let other = cs_unix_listen(otherPath, 8)
        try #require(other >= 0)
        defer { close(other) }
        let stranger = cs_unix_connect(otherPath)
        defer { close(stranger) }

        let peers = try #require(ServerPeers(socketPath: path))
        let me = getpid()
        #expect(peers.connections(of: me) == 0)
        #expect(peers.confirmed([1: me]) == [])

        let first = cs_unix_connect(path)
        let second = cs_unix_connect(path)
        // Accepted, as a server does: a connection still in the backlog has no socket inode on the server's side.
        let accepted = [cs_accept_cloexec_nonblock(listener), cs_accept_cloexec_nonblock(listener)]
        defer { for fd in [first, second] + accepted { close(fd) } }
        try #require(accepted.allSatisfy { $0 >= 0 })
        let duplicate = dup(first)
        defer { close(duplicate) }
        // The accepted ends this process also holds are the server's side, not connections to it; a dup is the same.
        #expect(peers.connections(of: me) == 2)
        #expect(peers.confirmed([1: me, 2: me]) == [me])
        #expect(peers.confirmed([1: me, 2: me, 3: me]) == [], "a third claimant is one more than the connections")
        #expect(peers.confirmed([1: me, 2: 1]) == [me], "init holds no connection to this server")
    }

    @Test func connectionsToAnAddedSocketCountOnceItIsAdded() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("lifecycled-peers-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let pulsePath = directory.appendingPathComponent("native").path
        let pipeWirePath = directory.appendingPathComponent("pipewire-0").path
        let listeners = [cs_unix_listen(pulsePath, 8), cs_unix_listen(pipeWirePath, 8)]
        defer { for fd in listeners { close(fd) } }
        try #require(listeners.allSatisfy { $0 >= 0 })
        let client = cs_unix_connect(pipeWirePath)
        let accepted = cs_accept_cloexec_nonblock(listeners[1])
        defer { for fd in [client, accepted] { close(fd) } }
        try #require(accepted >= 0)

        let peers = try #require(ServerPeers(socketPath: pulsePath))
        let me = getpid()
        #expect(peers.confirmed([1: me]) == [])
        #expect(!peers.addSocket(directory.path), "a directory is no socket")
        #expect(peers.addSocket(pipeWirePath))
        #expect(peers.connections(of: me) == 1)
        #expect(peers.confirmed([1: me]) == [me], "the verdict reached before the socket was added is not kept")
        #expect(peers.confirmed([1: me, 2: me]) == [])
    }

    @Test func pipeWiresSocketIsLookedForBesideItsPulseAudioService() {
        #expect(ServerPeers.pipeWireSocket(besidePulseSocket: "/run/user/1000/pulse/native") == "/run/user/1000/pipewire-0")
        #expect(ServerPeers.pipeWireSocket(besidePulseSocket: "/tmp/pulse.sock") == nil)
    }

    @Test func onlyAServerOnASocketFileCanBeAskedAbout() {
        #expect(ServerPeers.socketPath(inServerString: "unix:/run/user/1000/pulse/native") == "/run/user/1000/pulse/native")
        #expect(ServerPeers.socketPath(inServerString: "{0123abcd}unix:/run/pulse/native") == "/run/pulse/native")
        #expect(ServerPeers.socketPath(inServerString: "/tmp/pulse/native") == "/tmp/pulse/native")
        #expect(ServerPeers.socketPath(inServerString: "tcp:localhost:4713") == nil)
        #expect(ServerPeers(socketPath: "/nonexistent/native") == nil)
    }
}
