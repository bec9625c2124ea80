import CSystemd
import Glibc

/// Who made a call, as the bus reports it (never as the caller says).
struct BusCaller {
    let uid: uid_t
    let pid: pid_t
}

/// Who may change states over D-Bus: what may change them on the control socket (`ControlAccess`: root, the
/// daemon's user, `[Control] Group=`), decided from the caller's credentials as the bus daemon knows them
/// (`sd_bus_query_sender_creds`); and on the system bus, whoever polkit allows `org.lifecycled.manage`, asked
/// without waiting (`CheckAuthorization`, interactive when the caller's message allows it). Reading is for anyone.
final class BusAuthorization {
    static let action = "org.lifecycled.manage"
    private unowned let daemon: Daemon
    private let connection: BusConnection
    private let daemonUID = geteuid()
    private var lastGroupWarning: String?
    /// polkit questions in flight, each holding its call and what to do when allowed.
    private var asking: [ObjectIdentifier: PolkitQuestion] = [:]

    init(daemon: Daemon, connection: BusConnection) {
        self.daemon = daemon
        self.connection = connection
    }

    private var access: ControlAccess {
        ControlAccess(daemonUID: daemonUID, group: daemon.configuration.config.daemon.controlGroup) { [unowned self] warning in
            guard warning != self.lastGroupWarning else { return }
            self.lastGroupWarning = warning
            Log.warning(warning)
        }
    }

    /// Runs `allowed` with the caller when it may change states; otherwise answers the call with AccessDenied.
    func authorize(_ call: BusCall, verb: String, allowed: @escaping (BusCaller) -> Void) {
        let mask = UInt64(SD_BUS_CREDS_EUID) | UInt64(SD_BUS_CREDS_EGID) | UInt64(SD_BUS_CREDS_PID)
            | UInt64(SD_BUS_CREDS_SUPPLEMENTARY_GIDS) | UInt64(SD_BUS_CREDS_AUGMENT)
        var creds: OpaquePointer?
        var result = sd_bus_query_sender_creds(call.message, mask, &creds)
        var uid: uid_t = 0, pid: pid_t = 0
        if result >= 0 { result = sd_bus_creds_get_euid(creds, &uid) }
        guard result >= 0, let creds else {
            if let creds { sd_bus_creds_unref(creds) }
            return call.fail(.accessDenied, "permission denied: the caller's credentials are unknown (\(BusConnection.reason(result)))")
        }
        defer { sd_bus_creds_unref(creds) }
        _ = sd_bus_creds_get_pid(creds, &pid)
        var gids: [gid_t] = []
        var egid: gid_t = 0
        if sd_bus_creds_get_egid(creds, &egid) >= 0 { gids.append(egid) }
        var supplementary: UnsafePointer<gid_t>?
        let count = sd_bus_creds_get_supplementary_gids(creds, &supplementary)
        if count > 0, let supplementary { gids += UnsafeBufferPointer(start: supplementary, count: Int(count)) }
        let caller = BusCaller(uid: uid, pid: pid)

        let access = self.access
        var decision = access.mayChange(uid: uid, gid: gids.first ?? gid_t.max, verb: verb)
        for gid in gids.dropFirst() where !decision.isAllowed {
            if case .allowed(let why) = access.mayChange(uid: uid, gid: gid, verb: verb) { decision = .allowed(why) }
        }
        switch decision {
        case .allowed(let why):
            if uid != 0 && uid != daemonUID { Log.info("D-Bus: allowed \(verb) for uid \(uid) (pid \(pid)): \(why)") }
            allowed(caller)
        case .refused(let message):
            guard connection.endpoint.kind == .system, let sender = call.sender, let bus = connection.bus else {
                Log.info("D-Bus: refused \(verb) from uid \(uid) (pid \(pid)): not \(access.whoMay)")
                return call.fail(.accessDenied, message)
            }
            askPolkit(bus, call: call, sender: sender, refusal: message) { allowed(caller) }
        }
    }

