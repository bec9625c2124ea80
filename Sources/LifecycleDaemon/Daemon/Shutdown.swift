import Glibc
import LifecycleModel

/// The daemon's end. SIGTERM/SIGINT: every app gets willTerminate (with its deadline), suspended ones are
/// continued so that they can exit, then SIGTERM and SIGKILL; the daemon exits when none is left. Unless systemd's
/// job for this unit is a restart (`systemctl restart`): then the daemon hands its apps over to the next one.
final class Shutdown {
    private let loop: EventLoop
    private unowned let host: any DaemonHost
    private let serviceManager: ServiceManager
    private let environment: [String: String]
    private let cgroups: CgroupSupport
    private let placement: any ProcessPlacement
    private let persistence: Persistence
    private let requests: ControlRequests
    /// Stops the system sources of notifications.
    private let stopSources: () -> Void
    /// Closes the control socket and the app socket.
    private let closeSockets: () -> Void
    /// No new requests are taken.
    private(set) var stopping = false
    /// The last steps ran: the settling of each later app does not run them again.
    private var finished = false

    init(loop: EventLoop, host: any DaemonHost, serviceManager: ServiceManager, environment: [String: String],
         cgroups: CgroupSupport, placement: any ProcessPlacement, persistence: Persistence, requests: ControlRequests,
         stopSources: @escaping () -> Void, closeSockets: @escaping () -> Void) {
        self.loop = loop
        self.host = host
        self.serviceManager = serviceManager
        self.environment = environment
        self.cgroups = cgroups
        self.placement = placement
        self.persistence = persistence
        self.requests = requests
        self.stopSources = stopSources
        self.closeSockets = closeSockets
    }

    /// SIGTERM or SIGINT arrived.
    func begin() {
        guard !stopping else { return }
        var reason = "not under a service manager"
        if serviceManager.isEnabled {
            switch SystemdJob.stopRequest(environment: environment) {
            case .restart(let job):
                do {
                    return handOver(job: job, released: try cgroups.releaseControllersForNextStart())
                } catch {
                    Log.error("\(error): the delegated cgroup keeps its controllers and the next daemon could not start beside the apps; stopping every app instead")
                    reason = "a \(job) job, but the next daemon could not start in the unit's cgroup"
                }
            case .stop(let why): reason = why
            case .unanswered(let error):
                Log.warning("Failed to ask systemd whether this stop is a restart: \(error); stopping every app")
                reason = "systemd did not say it is a restart"
            }
        }
        stopping = true
        serviceManager.stopping()
        let running = host.records.filter(\.state.isRunning).count
        Log.notice("Stopping: terminating \(running) running apps (\(reason))")
        host.terminateAll()
        finishIfDone()
    }

    /// The stop half of a restart: the next daemon takes every app back exactly as after a crash (state files,
    /// pid and start time, the connections kept in the service manager's fd store, which a stop half of a
    /// restart does not flush). So nothing is signalled, suspended apps stay suspended, the stored connections
    /// stay stored (no FDSTOREREMOVE=1) and clients are told nothing: what they send meanwhile waits in their
    /// socket. Only waiting lifectl requests get an answer, as their connections close with this daemon.
    /// `released`: the controllers disabled in the delegated cgroup so that systemd can start the next daemon
    /// there (`releaseControllersForNextStart`).
    private func handOver(job: String, released: [String]) {
        stopping = true
        serviceManager.stopping()
        let apps = host.appNames.compactMap(host.runtime)
        let running = apps.filter { host.record($0.name)?.state.isRunning == true }
        let stored = running.filter(\.fdStored).count
        Log.notice("Restarting: leaving \(running.count) apps to the next daemon (systemd's job for this unit is a \(job)); \(stored) of their connections wait in the fd store")
        if !released.isEmpty {
            Log.info("Disabled \(released.joined(separator: ", ")) for the app cgroups, so that systemd can start the next daemon in the delegated cgroup; it enables them again")
        }
        for app in apps { requests.fail(app, "lifecycled is restarting; ask again once it is back") }
        persistence.saveNow(apps)
        stopSources()
        closeSockets()
        Log.notice("Handed over")
        loop.exit(code: 0)
    }

    /// Once stopping and no app runs any more: the apps' places go, the last state is saved, and the loop ends.
    func finishIfDone() {
        guard stopping, !finished, !host.records.contains(where: { $0.state.isRunning }) else { return }
        finished = true
        for app in host.appNames.compactMap(host.runtime) {
            requests.fail(app, "lifecycled is shutting down")
            app.place.remove(app)
        }
        placement.removeAll()
        stopSources()
        persistence.saveDirty()
        closeSockets()
        Log.notice("Stopped")
        loop.exit(code: 0)
    }
}
