import CSystemd
import Glibc

/// What a SIGTERM from the service manager means: the stop half of `systemctl restart`, or a stop.
enum StopRequest: Equatable {
    /// systemd's job for this unit restarts it (`job` is its JobType): a new daemon follows at once.
    case restart(job: String)
    /// A plain stop: systemd's job for the unit is not a restart (`reason` says which, or that there is none).
    case stop(reason: String)
    /// systemd could not be asked, or gave no usable answer (`error` says why): a plain stop too.
    case unanswered(error: String)
}

/// Asks systemd, over D-Bus, which job it is running on this daemon's unit when SIGTERM arrives.
///
/// `systemctl restart` sends the same SIGTERM as `systemctl stop`; only the unit's job tells them apart.
/// systemd installs one job per unit, and a restart is a job of type `restart` for its whole stop half: treated
/// as a stop, then turned into a start instead of finishing. `try-restart` is collapsed into `restart` (or
/// nothing) when it is installed, so it never shows up on a running unit; it is accepted anyway.
/// `reload-or-restart` and `try-reload-or-restart` become a reload on a running unit (this unit has
/// ExecReload=): SIGHUP, no SIGTERM. Any other job (`stop`, or a `start` queued behind a stop) or no job at all
/// is a stop.
///
/// The conversation is synchronous and bounded by `timeout` as a whole (connecting, authenticating, the three
/// calls): the daemon is stopping anyway, and any failure means a plain stop.
enum SystemdJob {
    static let timeout: Duration = .seconds(1)
    /// LIFECYCLED_SYSTEMD_BUS=ADDRESS (fault tests only): the sd-bus address of "systemd" instead of its private
    /// socket, e.g. `unix:path=/tmp/x/bus`, so that a test can play systemd's bus on a machine whose PID 1 is not
    /// systemd. The daemon runs as root and the variable comes from its unit's environment, which only root
    /// controls; it is logged as a warning whenever it is used.
    static let busOverrideVariable = "LIFECYCLED_SYSTEMD_BUS"
    static let managerPath = "/org/freedesktop/systemd1"

    static func isRestart(jobType: String) -> Bool { jobType == "restart" || jobType == "try-restart" }

    /// The unit that holds `pid` (GetUnitByPID), its `Job` property, and that job's `JobType`. systemd maps a
    /// pid in a cgroup below the unit's (the daemon's `supervisor/` in a delegated subtree) to the unit.
    static func stopRequest(environment: [String: String], pid: pid_t = getpid(), timeout: Duration = timeout) -> StopRequest {
        let deadline = MonotonicDeadline(after: timeout)
        do {
            let bus = try SystemdBus.connect(environment: environment, deadline: deadline)
            defer { bus.close() }
            let unit = try bus.unitByPID(pid)
            guard let job = try bus.job(ofUnit: unit) else {
                return .stop(reason: "no job on \(unit), per \(bus.name)")
            }
            let type = try bus.jobType(job)
            return isRestart(jobType: type) ? .restart(job: type)
                : .stop(reason: "a \(type) job on \(unit), per \(bus.name)")
        } catch {
            return .unanswered(error: "\(error)")
        }
    }
}

struct SystemdBusError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
    init(_ operation: String, errno: Int32) { description = "\(operation): \(String(cString: strerror(errno)))" }
}

/// A bus connection started on `address` (a private socket or a test's bus), closed again if it cannot start.
func startedBus(at address: String) throws(SystemdBusError) -> OpaquePointer {
    var created: OpaquePointer?
    var result = sd_bus_new(&created)
    guard result >= 0, let bus = created else { throw SystemdBusError("create a bus connection", errno: -result) }
    result = sd_bus_set_address(bus, address)
    if result >= 0 { result = sd_bus_start(bus) }
    guard result >= 0 else {
        sd_bus_close_unref(bus)
        throw SystemdBusError("connect to \(address)", errno: -result)
    }
    return bus
}

/// CLOCK_MONOTONIC in microseconds, sd-bus's unit.
struct MonotonicDeadline {
    let usec: UInt64
    init(after duration: Duration) {
        let (seconds, attoseconds) = duration.components
        usec = Self.now() + UInt64(seconds) * 1_000_000 + UInt64(attoseconds / 1_000_000_000_000)
    }
    var remaining: UInt64 { let now = Self.now(); return now < usec ? usec - now : 0 }
    static func now() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }
}

