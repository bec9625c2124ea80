import Glibc

/// Reads process facts from /proc. Every function takes the proc root so tests can feed a fake
/// tree. A process that vanishes while being read is simply absent (or nil).
public enum ProcessTable {
    /// The processes whose process group is `pgid`, zombies included, in pid order.
    public static func members(ofProcessGroup pgid: pid_t, procRoot: String = "/proc") -> [pid_t] {
        guard let directory = opendir(procRoot) else { return [] }
        defer { closedir(directory) }
        var pids: [pid_t] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let pid = pid_t(name), pid > 0,
                  let fields = statFields(of: pid, procRoot: procRoot), fields.count > 2,
                  pid_t(fields[2]) == pgid
            else { continue }
            pids.append(pid)
        }
        return pids.sorted()
    }

    /// The state letter of /proc/PID/stat: R, S, D, T (stopped), t (traced), Z, X, I…
    public static func state(of pid: pid_t, procRoot: String = "/proc") -> Character? {
        statFields(of: pid, procRoot: procRoot)?.first?.first
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

    /// Whether no process in `pids` is stopped (T or t); true for an empty list.
    public static func noneStopped(_ pids: [pid_t], procRoot: String = "/proc") -> Bool {
        !pids.contains { pid in state(of: pid, procRoot: procRoot).map(isStopped) ?? false }
    }

    /// Field 22 of /proc/PID/stat: clock ticks after boot at which the process started.
    /// With the pid, it names a process unambiguously (pids are reused).
    public static func startTime(of pid: pid_t, procRoot: String = "/proc") -> UInt64? {
        guard let fields = statFields(of: pid, procRoot: procRoot), fields.count > 19 else { return nil }
        return UInt64(fields[19])
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

    private static func isStopped(_ state: Character) -> Bool { state == "T" || state == "t" }
    private static func isExited(_ state: Character) -> Bool { state == "Z" || state == "X" || state == "x" }
}
