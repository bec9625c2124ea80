import CSupport
import CSystemd
import Glibc

/// The daemon's connection to a D-Bus bus, dispatched by the daemon's own sd-event loop (`sd_bus_attach_event`).
/// A bus that is not there at start or goes away never stops the daemon: the loss is logged once, and the
/// connection is tried again when the bus's socket appears (an inotify watch on its directory, so that an absent
/// bus costs no wakeup), or, where the socket is there but does not answer or the address is not a socket path,
/// after a delay that doubles up to 30 s.
final class BusConnection {
    static let busName = "org.lifecycled.Lifecycle1"

    private let loop: EventLoop
    let endpoint: BusEndpoint
    /// The connected bus, nil while there is none.
    private(set) var bus: OpaquePointer?
    /// Called with each new connection, before the name is requested: the objects are registered.
    var connected: (OpaquePointer) -> Void = { _ in }
    /// Called when the connection is gone, before the bus is freed: the objects' slots are dropped.
    var disconnected: () -> Void = {}
    private var slots: [OpaquePointer] = []
    private lazy var reconnection = ReconnectingSource(loop: loop, name: "D-Bus", first: .milliseconds(100), cap: .seconds(30)) {
        [unowned self] in self.connect()
    }
    /// Whether the connection holds the name, or waits in the bus's queue for it.
    private(set) var serving = false
    private var queued = false
    /// A connection was lost before this one: its serving is a reconnect.
    private var reconnected = false
    private var stopped = false

    init(loop: EventLoop, endpoint: BusEndpoint) {
        self.loop = loop
        self.endpoint = endpoint
    }

    var description: String { "the \(endpoint.kind.rawValue) bus at \(endpoint.address)" }

    func start() { connect() }

    func stop() {
        stopped = true
        reconnection.cancel()
        tearDown()
    }

    private var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    private func connect() {
        guard !stopped, bus == nil else { return }
        var created: OpaquePointer?
        var result = sd_bus_new(&created)
        guard result >= 0, let new = created else { return lost("create a bus connection", result) }
        result = sd_bus_set_address(new, endpoint.address)
        if result >= 0 { result = sd_bus_set_bus_client(new, 1) }
        if result >= 0 { result = sd_bus_set_description(new, "lifecycled-api") }
        if result >= 0 { result = sd_bus_start(new) }
        if result >= 0 { result = sd_bus_attach_event(new, loop.event, 0) }
        guard result >= 0 else {
            sd_bus_close_unref(new)
            return lost("connect to \(description)", result)
        }
        bus = new
        // The bus's own Disconnected message is the one sign that the peer went away.
        var slot: OpaquePointer?
        result = sd_bus_match_signal_async(new, &slot, "org.freedesktop.DBus.Local", "/org/freedesktop/DBus/Local",
                                           "org.freedesktop.DBus.Local", "Disconnected", { _, userdata, _ in
            let connection = Unmanaged<BusConnection>.fromOpaque(userdata!).takeUnretainedValue()
            // Not torn down inside sd-bus's own dispatch of the bus being freed: after it returns.
            connection.loop.afterCallback { connection.dropped() }
            return 0
        }, nil, userdata)
        if result >= 0, let slot { slots.append(slot) }
        // While another connection owns the name, this one waits in the bus's queue: the bus says when it has it.
        slot = nil
        result = sd_bus_match_signal_async(new, &slot, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                           "org.freedesktop.DBus", "NameAcquired", { message, userdata, _ in
            let connection = Unmanaged<BusConnection>.fromOpaque(userdata!).takeUnretainedValue()
            var name: UnsafePointer<CChar>?
            if let message, sd_bus_message_read_basic(message, CChar(UInt8(ascii: "s")), &name) >= 0,
               let name, String(cString: name) == BusConnection.busName {
                connection.acquired()
            }
            return 0
        }, nil, userdata)
        if result >= 0, let slot { slots.append(slot) }
        connected(new)
        slot = nil
        // SD_BUS_NAME_QUEUE: wait in the bus's queue behind an owner rather than be refused.
        result = sd_bus_request_name_async(new, &slot, Self.busName, UInt64(SD_BUS_NAME_QUEUE), { reply, userdata, _ in
            let connection = Unmanaged<BusConnection>.fromOpaque(userdata!).takeUnretainedValue()
            connection.nameAnswered(reply)
            return 0
        }, userdata)
        if result >= 0, let slot { slots.append(slot) } else { Log.warning("D-Bus: failed to request the name \(Self.busName): \(Self.reason(result))") }
    }

