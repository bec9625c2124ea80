import Foundation
import Glibc
import Testing
@testable import LifecycleDaemon

/// ReconnectingSource on a real loop: when the next attempt comes (a doubling delay, or the server's socket
/// appearing in a real directory through inotify).
@Suite struct ReconnectingSourceTests {
    /// Runs the loop until `exit` is called, or 5 s pass (then the expectation fails).
    private func run(_ loop: EventLoop) throws {
        let guardTimer = try loop.timer { loop.exit(code: 1) }
        guardTimer.arm(after: .seconds(5))
        #expect(loop.run() == 0, "the loop ran into the 5 s guard")
    }

    private func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "reconnecting-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test func withoutASocketTheDelayDoublesUpToItsCapAndASuccessStartsOver() throws {
        let loop = try EventLoop()
        var attempts = 0
        let source = ReconnectingSource(loop: loop, name: "test", first: .milliseconds(10), cap: .milliseconds(40)) {
            attempts += 1
            loop.exit()
        }
        #expect(source.failed(nil) == .after(.milliseconds(10)))
        #expect(source.failed(nil) == .after(.milliseconds(20)))
        #expect(source.failed(nil) == .after(.milliseconds(40)))
        #expect(source.failed(nil) == .after(.milliseconds(40)), "the cap")
        source.succeeded()
        #expect(source.failed(nil) == .after(.milliseconds(10)), "a success starts over from the first delay")
        try run(loop)
        #expect(attempts == 1, "one timer, armed for the last delay")
    }

    /// A socket that is there but refused is tried again by the timer: watching for it would wait forever.
    @Test func aSocketThatIsThereIsRetriedByTheTimer() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/server"
        #expect(FileManager.default.createFile(atPath: socket, contents: nil))
        let loop = try EventLoop()
        var attempts = 0
        let source = ReconnectingSource(loop: loop, name: "test", first: .milliseconds(10), cap: .seconds(1)) {
            attempts += 1
            loop.exit()
        }
        #expect(source.failed(nil, socket: socket) == .after(.milliseconds(10)))
        try run(loop)
        #expect(attempts == 1)
    }

    /// The socket's directory is missing too: the nearest existing one is watched for it, then the directory for
    /// the socket; each appearance brings an attempt at once, and no timer runs meanwhile.
    @Test func aMissingSocketIsWaitedForThroughItsMissingDirectory() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/run/server"
        let loop = try EventLoop()
        var attempts: [Bool] = []
        var source: ReconnectingSource!
        source = ReconnectingSource(loop: loop, name: "test", first: .milliseconds(1), cap: .milliseconds(1)) {
            let there = access(socket, F_OK) == 0
            attempts.append(there)
            if there { return loop.exit() }
            #expect(source.failed(nil, socket: socket) == .whenSocketAppears(socket))
        }
        #expect(source.failed(nil, socket: socket) == .whenSocketAppears(socket))
        // Later than the timer's 1 ms would have fired, had one been armed.
        let makeDirectory = try loop.timer { _ = mkdir(directory + "/run", 0o700) }
        makeDirectory.arm(after: .milliseconds(50))
        let makeSocket = try loop.timer { _ = FileManager.default.createFile(atPath: socket, contents: nil) }
        makeSocket.arm(after: .milliseconds(100))
        try run(loop)
        #expect(attempts == [false, true], "one attempt when the directory appeared, one when the socket did")
    }
}
