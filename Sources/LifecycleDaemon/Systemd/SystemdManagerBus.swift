import CSystemd
import Glibc

/// A lasting sd-bus connection to systemd's manager, attached to the daemon's sd-event loop: the scope placement's
/// calls (StartTransientUnit, SetUnitProperties, FreezeUnit, ThawUnit, AttachProcessesToUnit) are sent without
/// waiting, and each reply comes back as a callback on the loop. Only `connect` waits, once, at start and bounded.
final class SystemdManagerBus {
    private var bus: OpaquePointer
    private let loop: EventLoop
    private let address: String
    /// Where the connection goes, for the log.
    let name: String
    /// systemd's version (the number before any dot of its `Version` property), read at start.
    let version: Int
    static let managerPath = "/org/freedesktop/systemd1"
    static let managerInterface = "org.freedesktop.systemd1.Manager"
    /// How long systemd may take to answer one call before its callback hears that no answer came
    /// (`noReply`).
    let callTimeout: Duration
    /// The error a callback hears when no answer came: the call timed out, or the connection closed before it.
    /// systemd may still have carried the call out.
    static let noReply = "org.freedesktop.DBus.Error.NoReply"
    /// The user's manager this connection goes to, for a daemon run as root (`UserManagerSocket`): its socket and
    /// its uid, checked whole at every connection; nil for the manager of the daemon's own `address(environment:euid:)`.
    private let userManager: UserManagerTarget?
    /// The user's manager as the kernel vouched for it at the latest connection, where `userManager` is set.
    private(set) var manager: UserManagerSocket.Manager?

    typealias UserManagerTarget = (path: String, uid: uid_t)

    private init(bus: OpaquePointer, loop: EventLoop, address: String, name: String, version: Int, callTimeout: Duration,
                 userManager: UserManagerTarget?, manager: UserManagerSocket.Manager?) {
        self.bus = bus
        self.loop = loop
        self.address = address
        self.name = name
        self.version = version
        self.callTimeout = callTimeout
        self.userManager = userManager
        self.manager = manager
        watchClose()
    }

    deinit { sd_bus_flush_close_unref(bus) }

    /// Whether the connection is up: false once the manager closed it (it exited or re-executed), until a call opens
    /// it again.
    var isOpen: Bool { sd_bus_is_open(bus) > 0 }

    /// Runs on the loop when the manager closes the connection (it exited or re-executed), as sd-bus reads the end
    /// of it; a call made later opens it again.
    var closed: (() -> Void)?

    /// sd-bus says that the connection ended with a signal of its own, `org.freedesktop.DBus.Local.Disconnected`,
    /// which it hands to the matches of the connection itself. The match lives with the bus: `self` outlives it.
    private func watchClose() {
        let result = sd_bus_match_signal(bus, nil, nil, "/org/freedesktop/DBus/Local", "org.freedesktop.DBus.Local", "Disconnected", { _, userdata, _ in
            Unmanaged<SystemdManagerBus>.fromOpaque(userdata!).takeUnretainedValue().closed?()
            return 0
        }, Unmanaged.passUnretained(self).toOpaque())
        if result < 0 {
            Log.warning("Failed to \(SystemdBusError("watch the connection to systemd (\(name)) for its end", errno: -result)); it is noticed at the next call")
        }
    }

    /// The manager's private socket (a direct connection, as `systemctl` uses: no bus daemon, no Hello): as root
    /// systemd's, else the user's own manager's in `$XDG_RUNTIME_DIR` (`systemctl --user`), since a user's service
    /// may not talk to systemd's; `LIFECYCLED_SYSTEMD_BUS` instead where it is set (`SystemdJob.busOverrideVariable`).
    static func address(environment: [String: String], euid: uid_t) throws(SystemdBusError) -> String {
        if let given = environment[SystemdJob.busOverrideVariable] { return given }
        if euid == 0 { return "unix:path=/run/systemd/private" }
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else {
            throw SystemdBusError("no XDG_RUNTIME_DIR: the user's service manager cannot be found")
        }
        return "unix:path=\(runtime)/systemd/private"
    }

