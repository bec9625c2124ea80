import Foundation
import Glibc

/// An X server (Xvfb) on a display number it picks itself, with openbox as its EWMH window manager, for the x11 display tests.
/// Both run as root (X11 allows it) and are stopped at the end; `kill()` and `start()` take the whole display away
/// and bring a new one on the same number. Windows come from the apps lifecycled launches (xterm, xlogo); the
/// tests drive them with xdotool and ask back with xprop.
final class XvfbOpenbox {
    static let tools = ["/usr/bin/Xvfb", "/usr/bin/openbox", "/usr/bin/xdotool", "/usr/bin/xprop", "/usr/bin/xterm", "/usr/bin/xlogo",
                        "/usr/bin/xauth"]
    /// The display number Xvfb took at the first start (`-displayfd`: it picks a free one itself, so suites that
    /// run side by side never share a server); a restart takes the same one, :0 included.
    private(set) var number = 0
    /// The first start has picked `number`.
    private var picked = false
    var display: String { ":\(number)" }
    let configFile: String
    /// With `authority`: the Xauthority file the server takes its cookie from (`-auth`), which its clients need.
    let authorityFile: String?
    private var server: Process?
    private var manager: Process?

    /// Installs what is missing through apt, as `make test-deps` does.
    static func installIfMissing() throws {
        guard tools.contains(where: { access($0, X_OK) != 0 }) else { return }
        try HeadlessSway.run("/bin/sh", ["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
            + "xvfb openbox xdotool x11-utils xterm x11-apps xauth >/dev/null"])
    }

    /// `authority`: the server lets in only clients that send its cookie (MIT-MAGIC-COOKIE-1), as a display manager's
    /// does; the cookie is in `authorityFile`, for any display number, and `environment` names it.
    init(tag: String, authority: Bool = false) throws {
        try Self.installIfMissing()
        configFile = "/tmp/lifecycled-openbox-\(tag).xml"
        authorityFile = authority ? "/tmp/lifecycled-xauth-\(tag)" : nil
        if let authorityFile {
            let hex = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
            // xauth's nlist form: family FamilyWild (ffff), no address, no display number, then the name
            // (MIT-MAGIC-COOKIE-1 in hex) and the data.
            try HeadlessSway.run("/bin/sh", ["-c", "echo 'ffff 0000  0000  0012 4d49542d4d414749432d434f4f4b49452d31 0010 \(hex)' "
                + "| xauth -q -f \(authorityFile) nmerge -"])
        }
        // Two desktops, and new windows take the focus (openbox's default, said so the tests do not depend on it).
        // New windows go under the pointer: openbox's smart placement takes quadratic time, and a test opens
        // hundreds of windows.
        try """
        <?xml version="1.0" encoding="UTF-8"?>
        <openbox_config xmlns="http://openbox.org/3.4/rc">
          <focus><focusNew>yes</focusNew><followMouse>no</followMouse></focus>
          <placement><policy>UnderMouse</policy></placement>
          <desktops><number>2</number><firstdesk>1</firstdesk></desktops>
        </openbox_config>
        """.write(toFile: configFile, atomically: true, encoding: .utf8)
        do {
            try start()
        } catch {
            stop()
            throw error
        }
    }

    var environment: [String: String] {
        ["DISPLAY": display, "PATH": "/usr/bin:/bin", "HOME": "/tmp"].merging(authorityFile.map { ["XAUTHORITY": $0] } ?? [:]) { $1 }
    }

