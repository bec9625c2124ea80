import CSupport
import Glibc
import LifecycleProtocol

/// A non-blocking stream connection on the loop: NDJSON lines in, bytes out through a bounded buffer.
///
/// What one peer can cost the daemon is bounded (docs/PROTOCOL.md section 14, docs/RELIABILITY.md):
/// - a peer that does not read never blocks the daemon: when it left more than `maxOutgoing` bytes unread, it is
///   dropped at the next message;
/// - a peer that floods is read `readBudget` bytes per wakeup, then the loop serves every other source before
///   this one again (sd-event dispatches one source per iteration, the longest pending first, and its I/O
///   sources are level-triggered), so a flood slows nobody but the flooder, whose writes block on its full socket;
/// - what is held for a peer is one line in progress (at most the framer's limit) and its outgoing bytes, and
///   both are released the moment the connection closes;
/// - an owner may bound the lines handed over per wakeup (`limitLines`) and lower the connection's priority, for
///   peers whose every request is costly to answer: their lines wait in the framer, and the socket is not read
///   again until they are handed over, so what is held stays one read's worth.
final class Connection {
    enum Event {
        case line([UInt8])
        /// The peer broke the framing (a line over the limit); the connection is still open for an error reply.
        case framingError(String)
        /// The peer hung up, or the connection was dropped; nothing more will come.
        case closed
    }

    let fd: FileDescriptor
    /// Names the peer in log lines ("fd 12" unless the owner says better).
    var label: String
    private var framer = LineFramer()
    private var outgoing: [UInt8] = []
    private var source: EventSource?
    private let loop: EventLoop
    /// Lines handed to the owner per wakeup; past it the rest wait for `continuation`.
    private var linesPerWakeup = Int.max
    private var priority: Int64 = 0
    /// Hands over the lines still in the framer at the next iteration, as the socket may be empty by then and
    /// its level-triggered source would not fire for them.
    private var continuation: EventSource?
    /// Dropped on close: owners' handlers capture the connection (or the object that holds it), and that
    /// cycle would keep the object and its buffers alive for the rest of the daemon's life.
    private var handler: ((Event) -> Void)?
    private(set) var isOpen = true
    /// Ending with a last line (`finish`): nothing more is read or queued, and the connection closes once written.
    private var finishing = false
    /// Closes a finishing connection whose peer does not take its last bytes.
    private var finishDeadline: EventSource?
    /// What the daemon buffers for a peer beyond the socket's own buffer before it gives up on it.
    static let maxOutgoing = 1 << 20
    /// Read at most this much per wakeup, then yield to the loop (fairness under a flood).
    static let readBudget = 64 * 1024
    private static let readChunk = 16 * 1024

    /// Owns `fd` (set non-blocking here) and starts reading; the descriptor closes with the connection.
    init(fd: FileDescriptor, loop: EventLoop, handler: @escaping (Event) -> Void) throws(SystemError) {
        self.fd = fd
        self.label = "fd \(fd.rawValue)"
        self.handler = handler
        self.loop = loop
        _ = cs_set_nonblocking(fd.rawValue)
        source = try loop.watch(fd: fd.rawValue, events: IOEvents.readable) { [unowned self] revents in
            self.ready(revents)
        }
    }

    deinit { closeQuietly() }

    /// At most `lines` requests per wakeup, dispatched at sd-event `priority` (a larger value waits for every
    /// pending source of a smaller one).
    func limitLines(to lines: Int, priority: Int64) {
        linesPerWakeup = max(1, lines)
        self.priority = priority
        source?.setPriority(priority)
    }

    /// Queue bytes and write what the socket takes now.
    ///
    /// The bound is on the backlog the peer left unread from earlier sends, not on this message: one reply may
    /// be larger than `maxOutgoing` (a `list` of thousands of apps) and is
    /// still delivered to a peer that reads. A peer that does not read is dropped at its next message, once
    /// what it left unread is over the bound, so what it can hold is bounded by the bound plus one message.
    func send(_ bytes: [UInt8]) {
        guard isOpen, !finishing else { return }
        outgoing.append(contentsOf: bytes)
        flush()
        let backlog = outgoing.count - bytes.count
        if backlog > Self.maxOutgoing {
            Log.warning("Dropping connection \(label): its peer does not read (\(backlog) bytes unread before this message, the limit is \(Self.maxOutgoing))")
            close()
        }
    }

    /// Bytes queued for the peer that its socket has not taken yet.
    var unsent: Int { outgoing.count }

