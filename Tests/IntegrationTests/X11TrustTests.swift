import Foundation
import Glibc
import Testing

/// A process of the test user bound at a display's abstract socket `@/tmp/.X11-unix/XN`, as any user may while no X
/// server holds that name. It either listens and never accepts, or accepts and never answers; each connection it
/// accepts is a line in `acceptedFile`.
final class X11Squatter {
    enum Mode: String, Sendable { case neverAccepts = "listen", neverAnswers = "accept" }
    let number: Int
    let process: Process
    let acceptedFile: String
    var socketName: String { "@/tmp/.X11-unix/X\(number)" }

    init(_ mode: Mode, tag: String, uid: uid_t, gid: gid_t) throws {
        acceptedFile = "/tmp/lifecycled-squatter-\(tag)"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        // Another user may not enter the test's working directory (a checkout under a private directory).
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        process.arguments = ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--", "/usr/bin/python3", "-c", """
            import errno, os, socket, sys, time
            mode, accepted = sys.argv[1], sys.argv[2]
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            # A display number no X server and no other test holds: neither its file nor its abstract name is taken.
            for number in range(600, 1000):
                if os.path.exists("/tmp/.X11-unix/X%d" % number):
                    continue
                try:
                    server.bind("\\0/tmp/.X11-unix/X%d" % number)
                    break
                except OSError as error:
                    if error.errno != errno.EADDRINUSE:
                        raise
            else:
                sys.exit("no free display number")
            server.listen(64)
            print(number, flush=True)
            held = []
            while True:
                if mode == "accept":
                    held.append(server.accept()[0])
                    with open(accepted, "a") as log:
                        log.write("accepted\\n")
                else:
                    time.sleep(3600)
            """, mode.rawValue, acceptedFile]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        self.process = process
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard let number = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw HarnessError("the squatter did not bind a display (it said \(line.debugDescription))")
        }
        self.number = number
    }

    /// The connections the squatter accepted, or (never accepting) those waiting in its backlog, as `ss` shows them.
    var connections: Int {
        if let text = try? String(contentsOfFile: acceptedFile, encoding: .utf8), !text.isEmpty {
            return text.split(separator: "\n").count
        }
        let listing = (try? HeadlessSway.run("/usr/bin/ss", ["-xlH", "src", socketName])) ?? ""
        return listing.split(separator: " ", omittingEmptySubsequences: true).dropFirst(2).first.flatMap { Int($0) } ?? 0
    }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        unlink(acceptedFile)
    }
}

/// Whose X server the daemon follows, and a peer at the display's socket that never accepts or never answers: the
/// loop goes on (lifectl is answered, SIGTERM stops the daemon), the listener's uid is checked at every connect, and
/// the cookie of `$XAUTHORITY` opens a server that asks for one.
@Suite("Display: whose X server, and an X peer that never answers", .serialized)
struct X11TrustTests {
    /// A root daemon with `Source=x11` on the squatted display, with `extra` config; `body` runs while it serves.
    func withSquatter(_ mode: X11Squatter.Mode, extra: String = "",
                      _ body: (DaemonHarness, X11Squatter, uid_t) throws -> Void) throws {
        let harness = try DaemonHarness()
        let user = try HeadlessSway.testUser()
        let squatter = try X11Squatter(mode, tag: harness.tag, uid: user.uid, gid: user.gid)
        defer {
            harness.stop()
            squatter.stop()
        }
        try harness.daemonConfig("[Display]\nSource=x11\nX11Display=:\(squatter.number)\n" + extra)
        try harness.start()
        try body(harness, squatter, user.uid)
        // The loop still serves, and SIGTERM still stops the daemon.
        let status = try harness.lifectl("--timeout", "10", "status")
        #expect(status.status == 0, "lifectl must be answered: \(status.stderr)")
        #expect(status.stdout.contains("x11 at :\(squatter.number), reconnecting"))
        let pid = try #require(harness.daemonPID)
        kill(pid, SIGTERM)
        try harness.waitUntil("the daemon stops on SIGTERM") { !harness.isDaemonRunning }
    }

    func refusals(_ harness: DaemonHarness, _ squatter: X11Squatter, uid: uid_t) -> Int {
        let line = "the X socket \(squatter.socketName) is served by uid \(uid) (pid \(squatter.process.processIdentifier))"
        return harness.log.components(separatedBy: line).count - 1
    }

    @Test("another user's squatter that never accepts, or accepts and never answers, is refused for its uid, logged once, and blocks nothing",
          .timeLimit(.minutes(5)), arguments: [X11Squatter.Mode.neverAccepts, .neverAnswers])
    func anotherUsersSquatterIsRefused(mode: X11Squatter.Mode) throws {
        try withSquatter(mode) { harness, squatter, uid in
            try harness.waitUntil("the squatter is refused for its uid") { refusals(harness, squatter, uid: uid) >= 1 }
            // Every reconnect checks again, and the same listener is not logged again.
            try harness.waitUntil("the daemon tried three times", timeout: 30) { squatter.connections >= 3 }
            #expect(refusals(harness, squatter, uid: uid) == 1)
            #expect(!harness.log.contains("display: following the X server"))
        }
    }

    @Test("an expected owner's peer that accepts and never answers the setup is given up after a while and tried again",
          .timeLimit(.minutes(5)))
    func aPeerThatNeverAnswersTheSetupIsGivenUp() throws {
        // [Adopt] User= makes the test user an expected owner: the setup exchange starts, and the peer never answers.
        try withSquatter(.neverAnswers, extra: "\n[Adopt]\nUser=\(HeadlessSway.user)\n") { harness, squatter, uid in
            try harness.waitUntil("the silent setup is given up", timeout: 30) {
                harness.log.contains("the X server at \(squatter.socketName) did not answer the connection setup within")
            }
            try harness.waitUntil("the daemon tries again", timeout: 30) { squatter.connections >= 2 }
            #expect(refusals(harness, squatter, uid: uid) == 0)
        }
    }

    /// An X client with `count` plain windows, through libxcb from Python's ctypes (no toolkit).
    static let manyWindows = """
        import ctypes, sys, time
        xcb = ctypes.CDLL("libxcb.so.1")
        class Iterator(ctypes.Structure):
            _fields_ = [("data", ctypes.POINTER(ctypes.c_uint32)), ("rem", ctypes.c_int), ("index", ctypes.c_int)]
        xcb.xcb_connect.restype = ctypes.c_void_p
        xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
        xcb.xcb_get_setup.restype = ctypes.c_void_p
        xcb.xcb_get_setup.argtypes = [ctypes.c_void_p]
        xcb.xcb_setup_roots_iterator.restype = Iterator
        xcb.xcb_setup_roots_iterator.argtypes = [ctypes.c_void_p]
        xcb.xcb_generate_id.restype = ctypes.c_uint32
        xcb.xcb_generate_id.argtypes = [ctypes.c_void_p]
        u8, u16, u32 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32
        xcb.xcb_create_window.argtypes = [ctypes.c_void_p, u8, u32, u32, ctypes.c_int16, ctypes.c_int16, u16, u16, u16, u16,
                                          u32, u32, ctypes.c_void_p]
        xcb.xcb_map_window.argtypes = [ctypes.c_void_p, u32]
        xcb.xcb_flush.argtypes = [ctypes.c_void_p]
        connection = xcb.xcb_connect(None, None)
        root = xcb.xcb_setup_roots_iterator(xcb.xcb_get_setup(connection)).data[0]
        for _ in range(int(sys.argv[1])):
            window = xcb.xcb_generate_id(connection)
            xcb.xcb_create_window(connection, 0, window, root, 0, 0, 40, 40, 0, 1, 0, 0, None)
            xcb.xcb_map_window(connection, window)
        xcb.xcb_flush(connection)
        while True:
            time.sleep(3600)
        """

    @Test("a stopped X server never holds the loop: hiding hundreds of windows while it reads nothing, lifectl is answered; once it runs again the daemon follows it",
          .timeLimit(.minutes(5)))
    func aStoppedXServerNeverBlocksTheLoop() throws {
        let harness = try DaemonHarness()
        let x = try XvfbOpenbox(tag: harness.tag)
        let program = "/tmp/lifecycled-many-windows-\(harness.tag).py"
        defer {
            x.resume()
            harness.stop()
            x.stop()
            unlink(program)
        }
        // More hides than a Unix socket's send buffer holds while nobody reads (a few hundred small writes).
        let count = 600
        try Self.manyWindows.write(toFile: program, atomically: true, encoding: .utf8)
        try harness.app("many", "[App]\nEnvironment=DISPLAY=\(x.display)\nExec=/usr/bin/python3 \(program) \(count)\nProtocol=none\n\n"
            + "[Lifecycle]\nBackgroundTimeSec=infinity\nTimeoutStopSec=3\n")
        try harness.app("logo", "[App]\nEnvironment=DISPLAY=\(x.display)\nExec=/usr/bin/xlogo -title logo-\(harness.tag)\nProtocol=none\n\n"
            + "[Lifecycle]\nBackgroundTimeSec=infinity\nTimeoutStopSec=3\n")
        try harness.daemonConfig("[Display]\nSource=x11\nX11Display=\(x.display)\n")
        try harness.start()
        try harness.waitUntil("the daemon follows the X server") { harness.log.contains("display: following the X server \(x.display)") }
        try harness.control("launch", "many")
        try x.waitUntil("openbox manages every window", timeout: 60) { (try? x.clientCount()) == count }
        // A window that comes after all of them and takes the focus: once its app is active, the daemon's picture
        // holds every window of the first app, shown and without the focus.
        try harness.control("launch", "logo")
        _ = try x.waitForWindow("logo-\(harness.tag)")
        try harness.waitForState("logo", "active")
        try harness.waitForState("many", "inactive")

        x.pause()
        let background = try harness.startLifectl("background", "many")
        defer { if background.isRunning { kill(background.processIdentifier, SIGKILL) } }
        // The request may reach the daemon after the first of these: each must be answered.
        for verb in ["status", "list", "status"] {
            let answer = try harness.lifectl("--timeout", "20", verb)
            #expect(answer.status == 0, "lifectl \(verb) must be answered while the X server reads nothing: \(answer.stderr)")
        }

        // Running again, the server takes the hides and the daemon follows: every window minimized, the app in the
        // background.
        x.resume()
        try harness.waitForState("many", "background", timeout: 60)
        try harness.waitUntil("the daemon is answered by the X server again") {
            (try? harness.lifectl("--timeout", "20", "status").stdout.contains("x11 at \(x.display), connected")) == true
        }
        try harness.control("focus", "many")
        try harness.waitForState("many", "active")
    }

    @Test("a root daemon follows an Xvfb that asks for a cookie, with the one $XAUTHORITY names", .timeLimit(.minutes(5)))
    func theCookieOfXauthorityOpensTheServer() throws {
        let harness = try DaemonHarness()
        let x = try XvfbOpenbox(tag: harness.tag, authority: true)
        defer {
            harness.stop()
            x.stop()
        }
        let authority = try #require(x.authorityFile)
        // The server refuses a client without the cookie: what follows proves the daemon sent it.
        #expect(throws: (any Error).self) {
            try HeadlessSway.run("/usr/bin/xprop", ["-root", "_NET_NUMBER_OF_DESKTOPS"],
                                 environment: x.environment.merging(["XAUTHORITY": "/dev/null"]) { $1 })
        }
        let python = DaemonHarness.pythonClient
        try harness.app("a", "[App]\nEnvironment=DISPLAY=\(x.display) XAUTHORITY=\(authority)\n"
            + "Exec=/bin/sh -c \"xterm -T a-\(harness.tag) -e sleep 100000 & exec \(python)\"\n\n"
            + "[Lifecycle]\nBackgroundTimeSec=infinity\nTimeoutStopSec=3\n")
        try harness.daemonConfig("[Display]\nSource=x11\nX11Display=\(x.display)\n")
        try harness.start(extraEnvironment: ["XAUTHORITY": authority])
        try harness.waitUntil("the daemon follows the X server") { harness.log.contains("display: following the X server \(x.display)") }
        try harness.control("launch", "a")
        _ = try x.waitForWindow("a-\(harness.tag)")
        try harness.waitForState("a", "active")
        #expect(try harness.lifectl("status").stdout.contains("x11 at \(x.display), connected"))
    }
}
