import Testing
@testable import LifecycleDaemon

/// `X11Display=` (and `$DISPLAY`) read as libxcb reads it, local forms only: the forms libxcb 1.15 takes for a Unix
/// socket are followed, a TCP display is refused, and what libxcb cannot parse is an error too.
@Suite struct DisplayX11NameTests {
    @Test(arguments: [(":0", 0, 0), (":12", 12, 0), (":3.1", 3, 1), ("unix:7", 7, 0), ("unix:7.2", 7, 2),
                      ("unix/:5", 5, 0), ("unix/unix:5.1", 5, 1), ("unix/somehost:4", 4, 0)])
    func localFormsNameTheDisplayAndScreen(name: String, display: Int32, screen: Int32) throws {
        let parsed = try X11DisplayName(name)
        #expect(parsed.display == display)
        #expect(parsed.screen == screen)
        #expect(parsed.socketPath == "/tmp/.X11-unix/X\(display)")
    }

    @Test(arguments: ["localhost:0", "example.org:1.0", "tcp/localhost:0", "inet6/::1:0", "[::1]:0", "host::0"])
    func tcpDisplaysAreRefused(name: String) {
        #expect(throws: X11DisplayName.ParseError.remote(name)) { try X11DisplayName(name) }
    }

    @Test(arguments: ["", "0", ":", ":x", ":1.", ":1.x", ":1.2.3", ": 1", ":-1", ":+1", "/tmp/.X11-unix/X0",
                      "/tmp/.X11-unix/X0.1", ":99999999999"])
    func malformedNamesAreErrors(name: String) {
        #expect(throws: X11DisplayName.ParseError.malformed(name)) { try X11DisplayName(name) }
    }
}
