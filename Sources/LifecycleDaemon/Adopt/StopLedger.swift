import Glibc

/// RUNTIME_DIR/state/stopped: every process this daemon stopped with SIGSTOP for an adopted app, written before the
/// signal, so that none stays stopped for ever: not after the daemon's crash, and not when the process left the
/// app's tree (its parent, the app's leader, died and it was reparented), where neither the adoption ledger's
/// leader nor a signal to the app's members reaches it. One line per process (`RecordFile`): `APP PID STARTTIME`,
/// and `APP -` when the app's processes were continued. A stop or a continue appends its lines, so that a switch
/// costs the lines of the app it moves, not of every app stopped; the file is written whole again only when the
/// lines that are over outnumber the ones that hold.
///
/// A configured app needs no line here: its state file and its cgroup or process group find its processes again.
/// A freezer needs none either: the adoption ledger thaws the scope.
final class StopLedger {
    struct Entry: Equatable {
        var app: String
        var process: RecordedProcess

        var line: String { "\(app) \(process.line)" }
    }

    private let file: RecordFile
    private let procRoot: String
    /// The processes stopped and not continued yet, by app.
    private var stopped: [String: [Entry]] = [:]
    /// Lines in the file now, and how many of them still hold (records of processes in `stopped`).
    private var fileLines = 0
    private var liveLines = 0

    init(stateDirectory: String, procRoot: String = "/proc") {
        file = RecordFile(stateDirectory + "/stopped", loss: "after a crash the processes stopped for adopted apps may stay stopped")
        self.procRoot = procRoot
    }

    var entries: [Entry] { stopped.keys.sorted().flatMap { stopped[$0] ?? [] } }

    /// Before `app`'s `pids` are sent SIGSTOP: those not recorded yet are, with their start times, in one write.
    /// A pid whose start time cannot be read is gone already.
    func record(_ app: String, pids: [pid_t]) {
        var known = stopped[app, default: []]
        var added: [String] = []
        for pid in pids where !known.contains(where: { $0.process.pid == pid }) {
            guard let process = RecordedProcess(running: pid, procRoot: procRoot) else { continue }
            let entry = Entry(app: app, process: process)
            known.append(entry)
            added.append(entry.line)
        }
        stopped[app] = known
        append(added, live: added.count)
    }

    /// `app` is continued (or let go): each process recorded for it that is still the same process gets SIGCONT,
    /// wherever it is now in the process tree, and its lines go.
    func continueAll(of app: String) {
        guard let entries = stopped.removeValue(forKey: app) else { return }
        Self.continueEach(entries, procRoot: procRoot)
        append(["\(app) -"], live: -entries.count)
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
    /// left alone. Every entry is checked, with one read of its /proc/PID/stat, before the first signal: the
    /// signals then go out together, and no continued process takes the CPU from the daemon between two of them.
    /// Returns the pids that were stopped.
    @discardableResult
    static func continueEach(_ entries: [Entry], procRoot: String) -> [pid_t] {
        var same: [pid_t] = []
        var wereStopped: [pid_t] = []
        for entry in entries {
            guard let state = entry.process.state(procRoot: procRoot) else { continue }
            same.append(entry.process.pid)
            if state == "T" { wereStopped.append(entry.process.pid) }
        }
        for pid in same { kill(pid, SIGCONT) }
        return wereStopped
    }

    /// The entries that hold after the lines, in order: `APP -` takes back the app's lines before it.
    static func parse(_ lines: [Substring]) -> [Entry] {
        var entries: [Entry] = []
        for line in lines {
            let words = line.split(separator: " ")
            if words.count == 2, words[1] == "-" {
                entries.removeAll { $0.app == words[0] }
            } else if words.count == 3, let process = RecordedProcess(words[1], words[2]) {
                entries.append(Entry(app: String(words[0]), process: process))
            }
        }
        return entries
    }

    /// Appends `lines`, which change the records that hold by `live`; the whole file again once the lines that
    /// are over are more than those that hold (and a few), so the file stays within twice what it records.
    private func append(_ lines: [String], live: Int) {
        guard !lines.isEmpty else { return }
        liveLines += live
        if fileLines + lines.count > 2 * liveLines + 64 {
            save()
        } else {
            file.append(lines)
            fileLines += lines.count
        }
    }

    private func save() {
        let lines = entries.map(\.line)
        file.write(lines)
        fileLines = lines.count
        liveLines = lines.count
    }
}
