import CSystemd
import Glibc

/// Who made a call, as the bus reports it (never as the caller says).
struct BusCaller {
    let uid: uid_t
    let pid: pid_t
}

/// Who may change states over D-Bus: what may change them on the control socket (`ControlAccess`: root, the
/// daemon's user, `[Control] Group=`), decided from the caller's credentials as the bus daemon knows them
/// (`GetConnectionCredentials`); and on the system bus, whoever polkit allows `org.lifecycled.manage`
/// (`CheckAuthorization`, interactive when the caller's message allows it). Reading is for anyone. Both questions
/// are asked without waiting: a bus daemon that stops answering holds only the calls that wait for it, never the loop.
final class BusAuthorization {
    static let action = "org.lifecycled.manage"
    /// How long (µs) the bus daemon has to say who a caller is; past it the call is refused.
    static let credentialsTimeout: UInt64 = 10_000_000
    private unowned let daemon: Daemon
    private let connection: BusConnection
    private let daemonUID = geteuid()
    private var lastGroupWarning: String?
    /// Questions in flight (credentials, polkit), each holding its call until answered or its bus is gone.
    private var asking: [ObjectIdentifier: PendingReply] = [:]

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

    /// The bus is gone: its questions are never answered, and their callers with it.
    func forgetQuestions() { asking = [:] }

    /// Runs `allowed` with the caller when it may change states; otherwise answers the call with AccessDenied.
    func authorize(_ call: BusCall, verb: String, allowed: @escaping (BusCaller) -> Void) {
        let unknown = "permission denied: the caller's credentials are unknown"
        guard let sender = call.sender, let bus = connection.bus else { return call.fail(.accessDenied, "\(unknown) (no sender)") }
        var created: OpaquePointer?
        guard sd_bus_message_new_method_call(bus, &created, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                             "org.freedesktop.DBus", "GetConnectionCredentials") >= 0,
              let message = created else { return call.fail(.accessDenied, unknown) }
        defer { sd_bus_message_unref(message) }
        var writer = BusWriter(message)
        writer.string(sender)
        guard writer.result >= 0 else { return call.fail(.accessDenied, unknown) }
        send(bus, message, timeout: Self.credentialsTimeout, for: call) { [unowned self] reply in
            if let error = sd_bus_message_get_error(reply), sd_bus_error_is_set(error) != 0 {
                let name = error.pointee.name.map { String(cString: $0) } ?? "an error"
                return call.fail(.accessDenied, "\(unknown) (the bus answered \(name))")
            }
            guard let credentials = BusCredentials(reply) else { return call.fail(.accessDenied, "\(unknown) (no user in the bus's answer)") }
            self.decide(call, verb: verb, credentials: credentials, allowed: allowed)
        } failed: {
            call.fail(.accessDenied, unknown)
        }
    }

    private func decide(_ call: BusCall, verb: String, credentials: BusCredentials, allowed: @escaping (BusCaller) -> Void) {
        let uid = credentials.uid, pid = credentials.pid
        let caller = BusCaller(uid: uid, pid: pid)
        let access = self.access
        // No groups from the bus: the user's own memberships, from the group database, still count.
        var decision = access.mayChange(uid: uid, gid: credentials.gids.first ?? gid_t.max, verb: verb)
        for gid in credentials.gids.dropFirst() where !decision.isAllowed {
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
        // polkit may wait for a person to authenticate: no timeout of ours cuts that short.
        send(bus, message, timeout: interactive ? UInt64.max : 0, for: call) { reply in
            PolkitAnswer.read(reply, call: call, refusal: refusal, allowed: allowed)
        } failed: {
            call.fail(.accessDenied, refusal)
        }
    }

    /// Sends `message` and runs `answered` with its reply (or sd-bus's error reply at the timeout); `failed` when it
    /// cannot be sent.
    private func send(_ bus: OpaquePointer, _ message: OpaquePointer, timeout: UInt64, for call: BusCall,
                      answered: @escaping (OpaquePointer) -> Void, failed: () -> Void) {
        let question = PendingReply(call: call, answered: answered)
        let key = ObjectIdentifier(question)
        var slot: OpaquePointer?
        let result = sd_bus_call_async(bus, &slot, message, { reply, userdata, _ in
            let question = Unmanaged<PendingReply>.fromOpaque(userdata!).takeUnretainedValue()
            question.answer(reply)
            return 0
        }, Unmanaged.passUnretained(question).toOpaque(), timeout)
        guard result >= 0 else { return failed() }
        asking[key] = question
        question.slot = slot
        // Forgotten after sd-bus has returned from the reply's callback, which its slot belongs to.
        question.done = { [unowned self] in self.daemon.loop.afterCallback { self.asking[key] = nil } }
    }
}

/// One question to the bus in flight; its slot is released with it, which cancels an unanswered one.
private final class PendingReply {
    let call: BusCall
    let answered: (OpaquePointer) -> Void
    var slot: OpaquePointer?
    var done: () -> Void = {}

