import CXCB
import Glibc

/// An EWMH window manager on X11 (openbox, i3, xfwm4, KWin…) as a display source, through libxcb on the daemon's
/// loop. It watches the root's active window, client list and current desktop, and each client's state, desktop,
/// pid and map state; after any change it reads the whole picture again, every request sent at once and each reply
/// taken as it arrives (never a blocking round trip). A lost connection is logged and made again after a doubling
/// delay; the apps keep their states meanwhile, and the first picture after the reconnect reconciles them.
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
    /// Replies awaited in the order the requests went out, with the steps that run once the replies before them
    /// are in (the server answers in order).
    private var pending: [Pending] = []
    private var reading = false
    private var draining = false
    /// A change came while a read was on its way: read again once it is done, as it may predate the change.
    private var stale = false
    /// Clients whose events this connection selected.
    private var selected: Set<UInt32> = []
    private var lastRoot = X11Root()
    private var lastClients: [UInt32: X11Client] = [:]
    private lazy var reconnection = try? Reconnection(loop: loop, first: .milliseconds(100), cap: .seconds(5)) {
        [unowned self] in self.connect()
    }
    private var stopped = false

    private enum Pending {
        case reply(UInt32, (UnsafeMutableRawPointer?) -> Void)
        case step(() -> Void)
    }

    init(loop: EventLoop, display: String) {
        self.loop = loop
        self.address = display
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

    /// EWMH: a pager's request (source indication 2), after switching to the window's desktop when it is elsewhere.
    func focus(window: Int64) {
        guard let connection, connected, let id = UInt32(exactly: window) else {
            return Log.warning("display: the X server is not connected; focus of window \(window) not sent")
        }
        if let desktop = lastClients[id]?.desktop, desktop != X11Client.allDesktops,
           let current = lastRoot.currentDesktop, desktop != current {
            lc_xcb_client_message(connection, root, root, atoms.currentDesktop, desktop, 0, 0)
        }
        lc_xcb_client_message(connection, root, id, atoms.activeWindow, 2, 0, 0)
        flush()
    }

    /// ICCCM: WM_CHANGE_STATE to IconicState.
    func hide(window: Int64) {
        guard let connection, connected, let id = UInt32(exactly: window) else {
            return Log.warning("display: the X server is not connected; hiding window \(window) not sent")
        }
        lc_xcb_client_message(connection, root, id, atoms.changeState, 3, 0, 0)
        flush()
    }

    // MARK: Connection

    private func connect() {
        guard !stopped else { return }
        var screen: Int32 = 0
        guard let connection = xcb_connect(address, &screen) else { return lost("Failed to connect to the X server \(address)") }
        if xcb_connection_has_error(connection) != 0 {
            xcb_disconnect(connection)
            return lost("Failed to connect to the X server \(address)")
        }
        var roots = xcb_setup_roots_iterator(xcb_get_setup(connection))
        for _ in 0..<max(0, Int(screen)) where roots.rem > 1 { xcb_screen_next(&roots) }
        guard let data = roots.data else {
            xcb_disconnect(connection)
            return lost("The X server \(address) has no screen \(screen)")
        }
        root = data.pointee.root
        do {
            watch = try loop.watch(fd: xcb_get_file_descriptor(connection), events: IOEvents.readable) { [unowned self] _ in
                self.ready()
            }
        } catch {
            xcb_disconnect(connection)
            return lost("Failed to watch the X connection: \(error)")
        }
        self.connection = connection
        pending = []
        selected = []
        reading = true
        stale = false
        lc_xcb_prefetch_res(connection)
        var byName: [String: UInt32] = [:]
        for atom in X11Atoms.names {
            let cookie = xcb_intern_atom(connection, 0, UInt16(atom.utf8.count), atom)
            pending.append(.reply(cookie.sequence) { reply in
                if let reply { byName[atom] = reply.assumingMemoryBound(to: xcb_intern_atom_reply_t.self).pointee.atom }
            })
        }
        pending.append(.step { [unowned self] in
            self.atoms = X11Atoms(byName: byName)
            self.hasResource = lc_xcb_has_res(connection) != 0
            let mask = XCB_EVENT_MASK_PROPERTY_CHANGE.rawValue | XCB_EVENT_MASK_SUBSTRUCTURE_NOTIFY.rawValue
            var values = [mask]
            xcb_change_window_attributes(connection, self.root, XCB_CW_EVENT_MASK.rawValue, &values)
            self.readRoot()
        })
        flush()
    }

    private func disconnect() {
        watch?.cancel()
        watch = nil
        if let connection { xcb_disconnect(connection) }
        connection = nil
        pending = []
        reading = false
        connected = false
    }

    /// Close, log, and try again after a delay that doubles up to its cap: no polling while the server is away.
    /// Every loss of an open connection is logged; of the failed attempts while the server is away, only the first.
    private func lost(_ reason: String) {
        let wasOpen = connection != nil
        disconnect()
        guard !stopped else { return }
        if wasOpen || reconnection?.isFirstFailure != false {
            Log.warning("display: \(reason); the apps keep their states, reconnecting")
        }
        guard let reconnection else {
            return Log.error("display: Failed to create the reconnect timer; X11 is not followed any more")
        }
        reconnection.schedule()
    }

    private func flush() {
        guard let connection else { return }
        if xcb_flush(connection) <= 0 || xcb_connection_has_error(connection) != 0 {
            return lost("The connection to the X server \(address) broke")
        }
        // Sending may have read what the server had sent, which the fd will not report again.
        drain()
    }

    // MARK: Input

    private func ready() { drain() }

    /// Everything xcb has or can read without blocking, until nothing moves: events (each may mark the picture
    /// stale), then the replies in the order they are due, and the steps between them.
    private func drain() {
        guard let connection, !draining else { return }
        draining = true
        defer { draining = false }
        var progress = true
        while progress, self.connection == connection {
            progress = false
            var changed = false
            while let event = xcb_poll_for_event(connection) {
                if matters(event) { changed = true }
                free(event)
            }
            if xcb_connection_has_error(connection) != 0 { return lost("The X server \(address) closed the connection") }
            replies: while let first = pending.first {
                switch first {
                case .step(let step):
                    pending.removeFirst()
                    step()
                case .reply(let sequence, let handle):
                    var reply: UnsafeMutableRawPointer?
                    guard lc_xcb_poll_reply(connection, sequence, &reply) != 0 else { break replies }
                    pending.removeFirst()
                    handle(reply)
                    free(reply)
                }
                progress = true
                guard self.connection == connection else { return }
            }
            if xcb_connection_has_error(connection) != 0 { return lost("The X server \(address) closed the connection") }
            if changed {
                refresh()
                progress = true
            }
        }
    }

    private func matters(_ event: UnsafeMutablePointer<xcb_generic_event_t>) -> Bool {
        let raw = UnsafeMutableRawPointer(event)
        switch Int32(lc_xcb_event_kind(event)) {
        case XCB_PROPERTY_NOTIFY:
            let notify = raw.load(as: xcb_property_notify_event_t.self)
            return notify.window == root ? atoms.rootWatched.contains(notify.atom) : atoms.clientWatched.contains(notify.atom)
        case XCB_MAP_NOTIFY, XCB_UNMAP_NOTIFY, XCB_DESTROY_NOTIFY:
            return true
        default:
            // Errors of requests without replies (a window gone before its events were selected) and the rest.
            return false
        }
    }

    // MARK: Reading the picture

    private func refresh() {
        if reading { stale = true } else { readRoot() }
    }

    private func readRoot() {
        guard let connection else { return }
        reading = true
        stale = false
        var root = X11Root()
        ask(connection, window: self.root, atoms.clientList, length: 1 << 16) { value, format in
            root.clients = X11Property.cardinals(value, format: format)
        }
        ask(connection, window: self.root, atoms.activeWindow, length: 1) { value, format in
            root.active = X11Property.cardinals(value, format: format).first
        }
        ask(connection, window: self.root, atoms.currentDesktop, length: 1) { value, format in
            root.currentDesktop = X11Property.cardinals(value, format: format).first
        }
        pending.append(.step { [unowned self] in self.readClients(of: root) })
        flush()
    }

    private func readClients(of root: X11Root) {
        guard let connection else { return }
        let mask = [XCB_EVENT_MASK_PROPERTY_CHANGE.rawValue | XCB_EVENT_MASK_STRUCTURE_NOTIFY.rawValue]
        for window in root.clients where !selected.contains(window) {
            xcb_change_window_attributes(connection, window, XCB_CW_EVENT_MASK.rawValue, mask)
        }
        selected = Set(root.clients)
        var clients: [UInt32: X11Client] = [:]
        for window in root.clients {
            let attributes = xcb_get_window_attributes(connection, window)
            pending.append(.reply(attributes.sequence) { reply in
                guard let reply else { return }
                let mapState = reply.assumingMemoryBound(to: xcb_get_window_attributes_reply_t.self).pointee.map_state
                clients[window] = X11Client(window: window, viewable: UInt32(mapState) == XCB_MAP_STATE_VIEWABLE.rawValue)
            })
            ask(connection, window: window, atoms.wmPID, length: 1) { value, format in
                clients[window]?.pid = X11Property.cardinals(value, format: format).first.flatMap { pid_t(exactly: $0) }
            }
            ask(connection, window: window, atoms.wmDesktop, length: 1) { value, format in
                clients[window]?.desktop = X11Property.cardinals(value, format: format).first
            }
            ask(connection, window: window, atoms.wmState, length: 64) { [atoms] value, format in
                clients[window]?.hidden = X11Property.cardinals(value, format: format).contains(atoms.wmStateHidden)
            }
            ask(connection, window: window, X11Atoms.wmClass, length: 256) { value, format in
                let names = X11Property.wmClass(value, format: format)
                clients[window]?.instance = names.instance
                clients[window]?.class = names.class
            }
        }
        pending.append(.step { [unowned self] in self.readPIDs(root: root, clients: clients) })
        flush()
    }

    /// Windows without `_NET_WM_PID`: the X-Resource extension knows the pid of a local client.
    private func readPIDs(root: X11Root, clients: [UInt32: X11Client]) {
        guard let connection else { return }
        var clients = clients
        if hasResource {
            for (window, client) in clients where client.pid == nil {
                pending.append(.reply(lc_xcb_res_query_pid(connection, window)) { reply in
                    guard let reply else { return }
                    let pid = lc_xcb_res_pid(reply)
                    if pid > 0 { clients[window]?.pid = pid_t(truncatingIfNeeded: pid) }
                })
            }
        }
        pending.append(.step { [unowned self] in self.read(root: root, clients: clients) })
        flush()
    }

    private func read(root: X11Root, clients: [UInt32: X11Client]) {
        lastRoot = root
        lastClients = clients
        reading = false
        if !connected {
            connected = true
            reconnection?.succeeded()
            Log.info("display: following the X server \(address)")
        }
        report?(X11Picture.picture(root: root, clients: clients))
        if stale { readRoot() }
    }

    /// One property, whatever its type; `handle` gets its bytes and format (nothing when the window is gone).
    private func ask(_ connection: OpaquePointer, window: xcb_window_t, _ property: UInt32, length: UInt32,
                     _ handle: @escaping ([UInt8], UInt8) -> Void) {
        let cookie = xcb_get_property(connection, 0, window, property, XCB_ATOM_ANY.rawValue, 0, length)
        pending.append(.reply(cookie.sequence) { reply in
            guard let reply else { return }
            let property = reply.assumingMemoryBound(to: xcb_get_property_reply_t.self)
            let count = Int(xcb_get_property_value_length(property))
            guard count > 0, let value = xcb_get_property_value(property) else { return }
            handle(Array(UnsafeRawBufferPointer(start: value, count: count)), property.pointee.format)
        })
    }
}
