// JSON text written straight into bytes, for the values the daemon writes most: the state files (StateFileJSON.swift)
// and the messages of an app switch and a status query (MessageWriters.swift).
//
// The contract: what is written here is byte for byte what JSONEncoder writes with [.sortedKeys,
// .withoutEscapingSlashes]: no spaces, keys in UTF-8 byte order, `"` `\` and the control characters escaped
// (\b \f \n \r \t, the others as \u00xx in lower case), everything else as its UTF-8 bytes, and Doubles as their
// shortest round-tripping digits without a trailing ".0". A value JSON cannot hold (NaN, an infinity) throws, as
// JSONEncoder does. The tests of each hand-written type compare its bytes with JSONEncoder's.

import LifecycleModel

/// A JSON text being written: scalars, `JSONValue`s, and the punctuation the callers spell out themselves
/// (`{"key":`, `,`, `}`), keys included in their sorted place.
///
/// The text goes into a buffer of its own rather than an Array, so that appending a key literal is one copy.
/// Noncopyable, so that the buffer has one owner, freed when the writer ends; `bytes` gives the text as an Array.
public struct JSONWriter: ~Copyable {
    /// Thrown for a number JSON cannot hold (NaN, an infinity).
    public struct Unrepresentable: Error, Equatable {}

    @usableFromInline var start: UnsafeMutablePointer<UInt8>
    @usableFromInline var capacity: Int
    @usableFromInline var count = 0

    /// `capacity`: the bytes expected (the buffer grows past it as needed).
    public init(capacity: Int = 256) {
        self.capacity = max(16, capacity)
        start = .allocate(capacity: self.capacity)
    }

    deinit { start.deallocate() }

    /// What was written.
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: start, count: count)) }

    /// Room for `extra` more bytes.
    @inlinable
    mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(extra) }
    }

    @usableFromInline
    mutating func grow(_ extra: Int) {
        let larger = max(capacity * 2, count + extra)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: larger)
        moved.initialize(from: start, count: count)
        start.deallocate()
        start = moved
        capacity = larger
    }

    @inlinable
    mutating func append(_ source: UnsafePointer<UInt8>, count length: Int) {
        reserve(length)
        (start + count).initialize(from: source, count: length)
        count += length
    }

    /// Text written as it is: punctuation, and keys (which need no escape) with their quotes and colon.
    @inlinable
    public mutating func raw(_ text: StaticString) {
        append(text.utf8Start, count: text.utf8CodeUnitCount)
    }

    @inlinable
    public mutating func byte(_ byte: UInt8) {
        reserve(1)
        start[count] = byte
        count += 1
    }

    /// Bytes written as they are (number text already formatted).
    public mutating func utf8(_ text: String) {
        var text = text
        text.withUTF8 { utf8 in
            guard let base = utf8.baseAddress else { return }
            append(base, count: utf8.count)
        }
    }

    public mutating func null() { raw("null") }

    public mutating func bool(_ value: Bool) {
        if value { raw("true") } else { raw("false") }
    }

    public mutating func integer(_ value: Int64) {
        if value < 0 { byte(UInt8(ascii: "-")) }
        unsigned(value.magnitude)
    }

    /// Decimal digits, written in place (no String made for them).
    public mutating func unsigned(_ value: UInt64) {
        var digits = 1
        var rest = value / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        reserve(digits)
        var position = count + digits
        rest = value
        repeat {
            position -= 1
            start[position] = UInt8(ascii: "0") + UInt8(rest % 10)
            rest /= 10
        } while rest > 0
        count += digits
    }

    /// JSONEncoder's Double: the shortest digits that read back the same (`description`), without a trailing ".0".
    public mutating func double(_ value: Double) throws(Unrepresentable) {
        guard value.isFinite else { throw Unrepresentable() }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        utf8(text)
    }

    /// `key` (with its punctuation: `,"name":`) and the string; nothing for nil, as `encodeIfPresent` leaves it out.
    public mutating func member(_ key: StaticString, _ value: String?) {
        guard let value else { return }
        raw(key)
        string(value)
    }

    /// `key` and the number; nothing for nil.
    public mutating func member(_ key: StaticString, _ value: Int64?) {
        guard let value else { return }
        raw(key)
        integer(value)
    }

    /// `key` and the number; nothing for nil.
    public mutating func member(_ key: StaticString, _ value: UInt64?) {
        guard let value else { return }
        raw(key)
        unsigned(value)
    }

    /// A quoted string with JSONEncoder's escapes (`.withoutEscapingSlashes`): `"`, `\` and the control
    /// characters; every other byte of its UTF-8 as it is.
    public mutating func string(_ value: String) {
        byte(UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            guard let base = utf8.baseAddress else { return }
            var run = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                append(base + run, count: index - run)
                run = index + 1
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
                    self.byte(hex.utf8Start[Int(byte >> 4)])
                    self.byte(hex.utf8Start[Int(byte & 0xF)])
                }
            }
            append(base + run, count: utf8.count - run)
        }
        byte(UInt8(ascii: "\""))
    }

    /// `[` the elements `]`, each written by `element`.
    @inlinable
    public mutating func array<Element, E: Error>(_ elements: some Sequence<Element>,
                                                  _ element: (inout JSONWriter, Element) throws(E) -> Void) throws(E) {
        byte(UInt8(ascii: "["))
        var first = true
        for item in elements {
            if !first { byte(UInt8(ascii: ",")) }
            first = false
            try element(&self, item)
        }
        byte(UInt8(ascii: "]"))
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
            byte(UInt8(ascii: "{"))
            for (position, member) in members.sorted(by: { Self.precedesInUTF8($0.key, $1.key) }).enumerated() {
                if position > 0 { byte(UInt8(ascii: ",")) }
                string(member.key)
                byte(UInt8(ascii: ":"))
                try self.value(member.value)
            }
            byte(UInt8(ascii: "}"))
        }
    }

    /// Whether `x` sorts before `y` by their UTF-8 bytes: JSONEncoder's `.sortedKeys` order (String's own `<`
    /// compares canonically equivalent forms, not bytes).
    static func precedesInUTF8(_ x: String, _ y: String) -> Bool { compareUTF8(x, y) < 0 }

    /// -1, 0 or 1 as `x` sorts before, with or after `y` by UTF-8 bytes.
    static func compareUTF8(_ x: String, _ y: String) -> Int {
        var x = x, y = y
        return x.withUTF8 { a in
            y.withUTF8 { b in
                let common = min(a.count, b.count)
                var index = 0
                while index < common {
                    if a[index] != b[index] { return a[index] < b[index] ? -1 : 1 }
                    index += 1
                }
                return a.count == b.count ? 0 : (a.count < b.count ? -1 : 1)
            }
        }
    }
}
