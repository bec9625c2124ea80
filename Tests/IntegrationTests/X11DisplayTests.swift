import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// `[Display] Source=x11` against a real Xvfb with openbox: the apps' windows (xterm, xlogo, started by the apps
/// lifecycled launches) drive the states, checked through `lifectl list --json`, /proc, the clients' own records,
/// and the window manager's own answers (xdotool, xprop).
@Suite("Display: states follow a real X server with openbox", .serialized)
struct X11DisplayTests {
    let python = DaemonHarness.pythonClient

    /// An app whose main process is the protocol client, with a window (`window`, titled `title`) as its child.
    func windowedApp(_ title: String, x: XvfbOpenbox, window: String? = nil, lifecycle: String = "BackgroundTimeSec=infinity") -> String {
        let window = window ?? "xterm -T \(title) -e sleep 100000"
        return "[App]\nEnvironment=DISPLAY=\(x.display)\nExec=/bin/sh -c \"\(window) & exec \(python)\"\n\n"
            + "[Lifecycle]\n\(lifecycle)\nTimeoutStopSec=3\n"
    }

    func withX11(_ apps: (XvfbOpenbox, String) -> [String: String], display: String = "",
                 _ body: (DaemonHarness, XvfbOpenbox, String) throws -> Void) throws {
        let harness = try DaemonHarness()
        let x = try XvfbOpenbox(tag: harness.tag)
        defer {
            harness.stop()
            x.stop()
        }
        for (name, text) in apps(x, harness.tag) { try harness.app(name, text) }
        try harness.daemonConfig(display.isEmpty ? "[Display]\nSource=x11\nX11Display=\(x.display)\n" : display)
        try harness.start()
        try harness.waitUntil("the daemon follows the X server") { harness.log.contains("display: following the X server") }
        try body(harness, x, harness.tag)
        #expect(harness.isDaemonRunning, "the daemon must still be running at the end of the test")
    }

    func state(_ daemon: DaemonHarness, _ app: String) throws -> String { try daemon.status(app).state.rawValue }

    /// The callbacks the app's client received, from record index `start` on.
    func callbacks(_ daemon: DaemonHarness, _ app: String, from start: Int = 0) -> [String] {
        Array(daemon.types(app).dropFirst(start)).filter { $0 != "hello" && $0 != "didFinishLaunching" }
    }

