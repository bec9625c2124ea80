import LifecycleModel
import LifecycleProtocol

/// The control connections that sent `watch` (docs/CONTROL.md, "watch"): each gets a snapshot of the apps, then one
/// line per change the daemon's observers are told of, until it hangs up.
///
/// A watcher is never waited on. Its lines are queued on its connection; one that left more than `maxUnsent` bytes
/// unread is dropped with a last line saying so (written if its socket takes it within `dropGrace`) and a log line.
/// Each line is encoded once, whatever the number of watchers, and what a watcher costs is bounded by its queue.
final class ControlWatchers: AppObserver {
    /// Hundreds of lines behind: a watcher that reads at all keeps up with any burst of transitions; one that stops
    /// reading is dropped long before its queue matters to the daemon (`Connection.maxOutgoing`).
    static let maxUnsent = 64 * 1024
    /// How long a dropped watcher has to take its last line before the connection closes regardless.
    static let dropGrace: Duration = .seconds(5)

    private struct Watcher {
        let client: ControlClient
        /// Only this app's lines; nil for every app.
        let app: String?
        /// `maxUnsent` plus the snapshot: a daemon with thousands of apps sends more than the bound at once, and a
        /// watcher still reading it has not fallen behind.
        let bound: Int
    }

    private unowned let host: any DaemonHost
    private let requests: ControlRequests
    private let coder = LineCoder()
    private var watchers: [ObjectIdentifier: Watcher] = [:]

    init(host: any DaemonHost, requests: ControlRequests) {
        self.host = host
        self.requests = requests
    }

    /// Starts a watch for `client`: the snapshot and `ready` now, the changes from then on. Nil when it started,
    /// else the failure to answer with (an unknown app, a second watch on one connection).
    func start(_ client: ControlClient, app: String?) -> ControlReply? {
        let key = ObjectIdentifier(client)
        guard watchers[key] == nil else { return .failure("this connection is watching already") }
        let statuses: [AppStatus]
        if let app {
            guard let status = requests.status(of: app) else { return .failure("no such app '\(app)'") }
            statuses = [status]
        } else {
            statuses = requests.allStatuses()
        }
        var snapshot: [UInt8] = []
        for status in statuses {
            snapshot += coder.encode(WatchEvent(event: "app", app: status.name, state: status.state.rawValue,
                                                pid: status.pid, since: status.since))
            for scene in status.scenes ?? [] {
                snapshot += coder.encode(WatchEvent(event: "scene", app: status.name, scene: scene.scene, state: scene.state))
            }
        }
        snapshot += coder.encode(WatchEvent(event: "ready", time: rfc3339(wallClockNow()),
                                            protocol: ControlRequest.protocolVersion))
        client.connection?.send(snapshot)
        watchers[key] = Watcher(client: client, app: app, bound: Self.maxUnsent + snapshot.count)
        return nil
    }

    /// The client's connection closed: forget it.
    func remove(_ client: ControlClient) {
        watchers[ObjectIdentifier(client)] = nil
    }

    /// The daemon stops: every watcher gets a last line, then its connection closes.
    func closeAll(_ reason: String) {
        let line = coder.encode(WatchEvent(event: "closing", reason: reason, time: rfc3339(wallClockNow())))
        let all = watchers.values
        watchers = [:]
        for watcher in all { watcher.client.connection?.finish(with: line, grace: .zero) }
    }

    func appChanged(_ change: AppChange) {
        guard !watchers.isEmpty, let (app, event) = event(for: change) else { return }
        let line = coder.encode(event)
        for (key, watcher) in watchers where watcher.app == nil || watcher.app == app {
            guard let connection = watcher.client.connection, connection.isOpen else {
                watchers[key] = nil
                continue
            }
            guard connection.unsent <= watcher.bound else {
                drop(key, watcher, connection)
                continue
            }
            connection.send(line)
        }
    }

    private func drop(_ key: ObjectIdentifier, _ watcher: Watcher, _ connection: Connection) {
        watchers[key] = nil
        Log.warning("Dropped the watch of \(connection.label): it left \(connection.unsent) bytes unread (at most \(watcher.bound))")
        let reason = "this watch fell behind: more than \(Self.maxUnsent) bytes of events were left unread; "
            + "watch again for a new snapshot"
        connection.finish(with: coder.encode(WatchEvent(event: "dropped", reason: reason, time: rfc3339(wallClockNow()))),
                          grace: Self.dropGrace)
    }

    /// The line for `change`, and the app it concerns; nil for changes a watcher does not see.
    private func event(for change: AppChange) -> (String, WatchEvent)? {
        let time = rfc3339(wallClockNow())
        switch change {
        case .added(let app):
            let state = host.record(app)?.state.rawValue ?? AppState.notRunning.rawValue
            return (app, WatchEvent(event: "added", app: app, state: state, time: time))
        case .removed(let app):
            return (app, WatchEvent(event: "removed", app: app, time: time))
        case .transition(let app, let from, let to, let reason):
            return (app, WatchEvent(event: "transition", app: app, from: from.rawValue, to: to.rawValue, reason: reason, time: time))
        case .sceneTransition(let app, let scene, let from, let to, let reason):
            // A session without a scene is `disconnected`, as `lifectl scenes` shows it.
            return (app, WatchEvent(event: "sceneTransition", app: app, scene: scene, from: from?.rawValue ?? "disconnected",
                                    to: to?.rawValue ?? "disconnected", reason: reason, time: time))
        case .details:
            return nil
        }
    }
}
