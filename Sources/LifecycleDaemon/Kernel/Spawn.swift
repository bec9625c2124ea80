import CSupport
import Glibc

/// The user, group and supplementary groups a child runs as.
public struct Credentials: Sendable, Equatable {
    public var uid: uid_t
    public var gid: gid_t
    public var groups: [gid_t]
    /// From the passwd entry, for USER, LOGNAME and HOME; nil for a numeric uid without one.
    public var userName: String?
    public var home: String?

    public init(uid: uid_t, gid: gid_t, groups: [gid_t], userName: String? = nil, home: String? = nil) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
        self.userName = userName
        self.home = home
    }
}

/// Everything a child is started with. The child always gets its own session and process
/// group, default signal dispositions and an empty signal mask; fd 0 is /dev/null, fds 1 and 2 are
/// inherited (or `outputFD`), `inheritedFD` becomes fd 3, and no other descriptor crosses.
public struct SpawnRequest: Sendable {
    /// An absolute path (see `resolveExecutable`): it is executed after the change of directory.
    public var executable: String
    /// Including argv[0]. When empty, `[executable]` is used.
    public var argv: [String]
    /// "KEY=value" entries; the child gets exactly these.
    public var environment: [String]
    public var workingDirectory: String?
    /// Who the child runs as; nil keeps the daemon's own ids.
    public var credentials: Credentials?
    /// Becomes fd 3 in the child (the app's end of its lifecycle socket).
    public var inheritedFD: Int32?
    /// cgroup.procs files the child joins before execve (`AppCgroup.procsFiles`).
    public var cgroupProcsFiles: [String]
    /// Becomes the child's stdout and stderr (a journal stream, or a pipe the daemon reads); nil inherits them.
    public var outputFD: Int32?

    public init(
        executable: String,
        argv: [String] = [],
        environment: [String] = [],
        workingDirectory: String? = nil,
        credentials: Credentials? = nil,
        inheritedFD: Int32? = nil,
        cgroupProcsFiles: [String] = [],
        outputFD: Int32? = nil
    ) {
        self.executable = executable
        self.argv = argv
        self.environment = environment
        self.workingDirectory = workingDirectory
        self.credentials = credentials
        self.inheritedFD = inheritedFD
        self.cgroupProcsFiles = cgroupProcsFiles
        self.outputFD = outputFD
    }
}

/// Starts a child as described and returns its pid, which is also its process group and
/// session id. The caller must reap it. Failures before execve (no such file, permission,
/// a cgroup that refuses the process) are thrown, with the failed child already reaped.
public func spawnProcess(_ request: SpawnRequest) throws(SystemError) -> pid_t {
    try startSpawn(request, onWorker: false).wait()
}

/// Starts a child as `spawnProcess` does, on a worker thread when `onWorker` (the default): the child's set-up
/// (its cgroups, session, signal dispositions, execve) then runs while the caller goes on, and `wait()` returns
/// what `spawnProcess` would have. The daemon launches many apps at once this way (see `cs_spawn_submit`).
///
/// The spawn is the C shim's clone path on worker threads rather than `posix_spawn` and `pidfd_open`, because
/// `posix_spawn` can neither join the app's cgroups nor take on its user before execve, and because, timed side by
/// side in one run of the launch bench, a launch of many apps through `posix_spawn` (or through the clone path
/// without its shared descriptor table and its workers) falls well behind s6's, while this path keeps pace with it.
public func startSpawn(_ request: SpawnRequest, onWorker: Bool = true) throws(SystemError) -> PendingSpawn {
    let c = try CSpawnArguments(request)
    defer { withExtendedLifetime(c) {} }
    if onWorker {
        // The job copies the strings; `PendingSpawn` keeps the descriptors open until wait().
        guard let job = cs_spawn_submit(
            request.executable, c.argv, c.envp, request.workingDirectory,
            c.ids == nil ? 0 : 1, c.ids?.uid ?? 0, c.ids?.gid ?? 0, c.groups, Int32(c.groups.count),
            request.inheritedFD ?? -1, c.cgroupFDs, Int32(c.cgroupFDs.count), request.outputFD ?? -1) else {
            return PendingSpawn(executable: request.executable, state: .failed(errno))
        }
        return PendingSpawn(executable: request.executable, state: .onWorker(job, cgroupFiles: c.cgroupFiles))
    }
    var pid: pid_t = 0
    let result = cs_spawn(
        request.executable, c.argv, c.envp, request.workingDirectory,
        c.ids == nil ? 0 : 1, c.ids?.uid ?? 0, c.ids?.gid ?? 0, c.groups, Int32(c.groups.count),
        request.inheritedFD ?? -1, c.cgroupFDs, Int32(c.cgroupFDs.count), request.outputFD ?? -1, &pid)
    return PendingSpawn(executable: request.executable, state: result == 0 ? .started(pid) : .failed(result))
}

