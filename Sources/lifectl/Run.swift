import CSupport
import Glibc
import LifecycleModel
import LifecycleProtocol
import LifectlCommand

// Performing a parsed command: the journal for logs, otherwise one request to the daemon and its answer (or, for
// watch, its stream).

/// Does what `command` asks; the exit status is lifectl's answer.
func run(_ invocation: Invocation, _ command: Command) -> Never {
    switch command {
    case .help:
        outputLines(usage)
        exit(0)
    case .logs(let app, let follow):
        showJournal(app: app, follow: follow, invocation)
    default:
        guard let request = command.request else { preconditionFailure("\(command) asks the daemon nothing") }
        let coder = LineCoder()
        let fd = connect(invocation)
        send(coder.encode(request), to: fd)
        // The stream goes on until interrupted: no timeout, no single reply.
        if case .watch = command { watchStream(fd: fd, json: invocation.json) }
        let reply = receiveReply(from: fd, within: invocation.timeoutSeconds, coder: coder)
        guard reply.ok else {
            let message = reply.error ?? "failed"
            // The daemon's refusals for an unknown app all say "no such app" (status, lifecycle verbs, post --app); a
            // reload's config errors name no app to look for.
            let noSuchApp = command != .reload && message.contains("no such app")
            fail(message, status: noSuchApp ? ExitStatus.noSuchApp : ExitStatus.refused, lines: command == .reload)
        }
        show(reply, of: command, invocation, coder: coder)
        exit(0)
    }
}

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

/// Becomes `journalctl -u lifecycled` for `app` (or all), with the options that mean something to it.
func showJournal(app: String?, follow: Bool, _ invocation: Invocation) -> Never {
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
    if invocation.noPager { words.append("--no-pager") }
    if invocation.quiet { words.append("-q") }
    if invocation.json { words += ["-o", "json"] }
    let argv = words.map { strdup($0) } + [nil]
    execv(journalctl, argv)
    fail("cannot run \(journalctl): \(String(cString: strerror(errno)))", status: ExitStatus.refused)
}

// MARK: One request, one reply

/// A connection to the daemon: a user's own daemon first, then the system's; the first socket that accepts the
/// connection is the daemon.
func connect(_ invocation: Invocation) -> Int32 {
    // Only the variables lifectl reads, one by one: a dictionary of the environment, even of these few, is a
    // noticeable share of a command whose time is mostly its start-up.
    let directories = invocation.runtimeDirectories(lifecycledRuntimeDir: ProcessEnvironment.get("LIFECYCLED_RUNTIME_DIR"),
                                                    xdgRuntimeDir: ProcessEnvironment.get("XDG_RUNTIME_DIR"), uid: getuid())
    var tried: [String] = []
    for directory in directories {
        let socketPath = RuntimeDirectory.controlSocket(in: directory)
        let fd = cs_unix_connect(socketPath)
        if fd >= 0 { return fd }
        tried.append("\(socketPath) (\(String(cString: strerror(-fd))))")
    }
    fail("cannot reach lifecycled: tried \(tried.joined(separator: " and ")). Is it running? Name its directory with "
         + "--runtime-dir or LIFECYCLED_RUNTIME_DIR", status: ExitStatus.unreachable)
}

func send(_ bytes: [UInt8], to fd: Int32) {
    var sent = 0
    while sent < bytes.count {
        let count = bytes[sent...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { fail("lost the connection to lifecycled: \(String(cString: strerror(errno)))", status: ExitStatus.unreachable) }
        sent += count
    }
}

/// The daemon's one reply line on `fd`, decoded; closes `fd`.
func receiveReply(from fd: Int32, within timeoutSeconds: Double, coder: LineCoder) -> ControlReply {
    var framer = LineFramer(limit: 64 << 20)
    var line: [UInt8]?
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    let remainingMs = Int32(min(timeoutSeconds * 1000, Double(Int32.max)))
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
    do {
        return try coder.decode(ControlReply.self, from: line!)
    } catch {
        fail("could not read lifecycled's answer: \(error)", status: ExitStatus.refused)
    }
}
