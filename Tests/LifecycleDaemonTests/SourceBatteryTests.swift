import CSupport
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

        /// Real: the kernel sends a uevent of another subsystem (`change` written to the loopback interface's
        /// `uevent` file makes it send one, SUBSYSTEM=net), as a test's own unfiltered socket sees, and the
        /// daemon's socket filter drops it in the kernel: the loop is not woken. A power_supply uevent cannot be
        /// produced here (no battery, no test_power module), so the filter's passing side is the socket-pair test
        /// below, run by the kernel's own filter on crafted messages.
        @Test(.enabled(if: access("/sys/class/net/lo/uevent", W_OK) == 0, "needs a writable /sys"))
        func aRealKernelUeventOfAnotherSubsystemDoesNotWakeTheLoop() throws {
            let harness = try Self.harness()
            #expect(harness.sources.descriptions[2].contains("kernel uevents (power_supply) and inotify on "))
            let witness = cs_uevent_open(nil)
            try #require(witness >= 0, "an unfiltered uevent socket of the test's own")
            defer { close(witness) }

            let completed = try harness.run([
                .act {
                    let fd = open("/sys/class/net/lo/uevent", O_WRONLY | O_CLOEXEC)
                    _ = write(fd, "change", 6)
                    close(fd)
                },
                .wait(.milliseconds(300)),
            ])

            #expect(completed)
            var subsystems: [String] = []
            var buffer = [CChar](repeating: 0, count: 16 * 1024)
            while true {
                let count = cs_uevent_receive(witness, &buffer, buffer.count)
                if count < 0 { break }
                if count > 0, let event = KernelUevent.parse(buffer[0..<count].map { UInt8(bitPattern: $0) }) {
                    subsystems.append(event.properties["SUBSYSTEM"] ?? "")
                }
            }
            #expect(subsystems.contains("net"), "the kernel sent the uevent: \(subsystems)")
            #expect(harness.sources.ueventsRead == 0)
            #expect((harness.sources.wakeups["uevent"] ?? 0) == 0)
            #expect(harness.posts == [])
        }

        /// The filter, run by the kernel on a datagram socket pair: only a kernel-format uevent whose SUBSYSTEM is
        /// exactly power_supply passes, and one whose header is too long for the filter to search passes too.
        @Test func theSocketFilterPassesOnlyTheSubsystemItIsGiven() throws {
            var pair: [Int32] = [-1, -1]
            try #require(socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
            defer { close(pair[0]); close(pair[1]) }
            try #require(cs_uevent_filter(pair[1], "power_supply") == 0, "errno \(errno)")

            func uevent(_ action: String, _ devpath: String, _ subsystem: String) -> [UInt8] {
                Array("\(action)@\(devpath)\0ACTION=\(action)\0DEVPATH=\(devpath)\0SUBSYSTEM=\(subsystem)\0SEQNUM=7\0".utf8)
            }
            let battery = "/devices/LNXSYSTM:00/LNXSYBUS:00/PNP0C0A:00/power_supply/BAT0"
            let deep = "/devices/" + String(repeating: "pci0000:00/", count: 30) + "power_supply/hid"
            let cases: [(String, [UInt8], Bool)] = [
                ("a battery's change", uevent("change", battery, "power_supply"), true),
                ("a battery's add", uevent("add", battery, "power_supply"), true),
                ("the network's change", uevent("change", "/devices/virtual/net/lo", "net"), false),
                ("a longer subsystem name", uevent("change", battery, "power_supply2"), false),
                ("a message cut inside the field", Array(uevent("change", battery, "power_supply").prefix(120)), false),
                ("a header too long to search", uevent("change", deep, "net"), true),
                ("no NUL at all", Array(String(repeating: "x", count: 64).utf8), false),
            ]
            for (what, bytes, passes) in cases {
                #expect(send(pair[0], bytes, bytes.count, 0) == bytes.count, "\(what)")
                var buffer = [UInt8](repeating: 0, count: 4096)
                let received = recv(pair[1], &buffer, buffer.count, 0)
                #expect((received == bytes.count) == passes, "\(what): received \(received)")
                if !passes { #expect(received < 0 && errno == EAGAIN, "\(what)") }
            }
        }
    }
}
