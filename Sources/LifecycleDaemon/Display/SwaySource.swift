import CSupport
import Glibc
import LifecycleProtocol

/// sway (or any compositor speaking the i3/sway IPC with pids) as a display source: it subscribes to window,
/// workspace and shutdown events and reads the whole tree at connect and after each event that may have moved a
/// window. A lost or garbled connection is logged, closed and made again after a doubling delay; the apps keep
/// their states meanwhile, and the first tree after the reconnect reconciles them.
final class SwaySource: DisplaySource {
    let name = "sway"
    private(set) var address: String
    /// Where the socket is now: sway names it after its pid, so a restarted sway is found again by looking anew.
    private let locate: () -> String?
    private(set) var connected = false
    private let loop: EventLoop
    private let coder = LineCoder()
    private var report: ((WindowPicture) -> Void)?
    private var socket: FileDescriptor?
    private var watch: EventSource?
    private var decoder = SwayFrameDecoder()
    private var output: [UInt8] = []
    /// The replies sway owes, in the order asked (it answers in order; events come in between).
    private var awaiting: [UInt32] = []
    /// A tree was asked for while one was on its way: ask again once it arrives, as it may predate the change.
    private var treeStale = false
    /// The picture last reported, which window events change in place.
    private var picture = WindowPicture()
    private var reported = false
    /// The loop's time of the first event not reported yet.
    private var changeStarted: Duration?
    private lazy var reconnection = try? Reconnection(loop: loop, first: .milliseconds(100), cap: .seconds(5)) {
        [unowned self] in self.connect()
    }
    private var stopped = false
    /// The uid whose sway the daemon follows, checked against the listener's credentials at every connect; nil
    /// for a socket the configuration names, which is followed whoever serves it.
    private let owner: uid_t?
    /// How long a connection may go without its first tree before it is taken for lost.
    static let answerTimeout: Duration = .seconds(5)
    /// At most this much is read from sway per wakeup, so that a flood leaves the loop to the other inputs.
    static let readBudget = 256 * 1024
    private lazy var answerTimer = try? LoopTimer(loop: loop) { [unowned self] in
        if !self.connected, self.socket != nil { self.lost("sway at \(self.address) did not answer within \(Self.answerTimeout)") }
    }

    init(loop: EventLoop, socketPath: String, owner: uid_t? = nil, locate: @escaping () -> String? = { nil }) {
        self.loop = loop
        self.address = socketPath
        self.owner = owner
        self.locate = locate
    }

    func start(report: @escaping (WindowPicture) -> Void) {
        self.report = report
        connect()
    }

    func stop() {
        stopped = true
        reconnection?.cancel()
        disconnect()
    }

    func focus(window: Int64) { command("[con_id=\(window)] focus") }
    func hide(window: Int64) { command("[con_id=\(window)] move scratchpad") }

    // MARK: Connection

