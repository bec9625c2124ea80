import Glibc

/// RUNTIME_DIR/state/adopted: what this daemon has adopted, rewritten at every adoption and release, so that the
/// next daemon, after a crash, thaws and continues whatever this one may have left frozen or stopped. One line per
/// app: `scope PATH`, `pid PID STARTTIME` (the start time tells the same process from one that reused its pid), or
/// `treescope PID STARTTIME PATH` for a process tree moved into a scope of its own (`TreeScopes`).
struct AdoptionLedger {
    enum Entry: Equatable {
        case scope(String)
        case process(pid_t, startTime: UInt64)
        case processScope(pid_t, startTime: UInt64, scope: String)

        /// The window's process of an adopted process tree, in a scope of its own or not.
        var pid: pid_t? {
            switch self {
            case .scope: nil
            case .process(let pid, _), .processScope(let pid, _, _): pid
            }
        }

        var isProcess: Bool { pid != nil }

        /// The cgroup of a scope, a launcher's or a tree's own.
        var scopePath: String? {
            switch self {
            case .scope(let path), .processScope(_, _, let path): path
            case .process: nil
            }
        }
    }

    let path: String

    init(stateDirectory: String) {
        path = stateDirectory + "/adopted"
    }

    func write(_ entries: [Entry]) {
        let text = entries.map { entry in
            switch entry {
            case .scope(let path): "scope \(path)\n"
            case .process(let pid, let startTime): "pid \(pid) \(startTime)\n"
            case .processScope(let pid, let startTime, let scope): "treescope \(pid) \(startTime) \(scope)\n"
            }
        }.joined()
        let temporary = path + ".tmp"
        do {
            try FileDescriptor.open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, mode: 0o600).write(Array(text.utf8))
            guard rename(temporary, path) == 0 else { throw SystemError(operation: "rename \(temporary)", errno: errno) }
        } catch {
            Log.warning("Failed to record the adopted apps in \(path): \(error); after a crash the next daemon may not thaw them")
        }
    }

    func read() -> [Entry] {
        guard let text = try? readKernelFile(path) else { return [] }
        return Self.parse(text)
    }

    static func parse(_ text: String) -> [Entry] {
        text.split(separator: "\n").compactMap { line in
            let words = line.split(separator: " ", maxSplits: 2)
            switch (words.first, words.count) {
            case ("scope", 2): return .scope(String(words[1]))
            case ("pid", 3):
                guard let pid = pid_t(words[1]), let start = UInt64(words[2]) else { return nil }
                return .process(pid, startTime: start)
            case ("treescope", 3):
                let rest = words[2].split(separator: " ", maxSplits: 1)
                guard rest.count == 2, let pid = pid_t(words[1]), let start = UInt64(rest[0]) else { return nil }
                return .processScope(pid, startTime: start, scope: String(rest[1]))
            default: return nil
            }
        }
    }

    /// At start, before anything is adopted: a previous daemon's scopes are thawed and its processes (the same
    /// ones, by start time, with their descendants and launch sessions) continued. The apps still there are adopted afresh.
    func thawLeftovers() {
        let entries = read()
        guard !entries.isEmpty else { return }
        var tree: ProcessTree?
        let orphans = Orphans()
        for entry in entries {
            if let scope = entry.scopePath { Self.thaw(scope) }
            switch entry {
            case .scope: continue
            case .process(let pid, let startTime), .processScope(let pid, let startTime, _):
                guard ProcessTable.startTime(of: pid) == startTime else { continue }
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
        unlink(path)
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