/// What the C spawn takes of a request: its cgroup files, opened before the spawn so that a cgroup that cannot be
/// joined fails here, with its path; argv and envp as C strings, freed with this.
private final class CSpawnArguments {
    let cgroupFiles: [FileDescriptor]
    let cgroupFDs: [Int32]
    let argv: [UnsafeMutablePointer<CChar>?]
    let envp: [UnsafeMutablePointer<CChar>?]
    let ids: Credentials?
    let groups: [gid_t]

    init(_ request: SpawnRequest) throws(SystemError) {
        var files: [FileDescriptor] = []
        for path in request.cgroupProcsFiles { files.append(try FileDescriptor.open(path, O_WRONLY)) }
        cgroupFiles = files
        cgroupFDs = files.map(\.rawValue)
        argv = (request.argv.isEmpty ? [request.executable] : request.argv).map { strdup($0) } + [nil]
        envp = request.environment.map { strdup($0) } + [nil]
        ids = request.credentials
        groups = request.credentials?.groups ?? []
    }

    deinit {
        for pointer in argv { free(pointer) }
        for pointer in envp { free(pointer) }
    }
}

/// A spawn under way (`startSpawn`). `wait()` returns its pid or throws; on a worker, the first call waits for the
/// job and then lets go of the cgroup files the child joined.
public final class PendingSpawn {
    fileprivate enum State {
        case onWorker(OpaquePointer, cgroupFiles: [FileDescriptor])
        case started(pid_t)
        case failed(Int32)
    }

    private let executable: String
    private var state: State

    fileprivate init(executable: String, state: State) {
        self.executable = executable
        self.state = state
    }

    public func wait() throws(SystemError) -> pid_t {
        if case .onWorker(let job, let cgroupFiles) = state {
            var pid: pid_t = 0
            let result = cs_spawn_finish(job, &pid)
            withExtendedLifetime(cgroupFiles) {}
            state = result == 0 ? .started(pid) : .failed(result)
        }
        switch state {
        case .started(let pid): return pid
        case .failed(let error): throw SystemError(operation: "spawn \(executable)", errno: error)
        case .onWorker: preconditionFailure("finished above")
        }
    }

    deinit {
        // Never left running on a worker with our descriptors: a child nobody asked for is killed and reaped.
        if case .onWorker = state, let pid = try? wait() {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = try? retryingEINTR("reap \(pid)") { waitpid(pid, &status, 0) }
        }
    }
}

/// A child held before execve (`startHeldSpawn`): it has done all its set-up and runs none of its program until
/// `release()`. Its reports come on `socket`, which the caller watches: readable means `nextReport()` has something.
/// Dropping this (or the daemon's end) without a release ends a held child: it exits instead of running.
final class HeldSpawn {
    /// What the spawn tells, in order: `held` once, then possibly `failed` (its execve failed after the release), then
    /// `ended`; or `failed` before any `held`, then `ended`.
    enum Report: Equatable {
        /// Set up and waiting: the child's pid, the caller's to watch and reap from now on.
        case held(pid_t)
        /// What failed, and the child to reap when there is one (nil: none was made).
        case failed(pid: pid_t?, errno: Int32)
        /// The child has exec'd or ended, and the spawn's thread let go of it: nothing more comes.
        case ended
        /// Nothing to read now.
        case nothing
    }

    /// The daemon's end of the hold socket, non-blocking and close-on-exec, so that no other child holds it.
    let socket: FileDescriptor
    let executable: String
    private var released = false

    fileprivate init(socket: FileDescriptor, executable: String) {
        self.socket = socket
        self.executable = executable
    }

