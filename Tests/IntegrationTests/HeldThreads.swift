import Foundation
import Glibc

/// Threads of another process, each held in a v1 freezer group of its own, so that a test says when each may run.
/// The v1 freezer moves single threads (its `tasks` file), and a frozen thread stops only on its way back to user
/// space: one in a system call finishes that call first. With the daemon's reclaim threads held, a test sees a job
/// under way and another beside it at any machine speed, where a race against the kernel's page-out would depend on
/// the load. Every thread goes back to its own group, thawed, at `releaseAll` (and no later than the deinit).
final class HeldThreads {
    static let hierarchy = "/sys/fs/cgroup/freezer"

    /// Whether this host can hold single threads: root and a writable v1 freezer hierarchy.
    static var available: Bool {
        geteuid() == 0 && access(hierarchy + "/tasks", W_OK) == 0
    }

    private struct Held {
        let tid: pid_t
        let group: String
        /// The thread's freezer group before it was held, to go back to.
        let home: String
    }

    private var held: [Held] = []

    /// Holds every thread of `pid` whose name (`comm`) is `name`, in the order of their thread ids.
    init(_ pid: pid_t, named name: String) throws {
        let tids = Kernel.threads(of: pid, named: name)
        guard !tids.isEmpty else { throw HarnessError("no thread named \(name) in process \(pid)") }
        for tid in tids {
            let cgroup = try String(contentsOfFile: "/proc/\(pid)/task/\(tid)/cgroup", encoding: .utf8)
            guard let line = cgroup.split(separator: "\n").first(where: { $0.split(separator: ":").dropFirst().first == "freezer" }),
                  let home = line.split(separator: ":", maxSplits: 2).last else {
                throw HarnessError("thread \(tid) is in no v1 freezer group: \(cgroup)")
            }
            let group = Self.hierarchy + "/lifecycled-test-\(getpid())-\(tid)"
            guard mkdir(group, 0o755) == 0 || errno == EEXIST else {
                throw HarnessError("mkdir \(group): \(String(cString: strerror(errno)))")
            }
            held.append(Held(tid: tid, group: group, home: Self.hierarchy + (home == "/" ? "" : String(home))))
            try "\(tid)".write(toFile: group + "/tasks", atomically: false, encoding: .utf8)
            try hold(held.count - 1)
        }
    }

    deinit { releaseAll() }

    var count: Int { held.count }

    /// Freezes thread `index` and waits until the kernel says it is frozen.
    func hold(_ index: Int) throws {
        try set(index, "FROZEN")
    }

    /// Thaws thread `index`; it runs on from where it stopped.
    func release(_ index: Int) throws {
        try set(index, "THAWED")
    }

    /// Every thread thawed and back in its own group, the groups removed.
    func releaseAll() {
        for thread in held {
            try? "THAWED".write(toFile: thread.group + "/freezer.state", atomically: false, encoding: .utf8)
            try? "\(thread.tid)".write(toFile: thread.home + "/tasks", atomically: false, encoding: .utf8)
            rmdir(thread.group)
        }
        held = []
    }

    private func set(_ index: Int, _ state: String) throws {
        let file = held[index].group + "/freezer.state"
        try state.write(toFile: file, atomically: false, encoding: .utf8)
        // FREEZING until every task of the group has stopped; a thread in a system call stops when the call returns.
        let reached = DaemonHarness.poll(timeout: 30) {
            (try? String(contentsOfFile: file, encoding: .utf8))?.trimmingCharacters(in: .newlines) == state
        }
        guard reached else { throw HarnessError("\(file) did not reach \(state)") }
    }
}
