import Glibc
import Synchronization

/// Descriptors kept open for the kernel files written and read on every transition: an app's CPU and IO weight
/// files, its cgroup.procs, cgroup.freeze and cgroup.events, and its processes' oom_score_adj. Opening, using and
/// closing one of them by path was three system calls and a path walk each time (an app switch made 20 of its 55
/// system calls for the two priority changes alone); through a kept descriptor it is one pwrite or pread at offset 0.
///
/// Why this is safe for these files, and only for them:
/// - Each is a kernel attribute, not stored data: a write at offset 0 sets the whole value, and a read at offset 0
///   regenerates the file (seq_file restarts its iteration at position 0; cgroup.procs does too).
/// - A descriptor names the object it was opened on. When that object is gone (the cgroup removed, the process
///   exited), using the descriptor fails (ENODEV, ESRCH, ENOENT): the descriptor is closed and the path opened
///   once more, which finds a group made again under the same name, or fails as an open by path always did. A
///   pid reused meanwhile is found by that new open exactly as it was by the open per call before.
/// - A read that returns less than was asked is the whole file, as seq_file fills the buffer while it has
///   records; a file as large as the buffer (4 KiB: a cgroup of hundreds of processes) is read the old way.
///
/// At most `capacity` descriptors of each kind stay open, the least recently used closed first: the apps that
/// change state often keep theirs, and a thousand apps cost no more descriptors than 32. One lock for the
/// whole cache: the daemon uses it from its loop's thread; tests may from others.
let kernelFiles = Mutex(KernelFileCache())

struct KernelFileCache: ~Copyable {
    static let capacity = 64
    /// The descriptors opened for writing and those opened for reading, each bounded by `capacity`.
    private var writers = Shelf()
    private var readers = Shelf()
    private var clock: UInt64 = 0

    /// A class, so that a hit marks its use without a write to the dictionary (which made Dictionary check its
    /// storage's uniqueness and copy it: 1.1M of an app switch's 285k instructions per 100, callgrind).
    private final class Entry {
        let fd: Int32
        var used: UInt64
        /// False once `fd` is closed: a hint that still holds the entry must not use the number, which the next
        /// open may give to another file.
        var isOpen = true
        init(fd: Int32, used: UInt64) {
            self.fd = fd
            self.used = used
        }

        func close() {
            isOpen = false
            _ = Glibc.close(fd)
        }
    }

    /// Descriptors by path, at most `capacity`, the least recently used closed first.
    private struct Shelf {
        var entries: [String: Entry] = [:]
        /// The entries found last, tried before the dictionary by comparing paths: a transition uses three or four
        /// files of one or two apps, and the dictionary hashes the whole path (some 60 bytes) at each lookup, where
        /// comparing with the same path, usually the very same string (`AppCgroup` makes each once), is a few
        /// instructions.
        var hints: [(path: String, entry: Entry)] = []
        static let hintCount = 4

        mutating func find(_ path: String) -> Entry? {
            for hint in hints where hint.entry.isOpen && hint.path == path { return hint.entry }
            guard let entry = entries[path] else { return nil }
            remember(path, entry)
            return entry
        }

        private mutating func remember(_ path: String, _ entry: Entry) {
            if hints.count >= Self.hintCount { hints.removeFirst() }
            hints.append((path, entry))
        }

        mutating func insert(_ path: String, _ fd: Int32, used: UInt64) {
            if entries.count >= KernelFileCache.capacity, let oldest = entries.min(by: { $0.value.used < $1.value.used }) {
                oldest.value.close()
                entries[oldest.key] = nil
            }
            let entry = Entry(fd: fd, used: used)
            entries[path] = entry
            remember(path, entry)
        }

        mutating func drop(_ path: String) {
            if let entry = entries.removeValue(forKey: path) { entry.close() }
        }

        mutating func forget(prefix: String) {
            for (path, entry) in entries where path.hasPrefix(prefix) {
                entry.close()
                entries[path] = nil
            }
        }

        func closeAll() {
            for entry in entries.values { entry.close() }
        }
    }

