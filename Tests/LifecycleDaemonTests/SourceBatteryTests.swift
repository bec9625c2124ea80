import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

extension SourceTests {
    @Suite struct Battery {
        /// A power-supply tree like sysfs's: BAT0 (a battery), AC (mains), and a mouse's battery (scope Device).
        private static func makeTree(_ root: String) {
            for (supply, files) in [
                ("BAT0", ["type": "Battery", "capacity": "85", "status": "Discharging"]),
                ("AC", ["type": "Mains", "online": "0"]),
                ("hid-mouse-battery", ["type": "Battery", "scope": "Device", "capacity": "40", "status": "Discharging"]),
            ] {
                SourceFixture.makeDirectories(root + "/" + supply)
                for (name, value) in files { SourceFixture.rewrite(root + "/" + supply + "/" + name, value + "\n") }
            }
        }

        private static func harness() throws -> SourceHarness {
            try SourceHarness(prepare: { makeTree($0 + "/power_supply") }) { directory in
                var config = SourceFixture.sourcesOff()
                config.battery = true
                config.powerSupplyPath = directory + "/power_supply"
                return config
            }
        }

        @Test func statusWordsAndLevelsAreTranslated() {
            #expect(BatterySource.batteryState(status: "Charging") == "charging")
            #expect(BatterySource.batteryState(status: "Discharging") == "discharging")
            #expect(BatterySource.batteryState(status: "Full") == "full")
            #expect(BatterySource.batteryState(status: "Not charging") == "notCharging")
            #expect(BatterySource.batteryState(status: "Unknown") == "unknown")
            #expect(BatterySource.batteryState(status: nil) == "unknown")
            #expect(BatterySource.level(capacity: "85") == 0.85)
            #expect(BatterySource.level(capacity: "104") == 1.0)
            #expect(BatterySource.level(capacity: nil, energy: ("30000000", "60000000")) == 0.5)
            #expect(BatterySource.level(capacity: nil, charge: ("1", "0")) == nil)
        }

        @Test func uEventsAreParsedFromTheKernelsFormat() {
            let datagram = Array("change@/devices/LNXSYSTM:00/PNP0C0A:00/power_supply/BAT0\0ACTION=change\0"
                .utf8) + Array("DEVPATH=/devices/LNXSYSTM:00/PNP0C0A:00/power_supply/BAT0\0SUBSYSTEM=power_supply\0".utf8)
                + Array("POWER_SUPPLY_NAME=BAT0\0POWER_SUPPLY_CAPACITY=84\0SEQNUM=4711\0".utf8)

            let event = KernelUevent.parse(datagram)

            #expect(event?.action == "change")
            #expect(event?.devpath == "/devices/LNXSYSTM:00/PNP0C0A:00/power_supply/BAT0")
            #expect(event?.properties["SUBSYSTEM"] == "power_supply")
            #expect(event?.properties["POWER_SUPPLY_NAME"] == "BAT0")
            #expect(KernelUevent.parse(Array("libudev\0\u{fe}\u{ed}".utf8)) == nil)
        }

        /// A fake tree in a temporary directory, rewritten by the test; inotify on it is real. The starting values
        /// are read without a post.
        @Test func changesPostOnlyWhenAValueChanges() throws {
            let harness = try Self.harness()
            let bat0 = harness.directory + "/power_supply/BAT0"
            let bat1 = harness.directory + "/power_supply/BAT1"
            #expect(harness.sources.descriptions[2].hasSuffix("; BAT0 85% discharging"), "\(harness.sources.descriptions[2])")
            let expected: [SourcePost] = [
                SourcePost(type: "batteryLevelDidChange", payload: ["level": 0.84, "supply": "BAT0"]),
                SourcePost(type: "batteryStateDidChange", payload: ["state": "charging", "supply": "BAT0"]),
                SourcePost(type: "batteryStateDidChange", payload: ["state": "full", "supply": "BAT0"]),
                SourcePost(type: "batteryLevelDidChange", payload: ["level": 0.5, "supply": "BAT1"]),
                SourcePost(type: "batteryStateDidChange", payload: ["state": "notCharging", "supply": "BAT1"]),
                SourcePost(type: "batteryStateDidChange", payload: ["state": "unknown", "supply": "BAT1"]),
            ]

            let completed = try harness.run([
                .act { SourceFixture.rewrite(bat0 + "/capacity", "84\n") },
                .waitFor { $0.count == 1 },
                .act { SourceFixture.rewrite(bat0 + "/status", "Charging\n") },
                .waitFor { $0.count == 2 },
                .act {
                    SourceFixture.rewrite(bat0 + "/capacity", "84\n")                          // unchanged
                    SourceFixture.rewrite(harness.directory + "/power_supply/AC/online", "1\n")  // mains: not a battery
                    SourceFixture.rewrite(harness.directory + "/power_supply/hid-mouse-battery/capacity", "39\n")
                },
                .wait(.milliseconds(300)),
                .act { SourceFixture.replaceByRename(bat0 + "/status", "Full\n") },
                .waitFor { $0.count == 3 },
                .act {                                                                  // a battery appears
                    SourceFixture.makeDirectories(bat1)
                    SourceFixture.rewrite(bat1 + "/capacity", "50\n")
                    SourceFixture.rewrite(bat1 + "/status", "Not charging\n")
                    SourceFixture.rewrite(bat1 + "/type", "Battery\n")
                },
                .waitFor { $0.count == 5 },
                .act { SourceFixture.removeTree(bat1) },                                // and goes
                .waitFor { $0.count == 6 },
            ])

            #expect(completed)
            #expect(harness.posts == expected)
        }

        /// Real: the kernel's uevent socket opens and receives a real uevent (`change` written to the loopback
        /// interface's `uevent` file makes the kernel send one, SUBSYSTEM=net), which is read and ignored.
        /// A power_supply uevent cannot be produced here (no battery, no test_power module), so that path is the
        /// parser test above plus the inotify path.
        @Test(.enabled(if: access("/sys/class/net/lo/uevent", W_OK) == 0, "needs a writable /sys"))
        func aRealKernelUeventOfAnotherSubsystemIsReadAndIgnored() throws {
            let harness = try Self.harness()
            #expect(harness.sources.descriptions[2].contains("kernel uevents (power_supply) and inotify on "))

            let completed = try harness.run([
                .act {
                    let fd = open("/sys/class/net/lo/uevent", O_WRONLY | O_CLOEXEC)
                    _ = write(fd, "change", 6)
                    close(fd)
                },
                .wait(.milliseconds(300)),
            ])

            #expect(completed)
            #expect(harness.sources.ueventsRead >= 1)
            #expect(harness.posts == [])
        }
    }
}
