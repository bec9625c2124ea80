/// A JSON value: notification payloads are opaque JSON to the daemon, except for `merge`,
/// which needs to see objects. The model stays free of Foundation.
public enum JSONValue: Sendable, Equatable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// At least the length of this value's JSON text as the daemon writes it (no spaces, `\"`, `\\` and `\u00XX`
    /// escapes; numbers at most 24 characters). What lets the model keep a notification within one protocol line
    /// without encoding it.
    public var encodedSizeBound: Int {
        switch self {
        case .null: 4
        case .bool(let value): value ? 4 : 5
        case .number: 24
        case .string(let text): Self.quotedSize(text)
        case .array(let items): 2 + max(0, items.count - 1) + items.reduce(0) { $0 + $1.encodedSizeBound }
        case .object(let members):
            2 + max(0, members.count - 1) + members.reduce(0) { $0 + Self.quotedSize($1.key) + 1 + $1.value.encodedSizeBound }
        }
    }

    static func quotedSize(_ text: String) -> Int {
        var size = 2
        for byte in text.utf8 {
            size += byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "/") ? 2 : byte < 0x20 ? 6 : 1
        }
        return size
    }

    /// `merge` coalescing: the union of two objects' keys, the later value winning; anything
    /// that is not an object on both sides is simply replaced by the later value.
    public func merged(with later: JSONValue) -> JSONValue {
        guard case .object(var base) = self, case .object(let update) = later else { return later }
        for (key, value) in update { base[key] = value }
        return .object(base)
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
                     ExpressibleByBooleanLiteral, ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, later in later }))
    }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
}

extension JSONValue: CustomStringConvertible {
    /// Compact JSON text, object keys sorted (for logs and people; the wire uses LineCoder).
    public var description: String {
        switch self {
        case .null: return "null"
        case .bool(let value): return value ? "true" : "false"
        case .number(let value):
            return value == value.rounded() && abs(value) < 9.0e15 ? String(Int64(value)) : String(value)
        case .string(let value): return Self.quoted(value)
        case .array(let values): return "[" + values.map(\.description).joined(separator: ",") + "]"
        case .object(let members):
            return "{" + members.sorted { $0.key < $1.key }.map { Self.quoted($0.key) + ":" + $0.value.description }
                .joined(separator: ",") + "}"
        }
    }

    private static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
