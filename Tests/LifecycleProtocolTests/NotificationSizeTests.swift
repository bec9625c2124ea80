import LifecycleModel
@testable import LifecycleProtocol
import Testing

/// A notification held for a sleeping app must still fit in one protocol line when it is delivered: the model
/// bounds payloads by `JSONValue.encodedSizeBound` without encoding them, so that bound must never be below the
/// bytes LineCoder writes.
@Suite("Notification size bounds")
struct NotificationSizeTests {
    static func awkwardValue(_ seed: Int) -> JSONValue {
        let strings = JSONCodingTests.awkwardStrings
        let numbers = JSONCodingTests.awkwardNumbers
        return .object([
            "text \(seed)": .string(strings[seed % strings.count]),
            "n": .number(numbers[seed % numbers.count]),
            "list": .array([.null, .bool(seed % 2 == 0), .string(strings[(seed + 3) % strings.count]), .number(-numbers[(seed + 1) % numbers.count])]),
            "nested": .object(["\u{1}key\"/": .string(String(repeating: "\u{2}\\\"", count: seed % 7))]),
        ])
    }

    @Test("the size bound is never below the JSON LineCoder writes", arguments: 0..<64)
    func boundCoversEncoding(seed: Int) {
        let value = Self.awkwardValue(seed)
        let written = LineCoder().encode(value).count
        #expect(value.encodedSizeBound >= written, "bound \(value.encodedSizeBound) < \(written) bytes written")
    }

    @Test("the fullest notification a sleeping app can be owed is one line, with a 255-byte type name")
    func fullestNotificationFitsOneLine() throws {
        let name = String(repeating: "t", count: 255)
        var queue = NotificationQueue(limit: 10_000)
        var seed = 0
        // Many awkward payloads (escapes inflate them), far past the budget: the oldest go.
        for _ in 0..<5_000 {
            queue.add(name, payload: Self.awkwardValue(seed), coalescing: .none)
            seed += 1
        }
        let delivery = try #require(queue.drain().first)
        #expect(delivery.dropped > 0)
        #expect(delivery.posts == 5_000)
        let line = LineCoder().encode(ServerMessage.notification(delivery))
        #expect(line.count <= maxLineLength, "\(line.count) bytes")
        #expect(delivery.payloads?.last == Self.awkwardValue(seed - 1), "the newest payload is kept")
    }
}