    private func connect() {
        guard !stopped else { return }
        if let found = locate() { address = found }
        let fd = cs_unix_connect_nonblocking(address)
        guard fd >= 0 else { return lost("Failed to connect to sway at \(address): \(String(cString: strerror(-fd)))") }
        let socket = FileDescriptor(owning: fd, path: address)
        if let owner {
            var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
            guard cs_peer_credentials(fd, &pid, &uid, &gid) == 0 else {
                return lost("Failed to read who serves the sway socket \(address): \(String(cString: strerror(errno)))")
            }
            guard uid == owner else {
                return lost("the sway socket \(address) is served by uid \(uid) (pid \(pid)), not by uid \(owner); not following it")
            }
        }
        do {
            watch = try loop.watch(fd: fd, events: IOEvents.readable) { [unowned self] revents in self.ready(revents) }
        } catch {
            return lost("Failed to watch the sway socket: \(error)")
        }
        self.socket = socket
        decoder = SwayFrameDecoder()
        awaiting = []
        treeStale = false
        reported = false
        changeStarted = nil
        send(SwayMessageType.subscribe, payload: #"["window","workspace","shutdown"]"#)
        send(SwayMessageType.getTree)
        answerTimer?.arm(after: Self.answerTimeout)
    }

    private func disconnect() {
        watch?.cancel()
        watch = nil
        socket = nil
        output = []
        awaiting = []
        connected = false
    }

    /// Close, log, and try again after a delay that doubles up to its cap: no polling while sway is away. Every
    /// loss of an open connection is logged; of the failed attempts to connect while sway is away, only the first.
    private func lost(_ reason: String) {
        let wasOpen = socket != nil
        disconnect()
        guard !stopped else { return }
        if wasOpen || reconnection?.isFirstFailure != false {
            Log.warning("display: \(reason); the apps keep their states, reconnecting")
        }
        guard let reconnection else {
            return Log.error("display: Failed to create the reconnect timer; sway is not followed any more")
        }
        reconnection.schedule()
    }

    // MARK: I/O

    private func send(_ type: UInt32, payload: String = "") {
        guard socket != nil else { return }
        if type == SwayMessageType.getTree, awaiting.contains(SwayMessageType.getTree) {
            treeStale = true
            return
        }
        awaiting.append(type)
        output += SwayCodec.encode(type: type, payload: payload)
        flush()
    }

    private func command(_ text: String) {
        guard connected else { return Log.warning("display: sway is not connected; '\(text)' not sent") }
        send(SwayMessageType.runCommand, payload: text)
    }

    private func flush() {
        guard let socket else { return }
        while !output.isEmpty {
            let count = output.withUnsafeBytes { Glibc.write(socket.rawValue, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN {
                watch?.setEvents(IOEvents.readable | IOEvents.writable)
                return
            }
            guard count > 0 else { return lost("Failed to write to sway: \(String(cString: strerror(errno)))") }
            output.removeFirst(count)
        }
        watch?.setEvents(IOEvents.readable)
    }

    private func ready(_ revents: UInt32) {
        if revents & IOEvents.writable != 0 { flush() }
        guard let socket, revents & IOEvents.readable | IOEvents.hangup | IOEvents.error != 0 else { return }
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var taken = 0
        // What is left past the budget wakes the loop again (level-triggered), after the other inputs.
        while taken < Self.readBudget {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(socket.rawValue, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN { break }
            if count <= 0 {
                return lost(count == 0 ? "sway closed the connection" : "Failed to read from sway: \(String(cString: strerror(errno)))")
            }
            decoder.append(chunk[..<count])
            taken += count
        }
        do {
            while let frame = try decoder.next() {
                try handle(frame)
                if self.socket == nil { return }
            }
        } catch {
            lost("sway sent input lifecycled cannot read (\(error))")
        }
    }

    /// A window event carries its view: a focus or a close is reported from it at once, without waiting for a tree.
    /// What it cannot tell (a tab hidden behind the focused one, a move elsewhere) comes with the tree read after it,
    /// of which at most one is on its way.
    private func followWindow(_ event: (change: String, window: DisplayWindow?)) {
        changeStarted = changeStarted ?? loop.now
        if connected, let window = event.window {
            var picture = picture
            switch event.change {
            case "focus":
                for index in picture.windows.indices { picture.windows[index].focused = false }
                var focused = window
                focused.focused = true
                focused.visible = true
                if let index = picture.windows.firstIndex(where: { $0.id == window.id }) {
                    picture.windows[index] = focused
                } else {
                    picture.windows.append(focused)
                }
                publish(picture, keepStamp: true)
            case "close":
                picture.windows.removeAll { $0.id == window.id }
                publish(picture)
                return
            case "title", "mark", "urgent":
                return
            default:
                break
            }
        }
        send(SwayMessageType.getTree)
    }

    /// Reports `picture` when it differs from the last one reported, stamped with the event that began the change.
    private func publish(_ picture: WindowPicture, keepStamp: Bool = false) {
        var stamped = picture
        stamped.changedAt = changeStarted
        if !keepStamp { changeStarted = nil }
        var plain = picture
        plain.changedAt = nil
        guard plain != self.picture || !reported else { return }
        self.picture = plain
        reported = true
        report?(stamped)
    }

    private func handle(_ frame: SwayFrame) throws(SwayIPCError) {
        if frame.isEvent {
            switch frame.type {
            case SwayMessageType.shutdownEvent:
                lost("sway is shutting down")
            case SwayMessageType.windowEvent:
                followWindow(try SwayTree.windowEvent(frame.payload, coder: coder))
            case SwayMessageType.workspaceEvent:
                // A workspace shown or hidden moves every window on it: the tree says what is true now.
                changeStarted = changeStarted ?? loop.now
                send(SwayMessageType.getTree)
            default:
                break
            }
            return
        }
        guard !awaiting.isEmpty else { throw .malformedPayload(type: frame.type, reason: "a reply nobody asked for") }
        let expected = awaiting.removeFirst()
        guard frame.type == expected else {
            throw .malformedPayload(type: frame.type, reason: "a reply of type \(frame.type) where \(expected) was due")
        }
        switch frame.type {
        case SwayMessageType.getTree:
            let picture = try SwayTree.picture(fromTree: frame.payload, coder: coder)
            if !connected {
                connected = true
                answerTimer?.cancel()
                reconnection?.succeeded()
                Log.info("display: following sway at \(address)")
            }
            if treeStale {
                treeStale = false
                send(SwayMessageType.getTree)
            }
            publish(picture)
        case SwayMessageType.runCommand:
            if let failure = try SwayTree.commandOutcome(frame.payload, coder: coder) {
                Log.warning("display: sway refused a command: \(failure)")
            }
        default:
            break
        }
    }
}
