import Glibc
import Testing
@testable import LifecycleDaemon

/// The daemon's bound on what it buffers for a peer (Connection.maxOutgoing) is a bound on the backlog the peer
/// left unread, not on one message: a `list` of thousands of apps is one reply over 1 MiB. Real sockets (a
/// socketpair) and the real event loop.
@Suite struct ConnectionTests {
    /// A socketpair: the daemon's end (non-blocking, watched by `Connection`) and the peer's end.
    private func socketPair() throws -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
        return (fds[0], fds[1])
    }

    /// Reads the peer's end without blocking until `total` bytes came, running the loop meanwhile; gives up
    /// after 30 s. Returns the bytes read.
    private func drain(_ peer: Int32, expecting total: Int, loop: EventLoop) throws -> [UInt8] {
        _ = fcntl(peer, F_SETFL, fcntl(peer, F_GETFL) | O_NONBLOCK)
        var received: [UInt8] = []
        let started = loop.now
        var poll: EventSource?
        poll = try loop.timer {
            var chunk = [UInt8](repeating: 0, count: 256 * 1024)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(peer, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                received += chunk[..<count]
            }
            if received.count >= total || loop.now - started > .seconds(30) { loop.exit() } else { poll?.arm(after: .milliseconds(1)) }
        }
        poll?.arm(after: .zero)
        _ = loop.run()
        poll?.cancel()
        return received
    }

    @Test("a connection limited to one line per wakeup at a lower priority yields to the others between its lines, and still hands over every line it read")
    func limitedConnectionYieldsBetweenLines() throws {
        let loop = try EventLoop()
        let (strangerEnd, strangerPeer) = try socketPair()
        let (rootEnd, rootPeer) = try socketPair()
        defer {
            close(strangerPeer)
            close(rootPeer)
        }
        var order: [String] = []
        func handler(_ event: Connection.Event) {
            guard case .line(let line) = event else { return }
            order.append(String(decoding: line, as: UTF8.self))
            // Root asks again while the stranger's next lines wait.
            if order.last == "s1" { _ = Array("r2\n".utf8).withUnsafeBytes { write(rootPeer, $0.baseAddress, $0.count) } }
            if order.count == 6 { loop.exit() }
        }
        let stranger = try Connection(fd: FileDescriptor(owning: strangerEnd, path: "the stranger's end"), loop: loop, handler: handler)
        let root = try Connection(fd: FileDescriptor(owning: rootEnd, path: "root's end"), loop: loop, handler: handler)
        stranger.limitLines(to: 1, priority: 10)
        // All of the stranger's lines arrive in one read; the socket is empty after it.
        _ = Array("s1\ns2\ns3\ns4\n".utf8).withUnsafeBytes { write(strangerPeer, $0.baseAddress, $0.count) }
        _ = Array("r1\n".utf8).withUnsafeBytes { write(rootPeer, $0.baseAddress, $0.count) }
        let timeout = try loop.timer { loop.exit() }
        timeout.arm(after: .seconds(10))
        _ = loop.run()
        #expect(order == ["r1", "s1", "r2", "s2", "s3", "s4"], "\(order)")
        stranger.closeQuietly()
        root.closeQuietly()
    }

    @Test("a single reply larger than maxOutgoing reaches a peer that reads it")
    func replyLargerThanTheBoundIsDelivered() throws {
        let loop = try EventLoop()
        let (daemonEnd, peer) = try socketPair()
        defer { close(peer) }
        var closed = false
        let connection = try Connection(fd: FileDescriptor(owning: daemonEnd, path: "the daemon's end"), loop: loop) { event in
            if case .closed = event { closed = true }
        }
        // 3 MiB in one line, as a list of about 7,000 apps would be; the peer reads only after the send.
        var reply = (0..<(3 * Connection.maxOutgoing)).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        reply.append(UInt8(ascii: "\n"))
        connection.send(reply)
        #expect(connection.isOpen, "the connection was dropped for the size of one reply")
        let received = try drain(peer, expecting: reply.count, loop: loop)
        #expect(received.count == reply.count && received == reply, "received \(received.count) of \(reply.count) bytes")
        #expect(!closed && connection.isOpen)
        connection.closeQuietly()
    }

    @Test("a peer that leaves more than maxOutgoing unread is dropped at the next message")
    func peerThatDoesNotReadIsDroppedAtTheNextMessage() throws {
        let loop = try EventLoop()
        let (daemonEnd, peer) = try socketPair()
        defer { close(peer) }
        var closed = false
        let connection = try Connection(fd: FileDescriptor(owning: daemonEnd, path: "the daemon's end"), loop: loop) { event in
            if case .closed = event { closed = true }
        }
        // Over the bound beyond what the socket itself holds (a few hundred KiB), never read.
        connection.send([UInt8](repeating: UInt8(ascii: "x"), count: 2 * Connection.maxOutgoing) + [UInt8(ascii: "\n")])
        #expect(connection.isOpen)
        connection.send(Array("{\"ok\":true}\n".utf8))
        #expect(!connection.isOpen && closed, "the backlog left unread is over the bound: the peer must be dropped")
    }

    /// Reads the peer's end until the daemon's end closes (end of file), running the loop meanwhile; gives up after 30 s.
    private func readToEnd(_ peer: Int32, loop: EventLoop) throws -> (bytes: [UInt8], ended: Bool) {
        _ = fcntl(peer, F_SETFL, fcntl(peer, F_GETFL) | O_NONBLOCK)
        var received: [UInt8] = []
        var ended = false
        let started = loop.now
        var poll: EventSource?
        poll = try loop.timer {
            var chunk = [UInt8](repeating: 0, count: 256 * 1024)
            while true {
                let count = chunk.withUnsafeMutableBytes { read(peer, $0.baseAddress, $0.count) }
                if count == 0 { ended = true }
                guard count > 0 else { break }
                received += chunk[..<count]
            }
            if ended || loop.now - started > .seconds(30) { loop.exit() } else { poll?.arm(after: .milliseconds(1)) }
        }
        poll?.arm(after: .zero)
        _ = loop.run()
        poll?.cancel()
        return (received, ended)
    }

    @Test("finish keeps only the first queued line (the socket may have taken part of it), writes it and the last line, then closes")
    func finishEndsWithTheLastLineOnALineBoundary() throws {
        let loop = try EventLoop()
        let (daemonEnd, peer) = try socketPair()
        defer { close(peer) }
        var closed = false
        let connection = try Connection(fd: FileDescriptor(owning: daemonEnd, path: "the daemon's end"), loop: loop) { event in
            if case .closed = event { closed = true }
        }
        // Far more than the socket holds: most of it waits in the connection's queue.
        let lines = (0..<4000).map { index in Array("line \(index) \(String(repeating: "x", count: 90))\n".utf8) }
        for line in lines { connection.send(line) }
        #expect(connection.unsent > 0, "the peer has not read: lines are queued")
        connection.finish(with: Array("LAST\n".utf8), grace: .seconds(30))

        let (bytes, ended) = try readToEnd(peer, loop: loop)
        #expect(ended && closed, "the connection closes once the last line is written, and tells its owner")
        let received = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        #expect(received.last == "LAST", "the last line comes last, whole: \(received.suffix(2))")
        let before = received.dropLast().map(String.init)
        #expect(before.count < lines.count, "the queued lines after the first are dropped")
        #expect(before == lines.prefix(before.count).map { String(decoding: $0.dropLast(), as: UTF8.self) },
                "what came before it is whole lines, in order, with none missing")
    }

    @Test("a finishing connection whose peer never reads closes when its grace ends")
    func finishClosesAfterTheGrace() throws {
        let loop = try EventLoop()
        let (daemonEnd, peer) = try socketPair()
        defer { close(peer) }
        var closed = false
        let connection = try Connection(fd: FileDescriptor(owning: daemonEnd, path: "the daemon's end"), loop: loop) { event in
            if case .closed = event {
                closed = true
                loop.exit()
            }
        }
        for _ in 0..<4000 { connection.send(Array("\(String(repeating: "y", count: 99))\n".utf8)) }
        connection.finish(with: Array("LAST\n".utf8), grace: .milliseconds(200))
        #expect(!closed, "the last line is not written yet: the socket is full")
        let timeout = try loop.timer { loop.exit() }
        timeout.arm(after: .seconds(30))
        _ = loop.run()
        #expect(closed && !connection.isOpen, "closed when the grace ended, though the peer never read")
    }
}