    /// Connects to the manager at `address(environment:euid:)` and asks for its version with a call bounded by
    /// `timeout`, which also proves that systemd answers there. `callTimeout`: each later call's.
    static func connect(loop: EventLoop, environment: [String: String], timeout: Duration = .seconds(2),
                        callTimeout: Duration = .seconds(10)) throws(SystemdBusError) -> SystemdManagerBus {
        try connect(loop: loop, address: try Self.address(environment: environment, euid: geteuid()), userManager: nil,
                    timeout: timeout, callTimeout: callTimeout)
    }

    /// Connects to user `uid`'s manager listening at `path` (a daemon run as root, `UserManagerSocket`), trusted on
    /// the whole check of `UserManagerSocket.connect` before the Version call, and again at every reconnect.
    static func connect(loop: EventLoop, userManagerAt path: String, uid: uid_t, timeout: Duration = .seconds(2),
                        callTimeout: Duration = .seconds(10)) throws(SystemdBusError) -> SystemdManagerBus {
        try connect(loop: loop, address: "unix:path=\(path)", userManager: (path, uid), timeout: timeout, callTimeout: callTimeout)
    }

    private static func connect(loop: EventLoop, address: String, userManager: UserManagerTarget?, timeout: Duration,
                                callTimeout: Duration) throws(SystemdBusError) -> SystemdManagerBus {
        let (bus, manager) = try opened(address, userManager: userManager)
        let version: Int
        do throws(SystemdBusError) {
            version = try managerVersion(bus, timeout: timeout)
            let attached = sd_bus_attach_event(bus, loop.event, 0)
            guard attached >= 0 else { throw SystemdBusError("attach the bus to the event loop", errno: -attached) }
        } catch {
            sd_bus_close_unref(bus)
            throw error
        }
        return SystemdManagerBus(bus: bus, loop: loop, address: address, name: address, version: version, callTimeout: callTimeout,
                                 userManager: userManager, manager: manager)
    }

    /// The one way a connection opens, at the first connect and at every reconnect: to a user's manager, only on
    /// `UserManagerSocket.connect`'s whole check.
    private static func opened(_ address: String, userManager: UserManagerTarget?) throws(SystemdBusError)
        -> (bus: OpaquePointer, manager: UserManagerSocket.Manager?) {
        guard let userManager else { return (try startedBus(at: address), nil) }
        let (bus, manager) = try UserManagerSocket.connect(userManager.path, uid: userManager.uid)
        return (bus, manager)
    }

    private static func managerVersion(_ bus: OpaquePointer, timeout: Duration) throws(SystemdBusError) -> Int {
        var created: OpaquePointer?
        var result = sd_bus_message_new_method_call(bus, &created, "org.freedesktop.systemd1", managerPath,
                                                    "org.freedesktop.DBus.Properties", "Get")
        guard result >= 0, let message = created else { throw SystemdBusError("create the Version call", errno: -result) }
        defer { sd_bus_message_unref(message) }
        result = sd_bus_message_append_basic(message, type("s"), managerInterface)
        if result >= 0 { result = sd_bus_message_append_basic(message, type("s"), "Version") }
        guard result >= 0 else { throw SystemdBusError("build the Version call", errno: -result) }
        // Sent and awaited by hand, as `SystemdJob` does: `sd_bus_call` would wait for the authentication with
        // sd-bus's own timeout whatever its own says, and the daemon's start would hang that long on a mute socket.
        var cookie: UInt64 = 0
        result = sd_bus_send(bus, message, &cookie)
        guard result >= 0 else { throw SystemdBusError("send the Version call", errno: -result) }
        let deadline = MonotonicDeadline(after: timeout)
        var answer: OpaquePointer?
        while answer == nil {
            var received: OpaquePointer?
            result = sd_bus_process(bus, &received)
            guard result >= 0 else { throw SystemdBusError("wait for systemd's Version", errno: -result) }
            if let received {
                var replyCookie: UInt64 = 0
                if sd_bus_message_get_reply_cookie(received, &replyCookie) >= 0 && replyCookie == cookie {
                    answer = received
                } else {
                    sd_bus_message_unref(received)
                }
                continue
            }
            if result > 0 { continue }
            guard deadline.remaining > 0 else { throw SystemdBusError("no answer from systemd within \(timeout)") }
            result = sd_bus_wait(bus, deadline.remaining)
            guard result >= 0 || result == -EINTR else { throw SystemdBusError("wait for systemd's Version", errno: -result) }
        }
        guard let reply = answer else { throw SystemdBusError("no answer from systemd") }
        if let error = sd_bus_message_get_error(reply), sd_bus_error_is_set(error) != 0 {
            defer { sd_bus_message_unref(reply) }
            throw SystemdBusError("ask systemd for its Version: \(error.pointee.name.map { String(cString: $0) } ?? "an error")")
        }
        defer { sd_bus_message_unref(reply) }
        var text: UnsafePointer<CChar>?
        result = sd_bus_message_enter_container(reply, type("v"), "s")
        if result > 0 { result = sd_bus_message_read_basic(reply, type("s"), &text) }
        guard result > 0, let text else { throw SystemdBusError("read systemd's Version") }
        // "252.30-1~deb12u2", "256.7": the major number leads.
        return Int(String(cString: text).prefix { $0.isNumber }) ?? 0
    }

