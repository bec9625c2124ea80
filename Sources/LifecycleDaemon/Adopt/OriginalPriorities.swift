import Glibc

/// What adopted apps had before the daemon changed them: each process's nice value and `oom_score_adj`, and each
/// scope's weight files and `memory.low`. The daemon gives them back when it lets an app go (a release, its stop)
/// and, since they are recorded in RUNTIME_DIR/state/adopted-priorities (`RecordFile`) as they are found, at the next
/// start after a crash.
final class OriginalPriorities {
    struct Process: Equatable {
        var process: RecordedProcess
        var nice: Int32
        var oomScoreAdj: Int
        var pid: pid_t { process.pid }
    }

    /// What was found, by app: processes, and weight files with their values.
    private var processes: [String: [pid_t: Process]] = [:]
    private var files: [String: [String: String]] = [:]
    private let file: RecordFile
    private let procRoot: String

    init(stateDirectory: String, procRoot: String = "/proc") {
        file = RecordFile(stateDirectory + "/adopted-priorities", loss: "after a crash the adopted apps' priorities may not be given back")
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
        let (processes, files) = Self.parse(file.read())
        Self.restore(processes, files, procRoot: procRoot)
        if !processes.isEmpty || !files.isEmpty {
            Log.notice("adopt: gave back the priorities of \(processes.count) process\(processes.count == 1 ? "" : "es") and \(files.count) scope file\(files.count == 1 ? "" : "s") a previous lifecycled had changed")
        }
        file.remove()
    }

    private static func read(_ pid: pid_t, procRoot: String) -> Process? {
        guard let process = RecordedProcess(running: pid, procRoot: procRoot),
              let oom = (try? readKernelFile("\(procRoot)/\(pid)/oom_score_adj")).flatMap({ $0.split(separator: "\n").first.flatMap { Int($0) } })
        else { return nil }
        errno = 0
        let nice = getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(pid))
        guard errno == 0 else { return nil }
        return Process(process: process, nice: nice, oomScoreAdj: oom)
    }

    private static func restore(_ processes: [Process], _ files: [String: String], procRoot: String) {
        for process in processes where process.process.isRunning(procRoot: procRoot) {
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
    static func lines(_ processes: [Process], _ files: [String: String]) -> [String] {
        processes.map { "pid \($0.process.line) \($0.nice) \($0.oomScoreAdj)" }
            + files.sorted(by: { $0.key < $1.key }).map { "file \($0.value) \($0.key)" }
    }

    static func parse(_ lines: [Substring]) -> (processes: [Process], files: [String: String]) {
        var processes: [Process] = []
        var files: [String: String] = [:]
        for line in lines {
            let words = line.split(separator: " ", maxSplits: 2)
            if words.first == "pid" {
                let numbers = Array(line.split(separator: " ").dropFirst())
                guard numbers.count == 4, let process = RecordedProcess(numbers[0], numbers[1]),
                      let nice = Int32(numbers[2]), let oom = Int(numbers[3]) else { continue }
                processes.append(Process(process: process, nice: nice, oomScoreAdj: oom))
            } else if words.first == "file", words.count == 3, words[2].hasPrefix("/") {
                files[String(words[2])] = String(words[1])
            }
        }
        return (processes, files)
    }

    private func save() {
        var allFiles: [String: String] = [:]
        for perApp in files.values { allFiles.merge(perApp) { first, _ in first } }
        file.write(Self.lines(processes.values.flatMap(\.values).sorted { $0.pid < $1.pid }, allFiles))
    }
}
