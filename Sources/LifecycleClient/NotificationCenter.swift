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

    public init(name: Name, userInfo: [String: String] = [:]) {
        self.name = name
        self.userInfo = userInfo
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

    private var observers: [Int: (name: LifecycleNotification.Name, block: @MainActor (LifecycleNotification) -> Void)] = [:]
    private var nextID = 0

    public init() {}

    @discardableResult
    public func addObserver(forName name: LifecycleNotification.Name,
                            using block: @escaping @MainActor (LifecycleNotification) -> Void) -> Observation {
        nextID += 1
        observers[nextID] = (name, block)
        return Observation(id: nextID, center: self)
    }

    /// Calls every observer of the notification's name, in the order they were added.
    public func post(_ notification: LifecycleNotification) {
        for id in observers.keys.sorted() {
            guard let observer = observers[id], observer.name == notification.name else { continue }
            observer.block(notification)
        }
    }
}