    func start() throws {
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/Xvfb")
        let chosen = Pipe()
        server.arguments = (picked ? [display] : ["-displayfd", "1"]) + ["-screen", "0", "1024x768x24", "-nolisten", "tcp"]
            + (authorityFile.map { ["-auth", $0] } ?? [])
        server.standardOutput = picked ? FileHandle.nullDevice : chosen
        server.standardError = FileHandle.nullDevice
        try server.run()
        self.server = server
        if !picked {
            // Xvfb writes the number once it takes clients; nothing (end of file) when it failed.
            let line = String(decoding: chosen.fileHandleForReading.availableData, as: UTF8.self)
            guard let taken = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
                throw HarnessError("Xvfb did not start (it said \(line.debugDescription))")
            }
            number = taken
            picked = true
        }
        // The socket shows before the server takes clients: a window manager started too early gives up.
        try waitUntil("Xvfb answers on \(display)") { (try? self.xprop("-root", "_NET_NUMBER_OF_DESKTOPS")) != nil }
        try waitUntil("openbox manages \(display)") {
            if self.manager?.isRunning != true { try self.startManager() }
            return ((try? self.xprop("-root", "_NET_NUMBER_OF_DESKTOPS")) ?? "").contains("= 2")
        }
    }

    private func startManager() throws {
        let manager = Process()
        manager.executableURL = URL(fileURLWithPath: "/usr/bin/openbox")
        manager.arguments = ["--config-file", configFile]
        manager.environment = environment
        manager.standardOutput = FileHandle.nullDevice
        manager.standardError = FileHandle.nullDevice
        try manager.run()
        self.manager = manager
    }

    /// SIGKILL the X server (openbox and every window go with it), and wait until both are gone.
    func kill() throws {
        for process in [server, manager].compactMap({ $0 }) where process.isRunning {
            Glibc.kill(process.processIdentifier, SIGKILL)
        }
        try waitUntil("the X server and openbox are gone") { self.server?.isRunning != true && self.manager?.isRunning != true }
        unlink("/tmp/.X11-unix/X\(number)")
        unlink("/tmp/.X\(number)-lock")
    }

    /// SIGSTOP the X server: it keeps its clients' connections and reads nothing from them until `resume()`.
    func pause() {
        if let server, server.isRunning { Glibc.kill(server.processIdentifier, SIGSTOP) }
    }

    func resume() {
        if let server, server.isRunning { Glibc.kill(server.processIdentifier, SIGCONT) }
    }

    /// How many windows openbox manages (the root's `_NET_CLIENT_LIST`).
    func clientCount() throws -> Int {
        let text = try xprop("-root", "_NET_CLIENT_LIST")
        guard let list = text.split(separator: "#", maxSplits: 1).dropFirst().first else { return 0 }
        return list.split(separator: ",").count
    }

    func stop() {
        resume()
        try? kill()
        unlink(configFile)
        if let authorityFile { unlink(authorityFile) }
    }

    @discardableResult
    func xdotool(_ arguments: String...) throws -> String {
        try HeadlessSway.run("/usr/bin/xdotool", arguments, environment: environment)
    }

    /// xprop with a bound: one that connects while Xvfb is still starting can wait for its setup reply for ever
    /// (seen once in a run), and a wait that retries must get an answer or an error.
    func xprop(_ arguments: String...) throws -> String {
        try HeadlessSway.run("/usr/bin/timeout", ["-k", "2", "10", "/usr/bin/xprop"] + arguments, environment: environment)
    }

    /// The window whose title is `title` (xterm -T, xlogo -title), once it shows up.
    func waitForWindow(_ title: String) throws -> String {
        var found: String?
        try waitUntil("a window titled \(title) appears") {
            found = (try? self.xdotool("search", "--name", "^\(title)$"))?.split(separator: "\n").first.map(String.init)
            return found != nil
        }
        return found!
    }

    func activeWindow() throws -> String { try xdotool("getactivewindow").trimmingCharacters(in: .whitespacesAndNewlines) }

    func currentDesktop() throws -> String { try xdotool("get_desktop").trimmingCharacters(in: .whitespacesAndNewlines) }

    /// Whether openbox minimized the window: `_NET_WM_STATE_HIDDEN` and ICCCM's Iconic state.
    func isIconic(_ window: String) throws -> Bool {
        let text = try xprop("-id", window, "_NET_WM_STATE", "WM_STATE")
        return text.contains("_NET_WM_STATE_HIDDEN") && text.contains("Iconic")
    }

    func waitUntil(_ what: String, timeout: Double = 30, _ condition: () throws -> Bool) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try condition() { return }
            usleep(20_000)
        }
        throw HarnessError("timed out waiting until \(what)")
    }
}
