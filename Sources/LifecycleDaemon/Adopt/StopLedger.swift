import Glibc

/// RUNTIME_DIR/state/stopped: every process this daemon stopped with SIGSTOP for an adopted app, written before the
/// signal, so that none stays stopped for ever: not after the daemon's crash, and not when the process left the
/// app's tree (its parent, the app's leader, died and it was reparented), where neither the adoption ledger's
/// leader nor a signal to the app's members reaches it. One line per process (`RecordFile`): `APP PID STARTTIME`.
///
/// A configured app needs no line here: its state file and its cgroup or process group find its processes again.
/// A freezer needs none either: the adoption ledger thaws the scope.
final class StopLedger {
    struct Entry: Equatable {
        var app: String
        var process: RecordedProcess
    }

    private let file: RecordFile
    private let procRoot: String
    /// The processes stopped and not continued yet, by app.
    private var stopped: [String: [Entry]] = [:]

    init(stateDirectory: String, procRoot: String = "/proc") {
        file = RecordFile(stateDirectory + "/stopped", loss: "after a crash the processes stopped for adopted apps may stay stopped")
        self.procRoot = procRoot
    }

    var entries: [Entry] { stopped.keys.sorted().flatMap { stopped[$0] ?? [] } }

    /// Before `app`'s `pids` are sent SIGSTOP: those not recorded yet are, with their start times, in one write.
    /// A pid whose start time cannot be read is gone already.
    func record(_ app: String, pids: [pid_t]) {
        var known = stopped[app, default: []]
        var added = false
        for pid in pids where !known.contains(where: { $0.process.pid == pid }) {
            guard let process = RecordedProcess(running: pid, procRoot: procRoot) else { continue }
            known.append(Entry(app: app, process: process))
            added = true
        }
        stopped[app] = known
        if added { save() }
    }

    /// `app` is continued (or let go): each process recorded for it that is still the same process gets SIGCONT,
    /// wherever it is now in the process tree, and its lines go.
    func continueAll(of app: String) {
        guard let entries = stopped.removeValue(forKey: app) else { return }
        Self.continueEach(entries, procRoot: procRoot)
        save()
    }

    /// `lifectl resume --all`: every process still recorded, of whichever app (one the daemon forgot meanwhile
    /// included), is continued. Returns the pids continued that were stopped.
    @discardableResult
    func continueEverything() -> [pid_t] {
        let all = entries
        guard !all.isEmpty else { return [] }
        stopped = [:]
        let continued = Self.continueEach(all, procRoot: procRoot)
        save()
        return continued
    }

    /// At start, before anything is adopted: the processes a previous daemon recorded are continued (those that are
    /// still the same process), and the file goes.
    func continueLeftovers() {
        let continued = Self.continueEach(Self.parse(file.read()), procRoot: procRoot)
        if !continued.isEmpty {
            Log.notice("adopt: continued \(continued.map(String.init).joined(separator: ", ")), which a previous lifecycled left stopped")
        }
        file.remove()
    }

    /// SIGCONT to each entry that is still the process recorded (same start time); the recycled and the gone are
    /// left alone. Returns the pids that were stopped.
    @discardableResult
    static func continueEach(_ entries: [Entry], procRoot: String) -> [pid_t] {
        var wereStopped: [pid_t] = []
        for entry in entries where entry.process.isRunning(procRoot: procRoot) {
            if ProcessTable.state(of: entry.process.pid, procRoot: procRoot) == "T" { wereStopped.append(entry.process.pid) }
            kill(entry.process.pid, SIGCONT)
        }
        return wereStopped
    }

    static func parse(_ lines: [Substring]) -> [Entry] {
        lines.compactMap { line in
            let words = line.split(separator: " ")
            guard words.count == 3, let process = RecordedProcess(words[1], words[2]) else { return nil }
            return Entry(app: String(words[0]), process: process)
        }
    }

    private func save() {
        file.write(entries.map { "\($0.app) \($0.process.line)" })
    }
}
