import CSupport
import Glibc
import LifecycleModel
import LifecycleProtocol

// lifectl: control lifecycled. Kept light (FoundationEssentials through LifecycleProtocol, no Foundation)
// because it is run often and from scripts.

let usage = """
    Usage: lifectl [OPTIONS] VERB [APP] [VERB OPTIONS]

    Queries (anyone):
      list                          every app with its state
      status [APP]                  the daemon, or one app, in detail
      watch [APP]                   every app's state (or APP's), then each change as it happens, one line
                                    each (--json: the daemon's JSON lines), until interrupted
    Lifecycle (root, the daemon's user, [Control] Group=): each waits until the app settles, then prints its state:
      launch APP [--background]     notRunning → inactive (or straight into the background)
      focus APP                     make APP active (launching it if needed); the active app goes to the background
      deactivate APP                interruption: active → inactive
      background APP                → background (suspended after its BackgroundTimeSec)
      suspend APP                   → suspended now
      resume APP                    suspended → background
      resume --all                  every suspended app → background: thawed and continued, adopted ones too
      terminate APP                 willTerminate, SIGTERM, SIGKILL
    Notifications (as lifecycle verbs):
      post TYPE [--app APP] [--data JSON]
                                    deliver to every app observing TYPE (or to APP); queued and
                                    coalesced for apps that are suspended
      simulate-memory-pressure      act as if the memory-pressure trigger fired (first event: warnings;
                                    later ones: terminate suspended apps), for kernels without PSI
                                    triggers and for testing the policy
    Configuration (as lifecycle verbs):
      reload                        read the config directory again and wait until it is applied; a file
                                    with an error is not applied (its app keeps its configuration): the
                                    errors are printed and the exit status is 1
    \(sceneUsage)
    Logs (needs the systemd journal):
      logs [APP] [-f|--follow]      journalctl -u lifecycled [LIFECYCLE_APP=APP + SYSLOG_IDENTIFIER=APP] [-f]

    Options:
      --json                        data as JSON: an array of apps (list, lifecycle verbs), an object
                                    {"daemon", "apps"} (status), {"delivered", "queued"} (post), {}
                                    (simulate-memory-pressure, reload); for logs, journalctl -o json
      -q, --quiet                   nothing on stdout when a changing verb succeeds (errors still go to
                                    stderr); queries print as usual
      --no-pager                    accepted, as systemctl does; lifectl never pages (logs passes it on)
      --runtime-dir DIR             where the daemon's control.sock is
      --timeout SEC                 how long to wait for the daemon's answer (default 120)
      -h, --help                    this text

    The daemon is found at $LIFECYCLED_RUNTIME_DIR/control.sock (default /run/lifecycled for root,
    $XDG_RUNTIME_DIR/lifecycled otherwise). NO_COLOR turns colours off.
    Exit status: 0 done, 1 refused or failed, 2 usage error, 3 daemon not reachable, 4 no such app.
    watch: 0 when interrupted (SIGINT, SIGTERM), 1 when the daemon dropped it for falling behind, 3 when the
    daemon went away.
    """

// Everything lifectl prints for a person goes through these: the daemon's answers carry text apps chose, and
// TerminalText keeps its control characters off the terminal. JSON output is written as it is: it is JSON.
func printError(_ message: String) {
    _ = "lifectl: \(TerminalText.escaped(message))\n".withCString { write(2, $0, strlen($0)) }
}

func fail(_ message: String, status: Int32) -> Never {
    printError(message)
    exit(status)
}

/// The exit statuses scripts can rely on (also in --help and lifectl(1)).
enum ExitStatus {
    static let refused: Int32 = 1
    static let usage: Int32 = 2
    static let unreachable: Int32 = 3
    static let noSuchApp: Int32 = 4
}

func output(_ text: String) {
    outputEscaped(TerminalText.escaped(text))
}

/// A line whose text is escaped already, piece by piece, around `paint`'s colour codes.
func outputEscaped(_ text: String) {
    _ = (text + "\n").withCString { write(1, $0, strlen($0)) }
}

