import Foundation
import LifecycleModel
import LifecycleProtocol

/// One input of the protocol fuzzer (`fuzz-protocol`, and the regression tests): the bytes a peer could send.
///
/// The first byte picks the framer's limit and how the rest is split into reads; the rest goes through a
/// `LineFramer` as the daemon's connections feed it, and every line it yields is decoded as each message type
/// of both sockets. Crashes are what libFuzzer looks for; the checks below turn a wrong answer into one too:
/// - the framer gives back exactly the input's lines, in order, none over its limit, and refuses only a line
///   that is over it;
/// - `LineCoder.decode` (the hand readers of the hot messages, then JSONDecoder) answers what Foundation's
///   JSONDecoder answers: the same value, or a failure. One difference is known and tolerated
///   (`knownDifferences`): JSONDecoder refuses some valid JSON that the hand readers read (a number like `0e3`,
///   RFC 8259's `int exp` with a zero); where JSONSerialization, Foundation's other parser, reads the line to the
///   same JSON, the hand reader is right;
/// - a decoded value encodes through `LineCoder.encode` to the bytes JSONEncoder writes, on one line, and decodes
///   back to the same value;
/// - a failure's message for the client is short and non-empty.
public enum ProtocolFuzz {
    /// Bounds the work per input, so that a fuzzer's time goes to variety rather than to one huge input.
    static let maxLinesDecoded = 64

    /// What one input showed: broken checks (`failures`, a bug), and tolerated differences from JSONDecoder.
    public struct Findings: Sendable {
        public var failures: [String] = []
        public var knownDifferences: [String] = []
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
        // Each type through its own LineCoder overloads (the hand-written readers and writers of the hot messages),
        // named here where the type is known.
        for line in lines.prefix(maxLinesDecoded) {
            check(line, { try coder.decode(ClientMessage.self, from: $0) }, { coder.encode($0) }, &findings)
            check(line, { try coder.decode(ServerMessage.self, from: $0) }, { coder.encode($0) }, &findings)
            check(line, { try coder.decode(ControlRequest.self, from: $0) }, { coder.encode($0) }, &findings)
            check(line, { try coder.decode(ControlReply.self, from: $0) }, { coder.encode($0) }, &findings)
            check(line, { try coder.decode(JSONValue.self, from: $0) }, { coder.encode($0) }, &findings)
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

    static func check<T: Codable & Equatable>(_ line: [UInt8], _ decode: ([UInt8]) throws -> T, _ encode: (T) -> [UInt8],
                                              _ findings: inout Findings) {
        let type = T.self
        func require(_ condition: Bool, _ message: @autoclosure () -> String) {
            if !condition { findings.failures.append(message()) }
        }
        let reference: T?
        do {
            reference = try JSONDecoder().decode(type, from: Data(line))
        } catch {
            reference = nil
            let message = ProtocolError(decoding: error, line: line).message
            require(!message.isEmpty && message.utf8.count <= 1024, "an unusable error message: \(message.utf8.count) bytes")
        }
        let decoded = try? decode(line)
        if let decoded, reference == nil, readsAsTheSameJSON(line, decoded) {
            findings.knownDifferences.append("LineCoder reads valid JSON that JSONDecoder refuses, as \(type): \(preview(line))")
            return
        }
        require(decoded == reference,
                "LineCoder decoded \(String(describing: decoded)) where JSONDecoder decoded \(String(describing: reference)) as \(type)")
        guard let value = reference else { return }

        let encoded = encode(value)
        let referenceEncoder = JSONEncoder()
        referenceEncoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if let foundation = try? referenceEncoder.encode(value) {
            require(encoded == [UInt8](foundation) + [UInt8(ascii: "\n")], "LineCoder's bytes differ from JSONEncoder's for \(type)")
        }
        require(encoded.last == UInt8(ascii: "\n") && !encoded.dropLast().contains(UInt8(ascii: "\n")), "an encoded message spans lines")
        let again = try? JSONDecoder().decode(type, from: Data(encoded.dropLast()))
        require(again == value, "\(type) does not survive encoding: \(value) came back as \(String(describing: again))")
    }
}

/// The start of a line, for a finding's message.
func preview(_ line: [UInt8]) -> String {
    let text = String(decoding: line.prefix(80), as: UTF8.self)
    return line.count > 80 ? "'\(text)…'" : "'\(text)'"
}

/// Whether JSONSerialization reads `line` as the JSON that `value` encodes to: then `line` is valid JSON that
/// means `value`, whatever JSONDecoder says.
func readsAsTheSameJSON(_ line: [UInt8], _ value: some Encodable) -> Bool {
    func normalized(_ json: Data) -> Data? {
        guard let object = try? JSONSerialization.jsonObject(with: json, options: [.fragmentsAllowed]) else { return nil }
        return try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed])
    }
    guard let encoded = try? JSONEncoder().encode(value), let read = normalized(Data(line)) else { return false }
    return read == normalized(encoded)
}
