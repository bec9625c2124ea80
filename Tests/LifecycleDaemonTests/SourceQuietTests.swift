import CSystemd
import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

extension SourceTests {
    @Suite struct Quiet {
        /// Every source on, on the machine's real files (/etc/localtime, the locale files, /sys/class/power_supply,
        /// /proc/pressure/memory, the uevent socket) plus one app's preferences in a temporary directory, and
        /// nothing changing: over one second the loop must not wake for any of them. Counted twice: sd-event's own
        /// iteration counter (every wakeup of the loop is one iteration) and each source's callback count. The
        /// only iterations allowed are the test's own: the deferred start, the one-second timer, and the exit;
        /// and one per kernel uevent, should another process make the kernel send one meanwhile.
        @Test func anIdleDaemonMakesNoWakeups() throws {
            let psi = access("/proc/pressure/memory", F_OK) == 0
            let harness = try SourceHarness(prepare: { SourceFixture.rewrite($0 + "/prefs.json", "{}") }) { _ in
                var config = SourcesConfig()  // every source on, on the real paths
                // The default 1 s window needs CAP_SYS_RESOURCE; with it or not, the trigger must be on here.
                if !SourceFixture.hasCapability(24) { config.pressureTrigger = "some 150000 2000000" }
                return config
            }
            harness.sources.watchPreferences(app: "notes", path: harness.directory + "/prefs.json")
            let descriptions = harness.sources.descriptions
            #expect(!descriptions.contains { $0.contains(" off") }, "\(descriptions)")
            #expect(harness.sources.memoryPressureIsOn == psi)

            var before: UInt64 = 0, after: UInt64 = 0
            let completed = try harness.run([
                .act { _ = sd_event_get_iteration(harness.loop.event, &before) },
                .wait(.seconds(1)),
                .act { _ = sd_event_get_iteration(harness.loop.event, &after) },
            ])

            #expect(completed)
            let wakeups = harness.sources.wakeups
            #expect(wakeups["timer"] == 0)
            #expect(wakeups["inotify"] == 0)
            #expect(wakeups["pressure"] == 0)
            // Between the two readings: the timer of the one-second wait, and uevents from elsewhere, if any.
            #expect(after - before <= 1 + UInt64(wakeups["uevent"] ?? 0), "iterations \(before) → \(after), \(wakeups)")
            #expect(harness.posts == [])
        }
    }

    @Suite struct Stopping {
        /// The descriptors the sources hold, found in /proc/self/fd by what they are: a CLOCK_REALTIME timerfd
        /// with cancel-on-set (fdinfo `settime flags: 03`), an inotify instance watching `directory` (fdinfo
        /// lists each watched inode), the PSI file, and a kernel uevent socket (protocol 15 in
        /// /proc/self/net/netlink). Other tests' descriptors are none of these.
        private static func descriptors(watching directory: String) -> (timer: Int, inotify: Int, pressure: Int, uevent: Int) {
            var status = stat()
            stat(directory, &status)
            let inode = "ino:" + String(status.st_ino, radix: 16) + " "
            let netlink = (try? readKernelFile("/proc/self/net/netlink")) ?? ""
            let ueventInodes = Set(netlink.split(separator: "\n").dropFirst().compactMap { line -> Substring? in
                let fields = line.split(separator: " ")
                return fields.count >= 10 && fields[1] == "15" ? fields[9] : nil
            })
            var counts = (timer: 0, inotify: 0, pressure: 0, uevent: 0)
            for (name, link) in openDescriptorTargets() {
                let info = (try? readKernelFile("/proc/self/fdinfo/" + name)) ?? ""
                if link == "anon_inode:[timerfd]", info.contains("clockid: 0"), info.contains("settime flags: 03") { counts.timer += 1 }
                if link == "anon_inode:inotify", info.contains(inode) { counts.inotify += 1 }
                if link == "/proc/pressure/memory" { counts.pressure += 1 }
                if link.hasPrefix("socket:["), ueventInodes.contains(Substring(link.dropFirst(8).dropLast())) { counts.uevent += 1 }
            }
            return counts
        }

        @Test func stopClosesEveryDescriptorAndPostsNothingMore() throws {
            let psi = access("/proc/pressure/memory", F_OK) == 0
            // No descriptor left over by the source tests that ran before (each harness stops its sources).
            let leftover = Self.descriptors(watching: "/")
            #expect(leftover.timer == 0 && leftover.pressure == 0 && leftover.uevent == 0, "\(leftover)")
            let harness = try SourceHarness(prepare: { directory in
                SourceFixture.rewrite(directory + "/localtime", "")
                SourceFixture.rewrite(directory + "/prefs.json", "{}")
                SourceFixture.makeDirectories(directory + "/power_supply")
            }) { directory in
                var config = SourcesConfig()
                config.localtimePath = directory + "/localtime"
                config.localeFiles = [directory + "/locale.conf"]
                config.powerSupplyPath = directory + "/power_supply"
                config.pressureTrigger = "some 150000 2000000"
                return config
            }
            harness.sources.watchPreferences(app: "notes", path: harness.directory + "/prefs.json")

            let open = Self.descriptors(watching: harness.directory)
            #expect(open.timer == 1)
            #expect(open.inotify == 1, "one inotify instance for all files")
            #expect(open.pressure == (psi ? 1 : 0))
            #expect(open.uevent == 1)

            let completed = try harness.run([
                .act {
                    harness.sources.stop()
                    SourceFixture.rewrite(harness.directory + "/prefs.json", "{\"after\":1}")
                    SourceFixture.rewrite(harness.directory + "/locale.conf", "LANG=C.UTF-8")
                },
                .wait(.milliseconds(200)),
            ])

            #expect(completed)
            let closed = Self.descriptors(watching: harness.directory)
            #expect(closed.timer == 0 && closed.inotify == 0 && closed.pressure == 0 && closed.uevent == 0, "\(closed)")
            #expect(harness.posts == [])
            #expect(harness.sources.descriptions == ["notification sources: stopped"])
        }
    }
}