/// One short sd-bus conversation with the service manager, every step bounded by one deadline. The calls are
/// sent with `sd_bus_send` and their replies picked out of `sd_bus_process` by cookie, waiting with
/// `sd_bus_wait(remaining)`: `sd_bus_call` would wait for the authentication with sd-bus's own timeout (25 s),
/// whatever `sd_bus_set_method_call_timeout` says, and a bus that accepts and never answers would hold the
/// daemon's stop that long.
private final class SystemdBus {
    private let bus: OpaquePointer
    private let deadline: MonotonicDeadline
    /// Where the answer came from, for the log: the private socket, the system bus, the test hook.
    let name: String

    private init(bus: OpaquePointer, deadline: MonotonicDeadline, name: String) {
        self.bus = bus
        self.deadline = deadline
        self.name = name
    }

    /// Not `sd_bus_flush_close_unref`: a flush waits for the authentication with sd-bus's own timeout (25 s)
    /// when the peer never answered it, and every reply this conversation needs is in by now.
    func close() { sd_bus_close_unref(bus) }

    /// As root, systemd's private socket, as `systemctl` does (a direct connection: no bus daemon, no Hello);
    /// if it cannot be reached, the system bus. Not as root, the user's manager the same way.
    static func connect(environment: [String: String], deadline: MonotonicDeadline) throws(SystemdBusError) -> SystemdBus {
        if let address = environment[SystemdJob.busOverrideVariable] {
            Log.warning("\(SystemdJob.busOverrideVariable)=\(address): asking this bus instead of systemd's (a test hook)")
            return try direct(address, deadline: deadline, name: "\(SystemdJob.busOverrideVariable) \(address)")
        }
        let isRoot = geteuid() == 0
        let privateSocket = isRoot ? "/run/systemd/private"
            : environment["XDG_RUNTIME_DIR"].map { "\($0)/systemd/private" }
        if let privateSocket {
            do {
                return try direct("unix:path=\(privateSocket)", deadline: deadline, name: privateSocket)
            } catch {
                Log.debug("Failed to connect to systemd's private socket \(privateSocket): \(error); trying the \(isRoot ? "system" : "user") bus")
            }
        }
        var bus: OpaquePointer?
        let result = isRoot ? sd_bus_open_system(&bus) : sd_bus_open_user(&bus)
        guard result >= 0, let bus else {
            throw SystemdBusError("connect to the \(isRoot ? "system" : "user") bus", errno: -result)
        }
        return SystemdBus(bus: bus, deadline: deadline, name: isRoot ? "the system bus" : "the user bus")
    }

    private static func direct(_ address: String, deadline: MonotonicDeadline, name: String) throws(SystemdBusError) -> SystemdBus {
        SystemdBus(bus: try startedBus(at: address), deadline: deadline, name: name)
    }

    // MARK: The three questions

    func unitByPID(_ pid: pid_t) throws(SystemdBusError) -> String {
        let reply = try call(SystemdJob.managerPath, "org.freedesktop.systemd1.Manager", "GetUnitByPID") { message in
            var value = UInt32(bitPattern: pid)
            return sd_bus_message_append_basic(message, Self.type("u"), &value)
        }
        defer { sd_bus_message_unref(reply) }
        return try readString(reply, type: "o", what: "GetUnitByPID's reply")
    }

    /// The unit's `Job` property, `(uo)`: the job's id and path, or id 0 and path "/" when there is none.
    func job(ofUnit unit: String) throws(SystemdBusError) -> String? {
        let reply = try getProperty(unit, "org.freedesktop.systemd1.Unit", "Job")
        defer { sd_bus_message_unref(reply) }
        let what = "the unit's Job property"
        try enter(reply, "v", "(uo)", what: what)
        try enter(reply, "r", "uo", what: what)
        var id: UInt32 = 0
        let result = sd_bus_message_read_basic(reply, Self.type("u"), &id)
        guard result > 0 else { throw SystemdBusError("read \(what): \(Self.reason(result))") }
        let path = try readString(reply, type: "o", what: what)
        return id == 0 ? nil : path
    }

