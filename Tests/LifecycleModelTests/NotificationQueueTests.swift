import Foundation
import LifecycleProtocol
import Testing
@testable import LifecycleModel

/// The per-app notification queue: while an app cannot receive, posts of a type fold into one entry by the
/// type's coalescing, so that on waking the app hears the net change, as UIKit's suspended apps do.
@Suite("Notification queue and coalescing")
struct NotificationQueueTests {
    // MARK: Coalescing

    @Test("latest keeps the last payload, and the delivery says how many posts it stands for")
    func latestKeepsLastPayload() {
        var queue = NotificationQueue()

        for level in [80, 60, 40] { queue.add("batteryLevelDidChange", payload: ["level": .number(Double(level))], coalescing: .latest) }

        #expect(queue.drain() == [NotificationDelivery(name: "batteryLevelDidChange", payload: ["level": 40], posts: 3)])
    }

    @Test("count sends one message with the number of posts and no payload")
    func countHasNoPayload() {
        var queue = NotificationQueue()

        for minute in 0..<5 { queue.add("significantTimeChange", payload: ["minute": .number(Double(minute))], coalescing: .count) }

        let deliveries = queue.drain()
        #expect(deliveries == [NotificationDelivery(name: "significantTimeChange", payload: nil, posts: 5)])
        #expect(deliveries.first?.payloads == nil)
    }

