import CSystemd
import Glibc
import LifecycleProtocol

/// The named errors of the API; their messages are lifectl's.
enum BusErrorName: String {
    case unknownApp = "org.lifecycled.Lifecycle1.Error.UnknownApp"
    case refused = "org.lifecycled.Lifecycle1.Error.Refused"
    case accessDenied = "org.lifecycled.Lifecycle1.Error.AccessDenied"
    case invalidArgs = "org.freedesktop.DBus.Error.InvalidArgs"
    /// polkit's check did not end within its bound (docs/DBUS.md, *Who may do what*); it is cancelled.
    case authorizationTimedOut = "org.lifecycled.Lifecycle1.Error.AuthorizationTimedOut"
    /// polkit asks for authentication and the call did not allow it: the standard name, which clients know to
    /// retry with interaction allowed.
    case interactiveAuthorizationRequired = "org.freedesktop.DBus.Error.InteractiveAuthorizationRequired"
    /// The caller's user has as many polkit checks waiting as one user may.
    case limitsExceeded = "org.freedesktop.DBus.Error.LimitsExceeded"
}

/// One method call being answered, now or once its app has settled (a waiter of `ControlRequests`). It holds a
/// reference to the message until answered; an answer to a caller or bus that is gone is dropped by sd-bus.
final class BusCall: RequestWaiter {
    let message: OpaquePointer
    private var answered = false
    /// What a successful settled request answers: nothing by default.
    var onSuccess: ((BusCall) -> Void)?

    init(_ message: OpaquePointer) {
        self.message = message
        sd_bus_message_ref(message)
    }

    deinit { sd_bus_message_unref(message) }

    var member: String { sd_bus_message_get_member(message).map { String(cString: $0) } ?? "" }
    var path: String { sd_bus_message_get_path(message).map { String(cString: $0) } ?? "" }
    var sender: String? { sd_bus_message_get_sender(message).map { String(cString: $0) } }

    // MARK: Arguments (sd-bus checked the signature before the call reached us)

    func readString() -> String {
        var value: UnsafePointer<CChar>?
        _ = sd_bus_message_read_basic(message, BusType.string, &value)
        return value.map { String(cString: $0) } ?? ""
    }

    func readBool() -> Bool {
        var value: Int32 = 0
        _ = sd_bus_message_read_basic(message, BusType.bool, &value)
        return value != 0
    }

    func readUInt32() -> UInt32 {
        var value: UInt32 = 0
        _ = sd_bus_message_read_basic(message, BusType.uint32, &value)
        return value
    }

    func readArray<T>(of type: CChar, _ read: () -> T) -> [T] {
        var values: [T] = []
        guard sd_bus_message_enter_container(message, BusType.array, String(UnicodeScalar(UInt8(type)))) > 0 else { return [] }
        while sd_bus_message_at_end(message, 0) == 0 { values.append(read()) }
        _ = sd_bus_message_exit_container(message)
        return values
    }

    // MARK: Answers

    /// The ControlRequests answer: success once settled, or the request's refusal.
    func reply(_ reply: ControlReply) {
        guard reply.ok else { return fail(.refused, reply.error ?? "refused") }
        if let onSuccess { onSuccess(self) } else { succeed() }
    }

    func succeed(_ build: (OpaquePointer) -> Int32 = { _ in 0 }) {
        guard !answered else { return }
        answered = true
        var created: OpaquePointer?
        guard sd_bus_message_new_method_return(message, &created) >= 0, let reply = created else { return }
        defer { sd_bus_message_unref(reply) }
        guard build(reply) >= 0 else { return fail(.invalidArgs, "the answer could not be built") }
        _ = sd_bus_send(nil, reply, nil)
    }

    func fail(_ name: BusErrorName, _ text: String) {
        guard !answered else { return }
        answered = true
        var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
        _ = sd_bus_error_set(&error, name.rawValue, text)
        _ = sd_bus_reply_method_error(message, &error)
        sd_bus_error_free(&error)
    }
}

/// sd-bus's type characters.
enum BusType {
    static let string = CChar(UInt8(ascii: "s"))
    static let objectPath = CChar(UInt8(ascii: "o"))
    static let bool = CChar(UInt8(ascii: "b"))
    static let uint32 = CChar(UInt8(ascii: "u"))
    static let uint64 = CChar(UInt8(ascii: "t"))
    static let array = CChar(UInt8(ascii: "a"))
    static let structure = CChar(UInt8(ascii: "r"))
    static let variant = CChar(UInt8(ascii: "v"))
    static let dictEntry = CChar(UInt8(ascii: "e"))
}

/// Appending to a message: the first failure is kept in `result` and skips the rest.
struct BusWriter {
    let message: OpaquePointer
    private(set) var result: Int32 = 0

    init(_ message: OpaquePointer) { self.message = message }

    mutating func string(_ value: String, type: CChar = BusType.string) {
        guard result >= 0 else { return }
        result = sd_bus_message_append_basic(message, type, value)
    }

    mutating func uint32(_ value: UInt32) {
        guard result >= 0 else { return }
        var value = value
        result = sd_bus_message_append_basic(message, BusType.uint32, &value)
    }

    mutating func uint64(_ value: UInt64) {
        guard result >= 0 else { return }
        var value = value
        result = sd_bus_message_append_basic(message, BusType.uint64, &value)
    }

    mutating func bool(_ value: Bool) {
        guard result >= 0 else { return }
        var value: Int32 = value ? 1 : 0
        result = sd_bus_message_append_basic(message, BusType.bool, &value)
    }

    mutating func container(_ type: CChar, _ contents: String, _ body: (inout BusWriter) -> Void) {
        guard result >= 0 else { return }
        result = sd_bus_message_open_container(message, type, contents)
        guard result >= 0 else { return }
        body(&self)
        guard result >= 0 else { return }
        result = sd_bus_message_close_container(message)
    }
}

/// A NULL-terminated array of C strings for the `_strv` calls of sd-bus, freed after `body`.
func withStrv<Result>(_ strings: [String], _ body: (UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Result) -> Result {
    let strv = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: strings.count + 1)
    for (index, string) in strings.enumerated() { strv[index] = strdup(string) }
    strv[strings.count] = nil
    defer {
        for index in 0..<strings.count { free(strv[index]) }
        strv.deallocate()
    }
    return body(strv)
}

/// The same as `withStrv`, in malloc'd memory that sd-bus frees (a node enumerator's answer).
func mallocStrv(_ strings: [String]) -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? {
    guard let raw = malloc(MemoryLayout<UnsafeMutablePointer<CChar>?>.stride * (strings.count + 1)) else { return nil }
    let strv = raw.bindMemory(to: UnsafeMutablePointer<CChar>?.self, capacity: strings.count + 1)
    for (index, string) in strings.enumerated() { strv[index] = strdup(string) }
    strv[strings.count] = nil
    return strv
}
