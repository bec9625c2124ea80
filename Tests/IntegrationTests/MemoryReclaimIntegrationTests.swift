import Foundation
import Glibc
import LifecycleProtocol
import Testing
import TestSupport

/// `Reclaim=`, end to end: a real app that touched its own anonymous memory is suspended, and after
/// `ReclaimAfterSec=` the daemon pages it out (process_madvise: this host's cgroup2 has no memory controller, so
/// memory.reclaim is checked in the VM of `make test-systemd`). Anonymous memory leaves RAM only into swap: the
/// suite uses `TestSwap` (the machine's swap, or a zram device kept for the whole test process); where no swap
/// can be had it checks the other half of the promise (status and the log say so, and the anonymous memory stays).
@Suite("memory reclaim of suspended apps", .serialized)
struct MemoryReclaimIntegrationTests {
    static let toucher = DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/memory_toucher.py").path

    /// An app that touches `mebibytes` MiB, then idles, touching it all again each time it is continued. It stays in
    /// the background until the test suspends it, once it has touched its memory.
    static func app(_ mebibytes: Int, marker: URL, lifecycle: String) -> String {
        "[App]\nExec=/usr/bin/python3 \(toucher) \(mebibytes) \(marker.path)\nProtocol=none\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n\(lifecycle)\n"
    }

    /// The passes the toucher has made over its memory, from its marker file.
    static func passes(_ marker: URL) -> Int {
        ((try? String(contentsOf: marker, encoding: .utf8)) ?? "").split(separator: " ").first.flatMap { Int($0) } ?? 0
    }

