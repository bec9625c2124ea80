import Glibc
import LifecycleModel
import LifecycleProtocol
import LifectlCommand

// What lifectl writes: errors, lines for a person, and the tables and details of the daemon's answers.

// Everything lifectl prints for a person goes through these: the daemon's answers carry text apps chose, and
// TerminalText keeps its control characters off the terminal. JSON output is written as it is: it is JSON.
// An error is one line, its newlines shown as \x0a, but for the two that lifectl and the daemon write as several:
// a usage error, which ends with the help, and a refused reload, which lists the files and their errors a line each.
func printError(_ message: String, lines: Bool = false) {
    let text = lines ? TerminalText.escapedLines(message) : TerminalText.escaped(message)
    _ = "lifectl: \(text)\n".withCString { write(2, $0, strlen($0)) }
}

func fail(_ message: String, status: Int32, lines: Bool = false) -> Never {
    printError(message, lines: lines)
    exit(status)
}

func output(_ text: String) {
    outputEscaped(TerminalText.escaped(text))
}

/// Text of several lines, such as the help.
func outputLines(_ text: String) {
    outputEscaped(TerminalText.escapedLines(text))
}

/// A line whose text is escaped already, piece by piece, around `paint`'s colour codes.
func outputEscaped(_ text: String) {
    _ = (text + "\n").withCString { write(1, $0, strlen($0)) }
}

/// Colours only on a terminal, and only when NO_COLOR does not say otherwise; read on the first painted text.
let colour = ProcessEnvironment.get("NO_COLOR").map(\.isEmpty) ?? true && isatty(1) == 1

/// `text` escaped, in the colour of `state` when standard output is a terminal that wants colours.
func paint(_ text: String, _ state: String) -> String {
    let text = TerminalText.escaped(text)
    guard colour else { return text }
    let code = switch state {
    case "active": "1;32"
    case "inactive": "33"
    case "background": "36"
    case "suspended": "34"
    case "failed": "1;31"
    default: "2"
    }
    return "\u{1B}[\(code)m\(text)\u{1B}[0m"
}

func age(_ seconds: Double) -> String {
    switch seconds {
    case ..<1: "now"
    case ..<60: "\(Int(seconds))s ago"
    case ..<3600: "\(Int(seconds / 60))min ago"
    case ..<86400: "\(Int(seconds / 3600))h ago"
    default: "\(Int(seconds / 86400))d ago"
    }
}

func pad(_ text: String, _ width: Int) -> String {
    text + String(repeating: " ", count: max(0, width - text.count))
}

func table(_ apps: [AppStatus]) {
    let header = ["NAME", "STATE", "PID", "SINCE", "PROTOCOL"]
    let rows = apps.map { [$0.name, $0.state.rawValue, $0.pid.map(String.init) ?? "-", age($0.sinceSeconds),
                           $0.protocol + ($0.adopted.map { " (adopted: \($0))" } ?? "")].map(TerminalText.escaped) }
    let widths = header.indices.map { column in ([header] + rows).map { $0[column].count }.max() ?? 0 }
    output(header.indices.map { $0 == header.count - 1 ? header[$0] : pad(header[$0], widths[$0]) }.joined(separator: "  "))
    for row in rows {
        let cells = row.indices.map { column -> String in
            let cell = pad(row[column], widths[column])
            return column == 1 ? paint(cell, row[1]) : cell
        }
        var text = cells.joined(separator: "  ")
        while text.hasSuffix(" ") { text.removeLast() }
        outputEscaped(text)
    }
}

func details(_ app: AppStatus) {
    outputEscaped("\(TerminalText.escaped(app.name)): \(paint(app.state.rawValue, app.state.rawValue)) since "
                  + TerminalText.escaped("\(app.since) (\(age(app.sinceSeconds)))"))
    output("  pid:             \(app.pid.map(String.init) ?? "-")")
    output("  protocol:        \(app.protocol)" + (app.awaiting.map { ", waiting for the ack of \($0)" } ?? ""))
    output("  launches:        \(app.launches)")
    output("  deadline misses: \(app.deadlineMisses)")
    output("  suspend method:  \(app.suspendMethod)")
    output("  cgroup:          \(app.cgroup ?? "-")")
    if let adopted = app.adopted { output("  adopted:         \(adopted)") }
    output("  observing:       \(app.observing.isEmpty ? "-" : app.observing.joined(separator: ", "))")
    output("  queued:          \(app.queuedNotifications) notifications (\(app.queuedPosts) posts)")
    if !app.backgroundModes.isEmpty { output("  background modes: \(app.backgroundModes.joined(separator: ", "))") }
    if app.backgroundTasks.isEmpty {
        output("  background tasks: -")
    } else {
        let remaining = app.backgroundTimeRemaining.map { " (\(Int($0.rounded(.up)))s left)" } ?? " (in the foreground: the time has not started)"
        output("  background tasks: \(app.backgroundTasks.map { "\($0.task) \($0.name)" }.joined(separator: ", "))\(remaining)")
    }
    if app.taskOverruns > 0 { output("  task overruns:   \(app.taskOverruns)") }
    if app.memoryTerminations > 0 { output("  memory terminations: \(app.memoryTerminations) (jetsam)") }
    if app.terminatedInBackground { output("  last run:        terminated in the background") }
    if let reclaim = app.reclaim { output("  reclaim:         \(describe(reclaim))") }
    for scene in app.scenes ?? [] {
        output("  scene \(scene.scene):        \(scene.state) (\(scene.role), \(scene.configuration))"
               + (scene.savedState != nil || scene.savedStateHidden == true ? ", state saved" : ""))
    }
}

