import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// `[Display] Source=dbus`: the test plays a homescreen that owns the display and reports it over a real private
/// bus with SetDisplay (by name) and SetDisplayPids (by process); the states and callbacks follow as with sway.
@Suite("Display: states follow a homescreen on D-Bus", .serialized)
struct DBusDisplayTests {
    let api = DBusTests()

    func callbacks(_ daemon: DaemonHarness, _ app: String, from start: Int = 0) -> [String] {
        Array(daemon.types(app).dropFirst(start)).filter { $0 != "hello" && $0 != "didFinishLaunching" }
    }

    func state(_ daemon: DaemonHarness, _ app: String) throws -> String { try daemon.status(app).state.rawValue }

    func setDisplay(_ bus: PrivateBus, _ visible: [String], focused: String) throws {
        _ = try api.mustCall(bus, "SetDisplay", "ass", [String(visible.count)] + visible + [focused])
    }

    @Test("SetDisplay and SetDisplayPids drive the states in UIKit's order; lifectl focus asks the homescreen")
    func homescreenDrivesTheStates() throws {
        try api.withBus(["a": api.client(), "b": api.client()], daemonConfig: "[Display]\nSource=dbus\n") { daemon, bus in
            #expect(daemon.log.contains("display: Source=dbus"))
            #expect(try api.property(bus, "DisplaySource").contains("dbus at org.lifecycled.Lifecycle1"))
            // A launched app is inactive until the homescreen shows it.
            try daemon.control("launch", "a")
            #expect(try state(daemon, "a") == "inactive")
            try setDisplay(bus, ["a"], focused: "a")
            try daemon.waitForState("a", "active")
            #expect(callbacks(daemon, "a") == ["didBecomeActive"])

            // b comes up beside a and takes the focus: a resigns and stays inactive (still visible).
            try daemon.control("launch", "b")
            try setDisplay(bus, ["a", "b"], focused: "b")
            try daemon.waitForState("b", "active")
            try daemon.waitForState("a", "inactive")
            #expect(callbacks(daemon, "a") == ["didBecomeActive", "willResignActive"])

            // By process: a alone, focused; b is hidden and goes to the background through resign.
            let aPid = try #require(try daemon.status("a").pid)
            let bRecords = daemon.types("b").count
            _ = try api.mustCall(bus, "SetDisplayPids", "auu", "1", String(aPid), String(aPid))
            try daemon.waitForState("a", "active")
            try daemon.waitForState("b", "background")
            #expect(callbacks(daemon, "b", from: bRecords) == ["willResignActive", "didEnterBackground"])

            // lifectl focus of a shown app is asked of the homescreen, and answered once the homescreen moved it.
            try setDisplay(bus, ["a", "b"], focused: "b")
            try daemon.waitForState("b", "active")
            let signals = daemon.root.appendingPathComponent("display-signals.txt")
            let monitor = try bus.monitor(into: signals)
            defer { PrivateBus.end(monitor) }
            let focus = try daemon.startLifectl("focus", "a")
            try daemon.waitUntil("the homescreen is asked to focus a") {
                ((try? String(contentsOf: signals, encoding: .utf8)) ?? "").contains("FocusRequested ('a',)")
            }
            #expect(try state(daemon, "a") == "inactive", "the state waits for the homescreen")
            try setDisplay(bus, ["a", "b"], focused: "a")
            focus.waitUntilExit()
            #expect(focus.terminationStatus == 0)
            #expect(try state(daemon, "a") == "active")

            // Nothing shown: both go to the background.
            try setDisplay(bus, [], focused: "")
            try daemon.waitForState("a", "background")
            try daemon.waitForState("b", "background")

            let unknown = try api.call(bus, "SetDisplay", "ass", "1", "nope", "")
            #expect(unknown.status != 0 && unknown.stderr.contains("no such app 'nope'"))
            let stranger = try api.call(bus, "SetDisplay", "ass", "1", "a", "a", asUser: DBusTests.nobody)
            #expect(stranger.stderr.contains("permission denied"))
            #expect(try state(daemon, "a") == "background")
        }
    }

    @Test("SetDisplayPids from a [Control] Group= member names only its own processes: another user's pid is refused and nothing moves")
    func aGroupMemberNamesOnlyItsOwnProcesses() throws {
        try api.withBus(["a": api.client()], daemonConfig: "[Display]\nSource=dbus\n\n[Control]\nGroup=nogroup\n") { daemon, bus in
            try daemon.control("launch", "a")
            let aPid = try #require(try daemon.status("a").pid)
            try setDisplay(bus, ["a"], focused: "a")
            try daemon.waitForState("a", "active")
            // nobody may move apps (the group), but a's process is root's: naming it is refused.
            let refused = try api.call(bus, "SetDisplayPids", "auu", "1", String(aPid), "0", asUser: DBusTests.nobody)
            #expect(refused.status != 0)
            #expect(refused.stderr.contains("process \(aPid) is uid 0's, not the caller's (uid \(DBusTests.nobody))"), "\(refused.stderr)")
            #expect(try state(daemon, "a") == "active", "nothing moved")
            // Its own process it may name; a's window is gone from the picture, so a goes to the background.
            let own = Process()
            own.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            own.arguments = ["--reuid=\(DBusTests.nobody)", "--regid=65534", "--clear-groups", "/bin/sleep", "60"]
            try own.run()
            defer { own.terminate(); kill(own.processIdentifier, SIGKILL); own.waitUntilExit() }
            // setpriv drops to nobody, then execs sleep: the uid is the kernel's answer, read before the call.
            try daemon.waitUntil("the sleep runs as nobody") { Kernel.uid(of: own.processIdentifier) == DBusTests.nobody }
            let allowed = try api.call(bus, "SetDisplayPids", "auu", "1", String(own.processIdentifier), "0", asUser: DBusTests.nobody)
            #expect(allowed.status == 0, "\(allowed.stderr)")
            try daemon.waitForState("a", "background")
            // Root names any process.
            _ = try api.mustCall(bus, "SetDisplayPids", "auu", "1", String(aPid), String(aPid))
            try daemon.waitForState("a", "active")
        }
    }
}

