import Glibc

/// Reads process facts from /proc. Every function takes the proc root so tests can feed a fake
/// tree. A process that vanishes while being read is simply absent (or nil).
public enum ProcessTable {
    /// The processes whose process group is `pgid`, zombies included, in pid order.
    /// A scan of every process on the machine: only for apps without a cgroup (the others read their
    /// cgroup.procs). Parsed as bytes, as `state(of:)` is.
    public static func members(ofProcessGroup pgid: pid_t, procRoot: String = "/proc") -> [pid_t] {
        members(withStatField: 2, equalTo: pgid, procRoot: procRoot)
    }

    /// The processes whose session is `sid`, zombies included, in pid order: a scan of every process, as
    /// `members(ofProcessGroup:)`.
    public static func members(ofSession sid: pid_t, procRoot: String = "/proc") -> [pid_t] {
        members(withStatField: 3, equalTo: sid, procRoot: procRoot)
    }

    private static func members(withStatField field: Int, equalTo wanted: pid_t, procRoot: String) -> [pid_t] {
        guard let directory = opendir(procRoot) else { return [] }
        defer { closedir(directory) }
        var pids: [pid_t] = []
        while let entry = readdir(directory) {
            let pid = withDirectoryEntryName(entry) { decimal($0) }
            guard let pid, pid > 0,
                  let value = try? withKernelFileBytes("\(procRoot)/\(pid)/stat", { statField(field, of: $0) }),
                  value == Int(wanted)
            else { continue }
            pids.append(pid_t(pid))
        }
        return pids.sorted()
    }

    /// The state letter of /proc/PID/stat: R, S, D, T (stopped), t (traced), Z, X, I…
    /// Read as bytes, not split into Strings, as it runs on every suspend confirmation and every stop or
    /// continue event.
    public static func state(of pid: pid_t, procRoot: String = "/proc") -> Character? {
        guard let byte = try? withKernelFileBytes("\(procRoot)/\(pid)/stat", { stateByte($0) }) else { return nil }
        return Character(Unicode.Scalar(byte))
    }

    /// Whether every live process in `pids` is stopped (T or t). Processes that have exited
    /// (gone, zombie, dead) are skipped: they will never stop, and a group whose member exits
    /// right after SIGSTOP is still stopped. False when no listed process is stopped (and so
    /// for an empty list).
    public static func allStopped(_ pids: [pid_t], procRoot: String = "/proc") -> Bool {
        var sawStopped = false
        for pid in pids {
            guard let state = state(of: pid, procRoot: procRoot), !isExited(state) else { continue }
            guard isStopped(state) else { return false }
            sawStopped = true
        }
        return sawStopped
    }

    /// Whether no live process in `pids` runs: each is stopped (T or t), or has exited (gone, zombie, dead).
    /// True for an empty list: for the members besides a leader whose stop the kernel reported already.
    public static func noneRunning(_ pids: [pid_t], procRoot: String = "/proc") -> Bool {
        pids.allSatisfy { pid in state(of: pid, procRoot: procRoot).map { isStopped($0) || isExited($0) } ?? true }
    }

    /// Whether no process in `pids` is stopped (T or t); true for an empty list.
    public static func noneStopped(_ pids: [pid_t], procRoot: String = "/proc") -> Bool {
        !pids.contains { pid in state(of: pid, procRoot: procRoot).map(isStopped) ?? false }
    }

    /// Field 22 of /proc/PID/stat: clock ticks after boot at which the process started.
    /// With the pid, it names a process unambiguously (pids are reused).
    /// Read as bytes: the daemon saves it with the app's state after every transition.
    public static func startTime(of pid: pid_t, procRoot: String = "/proc") -> UInt64? {
        guard let ticks = try? withKernelFileBytes("\(procRoot)/\(pid)/stat", { statField(19, of: $0) }) else { return nil }
        return UInt64(ticks)
    }

    /// The state letter and the start time (`state(of:)` and `startTime(of:)`) from one read of /proc/PID/stat.
    public static func stateAndStartTime(of pid: pid_t, procRoot: String = "/proc") -> (state: Character, startTime: UInt64)? {
        let read = try? withKernelFileBytes("\(procRoot)/\(pid)/stat") { stat -> (UInt8, Int)? in
            guard let state = stateByte(stat), let ticks = statField(19, of: stat) else { return nil }
            return (state, ticks)
        }
        guard let (state, ticks) = read ?? nil else { return nil }
        return (Character(Unicode.Scalar(state)), UInt64(ticks))
    }

    /// The fields of /proc/PID/stat after the command name, so index 0 is field 3 (state).
    /// The name (field 2) is in parentheses and may itself contain spaces and ')', so the
    /// fields start after the *last* ')'.
    static func statFields(of pid: pid_t, procRoot: String) -> [Substring]? {
        guard let text = try? readKernelFile("\(procRoot)/\(pid)/stat") else { return nil }
        return statFields(parsing: text)
    }

    static func statFields(parsing text: String) -> [Substring]? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(whereSeparator: { $0 == " " || $0 == "\n" })
        return fields.isEmpty ? nil : fields
    }

    /// The state byte of a /proc/PID/stat text: the first after the last ')' and its space.
    static func stateByte(_ stat: UnsafeBufferPointer<UInt8>) -> UInt8? {
        guard let close = stat.lastIndex(of: UInt8(ascii: ")")), close + 2 < stat.count else { return nil }
        return stat[close + 2]
    }

    /// Field `index` (0 is the state, as in `statFields`) of a /proc/PID/stat text as a number, nil if absent.
    static func statField(_ index: Int, of stat: UnsafeBufferPointer<UInt8>) -> Int? {
        guard let close = stat.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        var field = -1, start = close + 1, position = close + 1
        while position <= stat.count {
            let atSeparator = position == stat.count || stat[position] == UInt8(ascii: " ") || stat[position] == UInt8(ascii: "\n")
            if atSeparator {
                if position > start {
                    field += 1
                    if field == index { return decimal(UnsafeBufferPointer(rebasing: stat[start..<position])) }
                }
                start = position + 1
            }
            position += 1
        }
        return nil
    }

    /// A non-negative decimal number, nil for anything else (or too long to be a pid or a field of stat).
    static func decimal(_ bytes: some Collection<UInt8>) -> Int? {
        guard !bytes.isEmpty, bytes.count < 19 else { return nil }
        var value = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    private static func isStopped(_ state: Character) -> Bool { state == "T" || state == "t" }
    private static func isExited(_ state: Character) -> Bool { state == "Z" || state == "X" || state == "x" }
}

/// Calls `body` with the name of a `readdir` entry, its bytes read in place (no NUL). The kernel packs entries
/// only as long as their names, so copying `d_name` out of the entry (a 256-byte array in `struct dirent`)
/// reads past the end of the last entry of readdir's buffer: AddressSanitizer's heap-buffer-overflow, and a
/// crash if the buffer ends where a mapping ends.
func withDirectoryEntryName<Result>(_ entry: UnsafeMutablePointer<dirent>, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
    withUnsafeMutablePointer(to: &entry.pointee.d_name) { field in
        let start = UnsafeRawPointer(field)
        let length = strnlen(start.assumingMemoryBound(to: CChar.self), MemoryLayout.size(ofValue: entry.pointee.d_name))
        return body(UnsafeBufferPointer(start: start.assumingMemoryBound(to: UInt8.self), count: length))
    }
}

/// The name of a `readdir` entry (see `withDirectoryEntryName`).
func directoryEntryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
    withDirectoryEntryName(entry) { String(decoding: $0, as: UTF8.self) }
}