    // MARK: Calls

    /// A reply: nil for success, else the error's name and message.
    typealias Reply = (_ error: String?, _ errorName: String?) -> Void

    func startTransientUnit(_ unit: String, properties: [UnitProperty], reply: @escaping Reply) {
        call("StartTransientUnit", reply: reply) { (message) throws(SystemdBusError) in
            try Self.appendStartTransientUnit(message, unit: unit, properties: properties)
        }
    }

    func setUnitProperties(_ unit: String, _ properties: [UnitProperty], reply: @escaping Reply) {
        call("SetUnitProperties", reply: reply) { (message) throws(SystemdBusError) in
            try Self.appendSetUnitProperties(message, unit: unit, properties: properties)
        }
    }

    /// StartTransientUnit's `ssa(sv)a(sa(sv))`: the unit, the job mode ("fail": never replace a job of a scope that
    /// is already there), its properties, and no auxiliary units.
    static func appendStartTransientUnit(_ message: OpaquePointer, unit: String, properties: [UnitProperty]) throws(SystemdBusError) {
        try append(message, "s", unit)
        try append(message, "s", "fail")
        try append(message, properties: properties)
        try container(message, "a", "(sa(sv))") { () throws(SystemdBusError) in }
    }

    /// SetUnitProperties' `sba(sv)`, for the running unit only (`runtime`): a drop-in of a scope would outlive it.
    static func appendSetUnitProperties(_ message: OpaquePointer, unit: String, properties: [UnitProperty]) throws(SystemdBusError) {
        try append(message, "s", unit)
        var runtime: Int32 = 1
        try check(sd_bus_message_append_basic(message, type("b"), &runtime), "append runtime")
        try append(message, properties: properties)
    }

    /// FreezeUnit or ThawUnit (systemd 246 and later): systemd writes the unit's cgroup.freeze and answers once
    /// the kernel has finished.
    func freezeUnit(_ unit: String, freeze: Bool, reply: @escaping Reply) {
        call(freeze ? "FreezeUnit" : "ThawUnit", reply: reply) { (message) throws(SystemdBusError) in try Self.append(message, "s", unit) }
    }

    /// Moves `pids` into the running unit `unit` (systemd 238 and later).
    func attachProcesses(_ unit: String, pids: [pid_t], reply: @escaping Reply) {
        call("AttachProcessesToUnit", reply: reply) { (message) throws(SystemdBusError) in
            try Self.append(message, "s", unit)
            try Self.append(message, "s", "")
            try Self.container(message, "a", "u") { () throws(SystemdBusError) in
                for pid in pids {
                    var value = UInt32(bitPattern: pid)
                    try Self.check(sd_bus_message_append_basic(message, Self.type("u"), &value), "append a pid")
                }
            }
        }
    }

