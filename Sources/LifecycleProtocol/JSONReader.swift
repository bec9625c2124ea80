// The reading half of the protocol's one JSON path: a strict RFC 8259 parser into `ParsedJSON`, and `JSONFields`,
// through which each type reads its members with an error that names the field. Every type the daemon, lifectl and
// the client library read reads itself this way (AppMessages.swift, ControlMessages.swift, WatchEvents.swift,
// StateFileJSON.swift, and sway's replies in the daemon).

import LifecycleModel

/// A parsed JSON value. Numbers keep their kind: an integer written without fraction or exponent that fits Int64
/// (or, above it, UInt64: the state file's process start time may be that large), or any other number as a Double.
public enum ParsedJSON: Sendable, Equatable {
    case null
    case bool(Bool)
    case integer(Int64)
    case unsigned(UInt64)
    case number(Double)
    case string(String)
    case array([ParsedJSON])
    /// Members in the order written, a key given twice included.
    case object([JSONMember])

    /// What a person calls this kind of value, for errors.
    var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .integer, .unsigned, .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

/// One member of a parsed object: key and value side by side, so that an object is one allocation.
public struct JSONMember: Sendable, Equatable {
    public var key: String
    public var value: ParsedJSON
}

/// The strict parser: one JSON value per line, whitespace around it allowed, nothing else. It refuses what RFC 8259
/// refuses (a trailing comma, a leading zero, a control character in a string, bytes that are not UTF-8, a lone
/// surrogate) and nesting deeper than 256, so that no line can exhaust the stack.
public struct JSONParser {
    struct Refused: Error {}

    /// The value of a whole line; a line that is not JSON gets the protocol's sentence for it, with a preview.
    public static func parse(_ line: [UInt8]) throws(ProtocolError) -> ParsedJSON {
        let value = line.withUnsafeBufferPointer { bytes in
            var parser = JSONParser(bytes: bytes)
            return try? parser.parseDocument()
        }
        guard let value else { throw ProtocolError("not a JSON object: \(ProtocolError.preview(line))") }
        return value
    }

    static let maxDepth = 256
    static let objectCapacity = 8

    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0
    var depth = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func parseDocument() throws(Refused) -> ParsedJSON {
        let value = try parseValue()
        skipWhitespace()
        guard position == bytes.count else { throw Refused() }
        return value
    }

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(Refused) -> ParsedJSON {
        skipWhitespace()
        guard position < bytes.count else { throw Refused() }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        default: return try parseNumber()
        }
    }

    private mutating func expect(_ word: StaticString) throws(Refused) {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count else { throw Refused() }
        for index in 0..<count where bytes[position + index] != word.utf8Start[index] { throw Refused() }
        position += count
    }

