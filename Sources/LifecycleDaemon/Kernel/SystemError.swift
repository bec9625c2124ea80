import Glibc

/// A system call that failed: what was attempted and the errno it set.
public struct SystemError: Error, Equatable, CustomStringConvertible {
    /// What was attempted, phrased to follow "Failed to": `open /sys/fs/cgroup/x`.
    public var operation: String
    public var errno: Int32

    public init(operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }

    public var description: String {
        "Failed to \(operation): \(String(cString: strerror(errno)))"
    }
}

/// Calls `body`, a system call that returns -1 and sets errno on failure, until it does not
/// fail with EINTR. The one place that retries EINTR.
@discardableResult
func retryingEINTR<Result: SignedInteger>(
    _ operation: @autoclosure () -> String, _ body: () -> Result
) throws(SystemError) -> Result {
    while true {
        let result = body()
        if result != -1 { return result }
        let code = Glibc.errno
        if code != EINTR { throw SystemError(operation: operation(), errno: code) }
    }
}

// MARK: - Small kernel files (/proc, /sys/fs/cgroup)

/// Reads a whole (small) file with plain read(2): /proc and cgroup files report a size of 0,
/// so read until end of file.
func readKernelFile(_ path: String) throws(SystemError) -> String {
    try withKernelFileBytes(path) { String(decoding: $0, as: UTF8.self) }
}

/// Calls `body` with the bytes of a whole (small) kernel file. The first 4 KiB are read into a buffer on the
/// stack and handed over without a copy (a /proc/PID/stat, a cgroup.procs of a few hundred pids); longer
/// files are gathered into an array. This runs on every transition (priorities, suspend confirmations), so
/// it allocates nothing in the common case: the earlier version zero-filled a 4 KiB array per read.
func withKernelFileBytes<Result>(_ path: String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) throws(SystemError) -> Result {
    let fd = try retryingEINTR("open \(path)") { open(path, O_RDONLY | O_CLOEXEC) }
    defer { close(fd) }
    return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4096) { (chunk) throws(SystemError) -> Result in
        var used = 0
        while used < chunk.count {
            let count = try retryingEINTR("read \(path)") { read(fd, chunk.baseAddress! + used, chunk.count - used) }
            if count == 0 { return body(UnsafeBufferPointer(rebasing: chunk[..<used])) }
            used += count
        }
        // More than the buffer holds: gather the rest.
        var bytes = Array(chunk)
        while true {
            let count = try retryingEINTR("read \(path)") { read(fd, chunk.baseAddress, chunk.count) }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[..<count])
        }
        return bytes.withUnsafeBufferPointer(body)
    }
}

/// Writes `value` with a single write(2): cgroup and /proc control files take one value per write.
func writeKernelFile(_ path: String, _ value: String) throws(SystemError) {
    let fd = try retryingEINTR("open \(path)") { open(path, O_WRONLY | O_CLOEXEC) }
    defer { close(fd) }
    let bytes = Array(value.utf8)
    let written = try retryingEINTR("write '\(value)' to \(path)") { write(fd, bytes, bytes.count) }
    if written != bytes.count { throw SystemError(operation: "write '\(value)' to \(path)", errno: EIO) }
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
