import LifecycleModel
import LifecycleProtocol

/// Whoever waits for a changing request's answer: a lifectl connection, a D-Bus method call.
protocol RequestWaiter: AnyObject {
    func reply(_ reply: ControlReply)
}

extension ControlClient: RequestWaiter {}

/// What the two control front ends, the control socket and the D-Bus API, serve their callers with: the port, and
/// the owners their requests go to.
struct ControlContext {
    unowned let host: any DaemonHost
    let loop: EventLoop
    let coder: LineCoder
    /// The front ends follow the apps through these (`watch`, `PropertiesChanged`).
    let observers: AppObservers
    let requests: ControlRequests
    /// The configuration in force (`[Control] Group=`) and `reload`.
    let configuration: ConfigReload
}

/// lifectl's side of the daemon: a changing request waits for its app to settle and is answered with the app's
/// status (and, for `scene open`, the session it created); queries are answered at once.
final class ControlRequests: AppKeeper {
    private let loop: EventLoop
    private unowned let host: any DaemonHost
    private let placement: any ProcessPlacement
    /// The session a waiting `scene open` created, for its reply.
    private var openedScenes: [ObjectIdentifier: String] = [:]
    /// Whose request the daemon is carrying out now, so that a scene it opens is named in that reply.
    private var asking: (any RequestWaiter)?

    init(loop: EventLoop, host: any DaemonHost, placement: any ProcessPlacement) {
        self.loop = loop
        self.host = host
        self.placement = placement
    }

    /// Apply a lifectl request; the reply goes out when the app settles (or at once on refusal).
    func handle(_ request: Request, for name: String, from client: any RequestWaiter, origin: String = "lifectl") {
        guard !host.stopping else { return client.reply(.failure("lifecycled is shutting down")) }
        host.runtime(name)?.waiters.append(client)
        // The display server is the one source of truth for what shows: the app settles when it reports the change.
        if host.throughDisplay(request, for: name) { return }
        asking = client
        let outcome = host.handle(.request(request, app: name, origin: origin))
        asking = nil
        if let refusal = outcome.refusal {
            // Only this request's entry: earlier requests of the same connection still wait for their replies.
            if let app = host.runtime(name), let index = app.waiters.lastIndex(where: { $0 === client }) {
                app.waiters.remove(at: index)
            }
            client.reply(.failure(refusal.description))
        }
    }

    /// The request being carried out opened `scene`: its reply names it, whenever the app settles.
    func sceneOpened(_ scene: String) {
        if let asking { openedScenes[ObjectIdentifier(asking)] = scene }
    }

    /// The app settled: every request waiting for it gets its status.
    func settled(_ app: AppRuntime) {
        let waiters = app.waiters
        app.waiters = []
        guard !waiters.isEmpty, let status = status(of: app.name) else { return }
        for waiter in waiters {
            waiter.reply(ControlReply(ok: true, apps: [status], scene: openedScenes.removeValue(forKey: ObjectIdentifier(waiter))))
        }
    }

    /// Every waiting request of the app fails with `message` (the app is removed, the daemon stops or restarts).
    func fail(_ app: AppRuntime, _ message: String) {
        for waiter in app.waiters { waiter.reply(.failure(message)) }
    }

    /// The app is forgotten (`AppRegistry`): requests that wait for it will never be answered otherwise.
    func forgetting(_ app: AppRuntime) {
        fail(app, "\(app.name) was removed from the configuration")
    }

    /// lifectl post: deliver or queue, and say how many of each.
    func post(_ type: String, payload: JSONValue, to app: String?) -> ControlReply {
        let outcome = host.handle(.post(type: type, payload: payload, to: app, from: .daemon))
        if let refusal = outcome.refusal { return .failure(refusal.description) }
        Log.info("posted \(type)\(app.map { " to \($0)" } ?? ""): \(outcome.delivered) delivered, \(outcome.queued) queued")
        return ControlReply(ok: true, posted: PostSummary(delivered: outcome.delivered, queued: outcome.queued))
    }

    func status(of name: String) -> AppStatus? {
        guard let app = host.runtime(name) else { return nil }
        let method = StatusReport.suspendMethod(inForce: app.suspension.mechanism, configured: app.config.suspendMethod,
                                                freezerAvailable: app.place.freezer(of: app) != nil || placement.canFreeze)
        let process = StatusReport.Process(pid: app.pid, sinceWall: app.sinceWall, suspendMethod: method,
                                           cgroupPath: app.place.displayPath(of: app), adoptedAs: app.adoptedAs,
                                           reclaim: app.reclaim)
        let wallNow = wallClockNow(), now = loop.now
        var status = host.withRecord(name) { record in StatusReport.app(record, process: process, wallNow: wallNow, now: now) }
        status?.backgroundModes = host.backgroundModes(of: name).sorted()
        return status
    }

    func allStatuses() -> [AppStatus] { host.appNames.compactMap(status(of:)) }
}