    init(call: BusCall, answered: @escaping (OpaquePointer) -> Void) {
        self.call = call
        self.answered = answered
    }

    deinit { if let slot { sd_bus_slot_unref(slot) } }

    func answer(_ reply: OpaquePointer?) {
        defer { done() }
        guard let reply else { return call.fail(.accessDenied, "permission denied: no answer from the bus") }
        answered(reply)
    }
}

/// `GetConnectionCredentials`'s `a{sv}`: `UnixUserID` (required here), `ProcessID`, `UnixGroupIDs` (all groups,
/// when the bus daemon knows them); other keys are skipped.
struct BusCredentials {
    var uid: uid_t = 0
    var pid: pid_t = 0
    var gids: [gid_t] = []

    init?(_ reply: OpaquePointer) {
        var hasUID = false
        guard sd_bus_message_enter_container(reply, BusType.array, "{sv}") > 0 else { return nil }
        while sd_bus_message_enter_container(reply, BusType.dictEntry, "sv") > 0 {
            var key: UnsafePointer<CChar>?
            guard sd_bus_message_read_basic(reply, BusType.string, &key) > 0, let key else { return nil }
            switch String(cString: key) {
            case "UnixUserID":
                guard let value = Self.uint32(reply) else { return nil }
                uid = uid_t(value)
                hasUID = true
            case "ProcessID":
                guard let value = Self.uint32(reply) else { return nil }
                pid = pid_t(bitPattern: value)
            case "UnixGroupIDs":
                guard sd_bus_message_enter_container(reply, BusType.variant, "au") > 0,
                      sd_bus_message_enter_container(reply, BusType.array, "u") > 0 else { return nil }
                var gid: UInt32 = 0
                while sd_bus_message_read_basic(reply, BusType.uint32, &gid) > 0 { gids.append(gid_t(gid)) }
                guard sd_bus_message_exit_container(reply) >= 0, sd_bus_message_exit_container(reply) >= 0 else { return nil }
            default:
                guard sd_bus_message_skip(reply, "v") >= 0 else { return nil }
            }
            guard sd_bus_message_exit_container(reply) >= 0 else { return nil }
        }
        guard hasUID else { return nil }
    }

    private static func uint32(_ reply: OpaquePointer) -> UInt32? {
        var value: UInt32 = 0
        guard sd_bus_message_enter_container(reply, BusType.variant, "u") > 0,
              sd_bus_message_read_basic(reply, BusType.uint32, &value) > 0,
              sd_bus_message_exit_container(reply) >= 0 else { return nil }
        return value
    }
}

/// CheckAuthorization's answer.
private enum PolkitAnswer {
    /// `(bba{ss})`: authorized, challenge, details.
    static func read(_ reply: OpaquePointer, call: BusCall, refusal: String, allowed: () -> Void) {
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
