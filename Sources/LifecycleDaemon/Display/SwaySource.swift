import CSupport
import Glibc
import LifecycleProtocol

/// sway (or any compositor speaking the i3/sway IPC with pids) as a display source: it subscribes to window,
/// workspace, binding, output and shutdown events, and reads the whole tree at connect and after each event that
/// changes its structure (a window opened, closed or moved, a workspace made or removed, an output changed, a key
/// binding that may change a layout). A focus or a workspace switch is followed from its event alone, through the
/// tree model (`SwayTreeModel`), so that it costs what it changes rather than the size of the desktop. A lost or
/// garbled connection is logged, closed and made again after a doubling delay; the apps keep their states
/// meanwhile, and the first tree after the reconnect reconciles them.
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
    /// The last tree, as focus and workspace events change it.
    private var model = SwayTreeModel()
    /// What this wakeup's events asked for, done once after them: a burst of events is one tree read and one report.
    private var treeWanted = false
    private var modelChanged = false
    /// The picture last reported.
    private var picture = WindowPicture()
    private var reported = false
    /// The loop's time of the first event not reported yet.
    private var changeStarted: Duration?
    private lazy var reconnection = ReconnectingSource(loop: loop, name: "display: sway", first: .milliseconds(100), cap: .seconds(5)) {
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
        reconnection.cancel()
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
        treeWanted = false
        modelChanged = false
        model = SwayTreeModel()
        reported = false
        changeStarted = nil
        send(SwayMessageType.subscribe, payload: #"["window","workspace","binding","shutdown"]"#)
        send(SwayMessageType.getTree)
        // Apart and last, as a sway without output events (1.7) refuses a whole subscription that names them.
        send(SwayMessageType.subscribe, payload: #"["output"]"#)
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

    /// Close, log, and try again after a delay that doubles up to its cap. Every loss of an open connection is
    /// logged; of the failed attempts to connect while sway is away, only the first.
    private func lost(_ reason: String) {
        let wasOpen = socket != nil
        disconnect()
        guard !stopped else { return }
        reconnection.failed("display: \(reason); the apps keep their states, reconnecting", warn: wasOpen ? true : nil)
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
            return lost("sway sent input lifecycled cannot read (\(error))")
        }
        if treeWanted {
            treeWanted = false
            send(SwayMessageType.getTree)
        }
        if modelChanged {
            modelChanged = false
            // A tree on its way completes the change: the stamp stays for the picture it gives.
            publish(model.picture, keepStamp: awaiting.contains(SwayMessageType.getTree))
        }
    }

    /// What the tree model makes of an event: a focus or a workspace switch is derived from the model, a change of
    /// structure is read from the tree after this wakeup's events. Before the first tree, every event reads it.
    private func follow(_ step: SwayTreeModel.Step) {
        guard step.changed || step.readTree else { return }
        changeStarted = changeStarted ?? loop.now
        if step.readTree || !connected { treeWanted = true }
        if step.changed, connected { modelChanged = true }
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
                let event = try SwayTree.windowEvent(frame.payload, coder: coder)
                follow(model.follow(window: event.change, event.window))
            case SwayMessageType.workspaceEvent:
                let event = try SwayTree.workspaceEvent(frame.payload, coder: coder)
                follow(model.follow(workspace: event.change, event.workspace))
            case SwayMessageType.bindingEvent:
                follow(SwayTreeModel.follow(binding: try SwayTree.bindingCommand(frame.payload, coder: coder)))
            case SwayMessageType.outputEvent:
                follow(SwayTreeModel.Step(readTree: true))
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
            model = try SwayTree.model(fromTree: frame.payload, coder: coder)
            modelChanged = false
            if !connected {
                connected = true
                answerTimer?.cancel()
                reconnection.succeeded()
                Log.info("display: following sway at \(address)")
            }
            if treeStale {
                treeStale = false
                send(SwayMessageType.getTree)
            }
            publish(model.picture)
        case SwayMessageType.runCommand:
            if let failure = try SwayTree.commandOutcome(frame.payload, coder: coder) {
                Log.warning("display: sway refused a command: \(failure)")
            }
        default:
            break
        }
    }
}