    func nextReport() -> Report {
        var report = cs_hold_report()
        var count: Int
        repeat {
            count = withUnsafeMutableBytes(of: &report) { recv(socket.rawValue, $0.baseAddress, $0.count, 0) }
        } while count < 0 && errno == EINTR
        if count < 0 && errno == EAGAIN { return .nothing }
        // An end of file, or what no spawn sends.
        guard count == MemoryLayout<cs_hold_report>.size else { return .ended }
        if report.error == 0 { return .held(report.pid) }
        return .failed(pid: report.pid > 0 ? report.pid : nil, errno: report.error)
    }

    /// Lets the child exec; once only.
    func release() {
        guard !released else { return }
        released = true
        var go: UInt8 = 1
        _ = send(socket.rawValue, &go, 1, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
    }

    var isReleased: Bool { released }

    /// Tells a child still held to end without a release: it reads an end of file and exits. The reports it sent,
    /// and its pid among them, can still be read.
    func drop() {
        guard !released else { return }
        _ = shutdown(socket.rawValue, Int32(SHUT_WR))
    }
}

/// Starts a child as `startSpawn` does, held before execve on a thread of its own (`HeldSpawn`); the caller learns
/// its pid from the first report, while the child waits. Only the start itself can fail here; every later failure is
/// a report.
func startHeldSpawn(_ request: SpawnRequest) throws(SystemError) -> HeldSpawn {
    let c = try CSpawnArguments(request)
    var fds: [Int32] = [-1, -1]
    try retryingEINTR("create the hold socket of \(request.executable)") { cs_seqpacket_pair_cloexec(&fds) }
    let daemonEnd = FileDescriptor(owning: fds[0], path: "the hold of \(request.executable)")
    let childEnd = FileDescriptor(owning: fds[1], path: "the child's end of the hold of \(request.executable)")
    try retryingEINTR("make the hold of \(request.executable) non-blocking") { cs_set_nonblocking(daemonEnd.rawValue) }
    // The spawn's thread has its own copies of the descriptors: ours close when this returns.
    let result = cs_spawn_held(
        request.executable, c.argv, c.envp, request.workingDirectory,
        c.ids == nil ? 0 : 1, c.ids?.uid ?? 0, c.ids?.gid ?? 0, c.groups, Int32(c.groups.count),
        request.inheritedFD ?? -1, c.cgroupFDs, Int32(c.cgroupFDs.count), request.outputFD ?? -1, childEnd.rawValue)
    withExtendedLifetime((c, childEnd)) {}
    guard result == 0 else { throw SystemError(operation: "spawn \(request.executable)", errno: result) }
    return HeldSpawn(socket: daemonEnd, executable: request.executable)
}

/// Makes the daemon the reaper of orphaned descendants (an app's daemonised grandchildren),
/// so they are reported to it instead of to PID 1.
public func becomeChildSubreaper() throws(SystemError) {
    try retryingEINTR("set PR_SET_CHILD_SUBREAPER") { cs_set_child_subreaper() }
}

// MARK: - Executables

/// The search path used when the daemon has no PATH, as systemd does.
let defaultSearchPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/// Finds what execvp would run, as an absolute path (the child changes directory before execve).
/// A name containing "/" is taken relative to the current directory; any other name is looked
/// up in `path` (`defaultSearchPath` when nil). Only regular files with an execute bit count.
public func resolveExecutable(_ name: String, path: String?) -> String? {
    if name.isEmpty { return nil }
    if name.contains("/") {
        return isExecutableFile(name) ? absolutePath(name) : nil
    }
    for directory in (path ?? defaultSearchPath).split(separator: ":", omittingEmptySubsequences: false) {
        // An empty PATH entry means the current directory (POSIX).
        let candidate = (directory.isEmpty ? "." : String(directory)) + "/" + name
        if isExecutableFile(candidate) { return absolutePath(candidate) }
    }
    return nil
}

private func isExecutableFile(_ path: String) -> Bool {
    var info = stat()
    // access(X_OK) alone accepts directories, and for root any file with one x bit.
    return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG && access(path, X_OK) == 0
}

private func absolutePath(_ path: String) -> String {
    if path.hasPrefix("/") { return path }
    guard let cwd = getcwd(nil, 0) else { return path }
    defer { free(cwd) }
    var relative = Substring(path)
    while relative.hasPrefix("./") { relative = relative.dropFirst(2) }
    let base = String(cString: cwd)
    return (base == "/" ? "" : base) + "/" + relative
}

// MARK: - Users and groups

public enum CredentialsError: Error, Equatable, CustomStringConvertible {
    case unknownUser(String)
    case unknownGroup(String)
    case system(SystemError)

