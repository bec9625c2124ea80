import Glibc

// Small kernel files (/proc, /sys/fs/cgroup): opened, used and closed at each call. They are attributes, not
// stored data, so nothing is cached; docs/PLATFORM.md says how they behave.

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