// MARK: Arguments

// Only the variables lifectl reads, one by one: a dictionary of the environment, even of these four, is a
// noticeable share of a command whose time is mostly its start-up.
var runtimeDirectories = RuntimeDirectory.candidates(lifecycledRuntimeDir: ProcessEnvironment.get("LIFECYCLED_RUNTIME_DIR"),
                                                     xdgRuntimeDir: ProcessEnvironment.get("XDG_RUNTIME_DIR"), uid: getuid())
var timeoutSeconds = 120.0
var json = false
var quiet = false
var noPager = false
var follow = false
var background = false
var all = false
var targetApp: String?
var data: String?
var sceneRole: String?
var sceneConfiguration: String?
var positional: [String] = []
var arguments = CommandLine.arguments.dropFirst()
/// The value that follows an option; exits with a usage error, saying what `option` needs, when there is none.
@MainActor func optionValue(_ option: String, needs what: String) -> String {
    guard let value = arguments.popFirst() else { fail("\(option) needs \(what)", status: ExitStatus.usage) }
    return value
}
while let argument = arguments.popFirst() {
    switch argument {
    case "--json": json = true
    case "-q", "--quiet": quiet = true
    // systemctl's habit; lifectl never pages, and `logs` hands it on to journalctl.
    case "--no-pager": noPager = true
    case "-f", "--follow": follow = true
    case "--background": background = true
    case "--all": all = true
    case "--app": targetApp = optionValue(argument, needs: "an app name")
    case "--data": data = optionValue(argument, needs: "a JSON value")
    case "--role": sceneRole = optionValue(argument, needs: "a scene role")
    case "--config": sceneConfiguration = optionValue(argument, needs: "a scene configuration name")
    case "--runtime-dir": runtimeDirectories = [optionValue(argument, needs: "a directory")]
    case "--timeout":
        guard let value = arguments.popFirst(), let seconds = Double(value), seconds > 0 else {
            fail("--timeout needs a number of seconds", status: ExitStatus.usage)
        }
        timeoutSeconds = seconds
    case "-h", "--help":
        output(usage)
        exit(0)
    default:
        if argument.hasPrefix("-") { fail("unknown option '\(argument)'\n\n\(usage)", status: ExitStatus.usage) }
        positional.append(argument)
    }
}
guard let verb = positional.first else { fail("no verb given\n\n\(usage)", status: ExitStatus.usage) }
let app = positional.dropFirst().first
guard positional.count <= 2 || verb == "scene" else { fail("too many arguments: \(positional.dropFirst(2).joined(separator: " "))", status: ExitStatus.usage) }
guard !follow || verb == "logs" else { fail("--follow goes with logs only", status: ExitStatus.usage) }

// MARK: logs: the journal, not the daemon