    @Test("merge takes the union of the objects' keys, the later value winning")
    func mergeUnitesKeys() {
        var queue = NotificationQueue()

        queue.add("userDefaultsDidChange", payload: ["theme": "dark", "volume": 3], coalescing: .merge)
        queue.add("userDefaultsDidChange", payload: ["volume": 7, "language": "fr"], coalescing: .merge)
        queue.add("userDefaultsDidChange", payload: ["theme": "light"], coalescing: .merge)

        #expect(queue.drain() == [NotificationDelivery(name: "userDefaultsDidChange",
                                                       payload: ["theme": "light", "volume": 7, "language": "fr"],
                                                       posts: 3)])
    }

    @Test("merge replaces a payload when either side is not an object",
          arguments: [(["a": 1], "text"), ("text", ["a": 1]), ([1, 2], [3]), (["a": 1], nil), (5, true)] as [(JSONValue, JSONValue)])
    func mergeReplacesNonObjects(_ earlier: JSONValue, _ later: JSONValue) {
        var queue = NotificationQueue()

        queue.add("userDefaultsDidChange", payload: earlier, coalescing: .merge)
        queue.add("userDefaultsDidChange", payload: later, coalescing: .merge)

        #expect(queue.drain() == [NotificationDelivery(name: "userDefaultsDidChange", payload: later, posts: 2)])
    }

    @Test("none keeps every payload in order while within the limit")
    func noneKeepsEveryPayload() {
        var queue = NotificationQueue(limit: 4)

        for text in ["a", "b", "c"] { queue.add("message", payload: .string(text), coalescing: .none) }

        #expect(queue.drain() == [NotificationDelivery(name: "message", payloads: ["a", "b", "c"], posts: 3, dropped: 0)])
    }

    @Test("none past its limit drops the oldest payloads and counts them")
    func noneDropsOldestPastLimit() {
        var queue = NotificationQueue(limit: 3)

        for index in 1...10 { queue.add("message", payload: .number(Double(index)), coalescing: .none) }

        #expect(queue.drain().first == NotificationDelivery(name: "message", payloads: [8, 9, 10], posts: 10, dropped: 7))
    }

    @Test("a none type drained after overflowing starts afresh: no payload or drop count carries over")
    func noneAfterOverflowStartsAfresh() {
        var queue = NotificationQueue(limit: 2)
        for index in 1...5 { queue.add("message", payload: .number(Double(index)), coalescing: .none) }
        _ = queue.drain()

        queue.add("message", payload: 6, coalescing: .none)

        #expect(queue.drain() == [NotificationDelivery(name: "message", payloads: [6], posts: 1, dropped: 0)])
    }

    @Test("a limit below one keeps one payload")
    func limitIsAtLeastOne() {
        var queue = NotificationQueue(limit: 0)

        queue.add("message", payload: "first", coalescing: .none)
        queue.add("message", payload: "second", coalescing: .none)

        #expect(queue.limit == 1)
        #expect(queue.drain() == [NotificationDelivery(name: "message", payloads: ["second"], posts: 2, dropped: 1)])
    }

    @Test("a single post is delivered as it came, with posts 1", arguments: Coalescing.allCases)
    func singlePost(_ coalescing: Coalescing) {
        var queue = NotificationQueue()

        queue.add("t", payload: ["k": "v"], coalescing: coalescing)

        let expected = switch coalescing {
        case .none: NotificationDelivery(name: "t", payloads: [["k": "v"]], posts: 1)
        case .count: NotificationDelivery(name: "t", payload: nil, posts: 1)
        case .latest, .merge: NotificationDelivery(name: "t", payload: ["k": "v"], posts: 1)
        }
        #expect(queue.drain() == [expected])
    }

    // MARK: Bounds and order

    @Test("a million posts of three latest types hold three entries")
    func memoryBoundedByTypes() {
        var queue = NotificationQueue()
        let types = ["batteryLevelDidChange", "batteryStateDidChange", "currentLocaleDidChange"]

        for post in 0..<1_000_000 { queue.add(types[post % 3], payload: .number(Double(post)), coalescing: .latest) }

        #expect(queue.count == 3)
        #expect(queue.postCount == 1_000_000)
        #expect(queue.drain() == [NotificationDelivery(name: "batteryLevelDidChange", payload: 999_999, posts: 333_334),
                                  NotificationDelivery(name: "batteryStateDidChange", payload: 999_997, posts: 333_333),
                                  NotificationDelivery(name: "currentLocaleDidChange", payload: 999_998, posts: 333_333)])
    }

    @Test("a none type holds at most its limit of payloads however many are posted")
    func noneBoundedByLimit() {
        var queue = NotificationQueue(limit: 64)

        for post in 0..<10_000 { queue.add("message", payload: .number(Double(post)), coalescing: .none) }

        let delivery = queue.drain().first
        #expect(delivery?.payloads?.count == 64)
        #expect(delivery?.payloads?.first == 9_936)
        #expect(delivery?.posts == 10_000)
        #expect(delivery?.dropped == 9_936)
    }

    @Test("drain delivers one message per type in the order each type was first posted, however they interleave")
    func drainInFirstPostOrder() {
        var queue = NotificationQueue()

        queue.add("c", payload: 1, coalescing: .latest)
        queue.add("a", payload: 1, coalescing: .count)
        queue.add("c", payload: 2, coalescing: .latest)
        queue.add("b", payload: ["x": 1], coalescing: .merge)
        queue.add("a", payload: 2, coalescing: .count)
        queue.add("c", payload: 3, coalescing: .latest)

        #expect(queue.drain().map(\.name) == ["c", "a", "b"])
    }

    @Test("drain empties the queue, and the next posts start a new order")
    func drainEmpties() {
        var queue = NotificationQueue()
        queue.add("a", payload: 1, coalescing: .latest)
        queue.add("b", payload: 1, coalescing: .latest)

        _ = queue.drain()
        #expect(queue.isEmpty && queue.count == 0 && queue.postCount == 0)
        #expect(queue.drain() == [])

        queue.add("b", payload: 2, coalescing: .latest)
        queue.add("a", payload: 2, coalescing: .latest)
        #expect(queue.drain() == [NotificationDelivery(name: "b", payload: 2, posts: 1),
                                  NotificationDelivery(name: "a", payload: 2, posts: 1)])
    }

    @Test("drain(accepting:) drops the types not accepted, keeping the others' order, and forgets them all")
    func drainAccepting() {
        var queue = NotificationQueue()
        for name in ["a", "b", "c", "d"] { queue.add(name, payload: 1, coalescing: .latest) }

        let delivered = queue.drain { $0 != "b" && $0 != "d" }

        #expect(delivered.map(\.name) == ["a", "c"])
        #expect(queue.isEmpty, "rejected types are dropped, not kept for later")
    }

    @Test("count and postCount follow types and posts")
    func countsTypesAndPosts() {
        var queue = NotificationQueue()

        queue.add("a", payload: 1, coalescing: .latest)
        queue.add("a", payload: 2, coalescing: .latest)
        queue.add("b", payload: 1, coalescing: .count)

        #expect(!queue.isEmpty)
        #expect(queue.count == 2)
        #expect(queue.postCount == 3)
    }

    // MARK: JSONValue

    @Test("merged(with:) unites two objects, the later value winning, and does not look inside nested objects")
    func jsonMerge() {
        let base: JSONValue = ["a": 1, "b": ["x": 1, "y": 2], "c": "keep"]
        let update: JSONValue = ["a": 2, "b": ["x": 9], "d": nil]

        #expect(base.merged(with: update) == ["a": 2, "b": ["x": 9], "c": "keep", "d": nil])
    }

    @Test("merged(with:) returns the later value when either side is not an object")
    func jsonMergeNonObjects() {
        #expect((["a": 1] as JSONValue).merged(with: 3) == 3)
        #expect((3 as JSONValue).merged(with: ["a": 1]) == ["a": 1])
        #expect(([1] as JSONValue).merged(with: [2]) == [2])
        #expect(JSONValue.null.merged(with: "x") == "x")
    }

    @Test("JSONValue is written with whole numbers as integers and round-trips")
    func jsonRoundTrip() throws {
        let value: JSONValue = ["int": 3, "negative": -42, "zero": 0, "fraction": 2.5, "big": 1_000_000_000_000,
                                "text": "hi", "flag": true, "nothing": nil, "list": [1, "two", false, [3.25]],
                                "nested": ["level": 40]]
        let line = LineCoder().encode(value)
        let text = String(decoding: line, as: UTF8.self)

        #expect(text == #"{"big":1000000000000,"flag":true,"fraction":2.5,"int":3,"list":[1,"two",false,[3.25]],"# +
                        #""negative":-42,"nested":{"level":40},"nothing":null,"text":"hi","zero":0}"# + "\n")
        #expect(!text.contains(".0"))
        #expect(try LineCoder().decode(JSONValue.self, from: line) == value)
    }

    @Test("JSONValue reads each JSON kind", arguments: [
        (#"null"#, JSONValue.null), (#"true"#, .bool(true)),
        (#"7"#, .number(7)), (#"-0.5"#, .number(-0.5)), (#""s""#, .string("s")),
        (#"[1,null]"#, .array([.number(1), .null])), (#"{"k":{"j":[]}}"#, .object(["k": .object(["j": .array([])])])),
    ])
    func jsonDecodes(_ text: String, _ expected: JSONValue) throws {
        #expect(try LineCoder().decode(JSONValue.self, from: Array(text.utf8)) == expected)
    }

    @Test("numbers beyond the integer range and fractions survive the round trip", arguments: [1e20, -1e20, 0.1, 9.5e15])
    func jsonLargeNumber(_ number: Double) throws {
        let line = LineCoder().encode(JSONValue.number(number))

        #expect(try LineCoder().decode(JSONValue.self, from: line) == .number(number))
    }
}

@Suite("JSONValue text")
struct JSONValueTextTests {
    @Test("description is compact JSON with sorted keys and escapes")
    func describesAsJSON() {
        let value: JSONValue = ["b": [1, 2.5, true, nil], "a": "x\"y\n\u{1}"]
        #expect(value.description == #"{"a":"x\"y\n\u0001","b":[1,2.5,true,null]}"#)
    }
}

/// The byte budget: whatever is held for one type fits in one protocol line when delivered.
@Suite("Notification queue byte budget")
struct NotificationBudgetTests {
    static func blob(_ tag: Int, bytes: Int) -> JSONValue { .object(["k\(tag)": .string(String(repeating: "x", count: bytes))]) }

    @Test("none keeps the newest payloads that fit in the budget, and counts the others as dropped")
    func noneKeepsWithinBudget() throws {
        var queue = NotificationQueue(limit: 64)
        for tag in 0..<5 { queue.add("message", payload: Self.blob(tag, bytes: 20_000), coalescing: .none) }
        let delivery = try #require(queue.drain().first)
        // Three of about 20 KB fit in 60 KiB; the two oldest went.
        #expect(delivery.payloads == (2..<5).map { Self.blob($0, bytes: 20_000) })
        #expect(delivery.dropped == 2)
        #expect(delivery.posts == 5)
        let total = delivery.payloads!.reduce(0) { $0 + $1.encodedSizeBound }
        #expect(total <= NotificationQueue.payloadBudget)
    }

    @Test("merge starts again from the latest post when the union outgrows the budget, saying how many it set aside")
    func mergeRestartsPastBudget() throws {
        var queue = NotificationQueue()
        for tag in 0..<7 { queue.add("prefs", payload: Self.blob(tag, bytes: 10_000), coalescing: .merge) }
        let delivery = try #require(queue.drain().first)
        // Six keys of 10 KB fit (about 60 KB); the seventh does not: the union restarts with it alone.
        #expect(delivery.payload == Self.blob(6, bytes: 10_000))
        #expect(delivery.dropped == 6)
        #expect(delivery.posts == 7)
    }

    @Test("a post whose payload alone is over the budget is refused, saying why")
    func oversizedPostRefused() throws {
        var model = Supervisor()
        model.add("a", policy: AppPolicy())
        let payload = Self.blob(0, bytes: NotificationQueue.payloadBudget)
        #expect(throws: PostError(type: "batteryLevelDidChange",
                                  reason: .payloadTooLarge(size: payload.encodedSizeBound, limit: NotificationQueue.payloadBudget))) {
            try model.post("batteryLevelDidChange", payload: payload, to: "a", now: .zero)
        }
        let error = PostError(type: "batteryLevelDidChange", reason: .payloadTooLarge(size: 61_448, limit: 61_440))
        #expect(error.description.contains("over the 61440 bytes one notification may carry"))
    }
}
