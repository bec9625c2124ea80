import Glibc

// Small kernel files (/proc, /sys/fs/cgroup): attributes, not stored data (docs/PLATFORM.md). The functions open,
// use and close them; `KeptKernelFiles` keeps the ones written at every transition open.

/// Reads a whole (small) kernel file as text.
func readKernelFile(_ path: String) throws(SystemError) -> String {
    try withKernelFileBytes(path) { String(decoding: $0, as: UTF8.self) }
}

/// Calls `body` with the bytes of a whole (small) kernel file. /proc and cgroup files report a size of 0, so
/// they are read until end of file. The first 4 KiB go into a buffer on the stack (a /proc/PID/stat, the
/// cgroup.procs of a few hundred processes), as this runs at every transition; longer files are gathered into
/// an array.
func withKernelFileBytes<Result>(_ path: String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) throws(SystemError) -> Result {
    let file = try FileDescriptor.open(path, O_RDONLY)
    return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4096) { (chunk) throws(SystemError) -> Result in
        var used = 0
        while used < chunk.count {
            let count = try file.read(into: UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: chunk[used...])))
            if count == 0 { return body(UnsafeBufferPointer(rebasing: chunk[..<used])) }
            used += count
        }
        var bytes = Array(chunk)
        bytes += try file.readAll()
        return bytes.withUnsafeBufferPointer(body)
    }
}

/// Writes `value` with a single write(2): cgroup and /proc control files take one value per write.
func writeKernelFile(_ path: String, _ value: String) throws(SystemError) {
    try FileDescriptor.open(path, O_WRONLY).writeOnce(value)
}

func fileExists(_ path: String) -> Bool {
    access(path, F_OK) == 0
}

/// Creates a directory; returns false if it already existed.
@discardableResult
func makeDirectory(_ path: String, mode: mode_t = 0o755) throws(SystemError) -> Bool {
    if mkdir(path, mode) == 0 { return true }
    let code = Glibc.errno
    if code == EEXIST { return false }
    throw SystemError(operation: "create \(path)", errno: code)
}

/// The kernel attribute files written or read at every transition (an app's cgroup weights and cgroup2 cgroup.procs,
/// its processes' `oom_score_adj`), kept open so that each use is one pwrite or pread at offset 0 instead of an open,
/// a call and a close (docs/BENCHMARKS.md). At most `limit` stay open, the least recently used going first; a kept
/// descriptor that fails (its group or process was made anew) is reopened once. Used on the loop's thread only.
final class KeptKernelFiles {
    /// A kept file and when it was last used; a class, so that a use updates it without a second lookup.
    private final class Kept {
        let file: FileDescriptor
        var used: UInt64
        init(_ file: FileDescriptor, used: UInt64) { self.file = file; self.used = used }
    }
    private var files: [String: Kept] = [:]
    private var uses: UInt64 = 0
    let limit: Int

    init(limit: Int = 256) { self.limit = limit }

    var count: Int { files.count }

    /// Writes `value` with one pwrite(2) at offset 0, as `writeKernelFile` writes it with a write(2).
    func write(_ path: String, _ value: String) throws(SystemError) {
        try use(path, O_WRONLY) { (file) throws(SystemError) in try file.writeOnce(value, at: 0) }
    }

    /// Calls `body` with the whole file, read by pread(2) from offset 0, as `withKernelFileBytes` reads it.
    func withBytes<Result>(_ path: String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) throws(SystemError) -> Result {
        let bytes = try use(path, O_RDONLY) { (file) throws(SystemError) in try file.readAll(from: 0) }
        return bytes.withUnsafeBufferPointer(body)
    }

    /// Closes the files under `directory` (a process that exited, a group removed).
    func forget(under directory: String) {
        let prefix = directory.hasSuffix("/") ? directory : directory + "/"
        for path in files.keys where path.hasPrefix(prefix) { files[path] = nil }
    }

    /// Closes the `/proc` files of `pids` (an app's processes, killed) and of every process that is gone: a
    /// process's files are of no use once it exits, and are not kept until the limit pushes them out.
    func forgetProcesses(_ pids: [pid_t]) {
        for pid in pids { forget(under: "/proc/\(pid)") }
        for path in files.keys where path.hasPrefix("/proc/") {
            guard let pid = pid_t(path.dropFirst(6).prefix { $0 != "/" }) else { continue }
            if kill(pid, 0) != 0 && errno == ESRCH { files[path] = nil }
        }
    }

    private func use<Result>(_ path: String, _ flags: Int32,
                             _ body: (FileDescriptor) throws(SystemError) -> Result) throws(SystemError) -> Result {
        uses += 1
        if let kept = files[path] {
            do {
                let result = try body(kept.file)
                kept.used = uses
                return result
            } catch {
                files[path] = nil
            }
        }
        let file = try FileDescriptor.open(path, flags)
        let result = try body(file)
        if files.count >= limit, let oldest = files.min(by: { $0.value.used < $1.value.used })?.key { files[oldest] = nil }
        files[path] = Kept(file, used: uses)
        return result
    }
}
