import CSupport
import Glibc

/// The service manager's file-descriptor store as the daemon uses it: each app's client connection
/// (FDNAME=app-NAME) and a pidfd of its process (FDNAME=pidfd-NAME) are kept there, so that the next daemon, after
/// a crash or a restart, takes back the very connection and the very process. Owns the pidfds passed back at start
/// until re-adoption takes or drops them.
final class FDStore {
    /// LISTEN_FDNAMES of the client connections in the store.
    static let connectionPrefix = "app-"
    /// LISTEN_FDNAMES of the apps' pidfds in the store.
    static let pidfdPrefix = "pidfd-"

    private let serviceManager: ServiceManager
    /// Pidfds the service manager passed back, by app, until re-adoption takes them.
    private var passedPidfds: [String: Int32] = [:]

    init(serviceManager: ServiceManager) {
        self.serviceManager = serviceManager
    }

    /// Sorts what the service manager passed back at start: keeps the pidfds, returns the client connections by
    /// their LISTEN_FDNAMES (for `ClientSessions.attachStored`), and says which other names go unused.
    func takePassed(_ passed: [String: Int32]) -> [String: Int32] {
        for (fdName, fd) in passed where fdName.hasPrefix(Self.pidfdPrefix) {
            passedPidfds[String(fdName.dropFirst(Self.pidfdPrefix.count))] = fd
        }
        for (name, fd) in passed where name != "control" && !name.hasPrefix(Self.connectionPrefix)
            && !name.hasPrefix(Self.pidfdPrefix) {
            Log.warning("Ignoring the passed socket '\(name)' (fd \(fd)): only 'control' is used")
        }
        return passed.filter { $0.key.hasPrefix(Self.connectionPrefix) }
    }

    // MARK: Connections

    /// The service manager keeps a copy of the app's connection, so that the client stays connected through a
    /// crash of the daemon.
    func storeConnection(_ app: AppRuntime, fd: Int32) {
        app.fdStored = serviceManager.storeFD(fd, name: Self.connectionPrefix + app.name)
    }

    /// The app's connection is gone: the service manager need not keep it any longer.
    func releaseConnection(_ app: AppRuntime) {
        guard app.fdStored else { return }
        app.fdStored = false
        serviceManager.removeStoredFDs(name: Self.connectionPrefix + app.name)
    }

    /// A passed-back connection nobody takes: closed, and dropped from the store.
    func dropConnection(fdName: String, fd: Int32) {
        close(fd)
        serviceManager.removeStoredFDs(name: fdName)
    }

    // MARK: Pidfds

    /// Under a service manager, a pidfd of the app's process goes into the store (then closed here unless it was
    /// `given`: the child is watched through sd-event, a re-adopted process through its own pidfd, which stays open).
    func storePidfd(_ app: AppRuntime, pid: pid_t, pidfd given: Int32? = nil) {
        guard serviceManager.isEnabled else { return }
        let pidfd = given ?? cs_pidfd_open(pid)
        guard pidfd >= 0 else { return }
        app.pidfdStored = serviceManager.storeFD(pidfd, name: Self.pidfdPrefix + app.name)
        if given == nil { close(pidfd) }
    }

    func releasePidfd(_ app: AppRuntime) {
        guard app.pidfdStored else { return }
        app.pidfdStored = false
        serviceManager.removeStoredFDs(name: Self.pidfdPrefix + app.name)
    }

    /// The passed-back pidfd of `app`, if there is one and it is of the process `pid` (the kernel's `Pid:` in its
    /// fdinfo; -1 once the process has ended). It stays in the store.
    func takePidfd(_ app: AppRuntime, pid: pid_t) -> Int32? {
        let name = app.name
        guard let pidfd = passedPidfds.removeValue(forKey: name) else { return nil }
        let info = (try? readKernelFile("/proc/self/fdinfo/\(pidfd)")) ?? ""
        let stored = info.split(separator: "\n").first { $0.hasPrefix("Pid:") }?.split(separator: "\t").last.flatMap { pid_t($0) }
        guard stored == pid else {
            Log.notice("\(name): its stored pidfd is of process \(stored.map(String.init) ?? "?"), not \(pid); not used")
            close(pidfd)
            serviceManager.removeStoredFDs(name: Self.pidfdPrefix + name)
            return nil
        }
        _ = fcntl(pidfd, F_SETFD, FD_CLOEXEC)
        app.pidfdStored = true
        Log.info("\(name): took back the pidfd of process \(pid) from the service manager's store")
        return pidfd
    }

    /// Passed-back pidfds of apps that were not re-adopted: closed, and dropped from the store.
    func dropUnusedPidfds() {
        for (name, pidfd) in passedPidfds {
            close(pidfd)
            serviceManager.removeStoredFDs(name: Self.pidfdPrefix + name)
        }
        passedPidfds = [:]
    }
}
