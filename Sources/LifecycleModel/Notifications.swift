/// How posts of one notification type to an app that cannot receive them now are folded together.
/// A property of the type, declared with it (`NotificationCatalog`).
public enum Coalescing: String, Sendable, Equatable, CaseIterable, Codable {
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
        "didReceiveMemoryWarning": .count,
        "userDefaultsDidChange": .merge,
    ]

    public init(extra: [String: Coalescing] = [:]) {
        types = Self.systemTypes.merging(extra) { _, declared in declared }
    }

    public func coalescing(of type: String) -> Coalescing? { types[type] }
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
    /// For `none`: how many of the oldest payloads were dropped past the bound.
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
    struct Entry: Sendable, Equatable {
        var coalescing: Coalescing
        var payload: JSONValue?
        var payloads: [JSONValue] = []
        var posts = 0
        var dropped = 0
    }

    private var order: [String] = []
    private var entries: [String: Entry] = [:]
    /// The most payloads a `none` type keeps per app.
    public let limit: Int

    public init(limit: Int = 64) { self.limit = max(1, limit) }

    public var isEmpty: Bool { order.isEmpty }
    /// Entries held: one per type.
    public var count: Int { order.count }
    /// Posts folded into the held entries.
    public var postCount: Int { entries.values.reduce(0) { $0 + $1.posts } }

    public mutating func add(_ name: String, payload: JSONValue, coalescing: Coalescing) {
        var entry = entries[name] ?? {
            order.append(name)
            return Entry(coalescing: coalescing)
        }()
        entry.posts += 1
        switch coalescing {
        case .latest: entry.payload = payload
        case .count: entry.payload = nil
        case .merge: entry.payload = entry.payload.map { $0.merged(with: payload) } ?? payload
        case .none:
            entry.payloads.append(payload)
            if entry.payloads.count > limit {
                entry.payloads.removeFirst(entry.payloads.count - limit)
                entry.dropped += 1
            }
        }
        entries[name] = entry
    }

    /// Everything held, one delivery per type in first-post order, and the queue emptied.
    /// Types `accept` rejects (no longer observed) are dropped.
    public mutating func drain(accepting accept: (String) -> Bool = { _ in true }) -> [NotificationDelivery] {
        defer {
            order = []
            entries = [:]
        }
        return order.compactMap { name in
            guard accept(name), let entry = entries[name] else { return nil }
            return switch entry.coalescing {
            case .none: NotificationDelivery(name: name, payloads: entry.payloads, posts: entry.posts, dropped: entry.dropped)
            default: NotificationDelivery(name: name, payload: entry.payload, posts: entry.posts)
            }
        }
    }
}
