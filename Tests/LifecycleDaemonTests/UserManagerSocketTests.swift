import CSupport
import Foundation
import Glibc
import CSystemd
import TestSupport
import Testing
@testable import LifecycleDaemon

/// How a daemon run as root finds and trusts the service manager of `[Adopt] User=` for `ScopeTrees=yes`, with real
/// sockets in a runtime directory of the test's own. (The manager itself needs systemd as PID 1: the container mode
/// of `make test-systemd` runs it, "system service" checks.)
@Suite(.serialized) struct UserManagerSocketTests {
    static let user: uid_t = 4242
    static let other: uid_t = 4243

    /// A runtime root with `UID/systemd/` made for `uid`, as pam_systemd and the user's manager lay it out.
    func runtimeRoot(for uid: uid_t) throws -> (root: String, path: String) {
        let root = NSTemporaryDirectory() + "user-manager-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: root + "/\(uid)/systemd", withIntermediateDirectories: true)
        return (root, UserManagerSocket.path(uid: uid, runtimeRoot: root))
    }

    /// A socket listening at `path` (in this process, so its peer credentials are root's), its file given to `owner`.
    func listen(at path: String, owner: uid_t) throws -> Int32 {
        let fd = cs_unix_listen(path, 8)
        try #require(fd >= 0, "listen on \(path): errno \(-fd)")
        try #require(chown(path, owner, 0) == 0, "chown \(path): errno \(errno)")
        return fd
    }

    func connected(to path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(fd >= 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            for (index, byte) in path.utf8.enumerated() { bytes[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(result == 0, "connect to \(path): errno \(errno)")
        return fd
    }

    /// What `body` is refused with, or nil where it is let through.
    func refusal(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch {
            return "\(error)"
        }
    }

    @Test func theSocketIsTheUsersPrivateSocketInTheirRuntimeDirectory() {
        #expect(UserManagerSocket.path(uid: 1000) == "/run/user/1000/systemd/private")
    }

    @Test func aSocketThatBelongsToTheUserIsAccepted() throws {
        let (root, path) = try runtimeRoot(for: Self.user)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let fd = try listen(at: path, owner: Self.user)
        defer { close(fd) }
        #expect(throws: Never.self) { try UserManagerSocket.check(path, uid: Self.user) }
    }

    @Test func aSocketOfAnotherUserIsRefused() throws {
        let (root, path) = try runtimeRoot(for: Self.user)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let fd = try listen(at: path, owner: Self.other)
        defer { close(fd) }
        #expect(refusal { try UserManagerSocket.check(path, uid: Self.user) }
                == "\(path) belongs to uid \(Self.other), not to uid \(Self.user) ([Adopt] User=)")
    }

    @Test func aFileOrALinkInPlaceOfTheSocketIsRefused() throws {
        let (root, path) = try runtimeRoot(for: Self.user)
        defer { try? FileManager.default.removeItem(atPath: root) }
        // A link to a socket of the user is no socket of the user's manager: the link is not followed.
        let real = root + "/elsewhere"
        let fd = try listen(at: real, owner: Self.user)
        defer { close(fd) }
        try #require(symlink(real, path) == 0)
        #expect(throws: SystemdBusError.self) { try UserManagerSocket.check(path, uid: Self.user) }
        unlink(path)
        try #require(FileManager.default.createFile(atPath: path, contents: Data()))
        try #require(chown(path, Self.user, 0) == 0)
        #expect(refusal { try UserManagerSocket.check(path, uid: Self.user) }
                == "\(path) is no socket, so no service manager of uid \(Self.user) listens there")
    }

    @Test func noSocketMeansNoManagerListens() throws {
        let (root, path) = try runtimeRoot(for: Self.user)
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(refusal { try UserManagerSocket.check(path, uid: Self.user) }
                == "no service manager of uid \(Self.user) listens at \(path): No such file or directory")
    }

    @Test func aListenerOfAnotherUidIsRefusedAndTheUsersOwnIsTrusted() throws {
        let (root, path) = try runtimeRoot(for: Self.user)
        defer { try? FileManager.default.removeItem(atPath: root) }
        // The file is the user's, but the process listening on it is root's (this test's): the kernel says so.
        let listener = try listen(at: path, owner: Self.user)
        defer { close(listener) }
        let client = try connected(to: path)
        defer { close(client) }
        #expect(refusal { _ = try UserManagerSocket.peer(of: client, uid: Self.user) }
                == "the process at the other end (pid \(getpid())) runs as uid 0, not as uid \(Self.user) ([Adopt] User=)")
        #expect(try UserManagerSocket.peer(of: client, uid: 0) == getpid())
    }