    /// RssAnon and VmSwap of /proc/PID/status, in bytes.
    static func memory(_ pid: pid_t) -> (anonymous: UInt64, swapped: UInt64) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> UInt64 {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
            return (line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { UInt64($0) } ?? 0) * 1024
        }
        return (field("RssAnon"), field("VmSwap"))
    }

    @Test("a suspended app's anonymous memory leaves RAM after ReclaimAfterSec; status shows it; a resume touches it again; Reclaim=no keeps it")
    func suspendedAppGivesItsMemoryBack() throws {
        let swapOn = TestSwap.on
        #expect(swapOn || !FileManager.default.fileExists(atPath: "/sys/class/zram-control"),
                "a machine with zram gets its swap device")
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let reclaimed = harness.root.appendingPathComponent("reclaimed.marker")
        let kept = harness.root.appendingPathComponent("kept.marker")
        try harness.app("reclaimed", Self.app(64, marker: reclaimed, lifecycle: "Reclaim=yes\nReclaimAfterSec=1"))
        // Suspended first, with a shorter delay: when the other app's reclaim is done, this one's time has passed.
        try harness.app("kept", Self.app(64, marker: kept, lifecycle: "Reclaim=no\nReclaimAfterSec=0.5"))
        try harness.start()

        try harness.control("launch", "kept", "--background")
        try harness.control("launch", "reclaimed", "--background")
        let pid = try #require(try harness.status("reclaimed").pid)
        let keptPID = try #require(try harness.status("kept").pid)
        try harness.waitUntil("both apps touched their 64 MiB") { Self.passes(reclaimed) >= 1 && Self.passes(kept) >= 1 }
        let before = Self.memory(pid)
        let keptBefore = Self.memory(keptPID)
        #expect(before.anonymous >= 64 << 20)
        try harness.control("suspend", "kept")
        try harness.control("suspend", "reclaimed")
        #expect(try harness.status("reclaimed").reclaim == nil, "nothing is reclaimed before ReclaimAfterSec")

        try harness.waitUntil("the reclaim is over") { try harness.status("reclaimed").reclaim?.outcome == "done" }
        let after = Self.memory(pid)
        let status = try #require(try harness.status("reclaimed").reclaim)
        #expect(status.method == "process_madvise")
        #expect(status.anonymousBefore >= 64 << 20, "\(status)")
        #expect(status.residentBefore >= status.anonymousBefore)
        #expect(status.residentAfter != nil && status.swappedAfter != nil)
        let text = try harness.lifectl("status", "reclaimed").stdout
        #expect(text.contains("reclaim:         done with process_madvise in "), "\(text)")
        if swapOn {
            #expect(after.anonymous <= before.anonymous / 10, "90% of the anonymous memory left RAM: before \(before), after \(after)")
            #expect(after.swapped >= 60 << 20, "it is in swap: \(after)")
            #expect(status.swap)
            #expect((status.anonymousAfter ?? .max) <= status.anonymousBefore / 10, "\(status)")
            #expect((status.swappedAfter ?? 0) >= status.swappedBefore + (60 << 20), "\(status)")
            #expect(try harness.lifectl("status").stdout.contains("reclaim: swap on"))
        } else {
            #expect(after.anonymous >= before.anonymous / 10 * 9, "without swap the anonymous memory stays: \(after)")
            #expect(!status.swap)
            #expect(text.contains("no swap: only file pages leave RAM"))
            #expect(harness.log.contains("the machine has no swap"))
            #expect(try harness.lifectl("status").stdout.contains("reclaim: no swap: only file pages leave RAM"))
        }

        // Reclaim=no: suspended as long, its memory stays where it was, and status has nothing to say.
        #expect(try harness.status("kept").state == .suspended)
        #expect(try harness.status("kept").reclaim == nil)
        #expect(Self.memory(keptPID).anonymous >= keptBefore.anonymous / 10 * 9,
                "Reclaim=no: before \(keptBefore), now \(Self.memory(keptPID))")

        // Resumed, it runs and touches its whole working set again: its pages come back.
        let passesBefore = Self.passes(reclaimed)
        try harness.control("resume", "reclaimed")
        try harness.waitUntil("the app touched its memory again") { Self.passes(reclaimed) > passesBefore }
        #expect(Self.memory(pid).anonymous >= 64 << 20, "faulted back: \(Self.memory(pid))")
        #expect(try harness.status("reclaimed").state == .background)
    }

    @Test("an app resumed while its memory is being reclaimed stops the reclaim where it is")
    func resumeStopsAReclaimUnderWay() throws {

        // Without swap the anonymous memory has nowhere to go and the work is over at once: nothing to stop.
        try #require(TestSwap.on, "this test needs swap; the machine has zram")
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let marker = harness.root.appendingPathComponent("big.marker")
        try harness.app("big", Self.app(384, marker: marker, lifecycle: "ReclaimAfterSec=0"))
        try harness.start()
        try harness.control("launch", "big", "--background")
        let pid = try #require(try harness.status("big").pid)
        try harness.waitUntil("the app touched its memory") { Self.passes(marker) >= 1 }

        try harness.control("suspend", "big")
        try harness.waitUntil("the reclaim began") { try harness.status("big").reclaim != nil }
        try harness.control("resume", "big")

        let status = try #require(try harness.status("big").reclaim)
        #expect(status.outcome == "stopped", "\(status)")
        try harness.waitUntil("the app touched its memory again") { Self.passes(marker) >= 2 }
        #expect(harness.log.contains("big: memory reclaim stopped"))
        #expect(!harness.log.contains("big: memory reclaimed with"))
        #expect(Kernel.state(pid) != "T")
    }

    /// The daemon's reclaim threads (named `reclaim`) with their nice value and the system time each has spent,
    /// from /proc/PID/task/TID/comm and stat (fields 19 and 15).
    static func reclaimThreads(of pid: pid_t) -> [(nice: Int, systemTime: UInt64)] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.compactMap { task in
            guard let comm = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8),
                  comm.trimmingCharacters(in: .newlines) == "reclaim",
                  let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
                  let end = stat.lastIndex(of: ")") else { return nil }
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            guard fields.count > 16, let nice = Int(fields[16]), let system = UInt64(fields[12]) else { return nil }
            return (nice, system)
        }
    }

    @Test("apps suspended together are paged out side by side on the lowest-priority reclaim threads, the first suspended first; a resume stops its own job only; the loop answers status meanwhile")
    func appsSuspendedTogetherAreReclaimedSideBySide() throws {

        // Without swap the anonymous memory has nowhere to go and each job is over at once: nothing overlaps.
        try #require(TestSwap.on, "this test needs swap; the machine has zram")
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let sizes = ["first": 384, "second": 256, "third": 128]
        var markers: [String: URL] = [:]
        for (name, size) in sizes {
            markers[name] = harness.root.appendingPathComponent("\(name).marker")
            try harness.app(name, Self.app(size, marker: markers[name]!, lifecycle: "ReclaimAfterSec=0"))
        }
        try harness.start()
        let daemonPID = try #require(harness.daemonPID)
        var pids: [String: pid_t] = [:]
        for name in ["first", "second", "third"] {
            try harness.control("launch", name, "--background")
            let pid = try #require(try harness.status(name).pid)
            pids[name] = pid
        }
        try harness.waitUntil("every app touched its memory") { markers.values.allSatisfy { Self.passes($0) >= 1 } }
        let before = pids.mapValues { Self.memory($0).anonymous }
        #expect(Self.reclaimThreads(of: daemonPID).isEmpty, "no reclaim thread before the first reclaim")

        for name in ["first", "second", "third"] { try harness.control("suspend", name) }
        // While the first app's job runs, the second one's memory leaves RAM too: two jobs at once (this machine has
        // two CPUs or more; with one, a single thread takes them in turn). Each poll is a status the loop answered
        // while the reclaim ran.
        let cpus = sysconf(Int32(_SC_NPROCESSORS_ONLN))
        var answeredWhileRunning = 0
        var overlapped = false
        var resumedFirst = false
        /// Whether the third app's job waited while both threads were busy with the first two (nil: not seen).
        var thirdWaited: Bool?
        try harness.waitUntil("the first app's reclaim is over", timeout: 120) {
            let first = try harness.status("first").reclaim
            guard first?.outcome == "running" || first == nil else { return true }
            guard first != nil else { return false }
            answeredWhileRunning += 1
            guard Self.memory(pids["second"]!).swapped >= 16 << 20 else { return false }
            let firstSwapped = Self.memory(pids["first"]!).swapped
            let thirdSwapped = Self.memory(pids["third"]!).swapped
            let secondRunning = try harness.status("second").reclaim?.outcome == "running"
            // Still running after those reads: the first's job was under way while they were made (an outcome
            // leaves `running` once), so both jobs held the threads when the third's memory was read.
            guard try harness.status("first").reclaim?.outcome == "running" else { return true }
            overlapped = true
            if secondRunning { thirdWaited = thirdSwapped < 1 << 20 }
            guard firstSwapped < before["first"]! / 2 else { return false }
            // Mid-way: its job is under way on a thread, and the resume stops it there.
            try harness.control("resume", "first")
            resumedFirst = true
            return true
        }
        #expect(answeredWhileRunning > 0, "lifectl status was answered while the reclaim ran")
        #expect(overlapped || cpus < 2, "a second app's memory left RAM while the first one's job was under way")
        #expect(resumedFirst || cpus < 2, "the first app was resumed with its job half done")
        #expect(thirdWaited != false || min(cpus, 4) >= 3, "the third app waited its turn behind the first two")
        let threads = Self.reclaimThreads(of: daemonPID)
        #expect(threads.count == min(cpus, 4) && threads.allSatisfy { $0.nice == 19 }, "one reclaim thread per CPU at nice 19: \(threads)")

        try harness.waitUntil("the other reclaims are over", timeout: 120) {
            try ["second", "third"].allSatisfy { try harness.status($0).reclaim?.outcome == "done" }
        }
        for name in ["second", "third"] {
            let after = Self.memory(pids[name]!)
            #expect(after.anonymous <= before[name]! / 10, "\(name): 90% of its anonymous memory left RAM: \(before[name]!) → \(after)")
        }
        #expect(Self.reclaimThreads(of: daemonPID).map(\.systemTime).reduce(0, +) > 0, "the page-out ran on the reclaim threads")
        if resumedFirst {
            #expect(try harness.status("first").reclaim?.outcome == "stopped")
            try harness.waitUntil("the first app touched its memory again") { Self.passes(markers["first"]!) >= 2 }
            #expect(harness.log.contains("first: memory reclaim stopped"))
            #expect(!harness.log.contains("first: memory reclaimed with"))
            // Its job stopped at the resume: nothing pages it out again behind the running app's back.
            let first = Self.memory(pids["first"]!)
            #expect(first.anonymous >= before["first"]! / 10 * 9, "the running app keeps its memory: \(before["first"]!) → \(first)")
        }
    }
}
