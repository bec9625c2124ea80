// The fast path of LineCoder: JSON written and read straight from bytes, for the protocol's own messages.
//
// Why: callgrind on the daemon (bench/callgrind.sh) put Foundation's JSONEncoder and JSONDecoder at about half
// of the instructions of an app switch and three quarters of a `status` query; most of it is the generic
// machinery around the coders (boxing every value, type metadata, a dictionary per object), not JSON itself.
//
// The contract, checked by Tests/LifecycleProtocolTests/LineCoderTests.swift against Foundation's coders:
// - `FastJSONEncoder` writes exactly the bytes JSONEncoder writes with [.sortedKeys, .withoutEscapingSlashes]
//   (keys in UTF-8 byte order, the same escapes, the same numbers). It throws `Unsupported` for anything it
//   does not mirror (Date, Data, URL, Decimal, non-finite numbers, a value that encodes nothing), and LineCoder
//   then uses JSONEncoder. The messages of an app switch (MessageJSON.swift) skip the Encodable machinery
//   altogether, written by hand with JSONWriter to the same bytes.
// - `FastJSONDecoder` succeeds only where JSONDecoder succeeds, with the same value. On any failure (bad JSON,
//   a type mismatch, a missing key, an error thrown by the type itself) LineCoder runs JSONDecoder on the
//   line, so error messages stay JSONDecoder's. Inputs it does not mirror exactly (duplicate keys, numbers
//   with a fraction or an exponent read as integers, Date/Data/URL/Decimal) are refused the same way.

import FoundationEssentials
import LifecycleModel

/// Thrown by the fast coders for what they leave to Foundation.
struct Unsupported: Error {}

// MARK: - Encoding

enum FastJSONEncoder {
    static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        // The messages of an app switch have writers of their own (MessageJSON.swift).
        if let bytes = handWritten(value) { return bytes }
        return try encodeGenerically(value)
    }

    /// Through `Encodable`: every value, the hand-written ones too (what their tests compare with).
    static func encodeGenerically<T: Encodable>(_ value: T) throws -> [UInt8] {
        let item = try EncodedItem.make(value, parent: nil, key: nil)
        var out = JSONWriter(capacity: 256)
        try item.write(into: &out)
        return out.bytes
    }
}

/// An encoded value before it is written out: objects are written with their keys sorted, so they are
/// kept until their encoding is over.
enum EncodedItem {
    case null
    case bool(Bool)
    case signed(Int64)
    case unsigned(UInt64)
    case double(Double)
    case string(String)
    /// Number text already formatted (Float, whose digits differ from Double's).
    case literal(String)
    case object(ObjectBox)
    case array(ArrayBox)
    /// A value encoded through its own Encoder (a nested value, a super encoder): resolved when written.
    case encoder(ItemEncoder)

    final class ObjectBox {
        var keys: [String] = []
        var values: [EncodedItem] = []
        init() {
            keys.reserveCapacity(8)
            values.reserveCapacity(8)
        }
    }

    final class ArrayBox {
        var values: [EncodedItem] = []
        init() {}
    }

    static func make<T: Encodable>(_ value: T, parent: ItemEncoder?, key: (any CodingKey)?) throws -> EncodedItem {
        // JSONEncoder gives these its own strategies; leave them to it.
        if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self { throw Unsupported() }
        // The common leaves without an Encoder of their own (a metatype comparison, no dynamic cast).
        if T.self == String.self { return .string(unsafeBitCast(value, to: String.self)) }
        if T.self == Int.self { return .signed(Int64(unsafeBitCast(value, to: Int.self))) }
        if T.self == Bool.self { return .bool(unsafeBitCast(value, to: Bool.self)) }
        let encoder = ItemEncoder(parent: parent, key: key)
        try value.encode(to: encoder)
        guard let item = encoder.item else { throw Unsupported() }  // encoded nothing
        return item
    }

    static func finite(_ value: Double) throws -> EncodedItem {
        guard value.isFinite else { throw Unsupported() }
        return .double(value)
    }

