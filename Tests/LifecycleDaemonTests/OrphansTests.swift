import Foundation
import Glibc
import Testing
@testable import LifecycleDaemon

/// What an app's launch left outside its tree. The launch session's rest is read from a /proc written by the test: a
/// real one cannot show that a process is read once, nor hold a session whose leader is known to be gone (the
/// double-forked worker with real processes is in `AdoptWorkerTests`). A process group's members are real processes.
@Suite struct OrphansTests {
    /// 3,999,999 is above any pid_max, so the session's leader is gone.
    private let session: pid_t = 3_999_999

    private func write(_ root: String, _ pid: pid_t, parent: pid_t, session: pid_t, uid: uid_t = 1000, started: Int,
                       children: [pid_t] = []) {
        let directory = "\(root)/\(pid)/task/\(pid)"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let stat = "\(pid) (p \(pid)) S \(parent) \(pid) \(session) 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 \(started) 0 0\n"
        FileManager.default.createFile(atPath: "\(root)/\(pid)/stat", contents: Data(stat.utf8))
        let status = "Name:\tp\nUid:\t\(uid)\t\(uid)\t\(uid)\t\(uid)\n"
        FileManager.default.createFile(atPath: "\(root)/\(pid)/status", contents: Data(status.utf8))
        let list = children.map(String.init).joined(separator: " ")
        FileManager.default.createFile(atPath: "\(directory)/children", contents: Data(list.utf8))
    }

    /// init (1) with the app (100), its double-forked worker (200) and the worker's child (201), an older process of
    /// the session (300), another session's process (400) and another user's (500).
    private func world(_ name: String) -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(getpid())").path
        try? FileManager.default.removeItem(atPath: root)
        write(root, 1, parent: 0, session: 1, started: 1, children: [100, 200, 300, 400, 500])
        write(root, 100, parent: 1, session: session, started: 50)
        write(root, 200, parent: 1, session: session, started: 60, children: [201])
        write(root, 201, parent: 200, session: session, started: 61)
        write(root, 300, parent: 1, session: session, started: 40)
        write(root, 400, parent: 1, session: 400, started: 70)
        write(root, 500, parent: 1, session: session, uid: 1001, started: 70)
        return root
    }

    @Test func theRestIsWhatTheLaunchStartedLaterUnderTheAppsAncestorsWithItsDescendants() throws {
        try #require(ProcessTree.hasChildrenFiles)
        let root = world("sessions")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sessions = Orphans(procRoot: root, ownLine: [])
        #expect(sessions.rest(of: 100, besides: [100]) == [200, 201])
        #expect(sessions.rest(of: 100, besides: [100, 201]) == [200], "what the app's tree holds is not repeated")
        #expect(Orphans(procRoot: root, ownLine: [200]).rest(of: 100, besides: [100]) == [], "never the daemon's line")
    }

    @Test func aListedChildIsReadOnceAndANewOneIsRead() throws {
        try #require(ProcessTree.hasChildrenFiles)
        let root = world("sessions-once")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sessions = Orphans(procRoot: root, ownLine: [])
        #expect(sessions.rest(of: 100, besides: [100]) == [200, 201])
        // Were 400 read again, it would now count: it is not, while init's children file lists it.
        write(root, 400, parent: 1, session: session, started: 70)
        #expect(sessions.rest(of: 100, besides: [100]) == [200, 201])
        // A new child of init is read.
        write(root, 600, parent: 1, session: session, started: 80)
        write(root, 1, parent: 0, session: 1, started: 1, children: [100, 200, 300, 400, 500, 600])
        #expect(sessions.rest(of: 100, besides: [100]) == [200, 201, 600])
        // A child no longer listed is forgotten, and read afresh when listed again.
        write(root, 1, parent: 0, session: 1, started: 1, children: [100, 200])
        #expect(sessions.rest(of: 100, besides: [100]) == [200, 201])
        write(root, 1, parent: 0, session: 1, started: 1, children: [100, 200, 400])
        #expect(sessions.rest(of: 100, besides: [100]) == [200, 201, 400])
    }

    @Test func aSessionWhoseLeaderLivesHasNoLaunchRest() throws {
        let root = world("sessions-leader")
        defer { try? FileManager.default.removeItem(atPath: root) }
        // The app in the session of a live process (the test runner: a terminal's shell, say).
        write(root, 100, parent: 1, session: getpid(), started: 50)
        #expect(Orphans(procRoot: root, ownLine: []).rest(of: 100, besides: [100]) == [])
    }

    @Test func aProcessGroupHoldsItsDoubleForkedWorkerAndNotAMemberThatLeftTheGroup() throws {
        let script = """
        import os, sys, time
        # Foundation's Process may have made it a group leader already, which setsid() refuses.
        if os.getpgid(0) != os.getpid():
            os.setsid()
        ready_read, ready_write = os.pipe()
        def ready_then_sleep():
            os.write(ready_write, b".")
            time.sleep(100)
            os._exit(0)
        if os.fork() == 0:
            if os.fork() == 0:
                ready_then_sleep()
            os._exit(0)
        os.wait()
        if os.fork() == 0:
            ready_then_sleep()
        if os.fork() == 0:
            os.setpgid(0, 0)
            ready_then_sleep()
        for _ in range(3):
            os.read(ready_read, 1)
        print("ready", flush=True)
        time.sleep(100)
        """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", script]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let leader = process.processIdentifier
        #expect(String(decoding: output.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("ready"))
        let tree = ProcessTree.descendants(of: leader)
        defer {
            kill(-leader, SIGKILL)
            for pid in tree { kill(pid, SIGKILL) }
            process.waitUntilExit()
        }
        let scanned = ProcessTable.members(ofProcessGroup: leader)
        #expect(scanned.count == 3, "the leader, its child and the orphaned worker")
        #expect(Orphans().processGroup(of: leader) == scanned.sorted())
        #expect(Set(scanned).subtracting(ProcessTree.descendants(of: leader)).count == 1,
                "the worker is orphaned: no descendant of the leader")
    }
}
