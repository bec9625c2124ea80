import Glibc

/// An open file descriptor that this process owns: it is closed when the last reference goes, or earlier by
/// `close()`; `take()` gives the number up to a new owner (sd-event, the service manager's fd store, a child).
///
/// A final class rather than a `~Copyable` struct: descriptors live in arrays (the cgroup files a child joins),
/// in enum payloads and in escaping closures, where a noncopyable value cannot go. Every method names the C call
/// it makes, retries `EINTR` through `retryingEINTR`, and throws a `SystemError` naming the operation and path.
final class FileDescriptor {
    /// The descriptor, or -1 once closed or taken.
    private(set) var rawValue: Int32
    /// What the descriptor names, for error messages ("open /run/x/state/a.json").
    let path: String

    /// Takes ownership of `rawValue`, which must be open.
    init(owning rawValue: Int32, path: String) {
        self.rawValue = rawValue
        self.path = path
    }

    deinit {
        if rawValue >= 0 { _ = Glibc.close(rawValue) }
    }

    /// open(2) of `path`, relative to `directory` when given (openat), with `O_CLOEXEC` added to `flags`.
    static func open(
        _ path: String, _ flags: Int32, mode: mode_t = 0, relativeTo directory: FileDescriptor? = nil,
        describedAs description: String? = nil
    ) throws(SystemError) -> FileDescriptor {
        let at = directory?.rawValue ?? AT_FDCWD
        let shown = description ?? path
        let fd = try retryingEINTR("open \(shown)") { openat(at, path, flags | O_CLOEXEC, mode) }
        return FileDescriptor(owning: fd, path: shown)
    }

    /// read(2) into `buffer`; 0 at end of file.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try retryingEINTR("read \(path)") { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// The whole file from the current offset, read(2) until end of file; at most `limit` bytes are kept.
    func readAll(limit: Int = .max, chunkSize: Int = 16 * 1024) throws(SystemError) -> [UInt8] {
        var bytes: [UInt8] = []
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 1)
        defer { chunk.deallocate() }
        while bytes.count < limit {
            let count = try read(into: chunk)
            if count == 0 { break }
            bytes.append(contentsOf: chunk[..<min(count, limit - bytes.count)])
        }
        return bytes
    }

    /// write(2) of all of `bytes`, in as many calls as the kernel takes; with `offset`, pwrite(2) from there
    /// instead, which leaves the file offset as it was.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: off_t? = nil) throws(SystemError) {
        var done = 0
        while done < bytes.count {
            let count = try retryingEINTR("write \(path)") {
                if let offset { pwrite(rawValue, bytes.baseAddress! + done, bytes.count - done, offset + off_t(done)) }
                else { Glibc.write(rawValue, bytes.baseAddress! + done, bytes.count - done) }
            }
            if count == 0 { throw SystemError(operation: "write \(path)", errno: EIO) }
            done += count
        }
    }

    func write(_ bytes: [UInt8], at offset: off_t? = nil) throws(SystemError) {
        try bytes.withUnsafeBytes { buffer in Result { () throws(SystemError) in try write(buffer, at: offset) } }.get()
    }

    /// One write(2) of `value`, as control files (cgroup, /proc) take one value per call: a short write is an error.
    /// With `offset`, one pwrite(2) there instead, for a control file kept open between writes.
    func writeOnce(_ value: String, at offset: off_t? = nil) throws(SystemError) {
        var utf8 = value
        let count = try utf8.withUTF8 { bytes in
            Result { () throws(SystemError) -> Int in
                bytes.count - (try retryingEINTR("write '\(value)' to \(path)") {
                    if let offset { pwrite(rawValue, bytes.baseAddress, bytes.count, offset) }
                    else { Glibc.write(rawValue, bytes.baseAddress, bytes.count) }
                })
            }
        }.get()
        if count != 0 { throw SystemError(operation: "write '\(value)' to \(path)", errno: EIO) }
    }

    /// The whole file from `offset`, by pread(2) until end of file.
    func readAll(from offset: off_t) throws(SystemError) -> [UInt8] {
        var bytes: [UInt8] = []
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 1)
        defer { chunk.deallocate() }
        while true {
            let count = try retryingEINTR("read \(path)") {
                pread(rawValue, chunk.baseAddress, chunk.count, offset + off_t(bytes.count))
            }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    /// fstat(2).
    func status() throws(SystemError) -> stat {
        var info = stat()
        try retryingEINTR("examine \(path)") { fstat(rawValue, &info) }
        return info
    }

    /// close(2), reporting its error; the descriptor is closed whatever it returns (Linux frees the number first).
    func close() throws(SystemError) {
        guard rawValue >= 0 else { return }
        let fd = rawValue
        rawValue = -1
        if Glibc.close(fd) != 0 && errno != EINTR { throw SystemError(operation: "close \(path)", errno: errno) }
    }

    /// Gives up ownership: the caller (or whoever it hands the number to) closes it.
    func take() -> Int32 {
        let fd = rawValue
        rawValue = -1
        return fd
    }
}
