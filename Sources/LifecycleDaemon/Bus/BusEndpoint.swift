/// `[Control] Bus=`: which D-Bus bus the daemon offers its API on (docs/DBUS.md).
public enum BusChoice: String, Sendable, Equatable, CaseIterable {
    /// The system bus as root with the default runtime directory (the system service), the session bus otherwise.
    case auto
    case system
    case session
    /// No D-Bus API.
    case none
}

/// The bus the daemon connects to and its address, as `[Control] Bus=` and the environment resolve them.
struct BusEndpoint: Equatable {
    enum Kind: String { case system, session }
    let kind: Kind
    let address: String

    /// LIFECYCLED_BUS_ADDRESS=ADDRESS: the address of the chosen bus instead of the usual one (tests, a private bus),
    /// before the standard DBUS_SYSTEM_BUS_ADDRESS and DBUS_SESSION_BUS_ADDRESS.
    static let addressVariable = "LIFECYCLED_BUS_ADDRESS"
    static let systemSocket = "unix:path=/run/dbus/system_bus_socket"

    /// The endpoint, or why there is none (`Bus=none`, or a session bus with no address to be found).
    static func resolve(_ choice: BusChoice, environment: [String: String], runtimeDirectory: String,
                        euid: UInt32) -> Result<BusEndpoint, Unavailable> {
        let kind: Kind
        switch choice {
        case .none: return .failure(Unavailable(reason: "Bus=none"))
        case .system: kind = .system
        case .session: kind = .session
        case .auto: kind = euid == 0 && runtimeDirectory == "/run/lifecycled" ? .system : .session
        }
        func given(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        if let address = given(addressVariable) { return .success(BusEndpoint(kind: kind, address: address)) }
        switch kind {
        case .system:
            return .success(BusEndpoint(kind: kind, address: given("DBUS_SYSTEM_BUS_ADDRESS") ?? systemSocket))
        case .session:
            if let address = given("DBUS_SESSION_BUS_ADDRESS") ?? given("XDG_RUNTIME_DIR").map({ "unix:path=\($0)/bus" }) {
                return .success(BusEndpoint(kind: kind, address: address))
            }
            return .failure(Unavailable(reason: "no session bus: neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set"))
        }
    }

    struct Unavailable: Error, Equatable { let reason: String }
}
