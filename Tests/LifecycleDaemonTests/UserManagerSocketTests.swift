import CSupport
import Foundation
import Glibc
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
        #expect(scopes.unavailable == "no service manager of uid \(Self.user) listens at \(path): No such file or directory")
    }

    @Test func rootRefusesAManagerSocketOfAnotherUser() throws {
        let (root, path) = try runtimeRoot(for: Self.user)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let fd = try listen(at: path, owner: Self.other)
        defer { close(fd) }
        let scopes = TreeScopes(loop: try EventLoop(), environment: [:], shared: nil, runtimeRoot: root)
        scopes.apply(enabled: true, user: String(Self.user))
        #expect(scopes.unavailable == "\(path) belongs to uid \(Self.other), not to uid \(Self.user) ([Adopt] User=)")
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
}
