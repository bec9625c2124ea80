// The reading half of the hand-written path: a strict parser into `ParsedValue`, and the scalars as JSONDecoder
// reads them. The readers of the hot messages (MessageReaders.swift) read from a parsed value; every line the
// parser or a reader declines goes to JSONDecoder.

import LifecycleModel

/// A parsed JSON value. Numbers keep their kind: an integer without fraction or exponent, or anything else
/// (read as Double only, as JSONDecoder would; the readers leave integers asked of it to JSONDecoder).
enum ParsedValue {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([ParsedValue])
    case object(keys: [String], values: [ParsedValue])
}

/// A strict RFC 8259 parser for the hand readers: anything it does not accept, or that JSONDecoder might read
/// differently (a key twice, nesting deeper than 256), is refused, and the line goes to JSONDecoder, whose value or
/// error is then the answer. An integer of more than 18 characters is kept as a number, which the readers of integers
/// decline.
struct JSONParser {
    struct Refused: Error {}

    /// The value of a whole line, or nil for a line the parser refuses.
    static func parse(_ line: [UInt8]) -> ParsedValue? {
        line.withUnsafeBufferPointer { bytes in
            var parser = JSONParser(bytes: bytes)
            return try? parser.parseDocument()
        }
    }

    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0
    var depth = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func parseDocument() throws -> ParsedValue {
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

    private mutating func parseValue() throws -> ParsedValue {
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

    private mutating func expect(_ word: StaticString) throws {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count else { throw Refused() }
        for index in 0..<count where bytes[position + index] != word.utf8Start[index] { throw Refused() }
        position += count
    }

    private mutating func parseObject() throws -> ParsedValue {
        depth += 1
        guard depth <= 256 else { throw Refused() }
        defer { depth -= 1 }
        position += 1
        var keys: [String] = [], values: [ParsedValue] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            return .object(keys: keys, values: values)
        }
        while true {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw Refused() }
            let key = try parseString()
            // Which of two equal keys JSONDecoder keeps is its own business: leave such objects to it.
            guard !keys.contains(key) else { throw Refused() }
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw Refused() }
            position += 1
            keys.append(key)
            values.append(try parseValue())
            skipWhitespace()
            guard position < bytes.count else { throw Refused() }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            guard bytes[position] == UInt8(ascii: "}") else { throw Refused() }
            position += 1
            return .object(keys: keys, values: values)
        }
    }

    private mutating func parseArray() throws -> ParsedValue {
        depth += 1
        guard depth <= 256 else { throw Refused() }
        defer { depth -= 1 }
        position += 1
        var values: [ParsedValue] = []
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
    /// once, validated as UTF-8; escapes are decoded, surrogate pairs joined; a lone surrogate throws.
    private mutating func parseString() throws -> String {
        position += 1
        let start = position
        var ascii = true
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                let span = UnsafeBufferPointer(rebasing: bytes[start..<position])
                position += 1
                // ASCII needs no validation.
                if ascii { return String(decoding: span, as: UTF8.self) }
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

    private mutating func parseHex4() throws -> UInt32 {
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
    private mutating func parseNumber() throws -> ParsedValue {
        let start = position
        if position < bytes.count, bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard position < bytes.count, isDigit(bytes[position]) else { throw Refused() }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
        } else {
            while position < bytes.count, isDigit(bytes[position]) { position += 1 }
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
        let text = UnsafeBufferPointer(rebasing: bytes[start..<position])
        // "-0" is -0.0 as a Double: keep it a Double (as an integer it is JSONDecoder's to judge).
        if integral, text.count <= 18, !(text.count == 2 && text[0] == UInt8(ascii: "-") && text[1] == UInt8(ascii: "0")) {
            // At most 18 digits (with the sign): always an Int64.
            var value: Int64 = 0
            let negative = text[0] == UInt8(ascii: "-")
            for byte in text where byte != UInt8(ascii: "-") { value = value * 10 + Int64(byte - UInt8(ascii: "0")) }
            return .integer(negative ? -value : value)
        }
        guard let value = Double(String(decoding: text, as: UTF8.self)), value.isFinite else { throw Refused() }
        return .number(value)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}

extension ParsedValue {
    var isNull: Bool { if case .null = self { true } else { false } }

    /// The scalars as JSONDecoder reads them into Bool, String, Int, Int32 and Double; nil where it might not.
    var plainBool: Bool? { if case .bool(let value) = self { value } else { nil } }
    var plainString: String? { if case .string(let value) = self { value } else { nil } }
    var plainInt: Int? { if case .integer(let value) = self { Int(exactly: value) } else { nil } }
    var plainInt32: Int32? { if case .integer(let value) = self { Int32(exactly: value) } else { nil } }
    var plainDouble: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .number(let value): value
        default: nil
        }
    }

    var plainStrings: [String]? {
        guard case .array(let items) = self else { return nil }
        var strings: [String] = []
        strings.reserveCapacity(items.count)
        for item in items {
            guard case .string(let text) = item else { return nil }
            strings.append(text)
        }
        return strings
    }

    /// JSONValue's `init(from:)` on this value: null, then Bool, Double, String, an array, an object (the parser has
    /// already refused duplicate keys).
    var jsonValue: JSONValue {
        switch self {
        case .null: .null
        case .bool(let value): .bool(value)
        case .integer(let value): .number(Double(value))
        case .number(let value): .number(value)
        case .string(let value): .string(value)
        case .array(let items): .array(items.map(\.jsonValue))
        case .object(let keys, let values):
            .object(Dictionary(uniqueKeysWithValues: zip(keys, values.lazy.map(\.jsonValue))))
        }
    }

    /// The elements of an array, each read by `read`; nil if this is not an array or one element is not read.
    func elements<Element>(_ read: (ParsedValue) -> Element?) -> [Element]? {
        guard case .array(let items) = self else { return nil }
        var elements: [Element] = []
        elements.reserveCapacity(items.count)
        for item in items {
            guard let element = read(item) else { return nil }
            elements.append(element)
        }
        return elements
    }
}
