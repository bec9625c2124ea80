import Glibc

/// What adopted apps had before the daemon changed them: each process's nice value and `oom_score_adj`, and each
/// scope's weight files and `memory.low`. The daemon gives them back when it lets an app go (a release, its stop)
/// and, since they are recorded in RUNTIME_DIR/state/adopted-priorities as they are found, at the next start after a
/// crash. A process is known by its pid and start time, so that one which reused the pid is left alone.
final class OriginalPriorities {
    struct Process: Equatable {
        var pid: pid_t
        var startTime: UInt64
        var nice: Int32
        var oomScoreAdj: Int
    }

    /// What was found, by app: processes, and weight files with their values.
    private var processes: [String: [pid_t: Process]] = [:]
    private var files: [String: [String: String]] = [:]
    let path: String
    private let procRoot: String

    init(stateDirectory: String, procRoot: String = "/proc") {
        path = stateDirectory + "/adopted-priorities"
        self.procRoot = procRoot
    }

    /// Before the daemon changes `pids` of `app`: what each has now, for those not seen yet.
    func record(_ app: String, pids: [pid_t]) {
        var known = processes[app, default: [:]]
        var added = false
        for pid in pids where known[pid] == nil {
            guard let found = Self.read(pid, procRoot: procRoot) else { continue }
            known[pid] = found
            added = true
        }
        processes[app] = known
        if added { save() }
    }

    /// Before the daemon writes weight or memory.low files of `app`'s scope: their values now, for those not seen yet.
    func record(_ app: String, files paths: [String]) {
        var known = files[app, default: [:]]
        var added = false
        for file in paths where known[file] == nil {
            guard let value = try? readKernelFile(file) else { continue }
            // io.weight's first line is its default; the per-device lines after it are left as they are.
            let first = value.split(separator: "\n").first.map { $0.split(separator: " ").joined(separator: " ") } ?? ""
            guard !first.isEmpty else { continue }
            known[file] = first
            added = true
        }
        files[app] = known
        if added { save() }
    }

    /// The app is let go: what it had is given back, and forgotten.
    func giveBack(_ app: String) {
        let processes = self.processes.removeValue(forKey: app).map { Array($0.values) } ?? []
        let files = self.files.removeValue(forKey: app) ?? [:]
        guard !processes.isEmpty || !files.isEmpty else { return }
        Self.restore(processes, files, procRoot: procRoot)
        save()
    }

    /// At start, before anything is adopted: what a previous daemon recorded and did not give back is given back.
    func giveBackLeftovers() {
        guard let text = try? readKernelFile(path) else { return }
        let (processes, files) = Self.parse(text)
        Self.restore(processes, files, procRoot: procRoot)
        if !processes.isEmpty || !files.isEmpty {
            Log.notice("adopt: gave back the priorities of \(processes.count) process\(processes.count == 1 ? "" : "es") and \(files.count) scope file\(files.count == 1 ? "" : "s") a previous lifecycled had changed")
        }
        unlink(path)
    }

    private static func read(_ pid: pid_t, procRoot: String) -> Process? {
        guard let startTime = ProcessTable.startTime(of: pid, procRoot: procRoot),
              let oom = (try? readKernelFile("\(procRoot)/\(pid)/oom_score_adj")).flatMap({ $0.split(separator: "\n").first.flatMap { Int($0) } })
        else { return nil }
        errno = 0
        let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(pid))
        guard errno == 0 else { return nil }
        return Process(pid: pid, startTime: startTime, nice: nice, oomScoreAdj: oom)
    }

    private static func restore(_ processes: [Process], _ files: [String: String], procRoot: String) {
        for process in processes where ProcessTable.startTime(of: process.pid, procRoot: procRoot) == process.startTime {
            do {
                try writeKernelFile("\(procRoot)/\(process.pid)/oom_score_adj", String(process.oomScoreAdj))
            } catch {
                Log.debug("adopt: Failed to give back oom_score_adj \(process.oomScoreAdj) to \(process.pid): \(error), ignoring")
            }
            if setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(process.pid), process.nice) != 0 && errno != ESRCH {
                Log.debug("adopt: Failed to give back nice \(process.nice) to \(process.pid): \(String(cString: strerror(errno))), ignoring")
            }
        }
        for (file, value) in files.sorted(by: { $0.key < $1.key }) where fileExists(file) {
            do { try writeKernelFile(file, value) } catch { Log.debug("adopt: Failed to give back \(file) = \(value): \(error), ignoring") }
        }
    }

    /// One line each: `pid PID STARTTIME NICE OOM_SCORE_ADJ`, or `file VALUE PATH` (the path last: it may hold
    /// spaces).
    static func format(_ processes: [Process], _ files: [String: String]) -> String {
        processes.map { "pid \($0.pid) \($0.startTime) \($0.nice) \($0.oomScoreAdj)\n" }.joined()
            + files.sorted(by: { $0.key < $1.key }).map { "file \($0.value) \($0.key)\n" }.joined()
    }

    static func parse(_ text: String) -> (processes: [Process], files: [String: String]) {
        var processes: [Process] = []
        var files: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ", maxSplits: 2)
            if words.first == "pid" {
                let numbers = line.split(separator: " ").dropFirst()
                guard numbers.count == 4, let pid = pid_t(numbers[numbers.startIndex]),
                      let start = UInt64(numbers[numbers.startIndex + 1]), let nice = Int32(numbers[numbers.startIndex + 2]),
                      let oom = Int(numbers[numbers.startIndex + 3]) else { continue }
                processes.append(Process(pid: pid, startTime: start, nice: nice, oomScoreAdj: oom))
            } else if words.first == "file", words.count == 3, words[2].hasPrefix("/") {
                files[String(words[2])] = String(words[1])
            }
        }
        return (processes, files)
    }

    private func save() {
        let all = processes.values.flatMap(\.values).sorted { $0.pid < $1.pid }
        var allFiles: [String: String] = [:]
        for perApp in files.values { allFiles.merge(perApp) { first, _ in first } }
        guard !all.isEmpty || !allFiles.isEmpty else {
            unlink(path)
            return
        }
        let temporary = path + ".tmp"
        do {
            try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: 0o600)
                .write(Array(Self.format(all, allFiles).utf8))
            guard rename(temporary, path) == 0 else { throw SystemError(operation: "rename \(temporary)", errno: errno) }
        } catch {
            Log.warning("Failed to record the adopted apps' priorities in \(path): \(error); after a crash they may not be given back")
        }
    }
}
