import CSupport
import Glibc
import LifecycleModel

// External apps (`External=yes`, docs/PROTOCOL.md "External apps"): lifecycled never starts them. A process that
// someone else started connects to RUNTIME_DIR/app.sock and says hello with the app's name and no token; once the
// checks below pass, that process and its process group are the app, watched through a pidfd (it is not our child)
// exactly as a process re-adopted from a previous daemon, and supervised like any other app.

/// External apps: checks a process that wants to become one, and takes it on.
final class ExternalApps {
    private unowned let host: any DaemonHost
    private let placement: any ProcessPlacement
    private let processes: ProcessSupervisor
    private let fdStore: FDStore

    init(host: any DaemonHost, placement: any ProcessPlacement, processes: ProcessSupervisor, fdStore: FDStore) {
        self.host = host
        self.placement = placement
        self.processes = processes
        self.fdStore = fdStore
    }

    /// An external app was configured: with `ExternalFrom=cgroup` its cgroup is made now, so that whoever starts
    /// its process can place it there before it connects (`lifectl status` shows the path).
    func prepare(_ app: AppRuntime) {
        let name = app.name
        guard app.config.externalFrom == .cgroup else { return }
        do {
            guard let cgroup = try placement.prepareExternal(app) else {
                return Log.warning("\(name): ExternalFrom=cgroup, but lifecycled has no cgroups here; its clients will be refused")
            }
            Log.info("\(name): external app; its process attaches from cgroup \(cgroup.displayPath)")
        } catch {
            Log.warning("\(name): Failed to create the cgroup of an external app: \(error); its clients will be refused")
        }
    }

    /// A process connected to the app socket and said hello as `name` without a token. It becomes the app when the
    /// app is external, not running, the peer's uid (SO_PEERCRED) is its `ExternalUser=`, and the peer leads a
    /// process group that holds only processes of that user (and, with `ExternalFrom=cgroup`, sits in the app's
    /// cgroup). `pidfd`: the peer's, or why none could be had; it closes with the refusal. Returns why not, or nil
    /// once `connection` is the app's and the model has launched it.
    func attach(_ name: String, peer pid: pid_t, uid: uid_t, pidfd opened: Result<FileDescriptor, SystemError>,
                connection: Connection) -> String? {
        let reason = checkExternal(name, peer: pid, uid: uid, pidfd: opened)
        guard reason == nil, let app = host.runtime(name), case .success(let pidfd) = opened else {
            return reason ?? "no such app"
        }
        // Its end is watched before the model hears of it: a process whose end lifecycled could not see is refused
        // and left alone, and the app stays notRunning, with no launch and no made-up exit status in its history.
        app.began(pid: pid, pidfd: pidfd, token: makeToken())
        do {
            try processes.watchExit(app, pid: pid, pidfd: pidfd, what: "external process")
        } catch {
            Log.error("\(name): Failed to watch external process \(pid): \(error); it is not attached")
            processes.forget(app)
            return "lifecycled cannot watch it (\(error))"
        }
        // The process is in place and its connection the app's before the model launches it, so that the launch's
        // priorities and messages reach it; checkExternal has already judged what the model would refuse.
        app.place.began(app)
        app.connection = connection
        fdStore.storeConnection(app, fd: connection.fd.rawValue)
        fdStore.storePidfd(app, pid: pid, pidfd: pidfd)
        Log.event(.launch, .notice, "\(name): external process \(pid) (uid \(uid)) attached",
                  [("LIFECYCLE_APP", name), ("LIFECYCLE_PID", String(pid)), ("LIFECYCLE_LAUNCHED_BY", "external"),
                   ("LIFECYCLE_UID", String(uid))])
        if let refusal = host.handle(.attach(app: name, launchedBy: "external")).refusal {
            app.connection = nil
            fdStore.releaseConnection(app)
            fdStore.releasePidfd(app)
            processes.forget(app)
            return refusal.description
        }
        return nil
    }