    private mutating func parseObject() throws(Refused) -> ParsedJSON {
        depth += 1
        guard depth <= Self.maxDepth else { throw Refused() }
        defer { depth -= 1 }
        position += 1
        var members: [JSONMember] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            return .object(members)
        }
        // Room for a message's members at once: growing from empty would reallocate on the first members.
        members.reserveCapacity(Self.objectCapacity)
        while true {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw Refused() }
            let key = try parseString()
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw Refused() }
            position += 1
            members.append(JSONMember(key: key, value: try parseValue()))
            skipWhitespace()
            guard position < bytes.count else { throw Refused() }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            guard bytes[position] == UInt8(ascii: "}") else { throw Refused() }
            position += 1
            return .object(members)
        }
    }

    private mutating func parseArray() throws(Refused) -> ParsedJSON {
        depth += 1
        guard depth <= Self.maxDepth else { throw Refused() }
        defer { depth -= 1 }
        position += 1
        var values: [ParsedJSON] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            return .array(values)
        }
        while true {
            values.append(try parseValue())
            skipWhitespace()
            guard position < bytes.count else { throw Refused() }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            guard bytes[position] == UInt8(ascii: "]") else { throw Refused() }
            position += 1
            return .array(values)
        }
    }

    /// A string at `position` (its opening quote). Plain strings (no escape) are made from their bytes at
    /// once, validated as UTF-8; escapes are decoded, surrogate pairs joined; a lone surrogate is refused.
    private mutating func parseString() throws(Refused) -> String {
        position += 1
        let start = position
        var ascii = true
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let span = UnsafeBufferPointer(rebasing: bytes[start..<position])
                position += 1
                // ASCII needs no validation.
                if ascii { return Self.common(span) ?? String(decoding: span, as: UTF8.self) }
                guard let text = String(validating: span, as: UTF8.self) else { throw Refused() }
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw Refused() }
            if byte >= 0x80 { ascii = false }
            position += 1
        }
        var utf8 = Array(UnsafeBufferPointer(rebasing: bytes[start..<position]))
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                guard let text = String(validating: utf8, as: UTF8.self) else { throw Refused() }
                return text
            case UInt8(ascii: "\\"):
                position += 1
                guard position < bytes.count else { throw Refused() }
                let escape = bytes[position]
                position += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if scalar >= 0xD800 && scalar < 0xDC00 {
                        guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u")
                        else { throw Refused() }
                        position += 2
                        let low = try parseHex4()
                        guard low >= 0xDC00 && low < 0xE000 else { throw Refused() }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw Refused() }
                    utf8.append(contentsOf: String(Character(unicode)).utf8)
                default: throw Refused()
                }
            default:
                guard byte >= 0x20 else { throw Refused() }
                utf8.append(byte)
                position += 1
            }
        }
        throw Refused()
    }

    /// The keys of the messages an app switch reads (and an ack's type), as literals: creating a String from bytes
    /// costs more than comparing a few bytes.
    private static func common(_ span: UnsafeBufferPointer<UInt8>) -> String? {
        switch span.count {
        case 2:
            if matches(span, "id") { return "id" }
            if matches(span, "ok") { return "ok" }
        case 3:
            if matches(span, "ack") { return "ack" }
            if matches(span, "app") { return "app" }
        case 4:
            if matches(span, "type") { return "type" }
            if matches(span, "verb") { return "verb" }
        case 5:
            if matches(span, "state") { return "state" }
        default: break
        }
        return nil
    }

    private static func matches(_ span: UnsafeBufferPointer<UInt8>, _ word: StaticString) -> Bool {
        for index in 0..<span.count where span[index] != word.utf8Start[index] { return false }
        return true
    }

    private mutating func parseHex4() throws(Refused) -> UInt32 {
        guard position + 4 <= bytes.count else { throw Refused() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw Refused()
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    /// RFC 8259 numbers: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    private mutating func parseNumber() throws(Refused) -> ParsedJSON {
        let start = position
        let negative = position < bytes.count && bytes[position] == UInt8(ascii: "-")
        if negative { position += 1 }
        guard position < bytes.count, isDigit(bytes[position]) else { throw Refused() }
        // The integer part, accumulated as a negative number (Int64.min has no positive twin); nil once it overflows.
        var magnitude: Int64? = 0
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
        } else {
            while position < bytes.count, isDigit(bytes[position]) {
                let digit = Int64(bytes[position] - UInt8(ascii: "0"))
                if let value = magnitude {
                    let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
                    let (sum, overflowSum) = times.subtractingReportingOverflow(digit)
                    magnitude = overflowTimes || overflowSum ? nil : sum
                }
                position += 1
            }
        }
        var integral = true
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            integral = false
            position += 1
            guard position < bytes.count, isDigit(bytes[position]) else { throw Refused() }
            while position < bytes.count, isDigit(bytes[position]) { position += 1 }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            integral = false
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard position < bytes.count, isDigit(bytes[position]) else { throw Refused() }
            while position < bytes.count, isDigit(bytes[position]) { position += 1 }
        }
        // "-0" is -0.0, a Double.
        if integral, let value = magnitude, !(negative && value == 0) {
            if negative { return .integer(value) }
            if value != .min { return .integer(-value) }
        }
        let text = UnsafeBufferPointer(rebasing: bytes[start..<position])
        if integral, !negative, let value = UInt64(String(decoding: text, as: UTF8.self)) { return .unsigned(value) }
        guard let value = Double(String(decoding: text, as: UTF8.self)), value.isFinite else { throw Refused() }
        return .number(value)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}

/// A type that reads itself from a parsed JSON value; `path` names where the value sits (`launchOptions`,
/// `apps.3.pid`, empty for the line itself), for errors.
public protocol JSONReadable {
    init(json: ParsedJSON, path: String) throws(ProtocolError)
}

/// The members of one JSON object, read one field at a time. A field absent or null is nil to `optional`; unknown
/// members are ignored, so that later versions may add fields; of a key given twice, the first counts.
public struct JSONFields {
    let members: [JSONMember]
    /// Where the object sits, with a trailing dot (empty for the line itself).
    let prefix: String

    public init(_ value: ParsedJSON, path: String) throws(ProtocolError) {
        guard case .object(let members) = value else {
            if path.isEmpty { throw .notAnObject }
            throw .badField(path, expected: "an object", found: value)
        }
        self.members = members
        prefix = path.isEmpty ? "" : path + "."
    }

    /// The member's value, nil when the key is absent.
    public func value(_ key: String) -> ParsedJSON? {
        // Lengths first: most keys differ in length, and comparing lengths is cheaper than comparing strings.
        let length = key.utf8.count
        for index in members.indices where members[index].key.utf8.count == length && members[index].key == key {
            return members[index].value
        }
        return nil
    }

    /// A member the type cannot do without.
    public func required<T: JSONReadable>(_ key: String, as type: T.Type = T.self) throws(ProtocolError) -> T {
        guard let value = value(key) else { throw ProtocolError("missing field '\(prefix)\(key)'") }
        return try T(json: value, path: prefix + key)
    }

    // The members most types read are strings and integers: these take the matching value without building the
    // member's path, which only an error needs, and leave every other value to the general reading for its error.

