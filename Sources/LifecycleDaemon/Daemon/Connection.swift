import CSupport
import Glibc
import LifecycleProtocol

/// A non-blocking stream connection on the loop: NDJSON lines in, bytes out through a bounded buffer.
/// A peer that does not read never blocks the daemon: past `maxOutgoing` buffered bytes it is dropped.
final class Connection {
    enum Event {
        case line([UInt8])
        /// The peer broke the framing (a line over the limit); the connection is still open for an error reply.
        case framingError(String)
        /// The peer hung up, or the connection was dropped; nothing more will come.
        case closed
    }

    let fd: Int32
    private var framer = LineFramer()
    private var outgoing: [UInt8] = []
    private var source: EventSource?
    private let handler: (Event) -> Void
    private(set) var isOpen = true
    static let maxOutgoing = 1 << 20

    /// Takes ownership of `fd` (set non-blocking here) and starts reading.
    init(fd: Int32, loop: EventLoop, handler: @escaping (Event) -> Void) throws(SystemError) {
        self.fd = fd
        self.handler = handler
        _ = cs_set_nonblocking(fd)
        source = try loop.watch(fd: fd, events: IOEvents.readable) { [unowned self] revents in
            self.ready(revents)
        }
    }

    deinit { closeQuietly() }

    /// Queue bytes and write what the socket takes now.
    func send(_ bytes: [UInt8]) {
        guard isOpen else { return }
        outgoing.append(contentsOf: bytes)
        flush()
        if outgoing.count > Self.maxOutgoing {
            Log.warning("Dropping a connection whose peer does not read (\(outgoing.count) bytes unread)")
            close()
        }
    }

    /// Close and tell the owner (`.closed`), once.
    func close() {
        guard isOpen else { return }
        closeQuietly()
        handler(.closed)
    }

    /// Close without telling the owner (it already knows).
    func closeQuietly() {
        guard isOpen else { return }
        isOpen = false
        source?.cancel()
        source = nil
        Glibc.close(fd)
    }

    private func ready(_ revents: UInt32) {
        if revents & IOEvents.writable != 0 { flush() }
        if revents & (IOEvents.readable | IOEvents.hangup | IOEvents.error) != 0 { readAvailable() }
    }

    private func readAvailable() {
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while isOpen {
            let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                framer.append(buffer[..<count])
                deliverLines()
                continue
            }
            if count < 0 && (errno == EINTR) { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            close()  // EOF or a hard error
            return
        }
    }

    private func deliverLines() {
        while isOpen {
            do {
                guard let line = try framer.nextLine() else { return }
                handler(.line(line))
            } catch {
                handler(.framingError(error.description))
                return
            }
        }
    }

    private func flush() {
        while isOpen && !outgoing.isEmpty {
            let written = outgoing.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written > 0 {
                outgoing.removeFirst(written)
            } else if written < 0 && errno == EINTR {
                continue
            } else if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                break
            } else {
                close()
                return
            }
        }
        guard isOpen else { return }
        let wantWrite = !outgoing.isEmpty
        source?.setEvents(IOEvents.readable | (wantWrite ? IOEvents.writable : 0))
    }
}