    @Test func theManagerMustBeInTheUsersOwnUserService() {
        let manager = "0::/user.slice/user-1000.slice/user@1000.service/init.scope\n"
        #expect(UserManagerSocket.managerCgroup(procCgroup: manager, uid: 1000) == "/user.slice/user-1000.slice/user@1000.service")
        #expect(UserManagerSocket.managerCgroup(procCgroup: manager, uid: 1001) == nil)
        #expect(UserManagerSocket.managerCgroup(procCgroup: "0::/user.slice/user-1000.slice/session-2.scope\n", uid: 1000) == nil)
        // A process of the user's in one of the manager's units is not the manager.
        let service = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/fake.service\n"
        #expect(UserManagerSocket.managerCgroup(procCgroup: service, uid: 1000) == nil)
        #expect(UserManagerSocket.managerCgroup(procCgroup: "1:name=systemd:/user.slice\n", uid: 1000) == nil)
    }

    // MARK: TreeScopes as root

    @Test func rootWithoutAdoptUserKeepsTrees() throws {
        let scopes = TreeScopes(loop: try EventLoop(), environment: [:], shared: nil)
        scopes.apply(enabled: true, user: nil)
        #expect(scopes.unavailable?.hasPrefix("lifecycled runs as root without [Adopt] User=") == true, "\(scopes.unavailable ?? "nil")")
    }

    @Test func rootWithAdoptUserLooksForThatUsersManager() throws {
        let (root, path) = try runtimeRoot(for: Self.user)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let scopes = TreeScopes(loop: try EventLoop(), environment: [:], shared: nil, runtimeRoot: root)
        scopes.apply(enabled: true, user: String(Self.user))
        #expect(scopes.unavailable == "no service manager of uid \(Self.user) listens at \(path): No such file or directory; retrying")
    }

    @Test func rootRefusesAManagerSocketOfAnotherUser() throws {
        let (root, path) = try runtimeRoot(for: Self.user)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let fd = try listen(at: path, owner: Self.other)
        defer { close(fd) }
        let scopes = TreeScopes(loop: try EventLoop(), environment: [:], shared: nil, runtimeRoot: root)
        scopes.apply(enabled: true, user: String(Self.user))
        #expect(scopes.unavailable == "\(path) belongs to uid \(Self.other), not to uid \(Self.user) ([Adopt] User=); retrying")
        #expect(scopes.scope(for: "app", leader: getpid(), members: [getpid()]) == nil)
    }

    @Test func rootRefusesAListenerThatIsNotTheUser() throws {
        let (root, path) = try runtimeRoot(for: Self.user)
        defer { try? FileManager.default.removeItem(atPath: root) }
        // The socket file is the user's, the listener root's: refused before anything is asked of it.
        let fd = try listen(at: path, owner: Self.user)
        defer { close(fd) }
        let scopes = TreeScopes(loop: try EventLoop(), environment: [:], shared: nil, runtimeRoot: root)
        scopes.apply(enabled: true, user: String(Self.user))
        #expect(scopes.unavailable?.contains("runs as uid 0, not as uid \(Self.user)") == true, "\(scopes.unavailable ?? "nil")")
    }

    // MARK: The user's manager, as real processes of the user in real cgroups

    /// What a user's manager lives in, made for real: cgroups on this machine's cgroup2 hierarchy
    /// (/sys/fs/cgroup/unified) laid out as systemd lays out a user's (`user@UID.service/init.scope`, where the user's
    /// manager runs, and a service of the user's beside it), a runtime directory the user may make the socket in (as
    /// pam_systemd gives it), and a loop.
    final class UserSession {
        static let unified = "/sys/fs/cgroup/unified"
        let base: String
        let uid: uid_t
        let root: String
        /// Where the user's manager listens.
        let path: String
        let loop: EventLoop

        init(uid: uid_t, tests: UserManagerSocketTests) throws {
            try #require(cs_is_cgroup2(Self.unified) == 1, "this machine's cgroup2 hierarchy is at \(Self.unified)")
            self.uid = uid
            base = Self.unified + "/lifecycled-user-manager-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            (root, path) = try tests.runtimeRoot(for: uid)
            loop = try EventLoop()
            for path in [initScope, impostor] {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            }
            for directory in [root + "/\(uid)", root + "/\(uid)/systemd"] {
                try #require(chown(directory, uid, gid_t(uid)) == 0, "chown \(directory): errno \(errno)")
            }
        }
        var service: String { base + "/user.slice/user-\(uid).slice/user@\(uid).service" }
        var initScope: String { service + "/init.scope" }
        var impostor: String { service + "/app.slice/impostor.service" }
        /// The manager's cgroup as the daemon names it, below the mount.
        var manager: String { String(service.dropFirst(Self.unified.count)) }

        /// A fake manager run as the user, listening at `path`, moved into `cgroup` before anyone connects.
        func listener(in cgroup: String) throws -> FakeSystemdBus {
            let fake = try FakeSystemdBus(mode: "restart", socket: path, user: uid)
            do {
                try "\(fake.pid)\n".write(toFile: cgroup + "/cgroup.procs", atomically: false, encoding: .utf8)
            } catch {
                fake.stop()
                throw error
            }
            return fake
        }

