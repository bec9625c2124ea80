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
    private var passedPidfds: [String: FileDescriptor] = [:]
    /// Client connections the service manager passed back, by LISTEN_FDNAMES, until `takeConnections`.
    private var passedConnections: [String: FileDescriptor] = [:]

    init(serviceManager: ServiceManager) {
        self.serviceManager = serviceManager
    }

    /// Sorts what the service manager passed back at start: keeps the pidfds and the client connections (owned
    /// from here on), and says which other names go unused.
    func takePassed(_ passed: [String: Int32]) {
        for (fdName, fd) in passed where fdName.hasPrefix(Self.pidfdPrefix) {
            passedPidfds[String(fdName.dropFirst(Self.pidfdPrefix.count))] = FileDescriptor(owning: fd, path: "stored \(fdName)")
        }
        for (name, fd) in passed where name != "control" && !name.hasPrefix(Self.connectionPrefix)
            && !name.hasPrefix(Self.pidfdPrefix) {
            Log.warning("Ignoring the passed socket '\(name)' (fd \(fd)): only 'control' is used")
        }
        passedConnections = passed.filter { $0.key.hasPrefix(Self.connectionPrefix) }
            .mapValues { FileDescriptor(owning: $0, path: "stored connection") }
    }

    /// The passed-back client connections by their LISTEN_FDNAMES, for `ClientSessions.attachStored`; those it does
    /// not take close when it returns.
    func takeConnections() -> [String: FileDescriptor] {
        defer { passedConnections = [:] }
        return passedConnections
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

    /// A passed-back connection nobody takes: dropped from the store (its descriptor closes with its last owner).
    func dropConnection(fdName: String) {
        serviceManager.removeStoredFDs(name: fdName)
    }

    // MARK: Pidfds

    /// Under a service manager, a copy of a pidfd of the app's process goes into the store: of the one `given` (a
    /// re-adopted or attached process is watched through it), else of one opened for the purpose and closed after.
    func storePidfd(_ app: AppRuntime, pid: pid_t, pidfd given: FileDescriptor? = nil) {
        guard serviceManager.isEnabled, let pidfd = given ?? (try? openPidFD(pid)) else { return }
        app.pidfdStored = serviceManager.storeFD(pidfd.rawValue, name: Self.pidfdPrefix + app.name)
    }

    func releasePidfd(_ app: AppRuntime) {
        guard app.pidfdStored else { return }
        app.pidfdStored = false
        serviceManager.removeStoredFDs(name: Self.pidfdPrefix + app.name)
    }

    /// The passed-back pidfd of `app`, if there is one and it is of the process `pid` (the kernel's `Pid:` in its
    /// fdinfo; -1 once the process has ended). It stays in the store.
    func takePidfd(_ app: AppRuntime, pid: pid_t) -> FileDescriptor? {
        let name = app.name
        guard let pidfd = passedPidfds.removeValue(forKey: name) else { return nil }
        let info = (try? readKernelFile("/proc/self/fdinfo/\(pidfd.rawValue)")) ?? ""
        let stored = info.split(separator: "\n").first { $0.hasPrefix("Pid:") }?.split(separator: "\t").last.flatMap { pid_t($0) }
        guard stored == pid else {
            Log.notice("\(name): its stored pidfd is of process \(stored.map(String.init) ?? "?"), not \(pid); not used")
            serviceManager.removeStoredFDs(name: Self.pidfdPrefix + name)
            return nil
        }
        _ = fcntl(pidfd.rawValue, F_SETFD, FD_CLOEXEC)
        app.pidfdStored = true
        Log.info("\(name): took back the pidfd of process \(pid) from the service manager's store")
        return pidfd
    }

    /// Passed-back pidfds of apps that were not re-adopted: closed, and dropped from the store.
    func dropUnusedPidfds() {
        for name in passedPidfds.keys {
            serviceManager.removeStoredFDs(name: Self.pidfdPrefix + name)
        }
        passedPidfds = [:]
    }
}
