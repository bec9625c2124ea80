import Glibc

// What lifecycled reads of an EWMH window manager's state, and the rule that turns it into a WindowPicture. Pure:
// X11Source fills these from the server's replies, and the tests fill them by hand.

/// The atoms lifecycled names, interned at each connect (their numbers belong to one server's life).
struct X11Atoms: Equatable {
    static let names = ["_NET_ACTIVE_WINDOW", "_NET_CLIENT_LIST", "_NET_CURRENT_DESKTOP", "_NET_WM_STATE",
                        "_NET_WM_STATE_HIDDEN", "_NET_WM_DESKTOP", "_NET_WM_PID", "WM_CHANGE_STATE", "WM_STATE"]
    /// WM_CLASS is one of the core protocol's predefined atoms.
    static let wmClass: UInt32 = 67

    var byName: [String: UInt32]

    var activeWindow: UInt32 { byName["_NET_ACTIVE_WINDOW", default: 0] }
    var clientList: UInt32 { byName["_NET_CLIENT_LIST", default: 0] }
    var currentDesktop: UInt32 { byName["_NET_CURRENT_DESKTOP", default: 0] }
    var wmState: UInt32 { byName["_NET_WM_STATE", default: 0] }
    var wmStateHidden: UInt32 { byName["_NET_WM_STATE_HIDDEN", default: 0] }
    var wmDesktop: UInt32 { byName["_NET_WM_DESKTOP", default: 0] }
    var wmPID: UInt32 { byName["_NET_WM_PID", default: 0] }
    var changeState: UInt32 { byName["WM_CHANGE_STATE", default: 0] }
    var icccmState: UInt32 { byName["WM_STATE", default: 0] }

    /// The root's properties whose change may change the picture.
    var rootWatched: Set<UInt32> { [activeWindow, clientList, currentDesktop] }
    /// A client's properties whose change may change the picture.
    var clientWatched: Set<UInt32> { [wmState, wmDesktop, wmPID, icccmState, Self.wmClass] }
}

/// Property values as the server sends them: a format (8, 16 or 32 bits per item) and the bytes, in the host's
/// byte order (xcb hands them over so).
enum X11Property {
    /// The 32-bit items of a property (CARDINAL, WINDOW, ATOM); empty for any other format.
    static func cardinals(_ bytes: [UInt8], format: UInt8) -> [UInt32] {
        guard format == 32 else { return [] }
        return stride(from: 0, to: bytes.count - bytes.count % 4, by: 4).map { index in
            bytes[index..<index + 4].withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) }
        }
    }

    /// WM_CLASS: the instance name and the class name, each ending in a NUL (ICCCM); a missing part is nil.
    static func wmClass(_ bytes: [UInt8], format: UInt8) -> (instance: String?, class: String?) {
        guard format == 8 else { return (nil, nil) }
        let parts = bytes.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        func part(_ index: Int) -> String? { parts.indices.contains(index) && !parts[index].isEmpty ? parts[index] : nil }
        return (part(0), part(1))
    }
}

/// The root window's part of the picture.
struct X11Root: Equatable {
    /// `_NET_CLIENT_LIST`: every managed window, in the order the window manager mapped them.
    var clients: [UInt32] = []
    /// `_NET_ACTIVE_WINDOW`; nil or 0 when no window has the focus.
    var active: UInt32?
    /// `_NET_CURRENT_DESKTOP`; nil when the window manager has no desktops.
    var currentDesktop: UInt32?
}

/// One managed window's part of the picture.
struct X11Client: Equatable {
    var window: UInt32
    /// `_NET_WM_PID`, which the client writes about itself.
    var pid: pid_t?
    /// The pid the X server knows from the client's socket (X-Resource), for a local client.
    var serverPID: pid_t?
    var instance: String?
    var `class`: String?
    /// `_NET_WM_DESKTOP`; `allDesktops` for a sticky window.
    var desktop: UInt32?
    /// `_NET_WM_STATE` holds `_NET_WM_STATE_HIDDEN` (minimized, shaded out of sight).
    var hidden = false
    /// The window and all its ancestors are mapped (map state Viewable).
    var viewable = true
    /// Every property of the window has been read once: until then it is left out of the picture.
    var complete = true