/// The app's last memory reclaim in a line: "done with process_madvise in 0.21s: resident 101.2 MiB → 1.4 MiB,
/// swapped 0.0 MiB → 99.8 MiB".
func describe(_ reclaim: ReclaimStatus) -> String {
    func mebibytes(_ bytes: UInt64) -> String {
        let tenths = (bytes * 10 + (1 << 19)) >> 20
        return "\(tenths / 10).\(tenths % 10) MiB"
    }
    var text = "\(reclaim.outcome) with \(reclaim.method)"
    if let seconds = reclaim.seconds { text += " in \((seconds * 100).rounded() / 100)s" }
    text += ": resident \(mebibytes(reclaim.residentBefore))" + (reclaim.residentAfter.map { " → \(mebibytes($0))" } ?? "")
    text += ", swapped \(mebibytes(reclaim.swappedBefore))" + (reclaim.swappedAfter.map { " → \(mebibytes($0))" } ?? "")
    if !reclaim.swap { text += " (no swap: only file pages leave RAM)" }
    return TerminalText.escaped(text)
}

/// Prints the daemon's answer `reply` to `command` as `invocation` asks (--json, -q).
func show(_ reply: ControlReply, of command: Command, _ invocation: Invocation, coder: LineCoder) {
    let json = invocation.json
    switch command {
    case .list, .status, .scenes:
        break
    default:
        // -q: a changing verb that succeeded says nothing; the exit status is the answer.
        if invocation.quiet { return }
    }
    func printJSON(_ value: some JSONWritable) {
        _ = coder.encode(value).withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }

    switch command {
    case .scenes:
        if json {
            printJSON(sceneRows(reply.apps ?? []))
        } else {
            sceneTable(reply.apps ?? [])
        }
    case .simulateMemoryPressure:
        // No data to show; with --json still one JSON document, so that `| jq` never sees an empty stdout.
        output(json ? "{}" : "memory pressure event delivered")
    case .reload:
        output(json ? "{}" : "configuration reloaded")
    case .post(let type, _, _):
        let posted = reply.posted ?? PostSummary(delivered: 0, queued: 0)
        if json {
            printJSON(posted)
        } else {
            output("\(type): delivered to \(posted.delivered) apps, queued for \(posted.queued)")
        }
    case .status(let app) where json:
        // An object for status: the daemon's part only when no app was named.
        printJSON(JSONObject { writer in
            writer.member("apps", reply.apps ?? [])
            writer.member("daemon", app == nil ? reply.daemon : nil)
        })
    case .scene where json:
        // An object, so that `scene open` can say which session it made.
        printJSON(JSONObject { writer in
            writer.member("apps", reply.apps ?? [])
            writer.member("scene", reply.scene)
        })
    case _ where json:
        // A list for list and the lifecycle verbs.
        printJSON(reply.apps ?? [])
    case .list:
        table(reply.apps ?? [])
    case .status(.some):
        reply.apps?.forEach(details)
    case .status(nil):
        guard let daemon = reply.daemon else { return }
        output("lifecycled \(daemon.version), pid \(daemon.pid), up \(Int(daemon.uptimeSeconds))s")
        output("  config:  \(daemon.configDirectory)")
        output("  runtime: \(daemon.runtimeDirectory)")
        output("  cgroups: \(daemon.cgroupLayout)")
        for mechanism in daemon.mechanisms { output("    \(mechanism)") }
        if let display = daemon.display { output("  display: \(display)") }
        if !daemon.sources.isEmpty {
            output("  notification sources:")
            for source in daemon.sources { output("    \(source)") }
        }
        if !daemon.configErrors.isEmpty {
            output("  config problems:")
            for problem in daemon.configErrors { output("    \(problem)") }
        }
        output("")
        table(reply.apps ?? [])
    default:
        for status in reply.apps ?? [] {
            outputEscaped("\(TerminalText.escaped(status.name)): \(paint(status.state.rawValue, status.state.rawValue))"
                          + (status.pid.map { " (pid \($0))" } ?? ""))
            if case .scene = command, let scenes = status.scenes {
                if let opened = reply.scene { output("  opened scene \(opened)") }
                for scene in scenes { output("  \(scene.scene) (\(scene.role), \(scene.configuration)): \(scene.state)") }
            }
        }
    }
}

/// An object of members written in key order by `members`, for the shapes only lifectl prints.
struct JSONObject: JSONWritable {
    var members: (inout JSONWriter) -> Void

    func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        members(&writer)
        writer.endObject()
    }
}