    /// Why `pid` (uid `uid`) may not attach as `name`, or nil.
    private func checkExternal(_ name: String, peer pid: pid_t, uid: uid_t,
                               pidfd opened: Result<FileDescriptor, SystemError>) -> String? {
        guard !host.stopping else { return "lifecycled is shutting down" }
        guard let app = host.runtime(name), let record = host.record(name) else { return "no such app" }
        guard app.config.external, let allowed = app.config.externalUID else {
            return "it does not accept external clients (its config has no External=yes);"
                + " a client lifecycled started reconnects with the token of its welcome"
        }
        // The configured user is not named: a refused user learns nothing about who may.
        guard uid == allowed else { return "uid \(uid) may not attach as it (only its ExternalUser= may)" }
        guard !record.state.isRunning else {
            if app.connection != nil { return "it is connected already (pid \(app.pid.map(String.init) ?? "?"))" }
            return "it is running already (pid \(app.pid.map(String.init) ?? "?")); its own client reconnects with the token of its welcome"
        }
        let pidfd: FileDescriptor
        switch opened {
        case .success(let opened): pidfd = opened
        case .failure(let error): return "lifecycled cannot watch pid \(pid) (pidfd: \(String(cString: strerror(error.errno))))"
        }
        // What the daemon stops and kills is the process group: only a group the process leads is the app's own.
        guard getpgid(pid) == pid else {
            return "pid \(pid) does not lead its own process group (lifecycled stops and kills an external app by its"
                + " process group: call setsid() or setpgid(0, 0) before connecting)"
        }
        guard getpgid(0) != pid else { return "pid \(pid) leads lifecycled's own process group" }
        // Never a group with processes of other users: the daemon signals only what ExternalUser could signal itself.
        let others = ProcessTable.members(ofProcessGroup: pid).filter { realUID(of: $0).map { $0 != allowed } ?? false }
        guard others.isEmpty else {
            return "its process group \(pid) holds processes of other users (pid \(others.map(String.init).joined(separator: ", ")))"
        }
        if app.config.externalFrom == .cgroup {
            guard placement.canPlaceInGroups else {
                return "its config says ExternalFrom=cgroup, and lifecycled has no cgroup here for a process to be placed in"
                    + " (no cgroups, or apps in systemd scopes, which only lifecycled's spawns get): use ExternalFrom=process-group"
            }
            if app.cgroup == nil { prepare(app) }
            guard let cgroup = app.cgroup else { return "its cgroup could not be created" }
            guard cgroup.pids().contains(pid) else { return "pid \(pid) is not in its cgroup \(cgroup.displayPath)" }
            app.place.gather(app)
        } else {
            app.place.dropUnused(app)
        }
        // Checked last: while the pidfd's process lives, `pid` is that process, so every check above was about it.
        var poll = pollfd(fd: pidfd.rawValue, events: Int16(POLLIN), revents: 0)
        guard Glibc.poll(&poll, 1, 0) == 0 else { return "pid \(pid) exited before it could attach" }
        return nil
    }

    /// At start, processes in an external app's cgroup that no saved state accounts for: someone else started them
    /// and put them there, maybe to attach. They are never left stopped (thawed, continued), but not terminated:
    /// lifecycled did not start them and does not own them until one attaches.
    func continueStrays(_ app: AppRuntime, _ pids: [pid_t], cgroup: AppCgroup) {
        do { try cgroup.thaw() } catch { Log.debug("\(app.name): Failed to thaw its cgroup: \(error)") }
        for pid in pids { kill(pid, SIGCONT) }
        Log.notice("\(app.name): process\(pids.count == 1 ? "" : "es") \(pids.map(String.init).joined(separator: ", ")) in the"
            + " cgroup of this external app, not attached: continued and left running until one attaches")
    }

    /// The real uid of `pid` (the Uid: line of /proc/PID/status), nil when it is gone.
    private func realUID(of pid: pid_t) -> uid_t? {
        guard let status = try? readKernelFile("/proc/\(pid)/status"),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }),
              let real = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first else { return nil }
        return uid_t(real)
    }
}
