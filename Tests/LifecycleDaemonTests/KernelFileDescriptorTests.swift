import Foundation
import Glibc
@testable import LifecycleDaemon
import Testing

/// `FileDescriptor`: the descriptor is closed when its owner goes, unless given up with `take()`; failures name
/// the operation and the path.
@Suite struct KernelFileDescriptorTests {
    private func isOpen(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) >= 0 }

    @Test func theDescriptorIsClosedWhenItsOwnerGoes() throws {
        var raw: Int32 = -1
        do {
            let file = try FileDescriptor.open("/dev/null", O_RDONLY)
            raw = file.rawValue
            #expect(isOpen(raw))
            #expect(fcntl(raw, F_GETFD) & FD_CLOEXEC != 0, "opened close-on-exec")
        }
        #expect(!isOpen(raw))
    }

    @Test func takeGivesUpOwnership() throws {
        let raw = try FileDescriptor.open("/dev/null", O_RDONLY).take()
        defer { close(raw) }
        #expect(isOpen(raw), "still open after its owner went")
    }

    @Test func closeReportsOnceAndLeavesNothingToCloseLater() throws {
        let file = try FileDescriptor.open("/dev/null", O_RDONLY)
        let raw = file.rawValue
        try file.close()
        #expect(file.rawValue == -1 && !isOpen(raw))
        try file.close()
    }

    @Test func aFailedOpenNamesThePathAndTheErrno() {
        #expect(throws: SystemError(operation: "open /nonexistent/x", errno: ENOENT)) {
            try FileDescriptor.open("/nonexistent/x", O_RDONLY)
        }
    }

    @Test func writeAndReadAllRoundTripMoreThanOneChunk() throws {
        let path = NSTemporaryDirectory() + "file-descriptor-\(getpid())-\(UUID().uuidString.prefix(8))"
        defer { unlink(path) }
        let bytes = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_EXCL, mode: 0o600).write(bytes)
        #expect(try FileDescriptor.open(path, O_RDONLY).readAll(chunkSize: 4096) == bytes)
        #expect(try FileDescriptor.open(path, O_RDONLY).readAll(limit: 100) == Array(bytes.prefix(100)))
    }

    @Test func aFileBeyondTheStackBufferIsReadWhole() throws {
        let path = NSTemporaryDirectory() + "kernel-file-\(getpid())-\(UUID().uuidString.prefix(8))"
        defer { unlink(path) }
        try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_EXCL, mode: 0o600).write(Array(repeating: UInt8(ascii: "x"), count: 5000))
        #expect(try withKernelFileBytes(path) { $0.count } == 5000)
        #expect(try withKernelFileBytes(path) { $0.allSatisfy { $0 == UInt8(ascii: "x") } })
    }

    @Test func keptFilesKeepAtMostTheirLimitClosingTheLeastRecentlyUsed() throws {
        let directory = NSTemporaryDirectory() + "kept-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let kept = KeptKernelFiles(limit: 2)
        for name in ["a", "b", "c"] {
            FileManager.default.createFile(atPath: "\(directory)/\(name)", contents: nil)
        }
        try kept.write("\(directory)/a", "1")
        try kept.write("\(directory)/b", "2")
        try kept.write("\(directory)/a", "3")
        try kept.write("\(directory)/c", "4")
        #expect(kept.count == 2)
        #expect(try kept.withBytes("\(directory)/a") { String(decoding: $0, as: UTF8.self) } == "3",
                "a was used last but one: b went")
        kept.forget(under: directory)
        #expect(kept.count == 0)
    }

    @Test("the /proc files of killed and gone processes are closed, those of running ones kept")
    func keptProcessFilesGoWithTheirProcesses() throws {
        // Our parent stands for the app process that is named while it still runs: it outlives the test.
        let exiting = Process()
        exiting.executableURL = URL(fileURLWithPath: "/bin/sleep")
        exiting.arguments = ["100"]
        try exiting.run()
        let kept = KeptKernelFiles()
        for pid in [getpid(), getppid(), exiting.processIdentifier] {
            _ = try kept.withBytes("/proc/\(pid)/oom_score_adj") { $0.count }
        }
        #expect(kept.count == 3)
        // SIGKILL, as the sleeper inherits the signal mask of a runner whose event loops block SIGTERM.
        kill(exiting.processIdentifier, SIGKILL)
        exiting.waitUntilExit()
        kept.forgetProcesses([])
        #expect(kept.count == 2, "the file of a process that is gone is closed")
        kept.forgetProcesses([getppid()])
        #expect(kept.count == 1, "the file of a process named is closed, while it still runs; ours stays")
        #expect(kill(getppid(), 0) == 0)
    }
}
