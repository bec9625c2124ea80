import Glibc

/// A process as a record file names it: its pid and its start time (field 22 of /proc/PID/stat), which together
/// tell it from a process that reused the pid, so that such a one is never signalled nor given anything back.
struct RecordedProcess: Equatable {
    var pid: pid_t
    var startTime: UInt64

    init(pid: pid_t, startTime: UInt64) {
        self.pid = pid
        self.startTime = startTime
    }

    /// The process that has `pid` now; nil when there is none.
    init?(running pid: pid_t, procRoot: String = "/proc") {
        guard let startTime = ProcessTable.startTime(of: pid, procRoot: procRoot) else { return nil }
        self.init(pid: pid, startTime: startTime)
    }

    /// `PID STARTTIME` as a record file writes them; nil for anything else.
    init?(_ pid: Substring, _ startTime: Substring) {
        guard let pid = pid_t(pid), pid > 0, let startTime = UInt64(startTime) else { return nil }
        self.init(pid: pid, startTime: startTime)
    }

    /// The process still runs: its pid has the same start time.
    func isRunning(procRoot: String = "/proc") -> Bool {
        state(procRoot: procRoot) != nil
    }

    /// Its state letter, from one read of /proc/PID/stat; nil when it has ended or the pid names another process.
    func state(procRoot: String = "/proc") -> Character? {
        guard let now = ProcessTable.stateAndStartTime(of: pid, procRoot: procRoot), now.startTime == startTime else { return nil }
        return now.state
    }

    var line: String { "\(pid) \(startTime)" }
}

/// A file in RUNTIME_DIR/state through which the next daemon, after a crash, undoes what this one did to processes it
/// did not start: what it adopted (`AdoptionLedger`), stopped (`StopLedger`) or changed the priorities of
/// (`OriginalPriorities`). One line per record, processes named by `RecordedProcess`. A change rewrites the whole
/// file (a temporary file renamed over, so that a crash leaves the old lines or the new ones), or appends lines in
/// one `write(2)` for a ledger that changes at every switch (`StopLedger`); a file with nothing to record is
/// removed, and the next daemon reads what is left once, at its start, and removes it.
struct RecordFile {
    let path: String
    /// What a lost write costs, for its warning ("after a crash they may stay stopped").
    private let loss: String

    init(_ path: String, loss: String) {
        self.path = path
        self.loss = loss
    }

    /// The file holds `lines` and nothing else; no file when there are none.
    func write(_ lines: [String]) {
        guard !lines.isEmpty else {
            unlink(path)
            return
        }
        let temporary = path + ".tmp"
        do {
            try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: 0o600)
                .write(Array(lines.map { $0 + "\n" }.joined().utf8))
            guard rename(temporary, path) == 0 else { throw SystemError(operation: "rename \(temporary)", errno: errno) }
        } catch {
            Log.warning("Failed to write \(path): \(error); \(loss)")
        }
    }

    /// Adds `lines` at the end in one write, which a crash of the daemon cannot cut: the kernel has the whole of it or
    /// none.
    func append(_ lines: [String]) {
        guard !lines.isEmpty else { return }
        do {
            try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW, mode: 0o600)
                .write(Array(lines.map { $0 + "\n" }.joined().utf8))
        } catch {
            Log.warning("Failed to write \(path): \(error); \(loss)")
        }
    }

    /// The lines a previous daemon left, if any.
    func read() -> [Substring] {
        guard let text = try? readKernelFile(path) else { return [] }
        return text.split(separator: "\n")
    }

    /// Done with what a previous daemon left.
    func remove() { unlink(path) }
}
