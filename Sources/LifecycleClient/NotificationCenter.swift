import LifecycleModel

/// A notification delivered on the main actor, in the spirit of Foundation's `Notification`.
public struct LifecycleNotification: Sendable {
    public struct Name: RawRepresentable, Hashable, Sendable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public init(_ rawValue: String) { self.rawValue = rawValue }
    }

    public var name: Name
    /// Extra values; for lifecycle notifications, `"id"` of the message.
    public var userInfo: [String: String]
    /// For a posted notification coalesced `latest` or `merge`: the (net) payload.
    public var payload: JSONValue?
    /// For a type coalesced `none`: every payload kept while the app slept, oldest first.
    public var payloads: [JSONValue]?
    /// How many posts this delivery stands for (more than 1 after a sleep), and how many were dropped.
    public var posts: Int
    public var dropped: Int

    public init(name: Name, userInfo: [String: String] = [:], payload: JSONValue? = nil,
                payloads: [JSONValue]? = nil, posts: Int = 1, dropped: Int = 0) {
        self.name = name
        self.userInfo = userInfo
        self.payload = payload
        self.payloads = payloads
        self.posts = posts
        self.dropped = dropped
    }
}

extension LifecycleNotification.Name {
    /// UIApplication's notification names, posted right after the delegate's method of the same callback.
    public static let didFinishLaunching = Self("didFinishLaunching")
    public static let didBecomeActive = Self("didBecomeActive")
    public static let willResignActive = Self("willResignActive")
    public static let didEnterBackground = Self("didEnterBackground")
    public static let willEnterForeground = Self("willEnterForeground")
    public static let willTerminate = Self("willTerminate")
    public static let didReceiveMemoryWarning = Self("didReceiveMemoryWarning")
    /// The system sources' notifications.
    public static let significantTimeChange = Self("significantTimeChange")
    public static let currentLocaleDidChange = Self("currentLocaleDidChange")
    public static let batteryLevelDidChange = Self("batteryLevelDidChange")
    public static let batteryStateDidChange = Self("batteryStateDidChange")
    public static let userDefaultsDidChange = Self("userDefaultsDidChange")

    /// The name of the notification that accompanies a lifecycle callback.
    public static func lifecycle(_ callback: LifecycleCallback) -> Self { Self(callback.rawValue) }
}

/// Observers of notifications by name, like `NotificationCenter.addObserver(forName:object:queue:using:)`.
/// Observers run synchronously on the main actor, before the message is acknowledged.
@MainActor
public final class LifecycleNotificationCenter {
    /// Keeps an observation alive; `remove()` ends it.
    @MainActor
    public final class Observation {
        fileprivate let id: Int
        fileprivate weak var center: LifecycleNotificationCenter?
        fileprivate init(id: Int, center: LifecycleNotificationCenter) {
            self.id = id
            self.center = center
        }
        public func remove() { center?.observers[id] = nil }
    }

    /// `name` nil: every notification (Foundation's `addObserver(forName: nil, …)`).
    private var observers: [Int: (name: LifecycleNotification.Name?, block: @MainActor (LifecycleNotification) -> Void)] = [:] {
        didSet {
            let names = observedNames
            if names != Self.names(of: oldValue) { namesChanged?(names) }
        }
    }
    private var nextID = 0
    /// Tells the application which names are observed, so that the daemon sends only those.
    var namesChanged: ((Set<String>) -> Void)?

    public init() {}

    /// The names some observer is registered for: what the daemon is asked to send. An observer of every
    /// notification adds none; it hears what the app gets for the others, and what every app gets (memory warnings).
    public var observedNames: Set<String> { Self.names(of: observers) }

    private static func names(of observers: [Int: (name: LifecycleNotification.Name?, block: @MainActor (LifecycleNotification) -> Void)]) -> Set<String> {
        Set(observers.values.compactMap(\.name?.rawValue))
    }

    /// `name` nil observes every notification, the lifecycle ones included.
    @discardableResult
    public func addObserver(forName name: LifecycleNotification.Name?,
                            using block: @escaping @MainActor (LifecycleNotification) -> Void) -> Observation {
        nextID += 1
        observers[nextID] = (name, block)
        return Observation(id: nextID, center: self)
    }

    /// Calls every observer of the notification's name, in the order they were added.
    public func post(_ notification: LifecycleNotification) {
        for id in observers.keys.sorted() {
            guard let observer = observers[id], observer.name == nil || observer.name == notification.name else { continue }
            observer.block(notification)
        }
    }
}
