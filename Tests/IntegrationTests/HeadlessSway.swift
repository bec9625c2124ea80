import Foundation
import Glibc

/// A headless sway for the display tests, run as an unprivileged user (sway refuses root) with its own runtime
/// directory. Its IPC socket is reached through a fixed link (`socketLink`) that follows sway across restarts;
/// `swaymsg` runs as that user too. Apps' windows come from `foot`, which the daemon's apps start themselves.
final class HeadlessSway {
    static let user = "lifecycled-test"
    let uid: uid_t
    let gid: gid_t
    let runtimeDirectory: String
    let configFile: String
    /// A symlink to the current sway's IPC socket (the name of which carries sway's pid).
    var socketLink: String { runtimeDirectory + "/sway.sock" }
    let waylandDisplay = "wayland-1"
    private var process: Process?

    /// Installs sway and foot through apt when missing, as `make deps` does for libsystemd-dev.
    static func installIfMissing() throws {
        guard access("/usr/bin/sway", X_OK) != 0 || access("/usr/bin/foot", X_OK) != 0 else { return }
        try run("/bin/sh", ["-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sway foot >/dev/null"])
    }

    @discardableResult
    static func run(_ program: String, _ arguments: [String], environment: [String: String]? = nil) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw HarnessError("\(program) \(arguments.joined(separator: " ")) exited with \(process.terminationStatus)")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// The unprivileged user the tests run processes as (made when missing): its uid and gid.
    static func testUser() throws -> (uid: uid_t, gid: gid_t) {
        if getpwnam(user) == nil {
            try run("/usr/sbin/useradd", ["-r", "-M", "-s", "/usr/sbin/nologin", user])
        }
        guard let entry = getpwnam(user) else { throw HarnessError("no user \(user)") }
        return (entry.pointee.pw_uid, entry.pointee.pw_gid)
    }

    init(tag: String) throws {
        try Self.installIfMissing()
        (uid, gid) = try Self.testUser()
        runtimeDirectory = "/tmp/lifecycled-sway-\(tag)"
        configFile = runtimeDirectory + ".conf"
        mkdir(runtimeDirectory, 0o700)
        chown(runtimeDirectory, uid, gid)
        chmod(runtimeDirectory, 0o700)
        try "output HEADLESS-1 resolution 1280x720\n".write(toFile: configFile, atomically: true, encoding: .utf8)
        chmod(configFile, 0o644)
        try start()
    }

    /// The environment of a program run as the sway user.
    private var userEnvironment: [String: String] {
        ["XDG_RUNTIME_DIR": runtimeDirectory, "WAYLAND_DISPLAY": waylandDisplay, "SWAYSOCK": socketLink,
         "PATH": "/usr/bin:/bin", "HOME": runtimeDirectory]
    }

    /// The environment an app needs to open a window on this sway (as root: root may use the user's socket).
    var appEnvironment: String { "Environment=XDG_RUNTIME_DIR=\(runtimeDirectory) WAYLAND_DISPLAY=\(waylandDisplay)\n" }

    func start() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        // Another user may not enter the test's working directory (a checkout under a private directory).
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        process.arguments = ["--reuid=\(uid)", "--regid=\(gid)", "--init-groups", "/usr/bin/sway", "-c", configFile]
        var environment = userEnvironment
        environment["WLR_BACKENDS"] = "headless"
        environment["WLR_RENDERER"] = "pixman"
        environment["WLR_LIBINPUT_NO_DEVICES"] = "1"
        environment.removeValue(forKey: "SWAYSOCK")
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        let pid = process.processIdentifier
        let socket = "\(runtimeDirectory)/sway-ipc.\(uid).\(pid).sock"
        try waitUntil("sway's socket appears") { access(socket, F_OK) == 0 }
        unlink(socketLink)
        symlink(socket, socketLink)
        try waitUntil("sway answers") { (try? self.msg("-t", "get_version")) != nil }
    }

    /// SIGKILL sway and wait until it is gone (its clients lose their display).
    func kill() throws {
        guard let process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        try waitUntil("sway is gone") { !process.isRunning }
        unlink("\(runtimeDirectory)/sway-ipc.\(uid).\(process.processIdentifier).sock")
        unlink("\(runtimeDirectory)/\(waylandDisplay)")
        unlink("\(runtimeDirectory)/\(waylandDisplay).lock")
    }

    func stop() {
        try? kill()
        unlink(socketLink)
        try? FileManager.default.removeItem(atPath: runtimeDirectory)
        unlink(configFile)
    }

    /// swaymsg, as the sway user.
    @discardableResult
    func msg(_ arguments: String...) throws -> String {
        try Self.run("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(gid)", "--init-groups", "/usr/bin/swaymsg"] + arguments,
                     environment: userEnvironment)
    }

    struct View {
        var id: Int
        var appID: String
        var pid: Int32
        var visible: Bool
        var focused: Bool
    }

    /// Every view in sway's tree.
    func views() throws -> [View] {
        let tree = try JSONSerialization.jsonObject(with: Data(try msg("-t", "get_tree").utf8))
        var views: [View] = []
        var stack: [Any] = [tree]
        while let node = stack.popLast() as? [String: Any] {
            if let pid = node["pid"] as? Int, let id = node["id"] as? Int {
                views.append(View(id: id, appID: node["app_id"] as? String ?? "", pid: Int32(pid),
                                  visible: node["visible"] as? Bool ?? false, focused: node["focused"] as? Bool ?? false))
            }
            stack += (node["nodes"] as? [Any] ?? []) + (node["floating_nodes"] as? [Any] ?? [])
        }
        return views
    }

    func view(_ appID: String) throws -> View? { try views().first { $0.appID == appID } }

    func waitForView(_ appID: String) throws -> View {
        var found: View?
        try waitUntil("a window of \(appID) shows") {
            found = try? self.view(appID)
            return found != nil
        }
        return found!
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
