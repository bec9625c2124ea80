import LifecycleModel
import LifecycleProtocol

/// One input of the protocol fuzzer (`fuzz-protocol`, and the regression tests): the bytes a peer could send.
///
/// The first byte picks the framer's limit and how the rest is split into reads; the rest goes through a
/// `LineFramer` as the daemon's connections feed it, and every line it yields is decoded as each message type
/// of both sockets. Crashes are what libFuzzer looks for; the checks below turn a wrong answer into one too:
/// - the framer gives back exactly the input's lines, in order, none over its limit, and refuses only a line
///   that is over it;
/// - a line `LineCoder.decode` reads as a value encodes to one line, which reads back as the same value and
///   encodes to the same bytes again;
/// - a line it refuses gets a message for the client that is short and non-empty.
public enum ProtocolFuzz {
    /// Bounds the work per input, so that a fuzzer's time goes to variety rather than to one huge input.
    static let maxLinesDecoded = 64

    /// What one input showed: broken checks (`failures`, a bug).
    public struct Findings: Sendable {
        public var failures: [String] = []
    }

    /// The fuzzers' entry: a broken check crashes, so that libFuzzer keeps the input.
    public static func run(_ data: UnsafeBufferPointer<UInt8>) {
        let findings = check(data)
        if !findings.failures.isEmpty { fatalError("fuzz check failed: " + findings.failures.joined(separator: "; ")) }
    }

    public static func check(_ data: UnsafeBufferPointer<UInt8>) -> Findings {
        var findings = Findings()
        guard let control = data.first else { return findings }
        let input = Array(data.dropFirst())
        // Small limits reach the too-long path with small inputs; 0 means the protocol's own.
        let limit = control & 0x80 != 0 ? Int(control & 0x3f) + 1 : maxLineLength
        let chunk = Int(control & 0x0f) + 1
        var framer = LineFramer(limit: limit)
        var lines: [[UInt8]] = []
        var fed = 0
        var failed = false
        feeding: while fed < input.count {
            let end = min(input.count, fed + chunk)
            framer.append(input[fed..<end])
            fed = end
            while true {
                do {
                    guard let line = try framer.nextLine() else { break }
                    lines.append(line)
                } catch {
                    failed = true
                    break feeding
                }
            }
        }
        checkFraming(input: input, fed: fed, lines: lines, failed: failed, limit: limit, &findings)
        let coder = LineCoder()
        for line in lines.prefix(maxLinesDecoded) {
            check(line, { (line) throws(ProtocolError) in try coder.decode(ClientMessage.self, from: line) }, { coder.encode($0) }, &findings)
            check(line, { (line) throws(ProtocolError) in try coder.decode(ServerMessage.self, from: line) }, { coder.encode($0) }, &findings)
            check(line, { (line) throws(ProtocolError) in try coder.decode(ControlRequest.self, from: line) }, { coder.encode($0) }, &findings)
            check(line, { (line) throws(ProtocolError) in try coder.decode(ControlReply.self, from: line) }, { coder.encode($0) }, &findings)
            check(line, { (line) throws(ProtocolError) in try coder.decode(JSONValue.self, from: line) }, { coder.encode($0) }, &findings)
        }
        return findings
    }

    static func checkFraming(input: [UInt8], fed: Int, lines: [[UInt8]], failed: Bool, limit: Int, _ findings: inout Findings) {
        func require(_ condition: Bool, _ message: @autoclosure () -> String) {
            if !condition { findings.failures.append(message()) }
        }
        var expected: [[UInt8]] = []
        var start = 0
        for index in 0..<fed where input[index] == UInt8(ascii: "\n") {
            expected.append(Array(input[start..<index]))
            start = index + 1
        }
        // Up to a failure, the lines are the input's; the failure is a line (complete or not) over the limit.
        let count = lines.count
        require(count <= expected.count, "the framer made up a line")
        require(Array(expected.prefix(count)) == lines, "the framer's lines differ from the input's")
        require(lines.allSatisfy { $0.count <= limit }, "a line over the limit was given out")
        if failed {
            let next = count < expected.count ? expected[count].count : fed - start
            require(next > limit, "a line of \(next) bytes was refused with a limit of \(limit)")
        } else {
            require(count == expected.count, "a complete line was not given out")
            require(fed - start <= limit, "a partial line over the limit was kept")
        }
    }

    static func check<T: JSONReadable & JSONWritable & Equatable>(_ line: [UInt8], _ decode: ([UInt8]) throws(ProtocolError) -> T,
                                                                 _ encode: (T) -> [UInt8], _ findings: inout Findings) {
        let type = T.self
        func require(_ condition: Bool, _ message: @autoclosure () -> String) {
            if !condition { findings.failures.append(message()) }
        }
        let value: T
        do {
            value = try decode(line)
        } catch {
            require(!error.message.isEmpty && error.message.utf8.count <= 1024, "an unusable error message: \(error.message.utf8.count) bytes")
            return
        }
        let encoded = encode(value)
        require(encoded.last == UInt8(ascii: "\n") && !encoded.dropLast().contains(UInt8(ascii: "\n")), "an encoded message spans lines")
        let again = try? decode(Array(encoded.dropLast()))
        require(again == value, "\(type) does not survive encoding: \(value) came back as \(String(describing: again))")
        if let again { require(encode(again) == encoded, "\(type) is not written the same way twice: \(preview(encoded))") }
    }
}

/// The start of a line, for a finding's message.
func preview(_ line: [UInt8]) -> String {
    let text = String(decoding: line.prefix(80), as: UTF8.self)
    return line.count > 80 ? "'\(text)…'" : "'\(text)'"
}
