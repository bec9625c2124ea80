// Posting notifications: a post is delivered at once to an app that can hear it, held in the app's
// NotificationQueue (coalesced by its type's rule, in Notifications.swift) while it is suspended or has not said
// hello, and flushed when it can hear again. The post's result and refusal types live here too.

extension Supervisor {
    /// Post a notification: delivered at once to apps that can receive it, queued (coalesced) for the ones
    /// that are suspended or not connected yet, dropped for the others (not running, not observing the type,
    /// or not speaking the protocol). `app` nil: every app. An app's client (`origin` `.client`) may post only
    /// the types declared for client posts (`NotificationCatalog.clientMayPost`).
    mutating func post(_ type: String, payload: JSONValue, to app: String?, from origin: PostOrigin) throws(PostError) -> PostOutcome {
        guard let coalescing = catalog.coalescing(of: type) else {
            throw PostError(type: type, reason: .unknownType(known: catalog.types.keys.sorted()))
        }
        if case .client = origin, !catalog.clientMayPost(type) {
            throw PostError(type: type, reason: .systemType(clientTypes: catalog.clientTypes))
        }
        if let app, !table.contains(app) { throw PostError(type: type, reason: .unknownApp(app)) }
        // Whatever is queued must still fit in one protocol line when it is delivered.
        let size = payload.encodedSizeBound
        guard size <= NotificationQueue.payloadBudget else {
            throw PostError(type: type, reason: .payloadTooLarge(size: size, limit: NotificationQueue.payloadBudget))
        }
        var outcome = PostOutcome()
        func count(_ offer: Offer) {
            switch offer {
            case .delivered: outcome.delivered += 1
            case .queued: outcome.queued += 1
            case .dropped: break
            }
        }
        if let app {
            count(offer(type, payload: payload, size: size, coalescing: coalescing, to: table.slot(app)))
        } else {
            for slot in table.records.indices { count(offer(type, payload: payload, size: size, coalescing: coalescing, to: slot)) }
        }
        return outcome
    }

    enum Offer { case delivered, queued, dropped }

    mutating func offer(_ type: String, payload: JSONValue, size: Int, coalescing: Coalescing, to slot: Int) -> Offer {
        // The record is read and written in place, never copied out: a live copy would make the queue's add copy
        // its storage.
        let name = table[slot].name
        // A memory warning goes to every app, as UIKit's applicationDidReceiveMemoryWarning does.
        let receives = table[slot].state.isRunning && table[slot].policy.speaksProtocol
            && !table[slot].muted && !table[slot].isTerminating
            && (!table[slot].connected || type == memoryWarningType || table[slot].observing.contains(type))
        let connected = table[slot].connected
        let suspended = table[slot].state == .suspended
        let limit = table[slot].policy.queueLimit
        // Before its hello the client has not said what it observes: hold everything, filter at delivery.
        guard receives else { return .dropped }
        if connected && !suspended {
            var single = NotificationQueue(limit: limit)
            single.add(type, payload: payload, size: size, coalescing: coalescing)
            for delivery in single.drain() { emit(.notify(app: name, delivery)) }
            return .delivered
        }
        table[slot].queue.add(type, payload: payload, size: size, coalescing: coalescing)
        changedSavedState(name)
        return .queued
    }

    /// The app can receive again (connected, or continued): one message per queued type, in first-post order.
    mutating func flushNotifications(_ name: String) {
        guard let app = table.record(name), app.canMessage, app.state != .suspended, !app.queue.isEmpty else { return }
        let observing = app.observing
        for delivery in table[name].queue.drain(accepting: { $0 == memoryWarningType || observing.contains($0) }) {
            emit(.notify(app: name, delivery))
        }
    }
}

/// The notification type of memory warnings, which every app gets without observing it.
public let memoryWarningType = "didReceiveMemoryWarning"

/// Who posts a notification.
public enum PostOrigin: Sendable, Equatable {
    /// The daemon's own sources, and lifectl (whose posts need root or `[Control] Group=`): any declared type.
    case daemon
    /// The client of the named app, over its own connection: only the types declared for client posts. A system
    /// type delivered to an app therefore always comes from the daemon, and one app cannot make another believe
    /// that the battery, the memory or its preferences changed.
    case client(String)
}

/// What a post did.
struct PostOutcome: Sendable, Equatable {
    var delivered = 0
    var queued = 0
}

/// A post the model cannot take.
public struct PostError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Reason: Sendable, Equatable {
        case unknownType(known: [String])
        case unknownApp(String)
        case payloadTooLarge(size: Int, limit: Int)
        /// A client posted one of the daemon's own types.
        case systemType(clientTypes: [String])
    }
    public var type: String
    public var reason: Reason

    public var description: String {
        switch reason {
        case .unknownType(let known):
            "cannot post '\(type)': no such notification type (declare it in lifecycled.conf [NotificationTypes]; known: \(known.joined(separator: ", ")))"
        case .unknownApp(let app):
            "cannot post '\(type)' to '\(app)': no such app"
        case .systemType(let clientTypes):
            "cannot post '\(type)': it is a system notification, posted only by lifecycled; apps may post the types "
                + "declared in lifecycled.conf [NotificationTypes] "
                + (clientTypes.isEmpty ? "(none is declared)" : "(\(clientTypes.joined(separator: ", ")))")
        case .payloadTooLarge(let size, let limit):
            "cannot post '\(type)': its payload is about \(size) bytes of JSON, over the \(limit) bytes one notification may carry"
        }
    }
}
