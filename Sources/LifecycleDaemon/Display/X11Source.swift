import CXCB
import Glibc

/// An EWMH window manager on X11 (openbox, i3, xfwm4, KWin…) as a display source, through libxcb on the daemon's
/// loop. It watches the root's active window, client list and current desktop, and each client's state, desktop,
/// pid and map state. It reads the whole picture at connect; after that, each event asks only for what it changed, and
/// the source reports only the windows whose part of the picture changed. Every request is sent at once and each
/// reply taken as it arrives (never a blocking round trip). A lost connection is logged and made again after a doubling
/// delay; the apps keep their states meanwhile, and the first picture after the reconnect reconciles them.
///
/// No write waits for a server that stops reading: requests go out through `X11Requests`, which flushes only when
/// the socket has room, else the loop watches the socket for room. Nothing waits for a reply either: replies are
/// polled (`lc_xcb_poll_reply`).
final class X11Source: DisplaySource {
    let name = "x11"
    let address: String
    private(set) var connected = false
    private let loop: EventLoop
    private var report: ((WindowPicture) -> Void)?
    private var connection: OpaquePointer?
    private var root: xcb_window_t = 0
    private var atoms = X11Atoms(byName: [:])
    private var hasResource = false
    private var watch: EventSource?
    /// The requests waiting to go out and the replies awaited.
    private var requests = X11Requests()
    private var reading = false
    private var draining = false
    /// A change came while a read was on its way: read again once it is done, as it may predate the change.
    private var stale = false
    /// Clients whose events this connection selected.
    private var selected: Set<UInt32> = []
    /// The window manager's state as the replies so far have it: the root's properties and each client's.
    private var rootState = X11Root()
    private var clientOrder: [UInt32] = []
    private var clients: [UInt32: X11Client] = [:]
    /// The first picture is in: each event asks only for what it changed.
    private var following = false
    /// The loop's time of the first event not reported yet.
    private var changeStarted: Duration?
    /// What was reported, and which windows may have changed since.
    private var reports = X11Reports()
    private lazy var reconnection = ReconnectingSource(loop: loop, name: "display: X11", first: .milliseconds(100), cap: .seconds(5)) {
        [unowned self] in self.connect()
    }
    private var stopped = false
    private let displayName: X11DisplayName
    private let connector: X11Connector
    /// The listener last refused for its uid, whose refusal is not logged again.
    private var refusedPeer: (uid: uid_t, pid: pid_t)?
    /// How long the connection setup may take before the peer is taken for one that never answers.
    static let setupTimeout: Duration = .seconds(5)

    /// Focus and hide requests are dropped while this many requests wait for a server that reads nothing.
    static let outboxLimit = 4096

    /// `display`: as configured, for the log and the status; `name`: as parsed from it. `owners`: the uids whose X
    /// server the daemon follows (DisplayFollower).
    init(loop: EventLoop, display: String, name: X11DisplayName, owners: [uid_t]) {
        self.loop = loop
        self.address = display
        self.displayName = name
        self.connector = X11Connector(loop: loop, name: name, owners: owners, timeout: Self.setupTimeout)
    }

    func start(report: @escaping (WindowPicture) -> Void) {
        self.report = report
        connect()
    }

    func stop() {
        stopped = true
        reconnection.cancel()
        connector.cancel()
        disconnect()
    }

    /// EWMH: a pager's request (source indication 2), after switching to the window's desktop when it is elsewhere.
    func focus(window: Int64) {
        guard connection != nil, connected, let id = UInt32(exactly: window) else {
            return Log.warning("display: the X server is not connected; focus of window \(window) not sent")
        }
        guard requests.waiting < Self.outboxLimit else {
            return Log.warning("display: the X server reads no requests; focus of window \(window) not sent")
        }
        let root = root, atoms = atoms
        if let desktop = clients[id]?.desktop, desktop != X11Client.allDesktops,
           let current = rootState.currentDesktop, desktop != current {
            enqueue { connection in lc_xcb_client_message(connection, root, root, atoms.currentDesktop, desktop, 0, 0); return nil }
        }
        enqueue { connection in lc_xcb_client_message(connection, root, id, atoms.activeWindow, 2, 0, 0); return nil }
        flush()
    }