    deinit {
        writers.closeAll()
        readers.closeAll()
    }

    /// Writes `bytes` at offset 0 of the file at `path`.
    mutating func write(_ path: String, _ bytes: UnsafeRawBufferPointer, describe: () -> String) throws(SystemError) {
        var fresh = false
        while true {
            let fd = try descriptor(path, writing: true, fresh: &fresh)
            let written = pwrite(fd, bytes.baseAddress, bytes.count, 0)
            if written == bytes.count { return }
            let error = written < 0 ? errno : EIO
            drop(path, writing: true)
            if error == EINTR || (!fresh && Self.isStale(error)) { continue }
            throw SystemError(operation: describe(), errno: error)
        }
    }

    /// Calls `body` with the bytes of the file at `path`, or returns nil when it is as large as the buffer (the
    /// caller reads it whole by path).
    mutating func read<Result: Sendable>(_ path: String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) throws(SystemError) -> Result? {
        var fresh = false
        while true {
            let fd = try descriptor(path, writing: false, fresh: &fresh)
            let result = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 4096) { chunk -> (Int, Result?) in
                let count = pread(fd, chunk.baseAddress, chunk.count, 0)
                guard count >= 0 else { return (Int(errno), nil) }
                guard count < chunk.count else { return (0, nil) }
                return (0, body(UnsafeBufferPointer(rebasing: chunk[..<count])))
            }
            if let value = result.1 { return value }
            if result.0 == 0 { return nil }  // full buffer
            drop(path, writing: false)
            let error = Int32(result.0)
            if error == EINTR || (!fresh && Self.isStale(error)) { continue }
            throw SystemError(operation: "read \(path)", errno: error)
        }
    }

    /// Closes the descriptors of the files under `directory` (a cgroup about to be removed).
    mutating func forget(under directory: String) {
        let prefix = directory.hasSuffix("/") ? directory : directory + "/"
        writers.forget(prefix: prefix)
        readers.forget(prefix: prefix)
    }

    /// How many descriptors are open (for tests).
    var openCount: Int { writers.entries.count + readers.entries.count }

    /// The object the descriptor was opened on is gone: the path may name a new one.
    private static func isStale(_ error: Int32) -> Bool {
        error == ENODEV || error == ESRCH || error == ENOENT || error == EBADF
    }

    private mutating func descriptor(_ path: String, writing: Bool, fresh: inout Bool) throws(SystemError) -> Int32 {
        clock &+= 1
        if let entry = writing ? writers.find(path) : readers.find(path) {
            entry.used = clock
            return entry.fd
        }
        let fd = try retryingEINTR("open \(path)") { open(path, (writing ? O_WRONLY : O_RDONLY) | O_CLOEXEC) }
        fresh = true
        if writing { writers.insert(path, fd, used: clock) } else { readers.insert(path, fd, used: clock) }
        return fd
    }

    private mutating func drop(_ path: String, writing: Bool) {
        if writing { writers.drop(path) } else { readers.drop(path) }
    }
}

/// `writeKernelFile`, through a kept descriptor (`KernelFileCache`): for the files written on every transition.
func writeKernelFileKept(_ path: String, _ value: String) throws(SystemError) {
    var utf8 = value
    let outcome = utf8.withUTF8 { utf8 in
        kernelFiles.withLock { (cache: inout KernelFileCache) -> SystemError? in
            do throws(SystemError) {
                try cache.write(path, UnsafeRawBufferPointer(utf8), describe: { "write '\(value)' to \(path)" })
                return nil
            } catch {
                return error
            }
        }
    }
    if let outcome { throw outcome }
}

/// `withKernelFileBytes`, through a kept descriptor (`KernelFileCache`); a file of 4 KiB or more is read by path.
func withKernelFileBytesKept<Result: Sendable>(_ path: String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) throws(SystemError) -> Result {
    let kept = try kernelFiles.withLock { (cache: inout KernelFileCache) throws(SystemError) -> Result? in try cache.read(path, body) }
    if let kept { return kept }
    return try withKernelFileBytes(path, body)
}