    /// The window's `_NET_WM_PID`, nil when it has none.
    func windowPID(_ x: XvfbOpenbox, _ window: String) throws -> pid_t? {
        let text = try x.xprop("-id", window, "_NET_WM_PID")
        guard let value = text.split(separator: "=").last, text.contains("CARDINAL") else { return nil }
        return pid_t(value.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    @Test("focus, desktops, minimizing and closing a window drive the states and callbacks; lifectl focus and background move the real focus")
    func x11DrivesTheStates() throws {
        try withX11({ x, tag in
            ["a": windowedApp("a-\(tag)", x: x), "b": windowedApp("b-\(tag)", x: x, lifecycle: "BackgroundTimeSec=1")]
        }) { daemon, x, tag in
            // A launched app is inactive until its window shows; openbox gives a new window the focus.
            try daemon.control("launch", "a")
            let aWindow = try x.waitForWindow("a-\(tag)")
            try daemon.waitForState("a", "active")
            try daemon.control("launch", "b")
            let bWindow = try x.waitForWindow("b-\(tag)")
            try daemon.waitForState("b", "active")
            // Both windows show on the desktop: a resigned and stays inactive.
            try daemon.waitForState("a", "inactive")
            #expect(callbacks(daemon, "a") == ["didBecomeActive", "willResignActive"])

            // Focus back to a by the window manager itself.
            let bRecords = daemon.types("b").count
            try x.xdotool("windowactivate", "--sync", aWindow)
            try daemon.waitForState("a", "active")
            try daemon.waitForState("b", "inactive")
            #expect(callbacks(daemon, "b", from: bRecords) == ["willResignActive"])

            // b's window moves to the other desktop: b goes to the background, then is suspended after its grace.
            try x.xdotool("set_desktop_for_window", bWindow, "1")
            try daemon.waitForState("b", "suspended")
            let bPid = try #require(try daemon.status("b").pid)
            let bWindowPid = try #require(try windowPID(x, bWindow))
            #expect(Kernel.stops(bPid))
            #expect(Kernel.state(bWindowPid) == "T", "the window's process, a child of the app, is stopped too")

            // Switching to that desktop shows b's window: b is resumed and becomes active, a goes to the background.
            let bBefore = daemon.types("b").count
            try x.xdotool("set_desktop", "1")
            try daemon.waitForState("a", "background")
            try x.xdotool("windowactivate", bWindow)
            try daemon.waitForState("b", "active")
            #expect(Kernel.state(bPid) != "T")
            #expect(callbacks(daemon, "b", from: bBefore) == ["didEnterBackground", "willEnterForeground", "didBecomeActive"]
                    || callbacks(daemon, "b", from: bBefore) == ["willEnterForeground", "didBecomeActive"])

            // lifectl focus asks openbox, which switches back to a's desktop and focuses it.
            try daemon.control("focus", "a")
            try daemon.waitForState("a", "active")
            #expect(try x.activeWindow() == aWindow)
            #expect(try x.currentDesktop() == "0")
            #expect(try state(daemon, "b") == "background" || state(daemon, "b") == "suspended")

            // lifectl background iconifies a's window.
            try daemon.control("background", "a")
            try daemon.waitForState("a", "background")
            #expect(try x.isIconic(aWindow))

            // Minimizing by the window manager: shown again, then minimized with xdotool.
            try x.xdotool("windowactivate", aWindow)
            try daemon.waitForState("a", "active")
            try x.xdotool("windowminimize", aWindow)
            try daemon.waitForState("a", "background")

            // Closing b's last window while its process runs: b goes to the background.
            try x.xdotool("set_desktop", "1")
            try x.xdotool("windowactivate", bWindow)
            try daemon.waitForState("b", "active")
            try x.xdotool("windowkill", bWindow)
            try daemon.waitUntil("b leaves the foreground") { ["background", "suspended"].contains(try self.state(daemon, "b")) }
            #expect(Kernel.exists(bPid))
        }
    }

    @Test("a window without _NET_WM_PID is found through X-Resource, and follows as any other")
    func aWindowWithoutItsPidIsFoundThroughXResource() throws {
        try withX11({ x, tag in
            ["c": windowedApp("c-\(tag)", x: x, window: "xlogo -title c-\(tag)", lifecycle: "BackgroundTimeSec=1")]
        }) { daemon, x, tag in
            try daemon.control("launch", "c")
            let window = try x.waitForWindow("c-\(tag)")
            #expect(try windowPID(x, window) == nil, "xlogo sets no _NET_WM_PID, so only X-Resource can name its process")
            try daemon.waitForState("c", "active")

            try x.xdotool("windowminimize", window)
            try daemon.waitForState("c", "suspended")
            let pid = try #require(try daemon.status("c").pid)
            #expect(Kernel.stops(pid))

            try daemon.control("focus", "c")
            try daemon.waitForState("c", "active")
            #expect(Kernel.state(pid) != "T")
            #expect(try x.activeWindow() == window)
            #expect(try !x.isIconic(window))
            #expect(callbacks(daemon, "c") == ["didBecomeActive", "willResignActive", "didEnterBackground",
                                               "willEnterForeground", "didBecomeActive"])
        }
    }

    @Test("the X server killed and restarted: the daemon keeps every state, reconnects, and follows the new server")
    func x11RestartLosesNothing() throws {
        try withX11({ x, tag in
            ["a": windowedApp("a-\(tag)", x: x), "b": windowedApp("b-\(tag)", x: x, lifecycle: "BackgroundTimeSec=1"),
             "c": windowedApp("c-\(tag)", x: x)]
        }) { daemon, x, tag in
            try daemon.control("launch", "b")
            let bWindow = try x.waitForWindow("b-\(tag)")
            try daemon.waitForState("b", "active")
            try x.xdotool("set_desktop_for_window", bWindow, "1")
            try daemon.waitForState("b", "suspended")
            try daemon.control("launch", "a")
            _ = try x.waitForWindow("a-\(tag)")
            try daemon.waitForState("a", "active")

            try x.kill()
            try daemon.waitUntil("the daemon notices") { daemon.log.contains("the apps keep their states, reconnecting") }
            #expect(try state(daemon, "a") == "active")
            #expect(try state(daemon, "b") == "suspended")
            let status = try daemon.lifectl("status")
            #expect(status.stdout.contains("display: x11 at \(x.display)"))

            try x.start()
            try daemon.waitUntil("the daemon follows the new X server") {
                daemon.log.components(separatedBy: "display: following the X server").count > 2
            }
            // a's window died with the old server: a is in the background now; nothing suspended shows a window.
            try daemon.waitForState("a", "background")
            #expect(try state(daemon, "b") == "suspended")
            // The new server drives the states as the old one did: a new app's window, shown then minimized.
            try daemon.control("launch", "c")
            let cWindow = try x.waitForWindow("c-\(tag)")
            try daemon.waitForState("c", "active")
            try x.xdotool("windowminimize", cWindow)
            try daemon.waitForState("c", "background")
            try x.xdotool("windowactivate", cWindow)
            try daemon.waitForState("c", "active")
            #expect(Kernel.state(try #require(try windowPID(x, cWindow))) != "T", "a visible window's process is never left stopped")
            // b, without a window now, is focused the usual way.
            try daemon.control("focus", "b")
            try daemon.waitForState("b", "active")
            #expect(Kernel.state(try #require(try daemon.status("b").pid)) != "T")
        }
    }
}