    /// polkit's answer decides; no polkit on the bus (or any failure to ask it) keeps the refusal.
    private func askPolkit(_ bus: OpaquePointer, call: BusCall, sender: String, refusal: String, allowed: @escaping () -> Void) {
        let question = PolkitQuestion(call: call, refusal: refusal, allowed: allowed)
        var created: OpaquePointer?
        guard sd_bus_message_new_method_call(bus, &created, "org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
                                             "org.freedesktop.PolicyKit1.Authority", "CheckAuthorization") >= 0,
              let message = created else { return call.fail(.accessDenied, refusal) }
        defer { sd_bus_message_unref(message) }
        let interactive = sd_bus_message_get_allow_interactive_authorization(call.message) > 0
        var writer = BusWriter(message)
        writer.container(BusType.structure, "sa{sv}") { writer in
            writer.string("system-bus-name")
            writer.container(BusType.array, "{sv}") { writer in
                writer.container(BusType.dictEntry, "sv") { writer in
                    writer.string("name")
                    writer.container(BusType.variant, "s") { writer in writer.string(sender) }
                }
            }
        }
        writer.string(Self.action)
        writer.container(BusType.array, "{ss}") { _ in }
        writer.uint32(interactive ? 1 : 0)  // AllowUserInteraction
        writer.string("")
        guard writer.result >= 0 else { return call.fail(.accessDenied, refusal) }
        var slot: OpaquePointer?
        // polkit may wait for a person to authenticate: no timeout of ours cuts that short.
        let timeout: UInt64 = interactive ? UInt64.max : 0
        let key = ObjectIdentifier(question)
        asking[key] = question
        let result = sd_bus_call_async(bus, &slot, message, { reply, userdata, _ in
            let question = Unmanaged<PolkitQuestion>.fromOpaque(userdata!).takeUnretainedValue()
            question.answered(reply)
            return 0
        }, Unmanaged.passUnretained(question).toOpaque(), timeout)
        guard result >= 0 else {
            asking[key] = nil
            return call.fail(.accessDenied, refusal)
        }
        question.slot = slot
        // Forgotten after sd-bus has returned from the reply's callback, which its slot belongs to.
        question.done = { [unowned self] in self.daemon.loop.afterCallback { self.asking[key] = nil } }
    }
}

/// One CheckAuthorization in flight.
private final class PolkitQuestion {
    let call: BusCall
    let refusal: String
    let allowed: () -> Void
    var slot: OpaquePointer?
    var done: () -> Void = {}

    init(call: BusCall, refusal: String, allowed: @escaping () -> Void) {
        self.call = call
        self.refusal = refusal
        self.allowed = allowed
    }

    deinit { if let slot { sd_bus_slot_unref(slot) } }

    /// `(bba{ss})`: authorized, challenge, details.
    func answered(_ reply: OpaquePointer?) {
        defer { done() }
        guard let reply else { return call.fail(.accessDenied, refusal) }
        if let error = sd_bus_message_get_error(reply), sd_bus_error_is_set(error) != 0 {
            let name = error.pointee.name.map { String(cString: $0) } ?? "an error"
            Log.debug("D-Bus: polkit did not answer \(BusAuthorization.action): \(name)")
            return call.fail(.accessDenied, refusal)
        }
        var authorized: Int32 = 0, challenge: Int32 = 0
        guard sd_bus_message_enter_container(reply, BusType.structure, "bba{ss}") > 0,
              sd_bus_message_read_basic(reply, BusType.bool, &authorized) > 0,
              sd_bus_message_read_basic(reply, BusType.bool, &challenge) > 0 else { return call.fail(.accessDenied, refusal) }
        if authorized != 0 { return allowed() }
        call.fail(.accessDenied, challenge != 0 ? "\(refusal) (polkit asks for authentication: call with interactive authorization allowed)" : refusal)
    }
}
