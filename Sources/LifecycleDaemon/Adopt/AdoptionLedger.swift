import Glibc

/// RUNTIME_DIR/state/adopted: what this daemon has adopted, rewritten at every adoption and release, so that the
/// next daemon, after a crash, thaws and continues whatever this one may have left frozen or stopped. One line per
/// app: `scope PATH`, or `pid PID STARTTIME` (the start time tells the same process from one that reused its pid).
struct AdoptionLedger {
    enum Entry: Equatable {
        case scope(String)
        case process(RecordedProcess)
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
            }
        })
    }

    static func parse(_ lines: [Substring]) -> [Entry] {
        lines.compactMap { line in
            let words = line.split(separator: " ", maxSplits: 2)
            switch (words.first, words.count) {
            case ("scope", 2): return .scope(String(words[1]))
            case ("pid", 3): return RecordedProcess(words[1], words[2]).map(Entry.process)
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
            switch entry {
            case .scope(let scope):
                let freeze = scope + "/cgroup.freeze"
                guard ((try? readKernelFile(freeze)) ?? "").hasPrefix("1") else { continue }
                do {
                    try writeKernelFile(freeze, "0")
                    Log.notice("adopt: thawed \(scope), which a previous lifecycled left frozen")
                } catch {
                    Log.warning("adopt: Failed to thaw \(scope), left by a previous lifecycled: \(error)")
                }
            case .process(let process):
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
}