/// The first executable `name` in `path` (PATH's form), as execvp would find it.
func executable(_ name: String, inPath path: String) -> String? {
    for directory in path.split(separator: ":") {
        let candidate = String(directory) + "/" + name
        var info = stat()
        if stat(candidate, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG && access(candidate, X_OK) == 0 {
            return candidate
        }
    }
    return nil
}

if verb == "logs" {
    guard !background, targetApp == nil, data == nil else { fail("logs takes only an app and -f", status: ExitStatus.usage) }
    // Without a journal the daemon's log is its standard error, and the apps' output goes the same way
    // (they inherit it): say so rather than run a journalctl that finds nothing.
    let elsewhere = "lifecycled writes its log to its standard error, and its apps' output goes there too, each line "
        + "prefixed with the app's name: look wherever it was started (a terminal, a file its output was redirected to, "
        + "the log of whatever supervises it)"
    let journalSocket = "/run/systemd/journal/socket"
    guard access(journalSocket, F_OK) == 0 else {
        fail("no systemd journal here (\(journalSocket) does not exist). \(elsewhere)", status: ExitStatus.refused)
    }
    guard let journalctl = executable("journalctl", inPath: ProcessEnvironment.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin") else {
        fail("journalctl is not installed here (not found in PATH), so the journal cannot be read. \(elsewhere)",
             status: ExitStatus.refused)
    }
    var words = ["journalctl", "-u", "lifecycled"]
    // The daemon's records about the app carry LIFECYCLE_APP=; the app's own output comes through the stream the
    // daemon opened under the app's name (SYSLOG_IDENTIFIER=). journalctl ANDs the unit with the disjunction.
    if let app { words += ["LIFECYCLE_APP=\(app)", "+", "SYSLOG_IDENTIFIER=\(app)"] }
    if follow { words.append("-f") }
    if noPager { words.append("--no-pager") }
    if quiet { words.append("-q") }
    if json { words += ["-o", "json"] }
    let argv = words.map { strdup($0) } + [nil]
    execv(journalctl, argv)
    fail("cannot run \(journalctl): \(String(cString: strerror(errno)))", status: ExitStatus.refused)
}

let request: ControlRequest
switch verb {
case "list":
    guard app == nil else { fail("list takes no app", status: ExitStatus.usage) }
    request = ControlRequest(verb: verb)
case "status":
    request = ControlRequest(verb: verb, app: app)
case "scenes":
    request = ControlRequest(verb: verb, app: app)
case "watch":
    request = ControlRequest(verb: verb, app: app)
case "scene":
    request = sceneRequest(Array(positional.dropFirst()), role: sceneRole, configuration: sceneConfiguration)
case "post":
    guard let type = app else { fail("post needs a notification type", status: ExitStatus.usage) }
    var payload: JSONValue?
    if let data {
        do {
            payload = try LineCoder().decode(JSONValue.self, from: Array(data.utf8))
        } catch {
            fail("--data is not valid JSON: \(data)", status: ExitStatus.usage)
        }
    }
    request = ControlRequest(verb: verb, app: targetApp, name: type, data: payload)
case "simulate-memory-pressure", "reload":
    guard app == nil else { fail("\(verb) takes no app", status: ExitStatus.usage) }
    request = ControlRequest(verb: verb)
case "resume" where all:
    guard app == nil else { fail("resume --all takes no app", status: ExitStatus.usage) }
    request = ControlRequest(verb: "resume-all")
case _ where ControlRequest.lifecycleVerbs.contains(verb) && !verb.hasPrefix("scene-"):
    guard !all else { fail("--all goes with resume only", status: ExitStatus.usage) }
    guard let app else { fail("\(verb) needs an app name", status: ExitStatus.usage) }
    guard !background || verb == "launch" else { fail("--background goes with launch only", status: ExitStatus.usage) }
    request = ControlRequest(verb: verb, app: app, background: background ? true : nil)
default:
    fail("unknown verb '\(verb)'\n\n\(usage)", status: ExitStatus.usage)
}

// MARK: One request, one reply

let coder = LineCoder()
// A user's own daemon first, then the system's: the first socket that accepts the connection is the daemon.
var fd: Int32 = -1
var tried: [String] = []
for directory in runtimeDirectories {
    let socketPath = RuntimeDirectory.controlSocket(in: directory)
    fd = cs_unix_connect(socketPath)
    if fd >= 0 { break }
    tried.append("\(socketPath) (\(String(cString: strerror(-fd))))")
}
guard fd >= 0 else {
    fail("cannot reach lifecycled: tried \(tried.joined(separator: " and ")). Is it running? Name its directory with "
         + "--runtime-dir or LIFECYCLED_RUNTIME_DIR", status: ExitStatus.unreachable)
}
var bytes = coder.encode(request)
var sent = 0
while sent < bytes.count {
    let count = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    if count < 0 && errno == EINTR { continue }
    guard count > 0 else { fail("lost the connection to lifecycled: \(String(cString: strerror(errno)))", status: ExitStatus.unreachable) }
    sent += count
}

// The stream goes on until interrupted: no timeout, no single reply.
if verb == "watch" { watchStream(fd: fd, json: json) }

var framer = LineFramer(limit: 64 << 20)
var line: [UInt8]?
var buffer = [UInt8](repeating: 0, count: 64 * 1024)
var remainingMs = Int32(min(timeoutSeconds * 1000, Double(Int32.max)))
while line == nil {
    var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    let ready = poll(&descriptor, 1, remainingMs)
    if ready < 0 && errno == EINTR { continue }
    guard ready > 0 else { fail("no answer from lifecycled within \(timeoutSeconds)s", status: ExitStatus.refused) }
    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    if count < 0 && errno == EINTR { continue }
    guard count > 0 else { fail("lifecycled closed the connection without answering", status: ExitStatus.unreachable) }
    framer.append(buffer[..<count])
    line = try? framer.nextLine()
}
close(fd)

let reply: ControlReply
do {
    reply = try coder.decode(ControlReply.self, from: line!)
} catch {
    fail("could not read lifecycled's answer: \(error)", status: ExitStatus.refused)
}
guard reply.ok else {
    let message = reply.error ?? "failed"
    // The daemon's refusals for an unknown app all say "no such app" (status, lifecycle verbs, post --app); a
    // reload's config errors name no app to look for.
    fail(message, status: verb != "reload" && message.contains("no such app") ? ExitStatus.noSuchApp : ExitStatus.refused)
}

// MARK: Output

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
    for scene in app.scenes ?? [] {
        output("  scene \(scene.scene):        \(scene.state) (\(scene.role), \(scene.configuration))"
               + (scene.savedState != nil || scene.savedStateHidden == true ? ", state saved" : ""))
    }
}