        /// The runtime directory, and every cgroup made, deepest first, once their processes are gone.
        func end() {
            try? FileManager.default.removeItem(atPath: root)
            var path = impostor
            var paths = [initScope]
            while path.count > base.count {
                paths.append(path)
                path = (path as NSString).deletingLastPathComponent
            }
            paths.append(base)
            for path in Set(paths).sorted(by: { $0.count > $1.count }) {
                for _ in 0..<100 where rmdir(path) != 0 && errno == EBUSY { usleep(10_000) }
            }
        }
    }

    /// Runs `loop` until `done` holds, for ten seconds at most; returns whether it held.
    @discardableResult
    func run(_ loop: EventLoop, until done: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while !done() && ContinuousClock.now < deadline { _ = sd_event_run(loop.event, 10_000) }
        return done()
    }

    /// Starts a transient unit on `bus` and waits for its answer: nil for success, else the error.
    func started(_ unit: String, on bus: SystemdManagerBus, loop: EventLoop) throws -> String? {
        var answer: String??
        bus.startTransientUnit(unit, properties: []) { error, _ in answer = .some(error) }
        try #require(run(loop, until: { answer != nil }), "an answer came")
        return answer ?? nil
    }

    @Test func aReconnectRunsTheWholeCheckAndRefusesAListenerOfTheUserOutsideTheManagersCgroup() throws {
        let session = try UserSession(uid: Self.user, tests: self)
        defer { session.end() }
        let (loop, path) = (session.loop, session.path)

        // The user's manager: a process of the user, in user@UID.service/init.scope.
        let manager = try session.listener(in: session.initScope)
        defer { manager.stop() }
        let bus = try SystemdManagerBus.connect(loop: loop, userManagerAt: path, uid: Self.user)
        #expect(bus.manager == UserManagerSocket.Manager(pid: manager.pid, cgroup: session.manager))

        // It goes; another process of the same user, in one of the manager's services, listens in its place.
        manager.stop()
        #expect(run(loop, until: { !bus.isOpen }), "the bus saw its manager go")
        let impostor = try session.listener(in: session.impostor)
        defer { impostor.stop() }
        let refused = try started("refused.scope", on: bus, loop: loop)
        #expect(refused == "the process at \(path) (pid \(impostor.pid)) is not in user@\(Self.user).service/init.scope, where the user's manager runs",
                "\(refused ?? "nil")")
        #expect(!impostor.requests.contains { $0.hasPrefix("StartTransientUnit") }, "nothing was asked of it: \(impostor.requests)")

        // The user's manager comes back: the next call reconnects to it, on the same check.
        impostor.stop()
        let back = try session.listener(in: session.initScope)
        defer { back.stop() }
        #expect(try started("accepted.scope", on: bus, loop: loop) == nil)
        #expect(back.requests.contains("StartTransientUnit accepted.scope"), "\(back.requests)")
        #expect(bus.manager == UserManagerSocket.Manager(pid: back.pid, cgroup: session.manager))
    }

    @Test func statusSaysTheUsersManagerIsGoneWhileItIsAndScopesAgainOnceItIsBack() throws {
        let session = try UserSession(uid: Self.user, tests: self)
        defer { session.end() }
        let (loop, path) = (session.loop, session.path)
        let manager = try session.listener(in: session.initScope)
        defer { manager.stop() }
        let scopes = TreeScopes(loop: loop, environment: [:], shared: nil, runtimeRoot: session.root, retryInterval: .milliseconds(50))
        scopes.apply(enabled: true, user: String(Self.user))
        #expect(scopes.unavailable == nil, "scopes are made: \(scopes.unavailable ?? "")")

        // The user's last session ends, and their manager with it.
        manager.stop()
        #expect(run(loop, until: { scopes.unavailable != nil }), "status changed as the manager went")
        #expect(scopes.unavailable == TreeScopes.gone)
        #expect(scopes.scope(for: "app", leader: getpid(), members: [getpid()]) == nil, "no scope is asked of a manager that is gone")
        // The daemon keeps looking, and says why it finds none: the socket is left, and nothing listens on it.
        #expect(run(loop, until: { scopes.unavailable?.hasPrefix("connect to unix:path=\(path)") == true }), "\(scopes.unavailable ?? "nil")")
        #expect(scopes.unavailable?.hasSuffix("; retrying") == true)

        // The user logs in again: their manager is found again, on the whole check, with no reload.
        let back = try session.listener(in: session.initScope)
        defer { back.stop() }
        #expect(run(loop, until: { scopes.unavailable == nil }), "\(scopes.unavailable ?? "nil")")
        #expect(back.requests.contains { $0.hasPrefix("Get ") }, "it asked the manager that is back: \(back.requests)")
    }
}