    /// ICCCM: WM_CHANGE_STATE to IconicState.
    func hide(window: Int64) {
        guard connection != nil, connected, let id = UInt32(exactly: window) else {
            return Log.warning("display: the X server is not connected; hiding window \(window) not sent")
        }
        guard requests.waiting < Self.outboxLimit else {
            return Log.warning("display: the X server reads no requests; hiding window \(window) not sent")
        }
        let root = root, atoms = atoms
        enqueue { connection in lc_xcb_client_message(connection, root, id, atoms.changeState, 3, 0, 0); return nil }
        flush()
    }

    // MARK: Connection

    private func connect() {
        guard !stopped else { return }
        connector.start { [unowned self] result in
            switch result {
            case .success(let connection): self.established(connection)
            case .failure(let failure): self.failed(failure)
            }
        }
    }

    /// A listener of another uid is logged once, however often it is met again, until a connection succeeds.
    private func failed(_ failure: X11ConnectFailure) {
        guard case .unexpectedOwner(_, let uid, let pid, _) = failure else { return lost(failure.description) }
        let new = refusedPeer?.uid != uid || refusedPeer?.pid != pid
        refusedPeer = (uid, pid)
        lost(failure.description, logged: new)
    }

    /// The setup is done: ask for the atoms and the X-Resource extension, then the whole picture.
    private func established(_ connection: OpaquePointer) {
        var roots = xcb_setup_roots_iterator(xcb_get_setup(connection))
        for _ in 0..<max(0, Int(displayName.screen)) where roots.rem > 1 { xcb_screen_next(&roots) }
        guard let data = roots.data else {
            xcb_disconnect(connection)
            return lost("The X server \(address) has no screen \(displayName.screen)")
        }
        root = data.pointee.root
        do {
            watch = try loop.watch(fd: xcb_get_file_descriptor(connection), events: IOEvents.readable) { [unowned self] events in
                self.ready(events)
            }
        } catch {
            xcb_disconnect(connection)
            return lost("Failed to watch the X connection: \(error)")
        }
        self.connection = connection
        requests = X11Requests()
        selected = []
        reading = true
        stale = false
        // The extension's presence is asked first, so that its reply is in before the atoms' (the server answers in
        // order) and reading it in the step below never waits.
        enqueue { connection in lc_xcb_prefetch_res(connection); return nil }
        var byName: [String: UInt32] = [:]
        for atom in X11Atoms.names {
            enqueue { connection in
                .reply(xcb_intern_atom(connection, 0, UInt16(atom.utf8.count), atom).sequence) { reply in
                    if let reply { byName[atom] = reply.assumingMemoryBound(to: xcb_intern_atom_reply_t.self).pointee.atom }
                }
            }
        }
        enqueue(step: { [unowned self] in
            self.atoms = X11Atoms(byName: byName)
            self.hasResource = lc_xcb_has_res(connection) != 0
            let root = self.root
            self.enqueue { connection in
                var values = [XCB_EVENT_MASK_PROPERTY_CHANGE.rawValue | XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY.rawValue]
                xcb_change_window_attributes(connection, root, XCB_CW_EVENT_MASK.rawValue, &values)
                return nil
            }
            self.readAll()
        })
        flush()
    }

    private func disconnect() {
        watch?.cancel()
        watch = nil
        if let connection { xcb_disconnect(connection) }
        connection = nil
        requests = X11Requests()
        reading = false
        connected = false
    }

    /// Close, log, and try again after a delay that doubles up to its cap. Every loss of an open connection is
    /// logged; of the failed attempts while the server is away, only the first. `logged`: whether to log this one,
    /// in place of that rule.
    private func lost(_ reason: String, logged: Bool? = nil) {
        let wasOpen = connection != nil
        disconnect()
        guard !stopped else { return }
        reconnection.failed("display: \(reason); the apps keep their states, reconnecting", warn: logged ?? (wasOpen ? true : nil))
    }