// -q: a changing verb that succeeded says nothing; the exit status is the answer.
if quiet && verb != "list" && verb != "status" && verb != "scenes" { exit(0) }

if verb == "scenes" {
    if json {
        _ = coder.encode(sceneRows(reply.apps ?? [])).withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    } else {
        sceneTable(reply.apps ?? [])
    }
    exit(0)
}

if verb == "simulate-memory-pressure" {
    // No data to show; with --json still one JSON document, so that `| jq` never sees an empty stdout.
    output(json ? "{}" : "memory pressure event delivered")
    exit(0)
}

if verb == "reload" {
    output(json ? "{}" : "configuration reloaded")
    exit(0)
}

if verb == "post" {
    let posted = reply.posted ?? PostSummary(delivered: 0, queued: 0)
    if json {
        _ = coder.encode(posted).withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    } else {
        output("\(app!): delivered to \(posted.delivered) apps, queued for \(posted.queued)")
    }
    exit(0)
}

if json {
    // A list for list and lifecycle verbs, an object for status.
    if verb == "status" {
        struct Status: Encodable { var daemon: DaemonStatus?; var apps: [AppStatus] }
        let value = app == nil ? Status(daemon: reply.daemon, apps: reply.apps ?? []) : Status(daemon: nil, apps: reply.apps ?? [])
        _ = coder.encode(value).withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    } else if verb == "scene" {
        // An object, so that `scene open` can say which session it made.
        struct SceneReply: Encodable { var scene: String?; var apps: [AppStatus] }
        _ = coder.encode(SceneReply(scene: reply.scene, apps: reply.apps ?? [])).withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    } else {
        _ = coder.encode(reply.apps ?? []).withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }
    exit(0)
}

switch verb {
case "list":
    table(reply.apps ?? [])
case "status":
    if app != nil {
        reply.apps?.forEach(details)
    } else if let daemon = reply.daemon {
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
    }
default:
    for status in reply.apps ?? [] {
        outputEscaped("\(TerminalText.escaped(status.name)): \(paint(status.state.rawValue, status.state.rawValue))"
                      + (status.pid.map { " (pid \($0))" } ?? ""))
        if verb == "scene", let scenes = status.scenes {
            if let opened = reply.scene { output("  opened scene \(opened)") }
            for scene in scenes { output("  \(scene.scene) (\(scene.role), \(scene.configuration)): \(scene.state)") }
        }
    }
}
