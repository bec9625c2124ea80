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
/// are asked without waiting: a bus daemon or a polkitd that stops answering holds only the calls that wait for it,
/// never the loop. Each polkit check is bounded in time and cancelled at its bound (`CancelCheckAuthorization`, so
/// that an authentication dialog does not outlive the call), and one user has at most `checksPerUser` waiting.
final class BusAuthorization {
    static let action = "org.lifecycled.manage"
    /// How long (µs) the bus daemon has to say who a caller is; past it the call is refused.
    static let credentialsTimeout: UInt64 = 10_000_000
    /// How long polkitd has to answer a check that asks nobody: sd-bus's default for a call, which systemd's own
    /// polkit checks use. An interactive check waits for a person instead, up to `[Control] AuthenticationTimeoutSec=`.
    static let checkTimeout: Duration = .seconds(25)
    /// Far more checks than a person or a tool has waiting at once, few enough that a flood holds little: each
    /// waiting check holds its call's message and a question on the bus.
    static let checksPerUser = 16
    private let loop: EventLoop
    private let configuration: ConfigReload
    private let connection: BusConnection
    private let daemonUID = geteuid()
    private var lastGroupWarning: String?
    /// Questions in flight (credentials, polkit), each holding its call until answered or its bus is gone.
    private var asking: [ObjectIdentifier: PendingReply] = [:]
    /// polkit checks waiting, by the caller's uid (as the bus daemon reports it): a user cannot multiply it the
    /// way it can open connections.
    private var checks: [uid_t: Int] = [:]
    /// Users told once in the log that they reached `checksPerUser`, until their checks drop below it.
    private var capped: Set<uid_t> = []
    private var lastCancellationID: UInt64 = 0

    init(loop: EventLoop, configuration: ConfigReload, connection: BusConnection) {
        self.loop = loop
        self.configuration = configuration
        self.connection = connection
    }

    private var access: ControlAccess {
        ControlAccess(daemonUID: daemonUID, group: configuration.config.daemon.controlGroup) { [unowned self] warning in
            guard warning != self.lastGroupWarning else { return }
            self.lastGroupWarning = warning
            Log.warning(warning)
        }
    }

    /// The bus is gone: its questions are never answered, and their callers with it.
    func forgetQuestions() {
        asking = [:]
        checks = [:]
        capped = []
    }

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
            askPolkit(bus, call: call, sender: sender, caller: caller, refusal: message) { allowed(caller) }
        }
    }

    /// polkit's answer decides; no polkit on the bus (or any failure to ask it) keeps the refusal.
    private func askPolkit(_ bus: OpaquePointer, call: BusCall, sender: String, caller: BusCaller, refusal: String,
                           allowed: @escaping () -> Void) {
        let uid = caller.uid, waiting = checks[uid, default: 0]
        guard waiting < Self.checksPerUser else {
            if capped.insert(uid).inserted {
                Log.warning("D-Bus: uid \(uid) has \(waiting) calls waiting for polkit; refusing more from it until they are answered")
            }
            return call.fail(.limitsExceeded, "\(call.member) refused: uid \(uid) already has \(waiting) calls waiting for polkit, "
                             + "the most one user may; call again once they are answered")
        }
        var created: OpaquePointer?
        guard sd_bus_message_new_method_call(bus, &created, "org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
                                             "org.freedesktop.PolicyKit1.Authority", "CheckAuthorization") >= 0,
              let message = created else { return call.fail(.accessDenied, refusal) }
        defer { sd_bus_message_unref(message) }
        let interactive = sd_bus_message_get_allow_interactive_authorization(call.message) > 0
        lastCancellationID += 1
        let cancellation = "lifecycled-\(lastCancellationID)"
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
        writer.string(cancellation)
        guard writer.result >= 0 else { return call.fail(.accessDenied, refusal) }
        // A person may take a while to authenticate, but not for ever: the call, and its place among the user's
        // checks, are given back at the bound.
        let bound = interactive ? configuration.config.daemon.authenticationTimeout : Self.checkTimeout
        let sent = loop.now
        checks[uid] = waiting + 1
        Log.debug("D-Bus: asking polkit whether uid \(uid) (pid \(caller.pid)) may \(call.member)\(interactive ? ", interactively" : ""); "
                  + "\(waiting + 1) of its checks waiting")
        send(bus, message, timeout: Self.microseconds(bound), for: call) { [unowned self] reply in
            self.checkEnded(for: uid)
            if let error = sd_bus_message_get_error(reply), sd_bus_error_has_name(error, "org.freedesktop.DBus.Error.NoReply") != 0,
               self.loop.now - sent >= bound {
                return self.timedOut(call, cancellation: cancellation, caller: caller, interactive: interactive, bound: bound)
            }
            PolkitAnswer.read(reply, call: call, refusal: refusal, interactive: interactive, allowed: allowed)
        } failed: {
            checkEnded(for: uid)
            call.fail(.accessDenied, refusal)
        }
    }

    private func checkEnded(for uid: uid_t) {
        let left = checks[uid, default: 1] - 1
        checks[uid] = left > 0 ? left : nil
        capped.remove(uid)
    }

    /// sd-bus gave up on polkit's answer at the bound: polkit is told to drop the check (and its agent the dialog),
    /// and the caller hears why.
    private func timedOut(_ call: BusCall, cancellation: String, caller: BusCaller, interactive: Bool, bound: Duration) {
        if let bus = connection.bus {
            var created: OpaquePointer?
            if sd_bus_message_new_method_call(bus, &created, "org.freedesktop.PolicyKit1", "/org/freedesktop/PolicyKit1/Authority",
                                              "org.freedesktop.PolicyKit1.Authority", "CancelCheckAuthorization") >= 0,
               let message = created {
                var writer = BusWriter(message)
                writer.string(cancellation)
                // Nothing waits for polkit's answer to the cancellation: a polkitd that hangs holds nothing here.
                if writer.result >= 0, sd_bus_message_set_expect_reply(message, 0) >= 0 { _ = sd_bus_send(bus, message, nil) }
                sd_bus_message_unref(message)
            }
        }
        let limit = ConfigLoader.formatDuration(bound)
        if interactive {
            Log.info("D-Bus: \(call.member) from uid \(caller.uid) (pid \(caller.pid)): nobody authenticated within \(limit); polkit's check is cancelled")
            call.fail(.authorizationTimedOut, "permission denied: \(call.member) needs authentication for \(Self.action), and none came "
                      + "within \(limit) ([Control] AuthenticationTimeoutSec= of lifecycled.conf); the check is cancelled")
        } else {
            Log.warning("D-Bus: polkit did not answer within \(limit) about \(call.member) from uid \(caller.uid) (pid \(caller.pid)); the check is cancelled")
            call.fail(.authorizationTimedOut, "permission denied: polkit did not answer within \(limit) whether you may \(call.member); the check is cancelled")
        }
    }

    /// sd-bus's timeout of a call: at least a microsecond, since 0 means its default.
    private static func microseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(1, seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
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
        question.done = { [unowned self] in self.loop.afterCallback { self.asking[key] = nil } }
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
    static func read(_ reply: OpaquePointer, call: BusCall, refusal: String, interactive: Bool, allowed: () -> Void) {
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
        guard challenge != 0 else { return call.fail(.accessDenied, refusal) }
        if interactive {
            return call.fail(.accessDenied, "\(refusal) (polkit asked for authentication, which did not succeed)")
        }
        call.fail(.interactiveAuthorizationRequired,
                  "\(refusal) (polkit asks for authentication: call with interactive authorization allowed)")
    }
}