/// `[Display]` on reload: a changed section stops the source in force and starts the new one, whose first picture
/// reconciles the apps; an unchanged one leaves the running source alone.
@Suite("Display: [Display] on reload", .serialized)
struct DisplayReloadTests {
    @Test("none to x11 reconciles with the windows already open; unchanged keeps the connection; x11 to none stops following; auto picks x11")
    func aChangedDisplaySectionSwitchesTheSource() throws {
        let harness = try DaemonHarness()
        let x = try XvfbOpenbox(tag: harness.tag)
        defer {
            harness.stop()
            x.stop()
        }
        let tag = harness.tag
        try harness.app("a", X11DisplayTests().windowedApp("a-\(tag)", x: x))
        try harness.daemonConfig("[Display]\nSource=none\n")
        try harness.start()
        try harness.control("launch", "a")
        let window = try x.waitForWindow("a-\(tag)")
        try x.xdotool("windowminimize", window)
        #expect(try harness.status("a").state.rawValue == "inactive", "without a source the window changes nothing")

        // To x11: the first picture finds a's window minimized, so a goes to the background.
        try harness.daemonConfig("[Display]\nSource=x11\nX11Display=\(x.display)\n")
        _ = try harness.lifectl("reload")
        try harness.waitUntil("the daemon follows the X server") { harness.log.contains("display: following the X server") }
        try harness.waitForState("a", "background")
        try x.xdotool("windowactivate", window)
        try harness.waitForState("a", "active")

        // Unchanged: the same connection goes on (no second connect), and it still drives the states.
        _ = try harness.lifectl("reload")
        try harness.waitUntil("the reload is done") { harness.log.components(separatedBy: "Reloaded the configuration").count > 2 }
        #expect(harness.log.components(separatedBy: "display: following the X server").count == 2)
        try x.xdotool("windowminimize", window)
        try harness.waitForState("a", "background")

        // To none: the X server's changes no longer move a; lifectl does.
        try harness.daemonConfig("[Display]\nSource=none\n")
        _ = try harness.lifectl("reload")
        try harness.waitUntil("the source is left") { harness.log.contains("display: now none") }
        #expect(try harness.lifectl("status").stdout.contains("display: none"))
        try x.xdotool("windowactivate", window)
        usleep(300_000)
        #expect(try harness.status("a").state.rawValue == "background", "a stopped source moves nothing")
        try harness.control("focus", "a")
        try harness.waitForState("a", "active")

        // To auto with a display and no sway socket: x11 is picked, and the log and the status say so.
        try harness.daemonConfig("[Display]\nSource=auto\nX11Display=\(x.display)\n")
        _ = try harness.lifectl("reload")
        try harness.waitUntil("auto follows the X server") {
            harness.log.contains("display: Source=auto: following the X server \(x.display)")
        }
        try harness.waitUntil("the status says auto picked x11") {
            (try harness.lifectl("status").stdout).contains("display: x11 (auto) at \(x.display), connected")
        }
        try x.xdotool("windowminimize", window)
        try harness.waitForState("a", "background")
        #expect(harness.isDaemonRunning)
    }
}
