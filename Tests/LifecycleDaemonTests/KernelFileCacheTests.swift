import Glibc
import Testing
@testable import LifecycleDaemon

/// The cache of kept descriptors itself (KernelFiles.swift), on a cache of the test's own (not the daemon's
/// shared one, which other tests use in parallel). Real files in a temporary directory and a real process's
/// /proc/PID/oom_score_adj; the cgroup cases (a group made again, cgroup.procs read anew) are in
/// KernelCgroupTests.
@Suite struct KernelFileCacheTests {
    @Test func aWriteSetsTheWholeValueAtOffsetZero() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/value"
        try makeFile(path)
        var cache = KernelFileCache()

        try write(&cache, path, "1024")
        try write(&cache, path, "128")
        #expect(try readKernelFile(path) == "1284", "a regular file keeps its tail; kernel attributes take the write whole")
        #expect(cache.openCount == 1, "the second write used the kept descriptor")
        #expect(try cache.read(path) { String(decoding: $0, as: UTF8.self) } == "1284")
        #expect(cache.openCount == 2, "one reader, one writer")
    }

    @Test func atMostCapacityDescriptorsStayOpenTheLeastRecentlyUsedClosedFirst() throws {
        let directory = try TemporaryDirectory()
        var cache = KernelFileCache()
        let count = KernelFileCache.capacity + 6
        for i in 0..<count {
            try makeFile(directory.path + "/\(i)")
            try write(&cache, directory.path + "/\(i)", "x")
            if i >= 1 { try write(&cache, directory.path + "/0", "y") }  // file 0 stays the most recently used
        }
        #expect(cache.openCount == KernelFileCache.capacity)
        // This directory's descriptors alone (other tests open and close theirs meanwhile), each with its number.
        let kept = { Set(openDescriptorTargets().filter { $0.target.hasPrefix(directory.path + "/") }.map { "\($0.name) \($0.target)" }) }
        let before = kept()
        #expect(before.count == KernelFileCache.capacity)
        #expect(before.contains { $0.hasSuffix("/0") } && !before.contains { $0.hasSuffix("/1") }, "file 0 kept, file 1 (the oldest) closed")
        try write(&cache, directory.path + "/0", "z")
        try write(&cache, directory.path + "/\(count - 1)", "z")
        #expect(kept() == before, "both were still open: nothing opened, nothing closed")

        cache.forget(under: directory.path)
        #expect(cache.openCount == 0)
        #expect(kept().isEmpty)
    }

    /// The last files used are found by comparing paths before the dictionary (`Shelf.hints`). A hinted file whose
    /// descriptor was closed (forgotten, as when its cgroup is removed; or evicted) must not be written through its
    /// old number, which the next open gives to another file: here that number goes at once to a file opened by
    /// someone else.
    @Test func aClosedDescriptorIsNeverUsedThroughAHint() throws {
        let directory = try TemporaryDirectory()
        var cache = KernelFileCache()
        let first = directory.path + "/first", other = directory.path + "/other"
        try makeFile(first)
        try makeFile(other)
        try write(&cache, first, "1")  // opened, and the most recent hint
        let number = openDescriptorTargets().first { $0.target == first }?.name
        cache.forget(under: directory.path)
        let stranger = open(other, O_WRONLY | O_CLOEXEC)
        defer { close(stranger) }
        // Usually the very number (tests running in parallel may take it first: then the old number is closed or
        // another test's, and a write through it would fail or go astray; either way "first" must get the value).
        _ = number

        try write(&cache, first, "2")
        #expect(try readKernelFile(first) == "2")
        #expect(try readKernelFile(other) == "", "nothing written through the old number")

        // The same after an eviction: the least recently used, while still among the hints of the other kind.
        #expect(try cache.read(first) { String(decoding: $0, as: UTF8.self) } == "2")
        for i in 0..<KernelFileCache.capacity {
            try makeFile(directory.path + "/\(i)")
            _ = try cache.read(directory.path + "/\(i)") { $0.count }
        }
        #expect(try cache.read(first) { String(decoding: $0, as: UTF8.self) } == "2", "opened again after its eviction")
        cache.forget(under: directory.path)
    }

    @Test func aFileAsLargeAsTheBufferIsLeftToTheCaller() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/large"
        try makeFile(path)
        try writeKernelFile(path, String(repeating: "7", count: 5000))
        var cache = KernelFileCache()

        #expect(try cache.read(path) { $0.count } == nil)
        #expect(try withKernelFileBytesKept(path) { $0.count } == 5000, "read whole by path")
    }

    /// A kept /proc/PID/oom_score_adj names its process: once it has exited and been reaped the write fails (the
    /// descriptor says ESRCH, the path opened again ENOENT), as a write by path did.
    @Test func aKeptDescriptorOfAnExitedProcessFails() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"]))
        var cache = KernelFileCache()
        let path = "/proc/\(pid)/oom_score_adj"

        try write(&cache, path, "500")
        #expect(try readKernelFile(path) == "500\n")
        try write(&cache, path, "900")
        #expect(try readKernelFile(path) == "900\n")

        kill(pid, SIGKILL)
        #expect(children.reap(pid) == .signaled(SIGKILL))
        do {
            try write(&cache, path, "0")
            Issue.record("wrote to the oom_score_adj of a reaped process")
        } catch let error as SystemError {
            #expect(error.errno == ENOENT || error.errno == ESRCH, "\(error)")
        }
        #expect(cache.openCount == 0, "a failed descriptor is not kept")
    }

    private func write(_ cache: inout KernelFileCache, _ path: String, _ value: String) throws {
        let bytes = Array(value.utf8)
        try bytes.withUnsafeBytes { buffer in
            try cache.write(path, buffer, describe: { "write \(value) to \(path)" })
        }
    }

    private func makeFile(_ path: String) throws(SystemError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw SystemError(operation: "create \(path)", errno: errno) }
        close(fd)
    }

}