    /// A string member the type cannot do without.
    public func required(_ key: String, as type: String.Type = String.self) throws(ProtocolError) -> String {
        guard let value = value(key) else { throw ProtocolError("missing field '\(prefix)\(key)'") }
        if case .string(let text) = value { return text }
        return try String(json: value, path: prefix + key)
    }

    /// An integer member the type cannot do without.
    public func required(_ key: String, as type: Int.Type = Int.self) throws(ProtocolError) -> Int {
        guard let value = value(key) else { throw ProtocolError("missing field '\(prefix)\(key)'") }
        if case .integer(let number) = value, let exact = Int(exactly: number) { return exact }
        return try Int(json: value, path: prefix + key)
    }

    /// A string member that may be absent or null.
    public func optional(_ key: String, as type: String.Type = String.self) throws(ProtocolError) -> String? {
        guard let value = value(key) else { return nil }
        switch value {
        case .null: return nil
        case .string(let text): return text
        default: return try String(json: value, path: prefix + key)
        }
    }

    /// A member that may be absent or null.
    public func optional<T: JSONReadable>(_ key: String, as type: T.Type = T.self) throws(ProtocolError) -> T? {
        guard let value = value(key) else { return nil }
        if case .null = value { return nil }
        return try T(json: value, path: prefix + key)
    }
}

extension ProtocolError {
    /// A line that is JSON but not an object where one is read; LineCoder words it with the line.
    static let notAnObject = ProtocolError("not a JSON object")

    /// A field of the wrong kind.
    static func badField(_ path: String, expected: String, found value: ParsedJSON) -> ProtocolError {
        ProtocolError("bad field '\(path)': expected \(expected), found \(value.kind)")
    }
}

extension String: JSONReadable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        guard case .string(let text) = json else { throw .badField(path, expected: "a string", found: json) }
        self = text
    }
}

extension Bool: JSONReadable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        guard case .bool(let flag) = json else { throw .badField(path, expected: "a boolean", found: json) }
        self = flag
    }
}

extension Double: JSONReadable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        switch json {
        case .integer(let value): self = Double(value)
        case .unsigned(let value): self = Double(value)
        case .number(let value): self = value
        default: throw .badField(path, expected: "a number", found: json)
        }
    }
}

extension JSONReadable where Self: FixedWidthInteger {
    /// An integer in range; a number written with a fraction or an exponent is taken when its value is whole.
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let exact: Self?
        switch json {
        case .integer(let value): exact = Self(exactly: value)
        case .unsigned(let value): exact = Self(exactly: value)
        case .number(let value): exact = Self(exactly: value)
        default: throw .badField(path, expected: "an integer", found: json)
        }
        guard let exact else {
            throw ProtocolError("bad field '\(path)': not an integer between \(Self.min) and \(Self.max)")
        }
        self = exact
    }
}

extension Int: JSONReadable {}
extension Int32: JSONReadable {}
extension Int64: JSONReadable {}
extension UInt64: JSONReadable {}

extension Array: JSONReadable where Element: JSONReadable {
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        guard case .array(let items) = json else { throw .badField(path, expected: "an array", found: json) }
        var elements: [Element] = []
        elements.reserveCapacity(items.count)
        for (index, item) in items.enumerated() { elements.append(try Element(json: item, path: "\(path).\(index)")) }
        self = elements
    }
}

extension JSONReadable where Self: RawRepresentable, RawValue == String, Self: CaseIterable {
    /// One of the type's names.
    public init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let name = try String(json: json, path: path)
        guard let value = Self(rawValue: name) else {
            let known = Self.allCases.map(\.rawValue).joined(separator: ", ")
            throw ProtocolError("bad field '\(path)': '\(ProtocolError.clipped(name, to: 80))' is not one of \(known)")
        }
        self = value
    }
}

extension AppState: JSONReadable {}
extension LifecycleCallback: JSONReadable {}
extension SceneCallback: JSONReadable {}
extension SceneActivationState: JSONReadable {}
extension Coalescing: JSONReadable {}

extension ParsedJSON: JSONReadable {
    /// The value itself, for a member read in steps.
    public init(json: ParsedJSON, path: String) { self = json }
}

extension JSONValue: JSONReadable {
    public init(json: ParsedJSON, path: String) { self = json.jsonValue }
}

extension ParsedJSON {
    /// The value as the model keeps opaque JSON: numbers as Doubles, objects as dictionaries (the first of a key
    /// given twice, as `JSONFields` reads it).
    public var jsonValue: JSONValue {
        switch self {
        case .null: .null
        case .bool(let value): .bool(value)
        case .integer(let value): .number(Double(value))
        case .unsigned(let value): .number(Double(value))
        case .number(let value): .number(value)
        case .string(let value): .string(value)
        case .array(let items): .array(items.map(\.jsonValue))
        case .object(let members):
            .object(Dictionary(members.lazy.map { ($0.key, $0.value.jsonValue) }, uniquingKeysWith: { first, _ in first }))
        }
    }
}