    /// Ends the connection with `last` (a line): of the queued lines only the first is kept (the socket may have
    /// taken part of it), the rest of it and `last` are written as the socket takes them, and the connection closes
    /// (telling the owner) once they are written or after `grace`, whichever comes first. Nothing more is read,
    /// and a peer that never reads again costs the daemon these few bytes until the grace ends.
    func finish(with last: [UInt8], grace: Duration) {
        guard isOpen, !finishing else { return }
        // Everything sent is whole lines: after the first newline come only lines the socket has not taken.
        if let end = outgoing.firstIndex(of: UInt8(ascii: "\n")) { outgoing.removeSubrange((end + 1)...) }
        outgoing.append(contentsOf: last)
        finishing = true
        continuation?.cancel()
        continuation = nil
        flush()
        guard isOpen else { return }
        do {
            let deadline = try loop.timer { [unowned self] in self.close() }
            deadline.arm(after: grace)
            finishDeadline = deadline
        } catch {
            close()
        }
    }

    /// Close and tell the owner (`.closed`), once.
    func close() {
        guard isOpen else { return }
        let handler = self.handler
        closeQuietly()
        handler?(.closed)
    }

    /// Close without telling the owner (it already knows). Frees the buffers and the handler at once.
    func closeQuietly() {
        guard isOpen else { return }
        isOpen = false
        source?.cancel()
        source = nil
        continuation?.cancel()
        continuation = nil
        finishDeadline?.cancel()
        finishDeadline = nil
        try? fd.close()
        handler = nil
        outgoing = []
        framer = LineFramer(limit: framer.limit)
    }

    private func ready(_ revents: UInt32) {
        if revents & IOEvents.writable != 0 { flush() }
        if finishing {
            if isOpen && revents & (IOEvents.hangup | IOEvents.error) != 0 { close() }
            return
        }
        if revents & (IOEvents.readable | IOEvents.hangup | IOEvents.error) != 0 { readAvailable() }
    }

    private func readAvailable() {
        var lines = linesPerWakeup
        // Lines left from the previous wakeup go first; the socket is read only once none is left.
        guard deliverLines(budget: &lines) else { return continueLater() }
        // Uninitialized stack memory, not a zero-filled array: a zero fill per readable event would cost more than
        // the read; only the bytes read(2) wrote are used.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.readChunk) { buffer in
            var budget = Self.readBudget
            while isOpen {
                // Still readable after the budget: the level-triggered source fires again once the others had their turn.
                guard budget > 0 else { return }
                let count: Int
                do throws(SystemError) {
                    count = try retryingEINTR("read from \(label)") { Glibc.read(fd.rawValue, buffer.baseAddress, buffer.count) }
                } catch where error.errno == EAGAIN || error.errno == EWOULDBLOCK {
                    return
                } catch {
                    close()
                    return
                }
                if count > 0 {
                    budget -= count
                    framer.append(UnsafeBufferPointer(rebasing: buffer[..<count]))
                    guard deliverLines(budget: &lines) else { return continueLater() }
                    // A short read emptied the socket: no second read to be told EAGAIN (one system call per
                    // message). The source is level-triggered, so whatever arrives meanwhile, an end of file
                    // included, fires it again.
                    if count < buffer.count { return }
                    continue
                }
                close()  // end of file
                return
            }
        }
    }

    /// Hands over complete lines until none is left (true) or `budget` is spent (false: some may be left).
    private func deliverLines(budget: inout Int) -> Bool {
        while isOpen {
            guard budget > 0 else { return false }
            do {
                guard let line = try framer.nextLine() else { return true }
                budget -= 1
                handler?(.line(line))
            } catch {
                handler?(.framingError(error.description))
                return true
            }
        }
        return true
    }

    private func continueLater() {
        guard isOpen, continuation == nil else { return }
        continuation = try? loop.deferred { [unowned self] in
            self.continuation = nil
            self.readAvailable()
        }
        continuation?.setPriority(priority)
    }

    private func flush() {
        while isOpen && !outgoing.isEmpty {
            let written: Int
            do throws(SystemError) {
                written = try retryingEINTR("send to \(label)") {
                    outgoing.withUnsafeBytes { Glibc.send(fd.rawValue, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                }
            } catch where error.errno == EAGAIN || error.errno == EWOULDBLOCK {
                break
            } catch {
                close()
                return
            }
            guard written > 0 else {
                close()
                return
            }
            outgoing.removeFirst(written)
            // A burst (a notification storm to a slow reader) must not keep its buffer for the connection's
            // life: a large capacity goes once all is written.
            if outgoing.isEmpty && outgoing.capacity > 8 * 1024 { outgoing = [] }
        }
        guard isOpen else { return }
        let wantWrite = !outgoing.isEmpty
        if finishing && !wantWrite { return close() }
        source?.setEvents((finishing ? 0 : IOEvents.readable) | (wantWrite ? IOEvents.writable : 0))
    }
}