    func jobType(_ job: String) throws(SystemdBusError) -> String {
        let reply = try getProperty(job, "org.freedesktop.systemd1.Job", "JobType")
        defer { sd_bus_message_unref(reply) }
        try enter(reply, "v", "s", what: "the job's JobType property")
        return try readString(reply, type: "s", what: "the job's JobType property")
    }

    // MARK: Messages

    private func getProperty(_ path: String, _ interface: String, _ property: String) throws(SystemdBusError) -> OpaquePointer {
        try call(path, "org.freedesktop.DBus.Properties", "Get") { message in
            let first = sd_bus_message_append_basic(message, Self.type("s"), interface)
            return first < 0 ? first : sd_bus_message_append_basic(message, Self.type("s"), property)
        }
    }

    /// Sends the call and waits, until the deadline, for its reply; an error reply is thrown with its name.
    private func call(_ path: String, _ interface: String, _ member: String,
                      arguments: (OpaquePointer) -> Int32) throws(SystemdBusError) -> OpaquePointer {
        var created: OpaquePointer?
        var result = sd_bus_message_new_method_call(bus, &created, "org.freedesktop.systemd1", path, interface, member)
        guard result >= 0, let message = created else { throw SystemdBusError("create the \(member) call", errno: -result) }
        defer { sd_bus_message_unref(message) }
        result = arguments(message)
        guard result >= 0 else { throw SystemdBusError("build the \(member) call", errno: -result) }
        var cookie: UInt64 = 0
        result = sd_bus_send(bus, message, &cookie)
        guard result >= 0 else { throw SystemdBusError("send \(member)", errno: -result) }
        let reply = try awaitReply(to: cookie, member: member)
        if let error = sd_bus_message_get_error(reply), sd_bus_error_is_set(error) != 0 {
            let name = error.pointee.name.map { String(cString: $0) } ?? "an error"
            let text = error.pointee.message.map { String(cString: $0) } ?? ""
            sd_bus_message_unref(reply)
            throw SystemdBusError("\(member): \(name)\(text.isEmpty ? "" : ": \(text)")")
        }
        return reply
    }

    private func awaitReply(to cookie: UInt64, member: String) throws(SystemdBusError) -> OpaquePointer {
        while true {
            var received: OpaquePointer?
            let result = sd_bus_process(bus, &received)
            guard result >= 0 else { throw SystemdBusError("wait for the reply to \(member)", errno: -result) }
            if let message = received {
                var replyCookie: UInt64 = 0
                if sd_bus_message_get_reply_cookie(message, &replyCookie) >= 0 && replyCookie == cookie { return message }
                // Anything else (a signal, the local Disconnected message): not ours.
                sd_bus_message_unref(message)
                continue
            }
            if result > 0 { continue }
            let remaining = deadline.remaining
            guard remaining > 0 else {
                throw SystemdBusError("no reply to \(member) within \(SystemdJob.timeout)")
            }
            do throws(SystemError) {
                // sd-bus returns the negative errno instead of setting it: set it where `retryingEINTR` looks.
                // A retry waits only for what is left of the deadline.
                try retryingEINTR("wait for the reply to \(member)") { () -> Int32 in
                    let waited = sd_bus_wait(bus, deadline.remaining)
                    guard waited < 0 else { return waited }
                    errno = -waited
                    return -1
                }
            } catch {
                throw SystemdBusError("wait for the reply to \(member)", errno: error.errno)
            }
        }
    }

    private func enter(_ message: OpaquePointer, _ type: Character, _ contents: String, what: String) throws(SystemdBusError) {
        let result = sd_bus_message_enter_container(message, Self.type(type), contents)
        guard result > 0 else { throw SystemdBusError("read \(what) as \(type) \(contents): \(Self.reason(result))") }
    }

    private func readString(_ message: OpaquePointer, type: Character, what: String) throws(SystemdBusError) -> String {
        var value: UnsafePointer<CChar>?
        let result = sd_bus_message_read_basic(message, Self.type(type), &value)
        guard result > 0, let value else { throw SystemdBusError("read \(what) as \(type): \(Self.reason(result))") }
        return String(cString: value)
    }

    private static func reason(_ result: Int32) -> String {
        result == 0 ? "the message ended" : String(cString: strerror(-result))
    }

    private static func type(_ character: Character) -> CChar { CChar(bitPattern: character.asciiValue!) }
}
