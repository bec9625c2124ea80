import CSupport
import Glibc

// Asking the kernel to take a stopped app's memory out of RAM, as Android's CachedAppOptimizer compacts cached
// apps: `memory.reclaim` on the app's cgroup where the cgroup2 memory controller is there, else `process_madvise`
// with MADV_PAGEOUT over each process's private mappings. Anonymous pages go to swap (compressed, with zram);
// without swap only file pages can go. The process faults its pages back in when it runs again.

/// What a process holds, from /proc/PID/status (bytes).
struct ProcessMemory: Sendable, Equatable {
    /// Anonymous memory in RAM (RssAnon).
    var residentAnonymous: UInt64 = 0
    /// File and shared memory in RAM (RssFile + RssShmem).
    var residentFile: UInt64 = 0
    /// Anonymous memory in swap (VmSwap).
    var swapped: UInt64 = 0

    var resident: UInt64 { residentAnonymous + residentFile }

    static func + (lhs: ProcessMemory, rhs: ProcessMemory) -> ProcessMemory {
        ProcessMemory(residentAnonymous: lhs.residentAnonymous + rhs.residentAnonymous,
                      residentFile: lhs.residentFile + rhs.residentFile, swapped: lhs.swapped + rhs.swapped)
    }

    /// The process's memory now; nil when it is gone (or a kernel thread, which has no such lines).
    static func of(_ pid: pid_t, procRoot: String = "/proc") -> ProcessMemory? {
        guard let status = try? readKernelFile("\(procRoot)/\(pid)/status") else { return nil }
        var memory = ProcessMemory()
        var seen = false
        for line in status.split(separator: "\n") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, let kilobytes = UInt64(fields[1]) else { continue }
            switch fields[0] {
            case "RssAnon:": memory.residentAnonymous = kilobytes * 1024; seen = true
            case "RssFile:", "RssShmem:": memory.residentFile += kilobytes * 1024
            case "VmSwap:": memory.swapped = kilobytes * 1024
            default: continue
            }
        }
        return seen ? memory : nil
    }
}

/// Whether the machine has swap, and so whether anonymous memory can leave RAM at all.
func swapIsOn(procRoot: String = "/proc") -> Bool {
    guard let swaps = try? readKernelFile("\(procRoot)/swaps") else { return false }
    return swaps.split(separator: "\n").count > 1
}

/// One process's private mappings, paged out a bounded number of bytes at a time, so that the loop stays free.
struct PageOut {
    /// A private mapping's address range.
    struct Range: Sendable, Equatable {
        var start: UInt
        var length: UInt
    }

    let pid: pid_t
    private let pidfd: FileDescriptor
    private var ranges: [Range]
    private var next = 0
    /// Bytes advised so far.
    private(set) var advised: UInt64 = 0

    var done: Bool { next >= ranges.count }

    /// Opens the process (its pidfd, so that a recycled pid is never touched) and reads its mappings once.
    init(pid: pid_t, procRoot: String = "/proc") throws(SystemError) {
        self.pid = pid
        pidfd = try openPidFD(pid)
        ranges = Self.privateMappings(try readKernelFile("\(procRoot)/\(pid)/maps"))
    }

    /// The mappings worth paging out: the writable private ones, where a process's own data lives (its heap,
    /// stacks, anonymous and copy-on-write pages), as Android's CachedAppOptimizer chooses them; the kernel's own
    /// (vdso, vvar, vsyscall) cannot be. Code and read-only data are clean file pages the kernel drops by itself.
    static func privateMappings(_ maps: String) -> [Range] {
        var ranges: [Range] = []
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].count == 4, fields[1].hasPrefix("rw"), fields[1].last == "p" else { continue }
            if fields.count == 6, fields[5].hasPrefix("[v") { continue }
            let bounds = fields[0].split(separator: "-")
            guard bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16),
                  end > start else { continue }
            ranges.append(Range(start: start, length: end - start))
        }
        return ranges
    }

    /// Pages out the next mappings, at most `budget` bytes of address space (at most 64 mappings, the shim's
    /// batch): a mapping larger than that is taken a part at a time, since the kernel's time grows with the pages
    /// it walks and one heap can hold gigabytes. Throws when the process is gone or the kernel refuses (ENOSYS
    /// before 5.10; EPERM without CAP_SYS_NICE over another user's process).
    mutating func step(budget: UInt) throws(SystemError) {
        var starts: [UInt] = []
        var lengths: [UInt] = []
        var taken: UInt = 0
        let pageSize = UInt(sysconf(Int32(_SC_PAGESIZE)))
        let budget = max(budget / pageSize * pageSize, pageSize)
        while next < ranges.count, starts.count < 64, taken < budget {
            let part = min(ranges[next].length, budget - taken)
            starts.append(ranges[next].start)
            lengths.append(part)
            taken += part
            if part == ranges[next].length {
                next += 1
            } else {
                ranges[next].start += part
                ranges[next].length -= part
            }
        }
        guard !starts.isEmpty else { return }
        let result = starts.withUnsafeBufferPointer { starts in
            lengths.withUnsafeBufferPointer { lengths in
                cs_process_madvise(pidfd.rawValue, starts.baseAddress, lengths.baseAddress, UInt32(starts.count), 21)
            }
        }
        // A mapping unmapped since the maps were read fails the batch with ENOMEM: the others are still worth it.
        if result < 0, errno == ENOMEM { return }
        guard result >= 0 else { throw SystemError(operation: "process_madvise \(pid) (MADV_PAGEOUT)", errno: errno) }
        advised += UInt64(result)
    }
}

/// Asks the cgroup2 memory controller to reclaim `bytes` from the cgroup at `path` (memory.reclaim). Returns false
/// when the kernel reclaimed less than asked (EAGAIN), which is not an error here: what could go, went.
@discardableResult
func reclaimCgroupMemory(_ path: String, bytes: UInt64) throws(SystemError) -> Bool {
    do {
        try writeKernelFile("\(path)/memory.reclaim", String(bytes))
        return true
    } catch where error.errno == EAGAIN {
        return false
    }
}

/// The memory the cgroup at `path` is charged now (memory.current), nil where it has no memory controller.
func cgroupMemoryCurrent(_ path: String) -> UInt64? {
    (try? readKernelFile("\(path)/memory.current")).flatMap { UInt64($0.split(separator: "\n").first ?? "") }
}
