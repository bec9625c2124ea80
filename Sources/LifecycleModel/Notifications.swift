/// How posts of one notification type to an app that cannot receive them now are folded together.
/// A property of the type, declared with it (`NotificationCatalog`).
public enum Coalescing: String, Sendable, Equatable, CaseIterable {
    /// Keep the last payload (orientation, battery level, locale, a preference).
    case latest
    /// One message saying how many posts there were.
    case count
    /// The union of the payloads' keys, the later value winning.
    case merge
    /// Keep every payload, in order, up to the per-app bound; past it the oldest are dropped and counted.
    case none
}

/// The notification types the daemon knows, with their coalescing. Posting an undeclared type is refused:
/// the coalescing of a type must be known before its first post can be queued.
public struct NotificationCatalog: Sendable, Equatable {
    public private(set) var types: [String: Coalescing]

    /// The types of the real system sources, coalesced as UIKit's counterparts are:
    /// each reflects "the net change since your app was suspended".
    public static let systemTypes: [String: Coalescing] = [
        "significantTimeChange": .count,
        "currentLocaleDidChange": .latest,
        "batteryLevelDidChange": .latest,
        "batteryStateDidChange": .latest,
        // The last pressure reading, and `posts` says how many warnings there were.
        "didReceiveMemoryWarning": .latest,
        "userDefaultsDidChange": .merge,
    ]

    public init(extra: [String: Coalescing] = [:]) {
        types = Self.systemTypes.merging(extra) { _, declared in declared }
    }

    public func coalescing(of type: String) -> Coalescing? { types[type] }

    /// Whether an app's client may post `type`: the types declared in `[NotificationTypes]` that are not the
    /// system's (a system type listed there only changes its coalescing; it stays the daemon's alone).
    public func clientMayPost(_ type: String) -> Bool { types[type] != nil && Self.systemTypes[type] == nil }

    /// The types clients may post, sorted.
    public var clientTypes: [String] { types.keys.filter(clientMayPost).sorted() }
}

/// One notification as the client receives it.
public struct NotificationDelivery: Sendable, Equatable {
    public var name: String
    /// For `latest` and `merge`: the (net) payload. For `count`: nil.
    public var payload: JSONValue?
    /// For `none`: every kept payload, oldest first.
    public var payloads: [JSONValue]?
    /// How many posts this message stands for.
    public var posts: Int
    /// For `none`: how many of the oldest payloads were dropped past the bounds (count or bytes). For `merge`:
    /// how many earlier posts were set aside because their union outgrew `payloadBudget`.
    public var dropped: Int

    public init(name: String, payload: JSONValue? = nil, payloads: [JSONValue]? = nil, posts: Int = 1, dropped: Int = 0) {
        self.name = name
        self.payload = payload
        self.payloads = payloads
        self.posts = posts
        self.dropped = dropped
    }
}

/// The notifications held for one app while it cannot receive them: one entry per type, in the order
/// each type was first posted, so its memory is bounded by the number of types, not of posts.
public struct NotificationQueue: Sendable, Equatable {
    /// The most bytes of payload one delivered notification carries (its `payload`, or all its `payloads`), so
    /// that the message fits in one protocol line (65,536 bytes) with its envelope and a type name of up to
    /// 255 bytes. A post whose payload alone is larger is refused.
    public static let payloadBudget = 60 * 1024

    struct Entry: Sendable, Equatable {
        var name: String
        var coalescing: Coalescing
        var payload: JSONValue?
        /// For `none`: the kept payloads are `payloads[oldest...]` (older ones are dropped by moving `oldest`, and
        /// the array is compacted now and then), with their sizes and the sum of the kept ones.
        var payloads: [JSONValue] = []
        var sizes: [Int] = []
        var oldest = 0
        var bytes = 0
        var posts = 0
        var dropped = 0

        init(name: String, coalescing: Coalescing, payload: JSONValue? = nil, payloads: [JSONValue] = [], posts: Int = 0, dropped: Int = 0) {
            self.name = name
            self.coalescing = coalescing
            self.payload = payload
            self.posts = posts
            self.dropped = dropped
            for kept in payloads { keep(kept, size: kept.encodedSizeBound, limit: .max) }
        }

        var keptPayloads: [JSONValue] { Array(payloads[oldest...]) }

        /// Keep one more payload; the oldest go while more than `limit` are kept or their bytes exceed the budget.
        mutating func keep(_ payload: JSONValue, size: Int, limit: Int) {
            payloads.append(payload)
            sizes.append(size)
            bytes += size
            while payloads.count - oldest > 1, payloads.count - oldest > limit || bytes > NotificationQueue.payloadBudget {
                bytes -= sizes[oldest]
                oldest += 1
                dropped += 1
            }
            if oldest >= 32, oldest * 2 >= payloads.count {
                payloads.removeFirst(oldest)
                sizes.removeFirst(oldest)
                oldest = 0
            }
        }
    }

    /// Entries in first-post order, and where each type's entry is. Entries are mutated in place: a sleeping app
    /// may be posted to many times, and each post must cost the same however many came before.
    private var entries: [Entry] = []
    private var index: [String: Int] = [:]
    /// The most payloads a `none` type keeps per app.
    public let limit: Int

    public init(limit: Int = 64) { self.limit = max(1, limit) }

    /// The entries as they are (for persisting them).
    var storedEntries: [Entry] { entries }

    /// Put back an entry persisted earlier.
    mutating func restore(_ entry: Entry) {
        index[entry.name] = entries.count
        entries.append(entry)
    }

    public var isEmpty: Bool { entries.isEmpty }
    /// Entries held: one per type.
    public var count: Int { entries.count }
    /// Posts folded into the held entries.
    public var postCount: Int { entries.reduce(0) { $0 + $1.posts } }

    /// `size`: the payload's `encodedSizeBound` when the caller has it (at most `payloadBudget`: `Supervisor.post`
    /// refuses larger payloads).
    public mutating func add(_ name: String, payload: JSONValue, size: Int? = nil, coalescing: Coalescing) {
        let position: Int
        if let existing = index[name] {
            position = existing
        } else {
            position = entries.count
            index[name] = position
            entries.append(Entry(name: name, coalescing: coalescing))
        }
        entries[position].posts += 1
        switch coalescing {
        case .latest: entries[position].payload = payload
        case .count: break
        case .merge:
            let merged = entries[position].payload.map { $0.merged(with: payload) } ?? payload
            if merged.encodedSizeBound <= Self.payloadBudget {
                entries[position].payload = merged
            } else {
                // The union no longer fits in one message: it starts again from this post, and says how many
                // posts it set aside.
                entries[position].dropped += entries[position].posts - 1
                entries[position].payload = payload
            }
        case .none:
            entries[position].keep(payload, size: size ?? payload.encodedSizeBound, limit: limit)
        }
    }

    /// Everything held, one delivery per type in first-post order, and the queue emptied.
    /// Types `accept` rejects (no longer observed) are dropped.
    public mutating func drain(accepting accept: (String) -> Bool = { _ in true }) -> [NotificationDelivery] {
        defer {
            entries = []
            index = [:]
        }
        return entries.compactMap { entry in
            guard accept(entry.name) else { return nil }
            switch entry.coalescing {
            case .none:
                return NotificationDelivery(name: entry.name, payloads: entry.keptPayloads, posts: entry.posts, dropped: entry.dropped)
            default:
                return NotificationDelivery(name: entry.name, payload: entry.payload, posts: entry.posts, dropped: entry.dropped)
            }
        }
    }
}
