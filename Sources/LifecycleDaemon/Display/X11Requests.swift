import CXCB
import Glibc

/// The requests and replies of one X connection in flight (`X11Source`). libxcb writes with a blocking wait: a
/// request waits once its output buffer is full, and a flush until the server has read everything, so a server
/// that stops reading (a stopped Xvfb) would hold the loop there. So requests wait here and go to libxcb `batch` at
/// a time, far below its buffer, each batch flushed only when the socket has room for it (POLLOUT). Replies are
/// awaited in the order the requests went out, with the steps that run once the replies before them are in (the
/// server answers in order).
struct X11Requests {
    enum Pending {
        case reply(UInt32, (UnsafeMutableRawPointer?) -> Void)
        case step(() -> Void)
    }

    /// What waits to go to libxcb, in order: a request (issued on the connection, giving the reply it awaits, nil
    /// for a request without one) or a step, which joins `pending` behind the requests before it.
    private enum Outgoing {
        case request((OpaquePointer) -> Pending?)
        case step(() -> Void)
    }

    /// How a `send` ended; `moved`, in each case: whether anything joined `pending`.
    enum Sent {
        /// Everything went out.
        case done(moved: Bool)
        /// The socket has no room: the rest waits until it has (`roomCame`).
        case awaitingRoom(moved: Bool)
        /// The flush failed: the connection is broken.
        case broken(moved: Bool)
    }

    /// Requests handed to libxcb between two flushes: none is longer than 64 bytes, so a batch stays far below
    /// libxcb's 16 KiB output buffer (it never writes on its own) and below the room POLLOUT promises on a Unix
    /// socket (a quarter of its send buffer free).
    static let batch = 64

    private(set) var pending: [Pending] = []
    private var outbox: [Outgoing] = []
    /// The first entry of `outbox` not yet sent.
    private var outboxStart = 0
    /// Requests handed to libxcb since its last flush.
    private var unflushed = 0
    /// The socket is watched for room to write.
    private(set) var awaitingRoom = false

    /// Requests and steps not yet handed to libxcb.
    var waiting: Int { outbox.count - outboxStart }

    /// A request for the outbox, sent in its turn (`send`).
    mutating func enqueue(_ request: @escaping (OpaquePointer) -> Pending?) {
        outbox.append(.request(request))
    }

    /// A step for the outbox: it runs once every reply asked for before it is in.
    mutating func enqueue(step: @escaping () -> Void) {
        outbox.append(.step(step))
    }

    /// The first of `pending`, taken off.
    mutating func removeFirstPending() { pending.removeFirst() }

    /// The socket has room again (or is in error): the next `send` goes on.
    mutating func roomCame() { awaitingRoom = false }

    /// Hands the outbox to libxcb, a batch at a time, each batch flushed while the socket has room for it.
    mutating func send(on connection: OpaquePointer) -> Sent {
        guard !awaitingRoom else { return .done(moved: false) }
        var moved = false
        while true {
            while outboxStart < outbox.count, unflushed < Self.batch {
                let next = outbox[outboxStart]
                outbox[outboxStart] = .step({})
                outboxStart += 1
                moved = true
                switch next {
                case .request(let issue):
                    if let reply = issue(connection) { pending.append(reply) }
                    unflushed += 1
                case .step(let step):
                    pending.append(.step(step))
                }
            }
            if outboxStart == outbox.count {
                outbox = []
                outboxStart = 0
            } else if outboxStart > 1024 {
                outbox.removeFirst(outboxStart)
                outboxStart = 0
            }
            guard unflushed > 0 else { return .done(moved: moved) }
            guard Self.hasRoom(xcb_get_file_descriptor(connection)) else {
                awaitingRoom = true
                return .awaitingRoom(moved: moved)
            }
            if xcb_flush(connection) <= 0 || xcb_connection_has_error(connection) != 0 { return .broken(moved: moved) }
            unflushed = 0
            guard outboxStart < outbox.count else { return .done(moved: moved) }
        }
    }

    /// Whether the socket takes a batch without waiting (POLLOUT), asked without waiting; a socket in error says
    /// yes, so that the flush finds the error.
    private static func hasRoom(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        while true {
            let ready = poll(&entry, 1, 0)
            if ready >= 0 { return ready > 0 && entry.revents & Int16(POLLOUT | POLLERR | POLLHUP) != 0 }
            guard errno == EINTR else { return true }
        }
    }
}