    /// The scalars as JSONWriter writes them (JSONEncoder's escapes and number forms, one implementation for the
    /// generic and the hand-written paths).
    func write(into out: inout JSONWriter) throws {
        switch self {
        case .null: out.null()
        case .bool(let value): out.bool(value)
        case .signed(let value): out.integer(value)
        case .unsigned(let value): out.unsigned(value)
        case .double(let value): try out.double(value)
        case .string(let value): out.string(value)
        case .literal(let text): out.utf8(text)
        case .object(let box):
            // JSONEncoder sorts keys by their UTF-8 bytes; a key encoded twice keeps its last value.
            // Sorted by each key's first 8 bytes as one big-endian number, then the whole keys where those
            // tie: the same order as the bytes, at a fraction of comparing Strings each time (the sort was a
            // tenth of an app switch's instructions, the saved app state having some thirty keys per object).
            let prefixes = box.keys.map(Self.prefix)
            let order = box.keys.indices.sorted { a, b in
                if prefixes[a] != prefixes[b] { return prefixes[a] < prefixes[b] }
                let order = Self.compareUTF8(box.keys[a], box.keys[b])
                return order == 0 ? a < b : order < 0
            }
            out.byte(UInt8(ascii: "{"))
            var first = true
            for (position, index) in order.enumerated() {
                if position + 1 < order.count, prefixes[order[position + 1]] == prefixes[index],
                   Self.compareUTF8(box.keys[order[position + 1]], box.keys[index]) == 0 { continue }
                if !first { out.byte(UInt8(ascii: ",")) }
                first = false
                out.string(box.keys[index])
                out.byte(UInt8(ascii: ":"))
                try box.values[index].write(into: &out)
            }
            out.byte(UInt8(ascii: "}"))
        case .array(let box):
            out.byte(UInt8(ascii: "["))
            for (index, value) in box.values.enumerated() {
                if index > 0 { out.byte(UInt8(ascii: ",")) }
                try value.write(into: &out)
            }
            out.byte(UInt8(ascii: "]"))
        case .encoder(let encoder):
            guard let item = encoder.item else { throw Unsupported() }
            try item.write(into: &out)
        }
    }

    /// The first 8 UTF-8 bytes of a key, big-endian, zero-padded: comparing these compares the keys' starts
    /// in byte order.
    static func prefix(_ key: String) -> UInt64 {
        var key = key
        return key.withUTF8 { bytes in
            var value: UInt64 = 0
            for index in 0..<8 { value = value << 8 | UInt64(index < bytes.count ? bytes[index] : 0) }
            return value
        }
    }

    /// The order of JSONEncoder's `.sortedKeys`: by UTF-8 bytes.
    static func compareUTF8(_ x: String, _ y: String) -> Int { JSONWriter.compareUTF8(x, y) }
}

/// The Encoder handed to `encode(to:)`: it records one item (a scalar, an object or an array).
/// Its coding path is made only when asked for (from the parent chain): building one array per nested
/// value cost more than the value's encoding.
final class ItemEncoder: Encoder, SingleValueEncodingContainer {
    let parent: ItemEncoder?
    let key: (any CodingKey)?
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    var item: EncodedItem?

    init(parent: ItemEncoder?, key: (any CodingKey)?) {
        self.parent = parent
        self.key = key
    }

