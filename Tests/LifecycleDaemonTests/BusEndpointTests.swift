import Testing
@testable import LifecycleDaemon
import LifecycleModel
import LifecycleProtocol

/// Which bus the API goes on, and what a property change announces: pure parts of the D-Bus API (the rest runs
/// against a real bus in the integration tests).
@Suite struct BusEndpointTests {
    func resolve(_ choice: BusChoice, _ environment: [String: String] = [:], runtime: String = "/run/lifecycled",
                 euid: UInt32 = 0) -> Result<BusEndpoint, BusEndpoint.Unavailable> {
        BusEndpoint.resolve(choice, environment: environment, runtimeDirectory: runtime, euid: euid)
    }

    @Test func autoIsTheSystemBusForTheSystemServiceAndTheSessionBusOtherwise() {
        #expect(resolve(.auto) == .success(BusEndpoint(kind: .system, address: BusEndpoint.systemSocket)))
        #expect(resolve(.auto, ["XDG_RUNTIME_DIR": "/run/user/1000"], euid: 1000)
            == .success(BusEndpoint(kind: .session, address: "unix:path=/run/user/1000/bus")))
        #expect(resolve(.auto, ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/tmp/b"], runtime: "/tmp/x")
            == .success(BusEndpoint(kind: .session, address: "unix:path=/tmp/b")))
    }

    @Test func theOverrideReplacesTheAddressNotTheKind() {
        let environment = ["LIFECYCLED_BUS_ADDRESS": "unix:path=/tmp/private", "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/elsewhere"]
        #expect(resolve(.system, environment) == .success(BusEndpoint(kind: .system, address: "unix:path=/tmp/private")))
        #expect(resolve(.system, ["DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/elsewhere"])
            == .success(BusEndpoint(kind: .system, address: "unix:path=/elsewhere")))
    }

    @Test func noneAndASessionWithoutAddressAreNoBusWithAReason() {
        #expect(resolve(.none) == .failure(BusEndpoint.Unavailable(reason: "Bus=none")))
        guard case .failure(let unavailable) = resolve(.session, [:]) else { Issue.record("a session bus without an address"); return }
        #expect(unavailable.reason.contains("DBUS_SESSION_BUS_ADDRESS"))
    }

    @Test func theBusKeyParses() {
        let (config, diagnostics) = ConfigLoader.parseDaemon(text: "[Control]\nBus=session\n", file: "lifecycled.conf")
        #expect(diagnostics == [])
        #expect(config.bus == .session)
        let (_, wrong) = ConfigLoader.parseDaemon(text: "[Control]\nBus=kdbus\n", file: "lifecycled.conf")
        #expect(wrong.count == 1)
    }

    @Test func aPropertyChangeNamesExactlyWhatChanged() {
        let before = BusManagerProperties(version: "1", cgroupLayout: "unified", displaySource: "none",
                                          counts: [.active: 1, .notRunning: 2])
        var after = before
        after.counts = [.active: 0, .notRunning: 2, .background: 1]
        #expect(after.changed(from: before) == ["AppsActive", "AppsBackground"])
        #expect(before.changed(from: before) == [])
        after.displaySource = "dbus"
        #expect(after.changed(from: before).first == "DisplaySource")
    }

    @Test func appPathsAreEscapedAsSdBusDoesAndDecodeBack() {
        #expect(BusPath.app("notes") == "/org/lifecycled/Lifecycle1/app/notes")
        #expect(BusPath.app("my-app") == "/org/lifecycled/Lifecycle1/app/my_2dapp")
        #expect(BusPath.appName(BusPath.app("my-app.v2")) == "my-app.v2")
        #expect(BusPath.appName("/org/lifecycled/Lifecycle1") == nil)
    }
}
