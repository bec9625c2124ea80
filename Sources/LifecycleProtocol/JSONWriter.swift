// The writing half of the protocol's one JSON path: every type the daemon, lifectl and the client library write
// writes itself into a JSONWriter (AppMessages.swift, ControlMessages.swift, WatchEvents.swift, StateFileJSON.swift).
//
// The wire's form (docs/PROTOCOL.md): no spaces, object keys in UTF-8 byte order, a nil optional left out, `"` `\`
// and the control characters escaped (\b \f \n \r \t, the others as \u00xx in lower case), everything else as
// its UTF-8 bytes, whole numbers as integers and other Doubles as their shortest round-tripping digits.

import LifecycleModel

/// A JSON text being written: objects (`beginObject`, `member` in key order, `endObject`), arrays, scalars and
/// `JSONValue`s.
///
/// The text goes into a buffer of its own rather than an Array, so that appending a key literal is one copy.
/// Noncopyable, so that the buffer has one owner, freed when the writer ends; `bytes` gives the text as an Array.
public struct JSONWriter: ~Copyable {
    @usableFromInline var start: UnsafeMutablePointer<UInt8>
    @usableFromInline var capacity: Int
    @usableFromInline var count = 0
    /// Set by `{`, cleared by the first member: whether the next member needs no comma before it. One flag serves
    /// nested objects, because a member's value ends before the next member of the enclosing object begins.
    @usableFromInline var atObjectStart = false

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

    /// The shortest digits that read back the same (`description`), without a trailing ".0". JSON has no NaN or
    /// infinity, and no value the daemon writes holds one (every parsed number is finite): one is written as null.
    public mutating func double(_ value: Double) {
        guard value.isFinite else { return null() }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        utf8(text)
    }

    @inlinable
    public mutating func beginObject() {
        byte(UInt8(ascii: "{"))
        atObjectStart = true
    }

    @inlinable
    public mutating func endObject() {
        byte(UInt8(ascii: "}"))
        atObjectStart = false
    }

    /// `"key":`, after a comma unless it is the object's first member. Keys need no escape: they are the types' own.
    @inlinable
    public mutating func key(_ key: StaticString) {
        if atObjectStart { atObjectStart = false } else { byte(UInt8(ascii: ",")) }
        byte(UInt8(ascii: "\""))
        raw(key)
        raw("\":")
    }

    /// A key that is data (a session id), escaped as any string.
    public mutating func dynamicKey(_ key: String) {
        if atObjectStart { atObjectStart = false } else { byte(UInt8(ascii: ",")) }
        string(key)
        byte(UInt8(ascii: ":"))
    }

    /// A member; nothing for nil (a nil optional is left out).
    @inlinable
    public mutating func member(_ key: StaticString, _ value: (some JSONWritable)?) {
        guard let value else { return }
        self.key(key)
        value.writeJSON(into: &self)
    }

    /// A quoted string: `"`, `\` and the control characters escaped; every other byte of its UTF-8 as it is.
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
    public mutating func array<Element>(_ elements: some Sequence<Element>, _ element: (inout JSONWriter, Element) -> Void) {
        byte(UInt8(ascii: "["))
        var first = true
        for item in elements {
            if !first { byte(UInt8(ascii: ",")) }
            first = false
            element(&self, item)
        }
        byte(UInt8(ascii: "]"))
    }

    /// A JSON value: whole numbers below 9e15 as integers, object members in the UTF-8 order of their keys.
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let flag): bool(flag)
        case .number(let number):
            if number == number.rounded(), abs(number) < 9.0e15 { integer(Int64(number)) } else { double(number) }
        case .string(let text): string(text)
        case .array(let items): array(items) { writer, item in writer.value(item) }
        case .object(let members):
            byte(UInt8(ascii: "{"))
            for (position, member) in members.sorted(by: { Self.precedesInUTF8($0.key, $1.key) }).enumerated() {
                if position > 0 { byte(UInt8(ascii: ",")) }
                string(member.key)
                byte(UInt8(ascii: ":"))
                self.value(member.value)
            }
            byte(UInt8(ascii: "}"))
        }
    }

    /// Whether `x` sorts before `y` by their UTF-8 bytes: the wire's key order (String's own `<` compares
    /// canonically equivalent forms, not bytes).
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

/// A type that writes itself as one JSON value.
public protocol JSONWritable {
    func writeJSON(into writer: inout JSONWriter)
}

extension String: JSONWritable {
    public func writeJSON(into writer: inout JSONWriter) { writer.string(self) }
}

extension Bool: JSONWritable {
    public func writeJSON(into writer: inout JSONWriter) { writer.bool(self) }
}

extension Double: JSONWritable {
    public func writeJSON(into writer: inout JSONWriter) { writer.double(self) }
}

extension Int: JSONWritable {
    public func writeJSON(into writer: inout JSONWriter) { writer.integer(Int64(self)) }
}

extension Int32: JSONWritable {
    public func writeJSON(into writer: inout JSONWriter) { writer.integer(Int64(self)) }
}

extension Int64: JSONWritable {
    public func writeJSON(into writer: inout JSONWriter) { writer.integer(self) }
}

extension UInt64: JSONWritable {
    public func writeJSON(into writer: inout JSONWriter) { writer.unsigned(self) }
}

extension Array: JSONWritable where Element: JSONWritable {
    public func writeJSON(into writer: inout JSONWriter) {
        writer.array(self) { writer, element in element.writeJSON(into: &writer) }
    }
}

extension JSONValue: JSONWritable {
    public func writeJSON(into writer: inout JSONWriter) { writer.value(self) }
}

extension JSONWritable where Self: RawRepresentable, RawValue == String {
    public func writeJSON(into writer: inout JSONWriter) { writer.string(rawValue) }
}

extension AppState: JSONWritable {}
extension LifecycleCallback: JSONWritable {}
extension SceneCallback: JSONWritable {}
extension SceneActivationState: JSONWritable {}
extension Coalescing: JSONWritable {}