    private func flush() {
        guard connection != nil else { return }
        send()
        // Sending may have read what the server had sent, which the fd will not report again.
        drain()
    }

    private func enqueue(_ request: @escaping (OpaquePointer) -> X11Requests.Pending?) {
        requests.enqueue(request)
    }

    private func enqueue(step: @escaping () -> Void) {
        requests.enqueue(step: step)
    }

    /// Hands what waits to libxcb; when the socket has no room, it is watched for room and the rest waits. Returns
    /// whether anything joined the replies awaited.
    @discardableResult
    private func send() -> Bool {
        guard let connection else { return false }
        switch requests.send(on: connection) {
        case .done(let moved):
            return moved
        case .awaitingRoom(let moved):
            watch?.setEvents(IOEvents.readable | IOEvents.writable)
            return moved
        case .broken(let moved):
            lost("The connection to the X server \(address) broke")
            return moved
        }
    }

    // MARK: Input

    private func ready(_ events: UInt32) {
        if requests.awaitingRoom && events & (IOEvents.writable | IOEvents.error | IOEvents.hangup) != 0 {
            requests.roomCame()
            watch?.setEvents(IOEvents.readable)
            send()
        }
        drain()
    }

    /// Everything xcb has or can read without blocking, until nothing moves: events (each may mark the picture
    /// stale), then the replies in the order they are due, and the steps between them.
    private func drain() {
        guard let connection, !draining else { return }
        draining = true
        defer { draining = false }
        var progress = true
        while progress, self.connection == connection {
            progress = false
            var asked = false
            while let event = xcb_poll_for_event(connection) {
                if follow(event) { asked = true }
                free(event)
            }
            if asked {
                changeStarted = changeStarted ?? loop.now
                enqueue(step: { [unowned self] in self.publish() })
                progress = true
            }
            if xcb_connection_has_error(connection) != 0 { return lost("The X server \(address) closed the connection") }
            replies: while let first = requests.pending.first {
                switch first {
                case .step(let step):
                    requests.removeFirstPending()
                    step()
                case .reply(let sequence, let handle):
                    var reply: UnsafeMutableRawPointer?
                    guard lc_xcb_poll_reply(connection, sequence, &reply) != 0 else { break replies }
                    requests.removeFirstPending()
                    handle(reply)
                    free(reply)
                }
                progress = true
                guard self.connection == connection else { return }
            }
            // A reply's handler may have asked for more (the new clients of a client list): send it.
            if send() { progress = true }
            guard self.connection == connection else { return }
            if xcb_connection_has_error(connection) != 0 { return lost("The X server \(address) closed the connection") }
            if stale && !reading {
                refresh()
                progress = true
            }
        }
    }

    /// Asks again for what `event` changed: a root property, one property or the map state of one window, or the
    /// client list. Returns whether anything was asked.
    private func follow(_ event: UnsafeMutablePointer<xcb_generic_event_t>) -> Bool {
        guard let connection, following else {
            if matters(event) { stale = true }
            return false
        }
        let raw = UnsafeMutableRawPointer(event)
        switch Int32(lc_xcb_event_kind(event)) {
        case XCB_PROPERTY_NOTIFY:
            let notify = raw.load(as: xcb_property_notify_event_t.self)
            if notify.window == root {
                switch notify.atom {
                case atoms.clientList: readClientList(connection)
                case atoms.activeWindow: readActive(connection)
                case atoms.currentDesktop: readCurrentDesktop(connection)
                default: return false
                }
                return true
            }
            guard clients[notify.window] != nil, atoms.clientWatched.contains(notify.atom) else { return false }
            readProperty(notify.atom, of: notify.window, connection)
            return true
        case XCB_MAP_NOTIFY:
            let window = raw.load(as: xcb_map_notify_event_t.self).window
            guard clients[window] != nil else { return false }
            readMapState(of: window, connection)
            return true
        case XCB_UNMAP_NOTIFY:
            let window = raw.load(as: xcb_unmap_notify_event_t.self).window
            guard clients[window] != nil else { return false }
            readMapState(of: window, connection)
            return true
        case XCB_DESTROY_NOTIFY:
            let window = raw.load(as: xcb_destroy_notify_event_t.self).window
            guard clients.removeValue(forKey: window) != nil else { return false }
            selected.remove(window)
            reports.close(window)
            return true
        default:
            // Errors of requests without replies (a window gone before its events were selected) and the rest.
            return false
        }
    }

