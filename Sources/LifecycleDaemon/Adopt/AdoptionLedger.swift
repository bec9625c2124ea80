import Glibc

/// RUNTIME_DIR/state/adopted: what this daemon has adopted, rewritten at every adoption and release, so that the
/// next daemon, after a crash, thaws and continues whatever this one may have left frozen or stopped. One line per
/// app: `scope PATH`, `pid PID STARTTIME` (the start time tells the same process from one that reused its pid), or
/// `treescope PID STARTTIME PATH` for a process tree moved into a scope of its own (`TreeScopes`).
struct AdoptionLedger {
    enum Entry: Equatable {
        case scope(String)
        case process(RecordedProcess)
        case processScope(RecordedProcess, scope: String)

        /// The window's process of an adopted process tree, in a scope of its own or not.
        var process: RecordedProcess? {
            switch self {
            case .scope: nil
            case .process(let process), .processScope(let process, _): process
            }
        }

        var pid: pid_t? { process?.pid }

        var isProcess: Bool { process != nil }

        /// The cgroup of a scope, a launcher's or a tree's own.
        var scopePath: String? {
            switch self {
            case .scope(let path), .processScope(_, let path): path
            case .process: nil
            }
        }
    }

    private let file: RecordFile

    init(stateDirectory: String) {
        file = RecordFile(stateDirectory + "/adopted", loss: "after a crash the next daemon may not thaw the adopted apps")
    }

    func write(_ entries: [Entry]) {
        file.write(entries.map { entry in
            switch entry {
            case .scope(let path): "scope \(path)"
            case .process(let process): "pid \(process.line)"
            case .processScope(let process, let scope): "treescope \(process.line) \(scope)"
            }
        })
    }

    static func parse(_ lines: [Substring]) -> [Entry] {
        lines.compactMap { line in
            let words = line.split(separator: " ", maxSplits: 2)
            switch (words.first, words.count) {
            case ("scope", 2): return .scope(String(words[1]))
            case ("pid", 3): return RecordedProcess(words[1], words[2]).map(Entry.process)
            case ("treescope", 3):
                let rest = words[2].split(separator: " ", maxSplits: 1)
                guard rest.count == 2, let process = RecordedProcess(words[1], rest[0]) else { return nil }
                return .processScope(process, scope: String(rest[1]))
            default: return nil
            }
        }
    }

    /// At start, before anything is adopted: a previous daemon's scopes are thawed and its processes (the same
    /// ones, by start time, with their descendants and launch sessions) continued. The apps still there are adopted afresh.
    func thawLeftovers() {
        let entries = Self.parse(file.read())
        guard !entries.isEmpty else { return }
        var tree: ProcessTree?
        let orphans = Orphans()
        for entry in entries {
            if let scope = entry.scopePath { Self.thaw(scope) }
            switch entry {
            case .scope: continue
            case .process(let process), .processScope(let process, _):
                guard process.isRunning() else { continue }
                let pid = process.pid
                if tree == nil { tree = ProcessTree.read() }
                var pids = tree?.subtree(of: pid) ?? [pid]
                // The rest of its launch session, as the app held it (`AdoptedProcessTree`): a double-forked worker.
                pids += orphans.rest(of: pid, besides: pids)
                let stopped = pids.filter { ProcessTable.state(of: $0) == "T" }
                for member in pids { kill(member, SIGCONT) }
                if !stopped.isEmpty {
                    Log.notice("adopt: continued \(stopped.map(String.init).joined(separator: ", ")), which a previous lifecycled left stopped")
                }
            }
        }
        file.remove()
    }

    /// Thaws a scope a previous daemon may have left frozen.
    private static func thaw(_ scope: String) {
        let freeze = scope + "/cgroup.freeze"
        guard ((try? readKernelFile(freeze)) ?? "").hasPrefix("1") else { return }
        do {
            try writeKernelFile(freeze, "0")
            Log.notice("adopt: thawed \(scope), which a previous lifecycled left frozen")
        } catch {
            Log.warning("adopt: Failed to thaw \(scope), left by a previous lifecycled: \(error)")
        }
    }
}
