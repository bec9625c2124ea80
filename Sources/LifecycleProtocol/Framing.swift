/// The protocol's version; a client says which one it speaks in its hello.
public let protocolVersion = 1

/// The longest line either side accepts, newline excluded.
public let maxLineLength = 64 * 1024

/// Splits a byte stream into `\n`-terminated lines of at most `maxLineLength` bytes (NDJSON framing).
public struct LineFramer: Sendable {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case lineTooLong(limit: Int)
        public var description: String {
            switch self {
            case .lineTooLong(let limit): "line longer than \(limit) bytes"
            }
        }
    }

    private var buffer: [UInt8] = []
    /// Where the bytes not yet returned begin: lines are consumed by moving this, and the buffer is compacted
    /// only once that prefix is large, so that a read full of short lines costs linear time, not quadratic.
    private var start = 0
    /// Where the search for the next newline resumes (bytes before it hold none).
    private var scanned = 0
    public let limit: Int

    public init(limit: Int = maxLineLength) { self.limit = limit }

    public mutating func append(_ bytes: some Sequence<UInt8>) {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// The same for a slice of a read buffer, the common case, without the generic one's run-time lookup across
    /// modules.
    public mutating func append(_ bytes: ArraySlice<UInt8>) {
        compact()
        buffer.append(contentsOf: bytes)
    }

    private mutating func compact() {
        if start > 0 && start >= buffer.count - start {
            buffer.removeSubrange(..<start)
            scanned -= start
            start = 0
        }
    }

    /// The next complete line without its newline, or nil when none is complete yet.
    /// Throws when the line in progress is already longer than the limit.
    public mutating func nextLine() throws(Failure) -> [UInt8]? {
        if let end = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
            guard end - start <= limit else { throw .lineTooLong(limit: limit) }
            let line = Array(buffer[start..<end])
            start = end + 1
            scanned = start
            if start == buffer.count {
                // Kept for the next lines, unless a burst made it large (it would stay so for the connection's life).
                buffer.removeAll(keepingCapacity: buffer.capacity <= 20 * 1024)
                start = 0
                scanned = 0
            }
            return line
        }
        scanned = buffer.count
        if buffer.count - start > limit { throw .lineTooLong(limit: limit) }
        return nil
    }

    /// Bytes received that do not yet end a line.
    public var pendingByteCount: Int { buffer.count - start }
}

/// A decoding failure with a message a client author can act on.
public struct ProtocolError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }

    /// Client-given text echoed in an error (a type, a verb, a field path), cut to `characters` with "…".
    public static func clipped(_ text: String, to characters: Int) -> String {
        text.count > characters ? text.prefix(characters) + "…" : text
    }

    static func preview(_ line: [UInt8]) -> String {
        let text = String(decoding: line.prefix(80), as: UTF8.self)
        return line.count > 80 ? "'\(text)…'" : "'\(text)'"
    }
}
