import CSupport
import Glibc
import Testing
@testable import LifecycleDaemon

@Suite struct KernelSpawnTests {
    @Test func childLeadsItsOwnSessionAndProcessGroup() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"]))

        #expect(getpgid(pid) == pid)
        #expect(getsid(pid) == pid)
    }

    @Test func argvAndEnvironmentReachTheChild() throws {
        let directory = try TemporaryDirectory()
        let children = Children()
        defer { children.killAndReapAll() }
        let output = directory.path + "/out"

        let pid = try children.spawn(SpawnRequest(
            executable: "/bin/sh", argv: ["/bin/sh", "-c", #"echo "$0 $FOO" > "$1""#, "zero", output],
            environment: ["FOO=bar baz"]))

        #expect(children.reap(pid) == .exited(0))
        #expect(try readKernelFile(output) == "zero bar baz\n")
    }

    @Test func workingDirectoryIsApplied() throws {
        let directory = try TemporaryDirectory()
        let children = Children()
        defer { children.killAndReapAll() }

        let pid = try children.spawn(SpawnRequest(
            executable: "/bin/sh", argv: ["sh", "-c", "pwd -P > out"], workingDirectory: directory.path))

        #expect(children.reap(pid) == .exited(0))
        #expect(try readKernelFile(directory.path + "/out") == directory.realPath + "\n")
    }

    @Test func inheritedDescriptorBecomesFD3() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        var pipeFDs: [Int32] = [-1, -1]
        try #require(pipe(&pipeFDs) == 0)
        defer { close(pipeFDs[0]) }

        let pid = try children.spawn(SpawnRequest(
            executable: "/bin/sh", argv: ["sh", "-c", "echo hi >&3"], inheritedFD: pipeFDs[1]))
        close(pipeFDs[1])

        #expect(children.reap(pid) == .exited(0))
        var buffer = [UInt8](repeating: 0, count: 16)
        let count = read(pipeFDs[0], &buffer, buffer.count)
        #expect(count == 3 && Array(buffer.prefix(3)) == Array("hi\n".utf8))
    }

    @Test func noOtherDescriptorCrossesToTheChild() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        // Deliberately not close-on-exec, on a file no one else opens, so that its link in
        // /proc/PID/fd identifies it. (Counting the child's fds is racy: after execve, sleep's own
        // setlocale briefly opens the locale archive.)
        let strayPath = "/tmp/lifecycled-stray-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        // Moved above 10: other tests of this process close their descriptors meanwhile, and a low free number
        // (3) would make it the inherited descriptor's place (a flake seen once).
        let opened = open(strayPath, O_RDWR | O_CREAT, 0o600)
        try #require(opened >= 0)
        let stray = fcntl(opened, F_DUPFD, 10)
        close(opened)
        try #require(stray > 3)
        defer { close(stray); unlink(strayPath) }
        var pipeFDs: [Int32] = [-1, -1]
        try #require(pipe(&pipeFDs) == 0)
        defer { close(pipeFDs[0]); close(pipeFDs[1]) }

        let plain = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"]))
        let withFD = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"], inheritedFD: pipeFDs[1]))

        for pid in [plain, withFD] {
            #expect(!descriptorTargets(of: pid).values.contains(strayPath), "the stray fd crossed to \(pid)")
        }
        // Right after execve, sleep's dynamic loader opens libc.so.6 at the lowest free number, 3, for a moment (seen
        // once the spawn got faster): a descriptor that crossed would stay, that one goes.
        #expect(eventually(timeout: 5) { descriptorTargets(of: plain)[3] == nil }, "fd 3: \(descriptorTargets(of: plain)[3] ?? "none")")
        #expect(descriptorTargets(of: withFD)[3] == descriptorTargets(of: getpid())[pipeFDs[1]], "fd 3 is the inherited pipe")
    }

    @Test func missingExecutableFailsWithENOENTAndLeavesNoChild() throws {
        // The child that fails never reaches execve, so it carries the comm of the thread that
        // spawned it: name this thread to find it (this test is synchronous, so it stays on it).
        let marker = "lcd-enoent-\(getpid() % 10000)"
        // The kernel keeps a trailing newline written to comm, so strip the one it reads back with.
        let previous = String(try readKernelFile("/proc/thread-self/comm").dropLast())
        try writeKernelFile("/proc/thread-self/comm", marker)
        defer { try? writeKernelFile("/proc/thread-self/comm", previous) }

        #expect(throws: SystemError(operation: "spawn /nonexistent/program", errno: ENOENT)) {
            try spawnProcess(SpawnRequest(executable: "/nonexistent/program"))
        }
        #expect(childProcesses(named: marker).isEmpty)
    }

    @Test(.enabled(if: getuid() == 0, "changing credentials needs root"))
    func credentialsAreApplied() throws {
        let children = Children()
        defer { children.killAndReapAll() }
        let nobody = try #require(try lookupCredentials(user: "nobody", group: nil))
        #expect(nobody.uid == 65534 && nobody.gid == 65534)

        let pid = try children.spawn(SpawnRequest(executable: "/bin/sleep", argv: ["sleep", "30"], credentials: nobody))

        let status = try processStatus(pid)
        #expect(status["Uid"] == ["65534", "65534", "65534", "65534"])
        #expect(status["Gid"] == ["65534", "65534", "65534", "65534"])
        #expect(status["Groups"] == nobody.groups.map(String.init))
    }

    @Test func executableIsResolvedThroughPath() throws {
        #expect(resolveExecutable("sh", path: "/nonexistent:/bin") == "/bin/sh")
        #expect(resolveExecutable("/bin/sh", path: nil) == "/bin/sh")
        #expect(resolveExecutable("no-such-program-here", path: "/bin:/usr/bin") == nil)
        #expect(resolveExecutable("/bin", path: nil) == nil, "a directory is not an executable")
        #expect(resolveExecutable("passwd", path: "/etc") == nil, "not executable")

        // A name with a slash is relative to the current directory, and comes back absolute.
        let cwd = try #require(getcwd(nil, 0))
        defer { free(cwd) }
        let depth = String(cString: cwd).split(separator: "/").count
        let relative = String(repeating: "../", count: depth) + "bin/sh"
        let resolved = try #require(resolveExecutable(relative, path: nil))
        #expect(resolved.hasPrefix("/") && access(resolved, X_OK) == 0)
    }

    @Test func credentialsAreLookedUp() throws {
        #expect(try lookupCredentials(user: nil, group: nil) == nil)
        #expect(try lookupCredentials(user: "root", group: nil)
            == Credentials(uid: 0, gid: 0, groups: [0], userName: "root", home: "/root"))
        #expect(try lookupCredentials(user: "65534", group: nil)?.userName == "nobody")
        #expect(try lookupCredentials(user: "nobody", group: "root")?.gid == 0)
        #expect(try lookupCredentials(user: nil, group: "nogroup") == Credentials(uid: getuid(), gid: 65534, groups: [65534]))
        #expect(try lookupCredentials(user: "4000000", group: nil) == Credentials(uid: 4_000_000, gid: 4_000_000, groups: [4_000_000]))
        #expect(throws: CredentialsError.unknownUser("no-such-user")) { try lookupCredentials(user: "no-such-user", group: nil) }
        #expect(throws: CredentialsError.unknownGroup("no-such-group")) { try lookupCredentials(user: "root", group: "no-such-group") }
    }
}