    private func nameAnswered(_ reply: OpaquePointer?) {
        if let reply, let error = sd_bus_message_get_error(reply), sd_bus_error_is_set(error) != 0 {
            let name = error.pointee.name.map { String(cString: $0) } ?? "an error"
            // The connection ended before the bus answered: the Disconnected message says so, once.
            if name == "org.freedesktop.DBus.Error.NoReply" { return }
            let text = error.pointee.message.map { String(cString: $0) } ?? ""
            Log.warning("D-Bus: failed to acquire \(Self.busName) on \(description): \(name): \(text); the API is not offered there")
            return
        }
        var code: UInt32 = 0
        if let reply { _ = sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "u")), &code) }
        reconnection.succeeded()
        // RequestName's answers: 1 the primary owner, 2 queued behind the owner, 3 refused, 4 already the owner.
        if code == 3 {
            return Log.warning("D-Bus: \(Self.busName) on \(description) is owned by another connection, which the bus does not queue behind; the API is not offered there")
        }
        guard code == 2 else { return acquired() }
        queued = true
        whoOwnsTheName()
    }

    /// The name is this connection's, now or once the owner let it go.
    private func acquired() {
        guard !serving else { return }
        serving = true
        if queued {
            Log.notice("D-Bus: \(Self.busName) is free now; serving it on \(description)")
        } else {
            Log.info(reconnected ? "D-Bus: reconnected to \(description); serving \(Self.busName)"
                                 : "D-Bus: serving \(Self.busName) on \(description)")
        }
        queued = false
    }

    /// Logs who holds the name this connection waits for: its unique name and, as the bus knows it, its process.
    private func whoOwnsTheName() {
        guard let bus else { return }
        var created: OpaquePointer?
        guard sd_bus_message_new_method_call(bus, &created, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                             "org.freedesktop.DBus", "GetConnectionUnixProcessID") >= 0,
              let message = created else { return ownerUnknown() }
        defer { sd_bus_message_unref(message) }
        var writer = BusWriter(message)
        writer.string(Self.busName)
        var slot: OpaquePointer?
        let result = sd_bus_call_async(bus, &slot, message, { reply, userdata, _ in
            let connection = Unmanaged<BusConnection>.fromOpaque(userdata!).takeUnretainedValue()
            var pid: UInt32 = 0
            if let reply, sd_bus_message_get_error(reply).map({ sd_bus_error_is_set($0) == 0 }) ?? true,
               sd_bus_message_read_basic(reply, CChar(UInt8(ascii: "u")), &pid) >= 0, pid > 0 {
                connection.ownerFound(pid_t(bitPattern: pid))
            } else {
                connection.ownerUnknown()
            }
            return 0
        }, userdata, 0)
        if writer.result >= 0, result >= 0, let slot { slots.append(slot) } else { ownerUnknown() }
    }

    private func ownerFound(_ pid: pid_t) {
        guard queued else { return }
        let command = (try? readKernelFile("/proc/\(pid)/comm"))?.split(separator: "\n").first.map(String.init) ?? "?"
        Log.warning("D-Bus: \(Self.busName) on \(description) is owned by process \(pid) (\(command)); queued for it, the API is served once it is free")
    }

    private func ownerUnknown() {
        guard queued else { return }
        Log.warning("D-Bus: \(Self.busName) on \(description) is owned by another connection; queued for it, the API is served once it is free")
    }

    private func dropped() {
        guard bus != nil else { return }
        tearDown()
        lost("stay connected to \(description)", -ECONNRESET)
    }

    /// Not `sd_bus_flush_close_unref`: a flush waits for the peer without a bound, and a stopped bus daemon would
    /// hold the daemon's own stop. Messages are written as they are sent; only a full socket leaves any queued.
    private func tearDown() {
        guard let bus else { return }
        disconnected()
        reconnected = reconnected || serving
        serving = false
        queued = false
        for slot in slots { sd_bus_slot_unref(slot) }
        slots = []
        _ = sd_bus_detach_event(bus)
        sd_bus_close_unref(bus)
        self.bus = nil
    }

    /// Logged once per loss; the next attempt when the socket appears, else after the current backoff, which then
    /// doubles.
    private func lost(_ operation: String, _ result: Int32) {
        guard !stopped else { return }
        reconnection.failed("D-Bus: failed to \(operation): \(Self.reason(result)); retrying when its socket appears (or with a growing delay), the daemon goes on without the bus meanwhile",
                            socket: Self.socketPath(of: endpoint.address))
    }

    static func reason(_ result: Int32) -> String { String(cString: strerror(-result)) }

    /// The socket's path where the address is one `unix:path=` (no other keys, no list of addresses).
    static func socketPath(of address: String) -> String? {
        let prefix = "unix:path="
        guard address.hasPrefix(prefix), !address.contains(";"), !address.contains(",") else { return nil }
        let path = String(address.dropFirst(prefix.count))
        guard path.hasPrefix("/"), !path.contains("%") else { return nil }
        return path
    }
}
