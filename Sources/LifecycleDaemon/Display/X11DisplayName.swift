/// A local X display as `DISPLAY` names it, read as libxcb reads it (`xcb_parse_display`): `[unix/][unix]:N[.S]`.
/// Unlike libxcb, a failed Unix socket never falls back to TCP on localhost.
/// Only local displays are followed: a TCP display (`host:N`, `tcp/host:N`) offers no peer credentials, so nothing
/// would vouch for whose server it is, and a root daemon must not follow a remote display. libxcb on Linux takes no
/// `/path/to/socket` form (that is macOS's launchd), and neither does the daemon.
struct X11DisplayName: Equatable, Sendable {
    let display: Int32
    let screen: Int32

    enum ParseError: Error, Equatable, CustomStringConvertible {
        case malformed(String)
        case remote(String)

        var description: String {
            switch self {
            case .malformed(let name): "\(name.debugDescription) is not an X display name ([unix]:N[.S])"
            case .remote(let name): "\(name.debugDescription) is not a local display: the daemon follows only an X "
                + "server on this machine's Unix socket (:N), whose owner the kernel vouches for"
            }
        }
    }

    init(_ name: String) throws(ParseError) {
        var rest = Substring(name)
        var unixProtocol = false
        if let slash = rest.lastIndex(of: "/") {
            guard rest[..<slash] == "unix" else { throw rest.contains(":") ? .remote(name) : .malformed(name) }
            rest = rest[rest.index(after: slash)...]
            unixProtocol = true
        }
        guard let colon = rest.lastIndex(of: ":") else { throw .malformed(name) }
        let host = rest[..<colon]
        let numbers = rest[rest.index(after: colon)...].split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let display = numbers.first.flatMap(Self.number) else { throw .malformed(name) }
        let screen = numbers.count > 1 ? Self.number(numbers[1]) : 0
        guard let screen else { throw .malformed(name) }
        // libxcb takes the Unix socket for `unix/` whatever the host, and for an empty host or `unix`.
        guard unixProtocol || host.isEmpty || host == "unix" else { throw .remote(name) }
        self.display = display
        self.screen = screen
    }

    private static func number(_ text: Substring) -> Int32? {
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int32(text)
    }

    /// Where the server listens, in the order libxcb tries them: the abstract socket (no file guards its name), then
    /// the file under /tmp/.X11-unix. The second is tried only when the first is not there (`ENOENT`, `ECONNREFUSED`).
    var socketPath: String { "/tmp/.X11-unix/X\(display)" }
}
