import CSupport
import Dispatch
import Glibc
import Synchronization
import Testing
@testable import LifecycleDaemon

/// The spawn without a copy of the whole descriptor table (descriptor slots, CLONE_FILES + CLOSE_RANGE_UNSHARE)
/// and spawns on worker threads (`startSpawn`): real children, real pipes.
@Suite struct KernelSpawnSlotTests {
    /// What a child wrote to `fd` until every writer closed it; nil if no end of file came within 10 s, which is
    /// what a write end left behind in a slot (or anywhere else in this process) would cause.
    func readToEnd(_ fd: Int32) -> String? {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = monotonicSeconds() + 10
        while monotonicSeconds() < deadline {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 100) >= 0 || errno == EINTR else { return nil }
            guard entry.revents != 0 else { continue }
            let count = read(fd, &buffer, buffer.count)
            if count == 0 { return String(decoding: bytes, as: UTF8.self) }
            if count > 0 { bytes += buffer.prefix(count) } else if errno != EINTR { return nil }
        }
        return nil
    }

    func makePipe() throws -> (read: Int32, write: Int32) {
        let fds = try #require(cloexecPipe())
        return (fds[0], fds[1])
    }

    /// Linux 5.9 brought CLOSE_RANGE_UNSHARE; before it every spawn takes the plain path.
    var kernelHasCloseRangeUnshare: Bool {
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let parts = release.split(separator: ".").prefix(2).map { Int($0.prefix { $0.isNumber }) ?? 0 }
        return parts.count == 2 && (parts[0], parts[1]) >= (5, 9)
    }

    @Test func theOutputPipeEndsWhenTheChildExits() throws {
        // The pipe's write end passes through a slot; were it left there, the reader would never see end of file.
        let children = Children()
        defer { children.killAndReapAll() }
        for round in 1...3 {
            let output = try makePipe()
            defer { close(output.read) }
            let pid = try children.spawn(SpawnRequest(
                executable: "/bin/sh", argv: ["sh", "-c", "echo round $0", String(round)], outputFD: output.write))
            close(output.write)
            #expect(readToEnd(output.read) == "round \(round)\n")
            #expect(children.reap(pid) == .exited(0))
        }
        #expect(cs_spawn_uses_slots() == (kernelHasCloseRangeUnshare ? 1 : 0))
    }

    @Test func concurrentSpawnsEachGetTheirOwnDescriptors() throws {
        // Four threads spawn at once, each child with its own fd 3 and stdout: every pipe must carry its own
        // child's words alone (the slot sets must never be shared between two spawns in flight).
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { thread in
            for round in 0..<10 {
                let tag = "t\(thread)r\(round)"
                guard let inherit = cloexecPipe(), let output = cloexecPipe() else {
                    failures.withLock { $0.append("\(tag): pipe: errno \(errno)") }
                    return
                }
                defer { close(inherit[0]); close(output[0]) }
                do {
                    let pid = try spawnProcess(SpawnRequest(
                        executable: "/bin/sh", argv: ["sh", "-c", "echo fd3 $0 >&3; echo out $0", tag],
                        inheritedFD: inherit[1], outputFD: output[1]))
                    close(inherit[1])
                    close(output[1])
                    let fd3 = readToEnd(inherit[0]), out = readToEnd(output[0])
                    let status = waitForExit(pid, timeout: 10)
                    if fd3 != "fd3 \(tag)\n" || out != "out \(tag)\n" || status != .exited(0) {
                        failures.withLock { $0.append("\(tag): fd 3 \(String(describing: fd3)), stdout \(String(describing: out)), \(status)") }
                    }
                } catch {
                    close(inherit[1])
                    close(output[1])
                    failures.withLock { $0.append("\(tag): \(error)") }
                }
            }
        }
        #expect(failures.withLock { $0 } == [])
    }

    @Test func spawnsOnWorkersRunSideBySideAndEachGetsItsOwnDescriptors() throws {
        // Many spawns handed to the workers before any is waited for, as the daemon launches its apps.
        var started: [(tag: String, spawn: PendingSpawn, fd3: Int32, out: Int32)] = []
        var writeEnds: [Int32] = []
        defer { for entry in started { close(entry.fd3); close(entry.out) } }
        for index in 0..<24 {
            let tag = "job\(index)"
            let inherit = try makePipe(), output = try makePipe()
            writeEnds += [inherit.write, output.write]
            let spawn = try startSpawn(SpawnRequest(
                executable: "/bin/sh", argv: ["sh", "-c", "echo fd3 $0 >&3; echo out $0", tag],
                inheritedFD: inherit.write, outputFD: output.write))
            started.append((tag, spawn, inherit.read, output.read))
        }
        // The write ends stay open until every spawn is finished (the jobs use them).
        let pids = try started.map { try $0.spawn.wait() }
        for fd in writeEnds { close(fd) }
        for entry in started {
            #expect(readToEnd(entry.fd3) == "fd3 \(entry.tag)\n")
            #expect(readToEnd(entry.out) == "out \(entry.tag)\n")
        }
        #expect(Set(pids).count == pids.count)
        for pid in pids { #expect(waitForExit(pid, timeout: 10) == .exited(0)) }
    }

    @Test func aSpawnOnAWorkerThatFailsThrowsOnWait() throws {
        let spawn = try startSpawn(SpawnRequest(executable: "/nonexistent/program"))
        #expect(throws: SystemError(operation: "spawn /nonexistent/program", errno: ENOENT)) { try spawn.wait() }
        // Asked again, the same answer; the job is not finished twice.
        #expect(throws: SystemError(operation: "spawn /nonexistent/program", errno: ENOENT)) { try spawn.wait() }
    }
}

/// A pipe whose ends are close-on-exec (as the daemon's own are: a spawn must pass them on by itself), or nil.
func cloexecPipe() -> [Int32]? {
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else { return nil }
    for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    return fds
}
