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
        #expect(try harness.settle("suspend", "reclaimed").reclaim == nil, "nothing is reclaimed before ReclaimAfterSec")

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

    /// The daemon's reclaim threads: one per online CPU, at most four.
    static let threadCount = min(max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))), 4)

    /// Waits until `pid` has `bytes` in swap, reading /proc every millisecond: the test, at nice 0, reads between two
    /// steps of a reclaim thread at nice 19, so a thread held right after is held early in its job.
    static func waitForSwap(_ pid: pid_t, atLeast bytes: UInt64) throws {
        let deadline = Date().addingTimeInterval(60)
        while memory(pid).swapped < bytes {
            guard Date() < deadline else { throw HarnessError("process \(pid) never had \(bytes) bytes in swap: \(memory(pid))") }
            usleep(1_000)
        }
    }

    /// Starts `harness` with these apps, launched in the background until they touched their memory, and its reclaim
    /// threads started (a small app's reclaim starts them) and held, idle: a job queued from now on waits until the
    /// test releases a thread.
    static func startHeld(_ harness: DaemonHarness, _ sizes: KeyValuePairs<String, Int>) throws
        -> (threads: HeldThreads, pids: [String: pid_t], markers: [String: URL]) {
        try #require(HeldThreads.available, "this test holds the reclaim threads in the v1 freezer (root, /sys/fs/cgroup/freezer)")
        var markers: [String: URL] = [:]
        for (name, size) in [("starter", 8)] + Array(sizes) {
            markers[name] = harness.root.appendingPathComponent("\(name).marker")
            try harness.app(name, Self.app(size, marker: markers[name]!, lifecycle: "ReclaimAfterSec=0"))
        }
        try harness.start()
        let daemonPID = try #require(harness.daemonPID)
        var pids: [String: pid_t] = [:]
        for (name, _) in [("starter", 8)] + Array(sizes) {
            try harness.control("launch", name, "--background")
            pids[name] = try #require(try harness.status(name).pid)
        }
        try harness.waitUntil("every app touched its memory") { markers.values.allSatisfy { Self.passes($0) >= 1 } }
        #expect(Self.reclaimThreads(of: daemonPID).isEmpty, "no reclaim thread before the first reclaim")
        try harness.control("suspend", "starter")
        try harness.waitUntil("the starter's reclaim is over") { try harness.status("starter").reclaim?.outcome == "done" }
        try harness.waitUntil("one reclaim thread per CPU") { Self.reclaimThreads(of: daemonPID).count == Self.threadCount }
        return (try HeldThreads(daemonPID, named: "reclaim"), pids, markers)
    }

    @Test("an app resumed while its memory is being reclaimed stops the reclaim where it is; one resumed while its reclaim waits never has it")
    func resumeStopsAReclaimUnderWay() throws {

        // Without swap the anonymous memory has nowhere to go and the work is over at once: nothing to stop.
        try #require(TestSwap.on, "this test needs swap; the machine has zram")
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let (threads, pids, markers) = try Self.startHeld(harness, ["big": 384, "queued": 64, "next": 16])
        defer { threads.releaseAll() }
        let before = pids.mapValues { Self.memory($0) }

        try harness.control("suspend", "big")
        try harness.control("suspend", "queued")
        #expect(try harness.status("big").reclaim?.outcome == "running")
        #expect(try harness.status("queued").reclaim?.outcome == "running")
        // One thread takes the first job, and is held again early in it; the other job waits behind it.
        try threads.release(0)
        try Self.waitForSwap(pids["big"]!, atLeast: 8 << 20)
        try threads.hold(0)
        let part = Self.memory(pids["big"]!).swapped
        #expect(part < before["big"]!.anonymous / 2, "held early in its job: \(part) of \(before["big"]!.anonymous) bytes")
        #expect(Self.memory(pids["queued"]!).swapped < 1 << 20, "the second job waits")

        try harness.control("resume", "queued")
        try harness.control("resume", "big")
        for name in ["big", "queued"] {
            let status = try #require(try harness.status(name).reclaim)
            #expect(status.outcome == "stopped", "\(name): \(status)")
        }
        // The held thread, let go, drops the stopped job at its next look and takes the next one queued: until that
        // one is done, the running app's memory only comes back from swap, never goes there again.
        try harness.control("suspend", "next")
        try threads.release(0)
        var mostSwapped = part
        try harness.waitUntil("the next job is over") {
            for _ in 0..<20 {
                mostSwapped = max(mostSwapped, Self.memory(pids["big"]!).swapped)
                usleep(1_000)
            }
            return try harness.status("next").reclaim?.outcome == "done"
        }
        #expect(mostSwapped <= part, "the stopped job paged out nothing more: \(part) then \(mostSwapped) bytes in swap")
        threads.releaseAll()
        for name in ["big", "queued"] {
            try harness.waitUntil("\(name) touched its memory again") { Self.passes(markers[name]!) >= 2 }
            #expect(harness.log.contains("\(name): memory reclaim stopped"))
            #expect(!harness.log.contains("\(name): memory reclaimed with"))
            #expect(Kernel.state(pids[name]!) != "T")
            let now = Self.memory(pids[name]!)
            #expect(now.anonymous >= before[name]!.anonymous / 10 * 9, "\(name) keeps its memory: \(before[name]!) → \(now)")
        }
        #expect(Self.memory(pids["queued"]!).swapped < 1 << 20, "a job resumed while it waited never ran")
    }

    /// The daemon's reclaim threads (named `reclaim`) with their nice value and the system time each has spent,
    /// from /proc/PID/task/TID/comm and stat (fields 19 and 15).
    static func reclaimThreads(of pid: pid_t) -> [(nice: Int, systemTime: UInt64)] {
        Kernel.threads(of: pid, named: "reclaim").compactMap { task in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/stat", encoding: .utf8),
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
        try #require(Self.threadCount >= 2, "side by side needs two reclaim threads, one per CPU")
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let (threads, pids, markers) = try Self.startHeld(harness, ["first": 384, "second": 256, "third": 128])
        defer { threads.releaseAll() }
        let daemonPID = try #require(harness.daemonPID)
        let before = pids.mapValues { Self.memory($0).anonymous }
        #expect(threads.count == Self.threadCount)
        #expect(Self.reclaimThreads(of: daemonPID).allSatisfy { $0.nice == 19 }, "at nice 19: \(Self.reclaimThreads(of: daemonPID))")

        for name in ["first", "second", "third"] { try harness.control("suspend", name) }
        // Every thread is held: the three jobs wait, and the loop answers status meanwhile.
        for name in ["first", "second", "third"] {
            #expect(try harness.status(name).reclaim?.outcome == "running")
            #expect(Self.memory(pids[name]!).swapped < 1 << 20, "\(name) waits")
        }

        // A thread let go takes the first suspended app's job, and is held again early in it.
        try threads.release(0)
        try Self.waitForSwap(pids["first"]!, atLeast: 8 << 20)
        try threads.hold(0)
        let firstPart = Self.memory(pids["first"]!).swapped
        #expect(firstPart < before["first"]! / 2, "held early in its job: \(firstPart) of \(before["first"]!) bytes")
        #expect(Self.memory(pids["second"]!).swapped < 1 << 20 && Self.memory(pids["third"]!).swapped < 1 << 20,
                "the first suspended is the first paged out")

        // Another thread takes the second app's job while the first's is under way: side by side.
        try threads.release(1)
        try Self.waitForSwap(pids["second"]!, atLeast: 8 << 20)
        try threads.hold(1)
        #expect(try harness.status("first").reclaim?.outcome == "running")
        #expect(try harness.status("second").reclaim?.outcome == "running")
        #expect(Self.memory(pids["first"]!).swapped == firstPart, "the first job stays where its thread was held")
        #expect(Self.memory(pids["third"]!).swapped < 1 << 20, "the third app waits its turn behind the first two")

        // The first app resumed mid-way: its job stops at its thread's next step; the others go on.
        try harness.control("resume", "first")
        #expect(try harness.status("first").reclaim?.outcome == "stopped")
        threads.releaseAll()
        try harness.waitUntil("the other reclaims are over", timeout: 120) {
            try ["second", "third"].allSatisfy { try harness.status($0).reclaim?.outcome == "done" }
        }
        for name in ["second", "third"] {
            let after = Self.memory(pids[name]!)
            #expect(after.anonymous <= before[name]! / 10, "\(name): 90% of its anonymous memory left RAM: \(before[name]!) → \(after)")
        }
        #expect(Self.reclaimThreads(of: daemonPID).map(\.systemTime).reduce(0, +) > 0, "the page-out ran on the reclaim threads")
        #expect(try harness.status("first").reclaim?.outcome == "stopped")
        try harness.waitUntil("the first app touched its memory again") { Self.passes(markers["first"]!) >= 2 }
        #expect(harness.log.contains("first: memory reclaim stopped"))
        #expect(!harness.log.contains("first: memory reclaimed with"))
        // Its job stopped at the resume: nothing pages it out again behind the running app's back.
        let first = Self.memory(pids["first"]!)
        #expect(first.anonymous >= before["first"]! / 10 * 9, "the running app keeps its memory: \(before["first"]!) → \(first)")
    }
}
