import Glibc
import LifecycleProtocol
import LifectlCommand

// lifectl watch [APP] [--json]: the daemon's `watch` stream (docs/CONTROL.md), as human lines or as its own JSON
// lines, until interrupted or until the daemon ends it.

/// Reads the watch stream on `fd` (the request is sent) and prints it; never returns.
func watchStream(fd: Int32, json: Bool) -> Never {
    // Interrupting is how a watch normally ends: a clean exit, not death by signal. A parent may have left the
    // signals blocked (the mask is inherited across exec), and a watch it cannot interrupt would run forever.
    signal(SIGINT) { _ in _exit(0) }
    signal(SIGTERM) { _ in _exit(0) }
    var interrupts = sigset_t()
    sigemptyset(&interrupts)
    sigaddset(&interrupts, SIGINT)
    sigaddset(&interrupts, SIGTERM)
    sigprocmask(SIG_UNBLOCK, &interrupts, nil)
    let coder = LineCoder()
    var framer = LineFramer(limit: 64 << 20)
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    var printer = WatchPrinter()
    while true {
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { break }
        framer.append(buffer[..<count])
        while true {
            let line: [UInt8]
            do {
                guard let next = try framer.nextLine() else { break }
                line = next
            } catch {
                fail("could not read lifecycled's watch stream: \(error)", status: ExitStatus.refused)
            }
            guard let event = try? coder.decode(WatchEvent.self, from: line) else {
                // Not an event: the daemon refused the watch with a reply.
                let reply = try? coder.decode(ControlReply.self, from: line)
                let message = reply?.error ?? "unexpected answer from lifecycled: \(String(decoding: line, as: UTF8.self))"
                fail(message, status: message.contains("no such app") ? ExitStatus.noSuchApp : ExitStatus.refused)
            }
            if json {
                _ = (line + [UInt8(ascii: "\n")]).withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
            } else if let text = printer.line(for: event) {
                output(text)
            }
            if event.endsWatch {
                let reason = event.reason ?? event.event
                fail("lifecycled ended the watch: \(reason)",
                     status: event.event == "dropped" ? ExitStatus.refused : ExitStatus.unreachable)
            }
        }
    }
    fail("lifecycled closed the connection: it stopped or restarted", status: ExitStatus.unreachable)
}

/// The human form of the stream: `TIME  APP  FROM → TO  (REASON)`, the time in local time.
struct WatchPrinter {
    /// The app column's width: the longest name so far, so that the columns line up after the snapshot.
    private var width = 8
    /// The time of the last app line of the snapshot, for its scenes' lines.
    private var snapshotTime = ""

    mutating func line(for event: WatchEvent) -> String? {
        // Escaped before it is measured, so that the columns line up (output() leaves it as it is then).
        let app = TerminalText.escaped(event.app ?? "")
        width = max(width, app.count)
        let name = app + String(repeating: " ", count: max(0, width - app.count))
        let time = event.time.map(Self.localTime) ?? ""
        switch event.event {
        case "app":
            snapshotTime = event.since.map(Self.localTime) ?? ""
            return "\(snapshotTime)  \(name)  \(event.state ?? "?")" + (event.pid.map { " (pid \($0))" } ?? "")
        case "scene":
            return "\(snapshotTime)  \(name)  scene \(event.scene ?? "?"): \(event.state ?? "?")"
        case "ready":
            return nil
        case "transition":
            return "\(time)  \(name)  \(event.from ?? "?") → \(event.to ?? "?")  (\(event.reason ?? ""))"
        case "sceneTransition":
            return "\(time)  \(name)  scene \(event.scene ?? "?"): \(event.from ?? "?") → \(event.to ?? "?")  (\(event.reason ?? ""))"
        case "added":
            return "\(time)  \(name)  added (\(event.state ?? "notRunning"))"
        case "removed":
            return "\(time)  \(name)  removed"
        default:
            // Events of a later protocol version, and the ends of the watch (said on stderr).
            return nil
        }
    }

    /// "2026-12-03T21:04:05.125Z" as the local "21:04:05.125"; the text itself when it is not of that form.
    static func localTime(_ rfc3339: String) -> String {
        let fields = rfc3339.split(whereSeparator: { "-T:.Z".contains($0) }).map { Int32($0) }
        guard fields.count == 7, fields.allSatisfy({ $0 != nil }) else { return rfc3339 }
        var parts = tm()
        parts.tm_year = fields[0]! - 1900
        parts.tm_mon = fields[1]! - 1
        parts.tm_mday = fields[2]!
        parts.tm_hour = fields[3]!
        parts.tm_min = fields[4]!
        parts.tm_sec = fields[5]!
        var seconds = timegm(&parts)
        var local = tm()
        guard localtime_r(&seconds, &local) != nil else { return rfc3339 }
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(local.tm_hour, 2)):\(pad(local.tm_min, 2)):\(pad(local.tm_sec, 2)).\(pad(fields[6]!, 3))"
    }
}
