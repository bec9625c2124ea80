import CSystemd
import Glibc

/// The kinds of structured records lifecycled writes to the journal, each with a stable MESSAGE_ID, so that
/// `journalctl MESSAGE_ID=…` finds every transition, launch, exit, restart, missed deadline or memory kill.
public enum JournalEvent: String, Sendable, CaseIterable {
    case transition, launch, exit, restart, startLimit, deadlineMissed, memoryTermination, protocolError

    /// 128-bit ids made once for lifecycled (like systemd's catalog ids), never to change.
    public var messageID: String {
        switch self {
        case .transition: "5c1a9e0b7f2d4b3c8a6e1d2f3b4c5d01"
        case .launch: "5c1a9e0b7f2d4b3c8a6e1d2f3b4c5d02"
        case .exit: "5c1a9e0b7f2d4b3c8a6e1d2f3b4c5d03"
        case .restart: "5c1a9e0b7f2d4b3c8a6e1d2f3b4c5d04"
        case .startLimit: "5c1a9e0b7f2d4b3c8a6e1d2f3b4c5d05"
        case .deadlineMissed: "5c1a9e0b7f2d4b3c8a6e1d2f3b4c5d06"
        case .memoryTermination: "5c1a9e0b7f2d4b3c8a6e1d2f3b4c5d07"
        case .protocolError: "5c1a9e0b7f2d4b3c8a6e1d2f3b4c5d08"
        }
    }
}

/// The journal through libsystemd: `sd_journal_sendv` for records, `sd_journal_stream_fd` for apps' output.
enum Journal {
    static let socketPath = "/run/systemd/journal/socket"

    /// Whether journald listens here (checked once at start-up: not under systemd, there is none).
    static func isAvailable() -> Bool { access(socketPath, W_OK) == 0 }

    /// One record with these fields (`MESSAGE`, `PRIORITY`, …). Returns false when the journal refused it.
    @discardableResult
    static func send(_ fields: [(String, String)]) -> Bool {
        // sd_journal_send is variadic (not callable from Swift); sendv takes an iovec per field.
        let buffers = fields.map { field -> UnsafeMutableBufferPointer<UInt8> in
            let bytes = Array("\(field.0)=\(field.1)".utf8)
            let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, bytes.count))
            _ = buffer.initialize(from: bytes)
            return UnsafeMutableBufferPointer(rebasing: buffer[..<bytes.count])
        }
        defer { for buffer in buffers { buffer.deallocate() } }
        var vectors = buffers.map { iovec(iov_base: UnsafeMutableRawPointer($0.baseAddress), iov_len: $0.count) }
        return sd_journal_sendv(&vectors, Int32(vectors.count)) >= 0
    }

    /// A stream the app's stdout and stderr go to, logged under `identifier`; nil if the journal refused.
    static func stream(identifier: String) -> FileDescriptor? {
        let fd = sd_journal_stream_fd(identifier, LOG_INFO, 0)
        return fd >= 0 ? FileDescriptor(owning: fd, path: "the journal stream of \(identifier)") : nil
    }
}

/// Whether journald listens on this machine (for `lifecycled`'s main).
public func journalIsAvailable() -> Bool { Journal.isAvailable() }