// MARK: - Helpers for the Kernel suites

enum ExitStatus: Equatable {
    case exited(Int32)
    case signaled(Int32)
    case timedOut
}

/// The children a test spawned: reaped one by one, and whatever is left is killed and reaped
/// at the end, even when an expectation failed.
final class Children {
    private(set) var pids: [pid_t] = []

    func spawn(_ request: SpawnRequest) throws -> pid_t {
        let pid = try spawnProcess(request)
        pids.append(pid)
        return pid
    }

    /// Waits (up to `timeout` seconds) for `pid` to exit, without blocking forever on a bug.
    func reap(_ pid: pid_t, timeout: Double = 5) -> ExitStatus {
        let status = waitForExit(pid, timeout: timeout)
        if status != .timedOut { pids.removeAll { $0 == pid } }
        return status
    }

    func killAndReapAll() {
        for pid in pids {
            kill(pid, SIGKILL)
            _ = waitForExit(pid, timeout: 5)
        }
        pids = []
    }
}

func waitForExit(_ pid: pid_t, timeout: Double) -> ExitStatus {
    let deadline = monotonicSeconds() + timeout
    while true {
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid {
            // WIFEXITED/WTERMSIG are C macros Swift cannot import.
            return status & 0x7f == 0 ? .exited((status >> 8) & 0xff) : .signaled(status & 0x7f)
        }
        if result < 0 && errno != EINTR { return .timedOut }
        if monotonicSeconds() > deadline { return .timedOut }
        usleep(200)
    }
}

/// Polls `condition` (the kernel finishes stops and freezes asynchronously, within ms).
func eventually(timeout: Double = 2, _ condition: () -> Bool) -> Bool {
    let deadline = monotonicSeconds() + timeout
    while !condition() {
        if monotonicSeconds() > deadline { return false }
        usleep(100)
    }
    return true
}

func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

func directoryEntries(_ path: String) -> [String] {
    guard let directory = opendir(path) else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = directoryEntryName(entry)
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

/// fd number → what /proc/PID/fd/N links to.
func descriptorTargets(of pid: pid_t) -> [Int32: String] {
    var targets: [Int32: String] = [:]
    for entry in directoryEntries("/proc/\(pid)/fd") {
        guard let fd = Int32(entry) else { continue }
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/\(pid)/fd/\(entry)", &buffer, buffer.count - 1)
        if count > 0 { targets[fd] = String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self) }
    }
    return targets
}

/// Our children (by /proc/PID/stat's ppid) whose comm is `name`.
func childProcesses(named name: String) -> [pid_t] {
    directoryEntries("/proc").compactMap { pid_t($0) }.filter { pid in
        guard let fields = ProcessTable.statFields(of: pid, procRoot: "/proc"), fields.count > 1,
              pid_t(fields[1]) == getpid(),
              let comm = try? readKernelFile("/proc/\(pid)/comm")
        else { return false }
        return comm == name + "\n"
    }
}

/// /proc/PID/status as key → whitespace-separated values.
func processStatus(_ pid: pid_t) throws -> [String: [String]] {
    var result: [String: [String]] = [:]
    for line in try readKernelFile("/proc/\(pid)/status").split(separator: "\n") {
        guard let colon = line.firstIndex(of: ":") else { continue }
        result[String(line[..<colon])] = line[line.index(after: colon)...].split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    }
    return result
}

/// A directory under /tmp, removed with its contents at the end of the test.
final class TemporaryDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/lifecycled-test-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw SystemError(operation: "create a temporary directory", errno: errno)
        }
        path = String(cString: made)
    }

    var realPath: String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    deinit { removeTree(path) }
}

private func removeTree(_ path: String) {
    var info = stat()
    guard lstat(path, &info) == 0 else { return }
    if info.st_mode & S_IFMT == S_IFDIR {
        for name in directoryEntries(path) { removeTree(path + "/" + name) }
        rmdir(path)
    } else {
        unlink(path)
    }
}
