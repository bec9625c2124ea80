import CSupport
import Dispatch
import Foundation
import Glibc
import Testing
@testable import LifecycleDaemon

/// Config files must be regular files (a symlink to one is followed): a FIFO, a socket, a directory or a device
/// in the config directory is a diagnostic naming the file, never a daemon blocked in open() or reading a device.
@Suite(.serialized) struct ConfigFileTypeTests {
    let root: String

    init() throws {
        root = NSTemporaryDirectory() + "lifecycled-config-types-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root + "/apps", withIntermediateDirectories: true)
    }

    func write(_ relative: String, _ text: String) throws {
        try text.write(toFile: root + "/" + relative, atomically: false, encoding: .utf8)
    }

    func makeSocket(_ relative: String) throws -> Int32 {
        let fd = cs_unix_listen(root + "/" + relative, 1)
        try #require(fd >= 0, "listen: errno \(-fd)")
        return fd
    }

    /// Loads the directory on another thread; a load still blocked after the wait is a failure, and the FIFOs are
    /// then opened for writing so that the blocked open() returns and the test ends.
    func loadWithoutBlocking(fifos: [String]) throws -> LoadedConfig {
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var loaded: LoadedConfig?  // written once by the loading thread, read after the semaphore
        let directory = root
        Thread.detachNewThread {
            loaded = ConfigLoader.load(directory: directory)
            done.signal()
        }
        if done.wait(timeout: .now() + 10) == .timedOut {
            Issue.record("the loader is blocked")
            for fifo in fifos {
                let fd = open(root + "/" + fifo, O_WRONLY)
                if fd >= 0 { close(fd) }
            }
            done.wait()
        }
        return try #require(loaded)
    }

    func diagnostic(_ loaded: LoadedConfig, _ file: String) -> String? {
        loaded.diagnostics.first { $0.file == file }?.message
    }

    @Test func nonRegularAppFilesAreDiagnosedAndTheRestLoads() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        try write("apps/good.conf", "[App]\nExec=/bin/true\n")
        try write("elsewhere.conf", "[App]\nExec=/bin/true\n")
        #expect(symlink(root + "/elsewhere.conf", root + "/apps/linked.conf") == 0)
        #expect(mkfifo(root + "/apps/fifo.conf", 0o644) == 0)
        #expect(mkdir(root + "/apps/dir.conf", 0o755) == 0)
        let socketFD = try makeSocket("apps/sock.conf")
        defer { close(socketFD) }
        #expect(symlink("/dev/zero", root + "/apps/zero.conf") == 0)

        let loaded = try loadWithoutBlocking(fifos: ["apps/fifo.conf"])
        #expect(Set(loaded.apps.keys) == ["good", "linked"], "a symlink to a regular file is followed")
        #expect(diagnostic(loaded, "apps/fifo.conf") == "Failed to read: not a regular file (a FIFO), app 'fifo' not loaded")
        #expect(diagnostic(loaded, "apps/dir.conf") == "Failed to read: not a regular file (a directory), app 'dir' not loaded")
        #expect(diagnostic(loaded, "apps/sock.conf") == "Failed to read: not a regular file (a socket), app 'sock' not loaded")
        #expect(diagnostic(loaded, "apps/zero.conf") == "Failed to read: not a regular file (a character device), app 'zero' not loaded")
    }

    @Test func aFIFOAsTheDaemonFileMeansTheDefaults() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(mkfifo(root + "/lifecycled.conf", 0o644) == 0)
        try write("apps/good.conf", "[App]\nExec=/bin/true\n")
        let loaded = try loadWithoutBlocking(fifos: ["lifecycled.conf"])
        #expect(diagnostic(loaded, "lifecycled.conf") == "Failed to read: not a regular file (a FIFO), using the defaults")
        #expect(Set(loaded.apps.keys) == ["good"])
    }

    @Test func aFileOverTheBoundIsRefusedBeforeItIsRead() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let fd = open(root + "/apps/huge.conf", O_CREAT | O_WRONLY, 0o644)
        #expect(ftruncate(fd, off_t(ConfigLoader.maximumFileSize + 1)) == 0)
        close(fd)
        let loaded = try loadWithoutBlocking(fifos: [])
        #expect(diagnostic(loaded, "apps/huge.conf") == "Failed to read: larger than 4 MiB, app 'huge' not loaded")
    }
}