    /// Whether an event seen while the first picture is read may change it.
    private func matters(_ event: UnsafeMutablePointer<xcb_generic_event_t>) -> Bool {
        let raw = UnsafeMutableRawPointer(event)
        switch Int32(lc_xcb_event_kind(event)) {
        case XCB_PROPERTY_NOTIFY:
            let notify = raw.load(as: xcb_property_notify_event_t.self)
            return notify.window == root ? atoms.rootWatched.contains(notify.atom) : atoms.clientWatched.contains(notify.atom)
        case XCB_MAP_NOTIFY, XCB_UNMAP_NOTIFY, XCB_DESTROY_NOTIFY:
            return true
        default:
            return false
        }
    }

    // MARK: Reading the picture

    /// At connect, and when a change came while the first picture was read: the whole picture. After it, each
    /// event asks only for what it changed (`follow`).
    private func refresh() {
        if reading { stale = true } else { readAll() }
    }

    private func readAll() {
        guard let connection else { return }
        reading = true
        stale = false
        following = false
        clients = [:]
        reports.restart()
        readClientList(connection)
        readActive(connection)
        readCurrentDesktop(connection)
        // Appended once the client list's reply has asked for every client, so that it runs after their replies.
        enqueue(step: { [unowned self] in self.enqueue(step: { [unowned self] in
            self.reading = false
            if self.stale { return self.readAll() }
            self.following = true
            if !self.connected {
                self.connected = true
                self.refusedPeer = nil
                self.reconnection.succeeded()
                Log.info("display: following the X server \(self.address)")
            }
            self.publish()
        }) })
        flush()
    }

    /// The client list: windows that left it are dropped, and every property of the new ones is read.
    private func readClientList(_ connection: OpaquePointer) {
        ask(connection, window: root, atoms.clientList, length: 1 << 16) { [unowned self] value, format in
            let list = X11Property.cardinals(value, format: format)
            self.clientOrder = list
            let present = Set(list)
            for window in self.clients.keys where !present.contains(window) {
                self.clients[window] = nil
                self.reports.close(window)
            }
            self.selected.formIntersection(present)
            let new = list.filter { self.clients[$0] == nil }
            for window in new { self.readClient(window, connection) }
            if self.following && !new.isEmpty { self.enqueue(step: { [unowned self] in self.publish() }) }
        }
    }

    private func readActive(_ connection: OpaquePointer) {
        ask(connection, window: root, atoms.activeWindow, length: 1) { [unowned self] value, format in
            let active = X11Property.cardinals(value, format: format).first
            for window in [self.rootState.active, active].compactMap({ $0 }) { self.reports.touch(window) }
            self.rootState.active = active
        }
    }

    private func readCurrentDesktop(_ connection: OpaquePointer) {
        ask(connection, window: root, atoms.currentDesktop, length: 1) { [unowned self] value, format in
            let desktop = X11Property.cardinals(value, format: format).first
            // Another desktop may show or hide any window.
            if desktop != self.rootState.currentDesktop { self.reports.touch(self.clients.keys) }
            self.rootState.currentDesktop = desktop
        }
    }

