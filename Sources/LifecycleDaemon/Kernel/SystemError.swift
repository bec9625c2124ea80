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
