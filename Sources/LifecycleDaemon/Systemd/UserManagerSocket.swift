import CSupport
import CSystemd
import Glibc

/// How a daemon that runs as root reaches the service manager of the user `[Adopt] User=` names: that manager's
/// private socket, `/run/user/UID/systemd/private`, a direct connection as `systemctl --user` makes (no bus daemon,
/// no Hello). systemd's manager accepts a peer there whose uid is its own or 0 (`bus_check_peercred`), so root is
/// let in by design. The user's session bus (`/run/user/UID/bus`) is no way in: dbus-daemon's session policy lets
/// only the bus's own user connect. The socket is trusted only as the kernel vouches for it: the file belongs to
/// the user, and the process listening on it runs as the user (SO_PEERCRED) in `user@UID.service/init.scope`.
enum UserManagerSocket {
    /// Where user `uid`'s manager listens, below `runtimeRoot` (`/run/user`; a test's directory in tests).
    static func path(uid: uid_t, runtimeRoot: String = "/run/user") -> String {
        "\(runtimeRoot)/\(uid)/systemd/private"
    }

    /// `path` is a socket that belongs to `uid`: anything else, or a socket of another user, is refused before the
    /// daemon connects to it.
    static func check(_ path: String, uid: uid_t) throws(SystemdBusError) {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            throw SystemdBusError("no service manager of uid \(uid) listens at \(path)", errno: errno)
        }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw SystemdBusError("\(path) is no socket, so no service manager of uid \(uid) listens there")
        }
        guard info.st_uid == uid else {
            throw SystemdBusError("\(path) belongs to uid \(info.st_uid), not to uid \(uid) ([Adopt] User=)")
        }
    }

    /// The pid of the process listening at the other end of `fd`, which must run as `uid`, as the kernel reports
    /// it (SO_PEERCRED).
    static func peer(of fd: Int32, uid: uid_t) throws(SystemdBusError) -> pid_t {
        var pid: pid_t = 0, peerUID: uid_t = 0, gid: gid_t = 0
        guard cs_peer_credentials(fd, &pid, &peerUID, &gid) == 0 else {
            throw SystemdBusError("read the credentials of the service manager's end of the connection", errno: errno)
        }
        guard peerUID == uid else {
            throw SystemdBusError("the process at the other end (pid \(pid)) runs as uid \(peerUID), not as uid \(uid) ([Adopt] User=)")
        }
        return pid
    }

    /// The user's manager as the kernel vouched for it at one connection: its pid (SO_PEERCRED) and its cgroup below
    /// the cgroup2 mount (`…/user@UID.service`).
    struct Manager: Equatable {
        let pid: pid_t
        let cgroup: String
    }

    /// A started bus connection to user `uid`'s manager at `path`, trusted on the whole check, the same at the first
    /// connect and at every reconnect: the socket file is the user's (`check`), and the process listening on it runs
    /// as `uid` (`peer`) in `user@UID.service/init.scope` (`managerCgroup`). The caller owns the returned bus.
    /// `procRoot`: where the listener's cgroup is read (`/proc`).
    static func connect(_ path: String, uid: uid_t, procRoot: String = "/proc") throws(SystemdBusError) -> (bus: OpaquePointer, manager: Manager) {
        try check(path, uid: uid)
        let bus = try startedBus(at: "unix:path=\(path)")
        do throws(SystemdBusError) {
            // A Unix socket is connected once sd_bus_start returns, so the peer is known before any call goes out.
            let pid = try peer(of: sd_bus_get_fd(bus), uid: uid)
            let procCgroup = (try? readKernelFile("\(procRoot)/\(pid)/cgroup")) ?? ""
            guard let cgroup = managerCgroup(procCgroup: procCgroup, uid: uid) else {
                throw SystemdBusError("the process at \(path) (pid \(pid)) is not in user@\(uid).service/init.scope, where the user's manager runs")
            }
            return (bus, Manager(pid: pid, cgroup: cgroup))
        } catch {
            sd_bus_close_unref(bus)
            throw error
        }
    }

    /// The cgroup of user `uid`'s manager below the cgroup2 mount (`…/user@UID.service`), from the `0::` line of its
    /// process's /proc/PID/cgroup; nil where that process is not in the `init.scope` of a `user@UID.service` of this
    /// uid, where systemd keeps a user's manager.
    static func managerCgroup(procCgroup: String, uid: uid_t) -> String? {
        guard let cgroup = AppSlice.unifiedCgroup(procSelfCgroup: procCgroup),
              let manager = AppSlice.managerCgroup(of: cgroup), manager.hasSuffix("/user@\(uid).service"),
              cgroup == manager + "/init.scope" else { return nil }
        return manager
    }
}