    /// Every property of a window new to the list, with its events selected first so that no change is missed
    /// between the reads and the events.
    private func readClient(_ window: UInt32, _ connection: OpaquePointer) {
        clients[window] = X11Client(window: window, complete: false)
        if selected.insert(window).inserted {
            enqueue { connection in
                let mask = [XCB_EVENT_MASK_PROPERTY_CHANGE.rawValue | XCB_EVENT_MASK_STRUCTURE_NOTIFY.rawValue]
                xcb_change_window_attributes(connection, window, XCB_CW_EVENT_MASK.rawValue, mask)
                return nil
            }
        }
        readMapState(of: window, connection)
        for atom in [atoms.wmPID, atoms.wmDesktop, atoms.wmState, X11Atoms.wmClass] { readProperty(atom, of: window, connection) }
        if hasResource {
            enqueue { [unowned self] connection in
                .reply(lc_xcb_res_query_pid(connection, window)) { [unowned self] reply in
                    guard let reply, self.clients[window] != nil else { return }
                    let pid = lc_xcb_res_pid(reply)
                    self.clients[window]?.serverPID = pid > 0 ? pid_t(truncatingIfNeeded: pid) : nil
                    self.reports.touch(window)
                }
            }
        }
        enqueue(step: { [unowned self] in
            self.clients[window]?.complete = true
            self.reports.touch(window)
        })
    }

    private func readMapState(of window: UInt32, _ connection: OpaquePointer) {
        enqueue { [unowned self] connection in
            .reply(xcb_get_window_attributes(connection, window).sequence) { [unowned self] reply in
                guard let reply, self.clients[window] != nil else { return }
                let mapState = reply.assumingMemoryBound(to: xcb_get_window_attributes_reply_t.self).pointee.map_state
                self.clients[window]?.viewable = UInt32(mapState) == XCB_MAP_STATE_VIEWABLE.rawValue
                self.reports.touch(window)
            }
        }
    }

    /// One watched property of a client; ICCCM's WM_STATE changes with the map state, which is read instead.
    private func readProperty(_ atom: UInt32, of window: UInt32, _ connection: OpaquePointer) {
        let atoms = atoms
        reports.touch(window)
        switch atom {
        case atoms.wmPID:
            ask(connection, window: window, atom, length: 1) { [unowned self] value, format in
                self.clients[window]?.pid = X11Property.cardinals(value, format: format).first.flatMap { pid_t(exactly: $0) }
            }
        case atoms.wmDesktop:
            ask(connection, window: window, atom, length: 1) { [unowned self] value, format in
                self.clients[window]?.desktop = X11Property.cardinals(value, format: format).first
            }
        case atoms.wmState:
            ask(connection, window: window, atom, length: 64) { [unowned self] value, format in
                self.clients[window]?.hidden = X11Property.cardinals(value, format: format).contains(atoms.wmStateHidden)
            }
        case X11Atoms.wmClass:
            ask(connection, window: window, atom, length: 256) { [unowned self] value, format in
                let names = X11Property.wmClass(value, format: format)
                self.clients[window]?.instance = names.instance
                self.clients[window]?.class = names.class
            }
        case atoms.icccmState:
            readMapState(of: window, connection)
        default:
            break
        }
    }

    /// The picture as the replies so far make it, reported once the replies to a batch of events are in: whole at
    /// connect, then only the windows whose part of it changed.
    private func publish() {
        let root = X11Root(clients: clientOrder, active: rootState.active, currentDesktop: rootState.currentDesktop)
        let changedAt = changeStarted
        changeStarted = nil
        if let picture = reports.next(root: root, clients: clients, serverVouches: hasResource, changedAt: changedAt) {
            report?(picture)
        }
    }

    /// One property, whatever its type; `handle` gets its bytes and format (nothing when the window is gone).
    /// A property that is not set (or was deleted) is handed over empty, so that a value read before is cleared.
    private func ask(_ connection: OpaquePointer, window: xcb_window_t, _ property: UInt32, length: UInt32,
                     _ handle: @escaping ([UInt8], UInt8) -> Void) {
        enqueue { connection in
            .reply(xcb_get_property(connection, 0, window, property, XCB_ATOM_ANY.rawValue, 0, length).sequence) { reply in
                guard let reply else { return }
                let property = reply.assumingMemoryBound(to: xcb_get_property_reply_t.self)
                let count = Int(xcb_get_property_value_length(property))
                guard count > 0, let value = xcb_get_property_value(property) else { return handle([], 0) }
                handle(Array(UnsafeRawBufferPointer(start: value, count: count)), property.pointee.format)
            }
        }
    }
}
