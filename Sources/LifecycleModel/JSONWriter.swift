// JSON text written straight into bytes, for the values the daemon writes most: its state files (one per app,
// rewritten at every transition; Snapshot.swift) and, through LineCoder's fast path, its protocol messages.
//
// Why: callgrind on an app switch (bench/callgrind.sh) put the four state saves at 40% of the switch's
// instructions, nearly all of it the generic Encodable machinery (a container and a box per value, witness
// calls, keys sorted at run time) around some thirty keys per file. A writer that knows the keys writes them in
// order, with no intermediate values.
//
// The contract (checked against JSONEncoder by Tests/LifecycleDaemonTests/StateFileEncodingTests.swift,
// Tests/LifecycleProtocolTests/MessageJSONTests.swift and, for the generic path that writes through it too,
// LineCoderTests.swift): what is written here is byte for byte what JSONEncoder
// writes with [.sortedKeys, .withoutEscapingSlashes]: no spaces, keys in UTF-8 byte order, `"` `\` and the
// control characters escaped (\b \f \n \r \t, the others as \u00xx in lower case), everything else as its UTF-8
// bytes, and Doubles as their shortest round-tripping digits without a trailing ".0". A value JSON cannot hold
// (NaN, an infinity) throws, as JSONEncoder does.

/// A JSON text being written: scalars, `JSONValue`s, and the punctuation the callers spell out themselves
/// (`{"key":`, `,`, `}`), keys included in their sorted place.
public struct JSONWriter {
    /// Thrown for a number JSON cannot hold (NaN, an infinity).
    public struct Unrepresentable: Error, Equatable {}

    public var bytes: [UInt8]

    public init(bytes: [UInt8] = []) { self.bytes = bytes }

    /// Text written as it is: punctuation, and keys (which need no escape) with their quotes and colon.
    @inlinable
    public mutating func raw(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @inlinable
    public mutating func byte(_ byte: UInt8) { bytes.append(byte) }

    public mutating func null() { raw("null") }

    public mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    public mutating func integer(_ value: Int64) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        unsigned(value.magnitude)
    }

    /// Decimal digits, written in place (no String made for them).
    public mutating func unsigned(_ value: UInt64) {
        if value < 10 {
            bytes.append(UInt8(ascii: "0") + UInt8(value))
            return
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            var rest = value
            repeat {
                start -= 1
                digits[start] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start...]))
        }
    }

    /// JSONEncoder's Double: the shortest digits that read back the same (`description`), without a trailing ".0".
    public mutating func double(_ value: Double) throws(Unrepresentable) {
        guard value.isFinite else { throw Unrepresentable() }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        bytes.append(contentsOf: text.utf8)
    }

    /// A quoted string with JSONEncoder's escapes (`.withoutEscapingSlashes`): `"`, `\` and the control
    /// characters; every other byte of its UTF-8 as it is.
    public mutating func string(_ value: String) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            var start = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<index]))
                start = index + 1
                switch byte {
                case UInt8(ascii: "\""): raw("\\\"")
                case UInt8(ascii: "\\"): raw("\\\\")
                case 0x08: raw("\\b")
                case 0x0C: raw("\\f")
                case 0x0A: raw("\\n")
                case 0x0D: raw("\\r")
                case 0x09: raw("\\t")
                default:
                    let hex: StaticString = "0123456789abcdef"
                    raw("\\u00")
                    bytes.append(hex.utf8Start[Int(byte >> 4)])
                    bytes.append(hex.utf8Start[Int(byte & 0xF)])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<utf8.count]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// `[` the elements `]`, each written by `element`.
    @inlinable
    public mutating func array<Element, E: Error>(_ elements: some Sequence<Element>,
                                                  _ element: (inout JSONWriter, Element) throws(E) -> Void) throws(E) {
        bytes.append(UInt8(ascii: "["))
        var first = true
        for item in elements {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            try element(&self, item)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    public mutating func strings(_ elements: [String]) {
        array(elements) { writer, text in writer.string(text) }
    }

    /// A JSON value as its `Encodable` conformance encodes it: whole numbers below 9e15 as integers, object
    /// members in the UTF-8 order of their keys.
    public mutating func value(_ value: JSONValue) throws(Unrepresentable) {
        switch value {
        case .null: null()
        case .bool(let flag): bool(flag)
        case .number(let number):
            if number == number.rounded(), abs(number) < 9.0e15 { integer(Int64(number)) } else { try double(number) }
        case .string(let text): string(text)
        case .array(let items): try array(items) { (writer, item) throws(Unrepresentable) in try writer.value(item) }
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (position, member) in members.sorted(by: { Self.precedesInUTF8($0.key, $1.key) }).enumerated() {
                if position > 0 { bytes.append(UInt8(ascii: ",")) }
                string(member.key)
                bytes.append(UInt8(ascii: ":"))
                try self.value(member.value)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    /// Whether `x` sorts before `y` by their UTF-8 bytes: JSONEncoder's `.sortedKeys` order (String's own `<`
    /// compares canonically equivalent forms, not bytes).
    public static func precedesInUTF8(_ x: String, _ y: String) -> Bool {
        var x = x, y = y
        return x.withUTF8 { a in
            y.withUTF8 { b in
                let common = min(a.count, b.count)
                var index = 0
                while index < common {
                    if a[index] != b[index] { return a[index] < b[index] }
                    index += 1
                }
                return a.count < b.count
            }
        }
    }
}