    var codingPath: [any CodingKey] {
        var path: [any CodingKey] = []
        var node: ItemEncoder? = self
        while let current = node {
            if let key = current.key { path.append(key) }
            node = current.parent
        }
        return path.reversed()
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        let box: EncodedItem.ObjectBox
        if case .object(let existing) = item {
            box = existing
        } else {
            box = EncodedItem.ObjectBox()
            item = .object(box)
        }
        return KeyedEncodingContainer(ObjectEncodingContainer<Key>(box: box, encoder: self))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        let box: EncodedItem.ArrayBox
        if case .array(let existing) = item {
            box = existing
        } else {
            box = EncodedItem.ArrayBox()
            item = .array(box)
        }
        return ArrayEncodingContainer(box: box, encoder: self)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { self }

    func encodeNil() throws { item = .null }
    func encode(_ value: Bool) throws { item = .bool(value) }
    func encode(_ value: String) throws { item = .string(value) }
    func encode(_ value: Double) throws { item = try EncodedItem.finite(value) }
    func encode(_ value: Float) throws { item = try EncodedItem.float(value) }
    func encode(_ value: Int) throws { item = .signed(Int64(value)) }
    func encode(_ value: Int8) throws { item = .signed(Int64(value)) }
    func encode(_ value: Int16) throws { item = .signed(Int64(value)) }
    func encode(_ value: Int32) throws { item = .signed(Int64(value)) }
    func encode(_ value: Int64) throws { item = .signed(value) }
    func encode(_ value: UInt) throws { item = .unsigned(UInt64(value)) }
    func encode(_ value: UInt8) throws { item = .unsigned(UInt64(value)) }
    func encode(_ value: UInt16) throws { item = .unsigned(UInt64(value)) }
    func encode(_ value: UInt32) throws { item = .unsigned(UInt64(value)) }
    func encode(_ value: UInt64) throws { item = .unsigned(value) }
    func encode<T: Encodable>(_ value: T) throws { item = try EncodedItem.make(value, parent: parent, key: key) }
}

extension EncodedItem {
    /// Floats print as JSONEncoder prints them: the Float's own shortest digits.
    static func float(_ value: Float) throws -> EncodedItem {
        guard value.isFinite else { throw Unsupported() }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return .literal(text)
    }
}

struct ObjectEncodingContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let box: EncodedItem.ObjectBox
    /// Whose value this object is (for the coding path).
    let encoder: ItemEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }

    private func put(_ item: EncodedItem, _ key: Key) {
        box.keys.append(key.stringValue)
        box.values.append(item)
    }

    mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { put(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { put(.string(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { put(try EncodedItem.finite(value), key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { put(try EncodedItem.float(value), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { put(.signed(Int64(value)), key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { put(.signed(Int64(value)), key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { put(.signed(Int64(value)), key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { put(.signed(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { put(.signed(value), key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { put(.unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { put(.unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { put(.unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { put(.unsigned(UInt64(value)), key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { put(.unsigned(value), key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        put(try EncodedItem.make(value, parent: encoder, key: key), key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        let nested = EncodedItem.ObjectBox()
        put(.object(nested), key)
        return KeyedEncodingContainer(ObjectEncodingContainer<NestedKey>(box: nested, encoder: ItemEncoder(parent: encoder, key: key)))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        let nested = EncodedItem.ArrayBox()
        put(.array(nested), key)
        return ArrayEncodingContainer(box: nested, encoder: ItemEncoder(parent: encoder, key: key))
    }

    mutating func superEncoder() -> any Encoder { superEncoder(named: "super", key: nil) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { superEncoder(named: key.stringValue, key: key) }

    private func superEncoder(named name: String, key: (any CodingKey)?) -> any Encoder {
        let child = ItemEncoder(parent: encoder, key: key)
        box.keys.append(name)
        box.values.append(.encoder(child))
        return child
    }
}

struct ArrayEncodingContainer: UnkeyedEncodingContainer {
    let box: EncodedItem.ArrayBox
    let encoder: ItemEncoder
    var codingPath: [any CodingKey] { encoder.codingPath }
    var count: Int { box.values.count }

    private func put(_ item: EncodedItem) { box.values.append(item) }

    mutating func encodeNil() throws { put(.null) }
    mutating func encode(_ value: Bool) throws { put(.bool(value)) }
    mutating func encode(_ value: String) throws { put(.string(value)) }
    mutating func encode(_ value: Double) throws { put(try EncodedItem.finite(value)) }
    mutating func encode(_ value: Float) throws { put(try EncodedItem.float(value)) }
    mutating func encode(_ value: Int) throws { put(.signed(Int64(value))) }
    mutating func encode(_ value: Int8) throws { put(.signed(Int64(value))) }
    mutating func encode(_ value: Int16) throws { put(.signed(Int64(value))) }
    mutating func encode(_ value: Int32) throws { put(.signed(Int64(value))) }
    mutating func encode(_ value: Int64) throws { put(.signed(value)) }
    mutating func encode(_ value: UInt) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt8) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt16) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt32) throws { put(.unsigned(UInt64(value))) }
    mutating func encode(_ value: UInt64) throws { put(.unsigned(value)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        put(try EncodedItem.make(value, parent: encoder, key: nil))
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        let nested = EncodedItem.ObjectBox()
        put(.object(nested))
        return KeyedEncodingContainer(ObjectEncodingContainer<NestedKey>(box: nested, encoder: encoder))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        let nested = EncodedItem.ArrayBox()
        put(.array(nested))
        return ArrayEncodingContainer(box: nested, encoder: encoder)
    }

    mutating func superEncoder() -> any Encoder {
        let child = ItemEncoder(parent: encoder, key: nil)
        put(.encoder(child))
        return child
    }
}

// MARK: - Decoding

enum FastJSONDecoder {
    static func decode<T: Decodable>(_ type: T.Type, from line: [UInt8]) throws -> T {
        // The acks of an app switch, in the forms clients send, are read without a parse (MessageJSON.swift).
        if T.self == ClientMessage.self, let id = line.withUnsafeBufferPointer(plainAck) {
            return unsafeBitCast(ClientMessage.ack(id: id), to: T.self)
        }
        let value = try line.withUnsafeBufferPointer { bytes in
            var parser = JSONParser(bytes: bytes)
            let value = try parser.parseDocument()
            return value
        }
        // The acks of an app switch are read by hand (MessageJSON.swift).
        if let message = handRead(type, from: value) { return message }
        return try ParsedDecoder.decode(type, from: value, codingPath: [])
    }
}

/// A parsed JSON value. Numbers keep their kind: an integer without fraction or exponent, or anything else
/// (read as Double only, as JSONDecoder would; integers asked of it are left to JSONDecoder).
enum ParsedValue {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([ParsedValue])
    case object(keys: [String], values: [ParsedValue])
}

/// A strict RFC 8259 parser: anything it does not accept (or does not mirror JSONDecoder on) throws.
struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0
    var depth = 0

    init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    mutating func parseDocument() throws -> ParsedValue {
        let value = try parseValue()
        skipWhitespace()
        guard position == bytes.count else { throw Unsupported() }
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
        guard position < bytes.count else { throw Unsupported() }
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
        guard position + count <= bytes.count else { throw Unsupported() }
        for index in 0..<count where bytes[position + index] != word.utf8Start[index] { throw Unsupported() }
        position += count
    }

    private mutating func parseObject() throws -> ParsedValue {
        depth += 1
        guard depth <= 256 else { throw Unsupported() }
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
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw Unsupported() }
            let key = try parseString()
            // Which of two equal keys JSONDecoder keeps is its own business: leave such objects to it.
            guard !keys.contains(key) else { throw Unsupported() }
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw Unsupported() }
            position += 1
            keys.append(key)
            values.append(try parseValue())
            skipWhitespace()
            guard position < bytes.count else { throw Unsupported() }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            guard bytes[position] == UInt8(ascii: "}") else { throw Unsupported() }
            position += 1
            return .object(keys: keys, values: values)
        }
    }

    private mutating func parseArray() throws -> ParsedValue {
        depth += 1
        guard depth <= 256 else { throw Unsupported() }
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
            guard position < bytes.count else { throw Unsupported() }
            if bytes[position] == UInt8(ascii: ",") { position += 1; continue }
            guard bytes[position] == UInt8(ascii: "]") else { throw Unsupported() }
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
                // ASCII needs no validation (and String(validating:) costs several times String(decoding:)).
                if ascii { return String(decoding: span, as: UTF8.self) }
                guard let text = String(validating: span, as: UTF8.self) else { throw Unsupported() }
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw Unsupported() }
            if byte >= 0x80 { ascii = false }
            position += 1
        }
        var utf8 = Array(UnsafeBufferPointer(rebasing: bytes[start..<position]))
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                guard let text = String(validating: utf8, as: UTF8.self) else { throw Unsupported() }
                return text
            case UInt8(ascii: "\\"):
                position += 1
                guard position < bytes.count else { throw Unsupported() }
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
                        else { throw Unsupported() }
                        position += 2
                        let low = try parseHex4()
                        guard low >= 0xDC00 && low < 0xE000 else { throw Unsupported() }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw Unsupported() }
                    utf8.append(contentsOf: String(Character(unicode)).utf8)
                default: throw Unsupported()
                }
            default:
                guard byte >= 0x20 else { throw Unsupported() }
                utf8.append(byte)
                position += 1
            }
        }
        throw Unsupported()
    }

    private mutating func parseHex4() throws -> UInt32 {
        guard position + 4 <= bytes.count else { throw Unsupported() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw Unsupported()
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
        guard position < bytes.count, isDigit(bytes[position]) else { throw Unsupported() }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
        } else {
            while position < bytes.count, isDigit(bytes[position]) { position += 1 }
        }
        var integral = true
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            integral = false
            position += 1
            guard position < bytes.count, isDigit(bytes[position]) else { throw Unsupported() }
            while position < bytes.count, isDigit(bytes[position]) { position += 1 }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            integral = false
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard position < bytes.count, isDigit(bytes[position]) else { throw Unsupported() }
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
        guard let value = Double(String(decoding: text, as: UTF8.self)), value.isFinite else { throw Unsupported() }
        return .number(value)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}

/// The Decoder handed to `init(from:)`, over one parsed value.
struct ParsedDecoder: Decoder, SingleValueDecodingContainer {
    let value: ParsedValue
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    static func decode<T: Decodable>(_ type: T.Type, from value: ParsedValue, codingPath: [any CodingKey]) throws -> T {
        if T.self == Date.self || T.self == Data.self || T.self == URL.self || T.self == Decimal.self { throw Unsupported() }
        switch value {
        case .string(let text) where T.self == String.self: return unsafeBitCast(text, to: T.self)
        case .integer(let number) where T.self == Int.self: return unsafeBitCast(Int(number), to: T.self)
        default: return try T(from: ParsedDecoder(value: value, codingPath: codingPath))
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let keys, let values) = value else { throw Unsupported() }
        return KeyedDecodingContainer(ObjectDecodingContainer<Key>(keys: keys, values: values, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let values) = value else { throw Unsupported() }
        return ArrayDecodingContainer(values: values, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }

    func decodeNil() -> Bool { if case .null = value { true } else { false } }
    func decode(_ type: Bool.Type) throws -> Bool { try value.bool() }
    func decode(_ type: String.Type) throws -> String { try value.string() }
    func decode(_ type: Double.Type) throws -> Double { try value.double() }
    func decode(_ type: Float.Type) throws -> Float { throw Unsupported() }
    func decode(_ type: Int.Type) throws -> Int { try value.integer() }
    func decode(_ type: Int8.Type) throws -> Int8 { try value.integer() }
    func decode(_ type: Int16.Type) throws -> Int16 { try value.integer() }
    func decode(_ type: Int32.Type) throws -> Int32 { try value.integer() }
    func decode(_ type: Int64.Type) throws -> Int64 { try value.integer() }
    func decode(_ type: UInt.Type) throws -> UInt { try value.integer() }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try value.integer() }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try value.integer() }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try value.integer() }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try value.integer() }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try Self.decode(type, from: value, codingPath: codingPath) }
}

extension ParsedValue {
    func bool() throws -> Bool {
        guard case .bool(let value) = self else { throw Unsupported() }
        return value
    }

    func string() throws -> String {
        guard case .string(let value) = self else { throw Unsupported() }
        return value
    }

    func double() throws -> Double {
        switch self {
        case .integer(let value): return Double(value)
        case .number(let value): return value
        default: throw Unsupported()
        }
    }

    /// Only integers written as such, in range; the rest (1.0, 1e2, overflow) is JSONDecoder's to judge.
    func integer<T: FixedWidthInteger>() throws -> T {
        guard case .integer(let value) = self, let result = T(exactly: value) else { throw Unsupported() }
        return result
    }
}

struct ObjectDecodingContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let keys: [String]
    let values: [ParsedValue]
    let codingPath: [any CodingKey]

    var allKeys: [Key] { keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { keys.contains(key.stringValue) }

    private func value(_ key: Key) throws -> ParsedValue {
        let name = key.stringValue
        guard let index = keys.firstIndex(of: name) else { throw Unsupported() }
        return values[index]
    }

    func decodeNil(forKey key: Key) throws -> Bool { if case .null = try value(key) { true } else { false } }
    func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try value(key).bool() }
    func decode(_ type: String.Type, forKey key: Key) throws -> String { try value(key).string() }
    func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try value(key).double() }
    func decode(_ type: Float.Type, forKey key: Key) throws -> Float { throw Unsupported() }
    func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try value(key).integer() }
    func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try value(key).integer() }
    func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try value(key).integer() }
    func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try value(key).integer() }
    func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try value(key).integer() }
    func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try value(key).integer() }
    func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try value(key).integer() }
    func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try value(key).integer() }
    func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try value(key).integer() }
    func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try value(key).integer() }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try ParsedDecoder.decode(type, from: value(key), codingPath: codingPath + [key])
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try ParsedDecoder(value: value(key), codingPath: codingPath + [key]).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        try ParsedDecoder(value: value(key), codingPath: codingPath + [key]).unkeyedContainer()
    }

    func superDecoder() throws -> any Decoder { throw Unsupported() }
    func superDecoder(forKey key: Key) throws -> any Decoder { throw Unsupported() }
}

struct ArrayDecodingContainer: UnkeyedDecodingContainer {
    let values: [ParsedValue]
    let codingPath: [any CodingKey]
    var currentIndex = 0
    var count: Int? { values.count }
    var isAtEnd: Bool { currentIndex >= values.count }

    init(values: [ParsedValue], codingPath: [any CodingKey]) {
        self.values = values
        self.codingPath = codingPath
    }

    private mutating func next() throws -> ParsedValue {
        guard currentIndex < values.count else { throw Unsupported() }
        defer { currentIndex += 1 }
        return values[currentIndex]
    }

    mutating func decodeNil() throws -> Bool {
        guard currentIndex < values.count else { throw Unsupported() }
        if case .null = values[currentIndex] {
            currentIndex += 1
            return true
        }
        return false
    }

    mutating func decode(_ type: Bool.Type) throws -> Bool { try next().bool() }
    mutating func decode(_ type: String.Type) throws -> String { try next().string() }
    mutating func decode(_ type: Double.Type) throws -> Double { try next().double() }
    mutating func decode(_ type: Float.Type) throws -> Float { throw Unsupported() }
    mutating func decode(_ type: Int.Type) throws -> Int { try next().integer() }
    mutating func decode(_ type: Int8.Type) throws -> Int8 { try next().integer() }
    mutating func decode(_ type: Int16.Type) throws -> Int16 { try next().integer() }
    mutating func decode(_ type: Int32.Type) throws -> Int32 { try next().integer() }
    mutating func decode(_ type: Int64.Type) throws -> Int64 { try next().integer() }
    mutating func decode(_ type: UInt.Type) throws -> UInt { try next().integer() }
    mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try next().integer() }
    mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try next().integer() }
    mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try next().integer() }
    mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try next().integer() }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let value = try next()
        return try ParsedDecoder.decode(type, from: value, codingPath: codingPath)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try ParsedDecoder(value: next(), codingPath: codingPath).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        try ParsedDecoder(value: next(), codingPath: codingPath).unkeyedContainer()
    }

    mutating func superDecoder() throws -> any Decoder { throw Unsupported() }
}