    public var description: String {
        switch self {
        case .unknownUser(let name): "Failed to look up user '\(name)': no such user"
        case .unknownGroup(let name): "Failed to look up group '\(name)': no such group"
        case .system(let error): error.description
        }
    }
}

/// The credentials for a `User=`/`Group=` pair, or nil when both are nil (run as the daemon).
/// Names or numeric ids. The group defaults to the user's primary group (or, for a numeric uid
/// with no passwd entry, the same number); supplementary groups are the user's memberships
/// (getgrouplist). A group alone keeps the daemon's uid.
public func lookupCredentials(user: String?, group: String?) throws(CredentialsError) -> Credentials? {
    if user == nil && group == nil { return nil }

    var gid: gid_t?
    if let group {
        guard let found = try groupID(group) else { throw .unknownGroup(group) }
        gid = found
    }
    guard let user else {
        return Credentials(uid: getuid(), gid: gid!, groups: [gid!])
    }

    let entry: PasswdEntry?
    if let number = UInt32(user) {
        entry = try passwdEntry { getpwuid_r(number, $0, $1, $2, $3) }
        if entry == nil {
            let primary = gid ?? number
            return Credentials(uid: number, gid: primary, groups: [primary])
        }
    } else {
        entry = try passwdEntry { getpwnam_r(user, $0, $1, $2, $3) }
    }
    guard let entry else { throw .unknownUser(user) }
    let primary = gid ?? entry.gid
    return Credentials(uid: entry.uid, gid: primary, groups: supplementaryGroups(of: entry.name, primary: primary),
                       userName: entry.name, home: entry.home)
}

struct PasswdEntry {
    var name: String
    var uid: uid_t
    var gid: gid_t
    var home: String
}

/// Runs a getpw*_r call, growing the string buffer on ERANGE. nil when there is no entry.
func passwdEntry(
    _ call: (UnsafeMutablePointer<passwd>, UnsafeMutablePointer<CChar>, Int, UnsafeMutablePointer<UnsafeMutablePointer<passwd>?>) -> Int32
) throws(CredentialsError) -> PasswdEntry? {
    var size = 1024
    while true {
        var record = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: size)
        let code = call(&record, &buffer, size, &result)
        if code == ERANGE { size *= 4; continue }
        if let found = result?.pointee {
            return PasswdEntry(name: String(cString: found.pw_name), uid: found.pw_uid, gid: found.pw_gid,
                               home: String(cString: found.pw_dir))
        }
        // "Not found" comes back as 0 or, depending on the NSS module, one of these.
        if code == 0 || code == ENOENT || code == ESRCH || code == EBADF || code == EPERM { return nil }
        throw .system(SystemError(operation: "read the user database", errno: code))
    }
}

private func groupID(_ name: String) throws(CredentialsError) -> gid_t? {
    if let number = UInt32(name) { return number }
    var size = 1024
    while true {
        var record = group()
        var result: UnsafeMutablePointer<group>?
        var buffer = [CChar](repeating: 0, count: size)
        let code = getgrnam_r(name, &record, &buffer, size, &result)
        if code == ERANGE { size *= 4; continue }
        if let found = result?.pointee { return found.gr_gid }
        if code == 0 || code == ENOENT || code == ESRCH || code == EBADF || code == EPERM { return nil }
        throw .system(SystemError(operation: "read the group database", errno: code))
    }
}

private func supplementaryGroups(of user: String, primary: gid_t) -> [gid_t] {
    var count: Int32 = 16
    while true {
        var groups = [gid_t](repeating: 0, count: Int(count))
        let previous = count
        if getgrouplist(user, primary, &groups, &count) >= 0 {
            return Array(groups.prefix(Int(count)))
        }
        // -1 with count raised to what is needed; guard against a library that does not raise it.
        count = max(count, previous * 2)
    }
}