    /// Sends a Manager call; `reply` runs on the loop with its outcome. A connection systemd closed (it re-executed)
    /// is opened again first.
    private func call(_ member: String, reply: @escaping Reply, arguments: (OpaquePointer) throws(SystemdBusError) -> Void) {
        do throws(SystemdBusError) {
            try reconnectIfClosed()
            var created: OpaquePointer?
            let result = sd_bus_message_new_method_call(bus, &created, "org.freedesktop.systemd1", Self.managerPath,
                                                        Self.managerInterface, member)
            guard result >= 0, let message = created else { throw SystemdBusError("create the \(member) call", errno: -result) }
            defer { sd_bus_message_unref(message) }
            try arguments(message)
            let box = Unmanaged.passRetained(ReplyBox(reply)).toOpaque()
            let sent = sd_bus_call_async(bus, nil, message, { message, userdata, _ in
                let box = Unmanaged<ReplyBox>.fromOpaque(userdata!).takeRetainedValue()
                if let error = sd_bus_message_get_error(message), sd_bus_error_is_set(error) != 0 {
                    let name = error.pointee.name.map { String(cString: $0) }
                    let text = error.pointee.message.map { String(cString: $0) } ?? ""
                    box.reply("\(name ?? "an error")\(text.isEmpty ? "" : ": \(text)")", name)
                } else {
                    box.reply(nil, nil)
                }
                return 0
            }, box, Self.microseconds(callTimeout))
            if sent < 0 {
                Unmanaged<ReplyBox>.fromOpaque(box).release()
                throw SystemdBusError("send \(member)", errno: -sent)
            }
        } catch {
            reply("\(error)", nil)
        }
    }

    private func reconnectIfClosed() throws(SystemdBusError) {
        guard sd_bus_is_open(bus) <= 0 else { return }
        Log.notice("The connection to systemd (\(name)) was closed; connecting again")
        let (fresh, vouched) = try Self.opened(address, userManager: userManager)
        let attached = sd_bus_attach_event(fresh, loop.event, 0)
        guard attached >= 0 else {
            sd_bus_close_unref(fresh)
            throw SystemdBusError("attach the bus to the event loop", errno: -attached)
        }
        sd_bus_close_unref(bus)
        bus = fresh
        manager = vouched
        watchClose()
    }

    // MARK: Encoding

    static func append(_ message: OpaquePointer, _ type: Character, _ value: String) throws(SystemdBusError) {
        try check(sd_bus_message_append_basic(message, Self.type(type), value), "append \(value)")
    }

    /// The `a(sv)` of unit properties.
    static func append(_ message: OpaquePointer, properties: [UnitProperty]) throws(SystemdBusError) {
        try container(message, "a", "(sv)") { () throws(SystemdBusError) in
            for property in properties {
                try container(message, "r", "sv") { () throws(SystemdBusError) in
                    try append(message, "s", property.name)
                    try container(message, "v", property.signature) { () throws(SystemdBusError) in
                        try appendValue(message, property)
                    }
                }
            }
        }
    }

    private static func appendValue(_ message: OpaquePointer, _ property: UnitProperty) throws(SystemdBusError) {
        switch property {
        case .string(_, let value):
            try append(message, "s", value)
        case .uint64(_, var value):
            try check(sd_bus_message_append_basic(message, type("t"), &value), "append \(property.name)")
        case .bool(_, let value):
            var flag: Int32 = value ? 1 : 0
            try check(sd_bus_message_append_basic(message, type("b"), &flag), "append \(property.name)")
        case .pids(_, let pids):
            try container(message, "a", "u") { () throws(SystemdBusError) in
                for pid in pids {
                    var value = pid
                    try check(sd_bus_message_append_basic(message, type("u"), &value), "append \(property.name)")
                }
            }
        }
    }

    static func container(_ message: OpaquePointer, _ type: Character, _ contents: String,
                          _ body: () throws(SystemdBusError) -> Void) throws(SystemdBusError) {
        try check(sd_bus_message_open_container(message, Self.type(type), contents), "open \(type) \(contents)")
        try body()
        try check(sd_bus_message_close_container(message), "close \(type) \(contents)")
    }

    private static func check(_ result: Int32, _ what: String) throws(SystemdBusError) {
        guard result >= 0 else { throw SystemdBusError(what, errno: -result) }
    }

    private static func type(_ character: Character) -> CChar { CChar(bitPattern: character.asciiValue!) }

    private static func microseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(seconds) * 1_000_000 + UInt64(attoseconds / 1_000_000_000_000)
    }
}

/// A reply handler carried through sd-bus's userdata pointer.
private final class ReplyBox {
    let reply: SystemdManagerBus.Reply
    init(_ reply: @escaping SystemdManagerBus.Reply) { self.reply = reply }
}
