import Glibc
import LifecycleProtocol
import Synchronization

/// The daemon's log: one line per event, in systemd's words ("Failed to …: reason"), to the journal with its
/// structured fields where journald listens, else to stderr. Only the programs log; library code returns errors.
///
/// Messages carry strings apps wrote (background-task names, scene ids, notification types, reasons): every message
/// goes out through `TerminalText`, so that no app can put an escape sequence on the terminal of whoever reads the
/// log. The structured fields stay as given: the journal stores them as data, and no terminal shows them raw.
public enum Log {
    public enum Level: Int, Comparable, Sendable {
        case debug = 7, info = 6, notice = 5, warning = 4, error = 3
        public static func < (a: Level, b: Level) -> Bool { a.rawValue > b.rawValue }
        var prefix: String { "<\(rawValue)>" }
    }

    private static let thresholdValue = Atomic<Int>(Level.info.rawValue)
    private static let prefixesValue = Atomic<Bool>(false)
    private static let journalValue = Atomic<Bool>(false)

    /// Records go to the journal (structured, through sd_journal_sendv) instead of stderr. Set at start-up
    /// when journald listens.
    public static var toJournal: Bool {
        get { journalValue.load(ordering: .relaxed) }
        set { journalValue.store(newValue, ordering: .relaxed) }
    }

    /// The least severe level that is written (default info).
    public static var threshold: Level {
        get { Level(rawValue: thresholdValue.load(ordering: .relaxed)) ?? .info }
        set { thresholdValue.store(newValue.rawValue, ordering: .relaxed) }
    }
    /// systemd's `<N>` level prefixes, when stderr goes to the journal (JOURNAL_STREAM is set).
    public static var levelPrefixes: Bool {
        get { prefixesValue.load(ordering: .relaxed) }
        set { prefixesValue.store(newValue, ordering: .relaxed) }
    }

    // The message is built only when it is written, as `event`'s: a debug or info line on a transition path (a
    // suspend's confirmation, each callback sent on a switch) costs no string below the threshold.
    public static func debug(_ message: @autoclosure () -> String) { if Level.debug >= threshold { write(.debug, message()) } }
    public static func info(_ message: @autoclosure () -> String) { if Level.info >= threshold { write(.info, message()) } }
    public static func notice(_ message: @autoclosure () -> String) { if Level.notice >= threshold { write(.notice, message()) } }
    public static func warning(_ message: @autoclosure () -> String) { if Level.warning >= threshold { write(.warning, message()) } }
    public static func error(_ message: @autoclosure () -> String) { if Level.error >= threshold { write(.error, message()) } }

    /// A structured record: in the journal with its MESSAGE_ID and fields (`LIFECYCLE_APP=` …); on stderr,
    /// the same words. Message and fields are built only when the record is written: a transition below the
    /// log level costs no strings.
    public static func event(_ event: JournalEvent, _ level: Level, _ message: @autoclosure () -> String,
                             _ fields: @autoclosure () -> [(String, String)]) {
        guard level >= threshold else { return }
        if toJournal {
            Journal.send([("MESSAGE", TerminalText.escaped(message())), ("PRIORITY", String(level.rawValue)), ("SYSLOG_IDENTIFIER", "lifecycled"),
                          ("MESSAGE_ID", event.messageID), ("LIFECYCLE_EVENT", event.rawValue)] + fields())
        } else {
            writeToStderr(level, message())
        }
    }

    static func write(_ level: Level, _ message: String) {
        guard level >= threshold else { return }
        if toJournal {
            Journal.send([("MESSAGE", TerminalText.escaped(message)), ("PRIORITY", String(level.rawValue)), ("SYSLOG_IDENTIFIER", "lifecycled")])
        } else {
            writeToStderr(level, message)
        }
    }

    /// One line of an app's own output, after `prefix`, on stderr: its bytes as the app wrote them (no UTF-8
    /// repair, a NUL byte included), in one write(2) so that lines from the daemon and its apps never interleave.
    static func writeOutput(prefix: [UInt8], _ line: UnsafeBufferPointer<UInt8>) {
        var text = prefix
        text.reserveCapacity(prefix.count + line.count + 1)
        text.append(contentsOf: line)
        text.append(UInt8(ascii: "\n"))
        text.withUnsafeBytes { bytes in
            var done = 0
            while done < bytes.count {
                let count = Glibc.write(2, bytes.baseAddress! + done, bytes.count - done)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { return }
                done += count
            }
        }
    }

    private static func writeToStderr(_ level: Level, _ message: String) {
        let message = TerminalText.escaped(message)
        var line = levelPrefixes ? level.prefix + message : message
        line += "\n"
        // One write(2) per line: lines from the daemon and its apps never interleave mid-line.
        _ = line.withCString { Glibc.write(2, $0, strlen($0)) }
    }
}
