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
    let fd = try retryingEINTR("open \(path)") { open(path, O_RDONLY | O_CLOEXEC) }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = try retryingEINTR("read \(path)") {
            chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        }
        if count == 0 { break }
        bytes.append(contentsOf: chunk[0..<count])
    }
    return String(decoding: bytes, as: UTF8.self)
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