    static let allDesktops: UInt32 = 0xFFFF_FFFF
}

enum X11Picture {
    /// The picture: a window is visible when it is viewable, not hidden, and on the current desktop (or on all);
    /// it is focused when it is the active window. Windows gone between the list and their own reads are left out.
    /// `serverVouches`: the server has X-Resource, whose pid of a local client comes from the client's socket; its
    /// pid alone is then taken, and `_NET_WM_PID` (written by the client about itself) never, so that a window
    /// cannot name another process. Without X-Resource, `_NET_WM_PID` is all there is.
    static func picture(root: X11Root, clients: [UInt32: X11Client], serverVouches: Bool = false) -> WindowPicture {
        WindowPicture(windows: root.clients.compactMap { clients[$0].flatMap { window($0, root: root, serverVouches: serverVouches) } })
    }

    /// One client's window by the same rule; nil until every property of it has been read.
    static func window(_ client: X11Client, root: X11Root, serverVouches: Bool = false) -> DisplayWindow? {
        guard client.complete else { return nil }
        let onDesktop = client.desktop == nil || client.desktop == X11Client.allDesktops
            || root.currentDesktop == nil || client.desktop == root.currentDesktop
        return DisplayWindow(id: Int64(client.window), pid: serverVouches ? client.serverPID : client.pid ?? client.serverPID,
                             appID: client.class, instance: client.instance,
                             visible: client.viewable && !client.hidden && onDesktop,
                             focused: root.active != 0 && root.active == client.window)
    }
}

/// What an X connection has reported and what may have changed since: the whole picture first, then only the
/// windows whose part of it changed and those gone. Pure: `X11Source` marks what its replies and events touched.
struct X11Reports {
    /// Each window as last reported; nil until the whole picture is reported.
    private var reported: [UInt32: DisplayWindow]?
    private var touched: Set<UInt32> = []
    private var gone: Set<UInt32> = []

    /// A new connection (or a picture read again whole): the next report is the whole picture.
    mutating func restart() {
        self = X11Reports()
    }

    /// `window`'s part of the picture may have changed.
    mutating func touch(_ window: UInt32) { touched.insert(window) }

    mutating func touch(_ windows: some Sequence<UInt32>) { touched.formUnion(windows) }

    /// `window` left the client list or was destroyed.
    mutating func close(_ window: UInt32) { gone.insert(window) }

    /// The report due, stamped `changedAt`: the whole picture after `restart`, else the windows whose part changed
    /// (in window order) and those gone; nil when nothing changed.
    mutating func next(root: X11Root, clients: [UInt32: X11Client], serverVouches: Bool,
                       changedAt: Duration?) -> WindowPicture? {
        defer {
            touched = []
            gone = []
        }
        guard var reported else {
            var picture = X11Picture.picture(root: root, clients: clients, serverVouches: serverVouches)
            self.reported = Dictionary(picture.windows.map { (UInt32(truncatingIfNeeded: $0.id), $0) }, uniquingKeysWith: { first, _ in first })
            picture.changedAt = changedAt
            return picture
        }
        // Taken out while it changes, so that it is changed in place rather than copied.
        self.reported = nil
        defer { self.reported = reported }
        var changed: [DisplayWindow] = []
        var closed: [Int64] = []
        for window in touched.sorted() {
            let now = clients[window].flatMap { X11Picture.window($0, root: root, serverVouches: serverVouches) }
            guard now != reported[window] else { continue }
            if let now {
                reported[window] = now
                changed.append(now)
            } else if reported.removeValue(forKey: window) != nil {
                closed.append(Int64(window))
            }
        }
        for window in gone.sorted() where reported.removeValue(forKey: window) != nil { closed.append(Int64(window)) }
        guard !changed.isEmpty || !closed.isEmpty else { return nil }
        return .changes(changed, gone: closed, changedAt: changedAt)
    }
}
