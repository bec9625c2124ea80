import CSupport
import CSystemd
import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// The names of the apps' scope units and the properties the daemon sends for them (`ScopeUnits`, `UnitProperty`,
/// `SystemdManagerBus`'s encoders). The scopes themselves need systemd as PID 1: `make test-systemd-vm` runs them.
@Suite struct ScopeUnitsTests {
    @Test func anAppNameBecomesAScopeUnitInTheDaemonsSliceEscapedAsSystemdEscapeDoes() {
        #expect(ScopeUnits.unitName(app: "notes") == "app-lifecycled-notes.scope")
        // `-` separates slice levels in a unit name, so systemd-escape turns it into \x2d; `.`, `_` and `:` stay.
        #expect(ScopeUnits.unitName(app: "my-app") == "app-lifecycled-my\\x2dapp.scope")
        #expect(ScopeUnits.unitName(app: "org.example_1") == "app-lifecycled-org.example_1.scope")
        #expect(ScopeUnits.escape(".hidden/x y") == "\\x2ehidden-x\\x20y")
        #expect(ScopeUnits.cgroupPath(app: "my-app", mount: "/m") == "/m/lifecycled.slice/app-lifecycled-my\\x2dapp.scope")
    }

    @Test func aUsersDaemonPutsItsScopesUnderItsOwnManagerAndRootUnderSystemds() {
        let session = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/lifecycled.service\n"
        #expect(ScopeUnits.managerRoot(procSelfCgroup: session, euid: 1000) == "/user.slice/user-1000.slice/user@1000.service")
        // A hybrid host lists its v1 hierarchies first; the cgroup2 line is the one that counts.
        let hybrid = "12:cpu,cpuacct:/user.slice\n1:name=systemd:/user.slice/user-1000.slice/user@1000.service/app.slice/x.service\n"
            + "0::/user.slice/user-1000.slice/user@1000.service/app.slice/x.service\n"
        #expect(ScopeUnits.managerRoot(procSelfCgroup: hybrid, euid: 1000) == "/user.slice/user-1000.slice/user@1000.service")
        #expect(ScopeUnits.managerRoot(procSelfCgroup: "0::/system.slice/lifecycled.service\n", euid: 0) == "")
        // Root's scopes are systemd's wherever the daemon runs.
        #expect(ScopeUnits.managerRoot(procSelfCgroup: session, euid: 0) == "")
        // A user's daemon outside a user manager (a login shell's session scope, no cgroup2) has no manager to ask.
        #expect(ScopeUnits.managerRoot(procSelfCgroup: "0::/user.slice/user-1000.slice/session-3.scope\n", euid: 1000) == nil)
        #expect(ScopeUnits.managerRoot(procSelfCgroup: "1:name=systemd:/user.slice\n", euid: 1000) == nil)
        let root = ScopeUnits.managerRoot(procSelfCgroup: session, euid: 1000) ?? "?"
        #expect(ScopeUnits.cgroupPath(app: "notes", mount: "/sys/fs/cgroup" + root)
                == "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/lifecycled.slice/app-lifecycled-notes.scope")
    }

    @Test func everyValidAppNameComesBackFromItsUnitName() {
        let alphabet = Array("abcXYZ019_.-")
        for length in 1...6 {
            for seed in 0..<50 {
                var name = String(alphabet[(seed * 7) % 6])  // a letter or digit first, as app names require
                for index in 1..<length { name.append(alphabet[(seed * 31 + index * 17) % alphabet.count]) }
                #expect(ConfigLoader.isValidAppName(name))
                let unit = ScopeUnits.unitName(app: name)
                #expect(ScopeUnits.appName(unit: unit) == name, "\(unit)")
                #expect(!unit.dropFirst(ScopeUnits.prefix.count).dropLast(ScopeUnits.suffix.count).contains("-"), "\(unit)")
            }
        }
    }

    @Test func unitsThatAreNotAppScopesHaveNoAppName() {
        for unit in ["lifecycled.service", "app-lifecycled-.scope", "app-other-x.scope", "app-lifecycled-x.service",
                     "app-lifecycled-bad\\x2.scope"] {
            #expect(ScopeUnits.appName(unit: unit) == nil, "\(unit)")
        }
    }

    @Test func aNewScopeHoldsTheAppsProcessInTheSliceAndIsCollectedEvenWhenItFailed() {
        let properties = UnitProperty.scope(app: "notes", pid: 4242)
        #expect(properties.contains(.pids("PIDs", [4242])))
        #expect(properties.contains(.string("Slice", "lifecycled.slice")))
        #expect(properties.contains(.string("CollectMode", "inactive-or-failed")))
        #expect(properties.contains(.bool("Delegate", true)), "AttachProcessesToUnit moves processes only into delegated units")
    }

    @Test func theWeightsAreTheOnesTheCgroupfsPlacementWrites() {
        for priority in [PriorityClass.foreground, .background, .suspended] {
            let weight = UInt64(priority.cgroupWeight)
            #expect(UnitProperty.weights(priority, memoryLow: .bytes(0)) == [
                .uint64("CPUWeight", weight), .uint64("IOWeight", weight), .uint64("MemoryLow", 0),
            ])
        }
        #expect(UnitProperty.weights(.background, memoryLow: .infinity) == UnitProperty.weights(.suspended, memoryLow: .infinity))
    }

    /// A message built on a bus over a socketpair (sd-bus builds messages only for a started bus), sealed and read
    /// back: the signatures systemd's methods declare, and the properties in order with their values.
    @Test func theCallsCarryTheSignaturesSystemdDeclares() throws {
        var fds: [Int32] = [0, 0]
        #expect(cs_socketpair_cloexec(&fds) == 0)
        defer { close(fds[1]) }
        var created: OpaquePointer?
        #expect(sd_bus_new(&created) >= 0)
        let bus = try #require(created)
        defer { sd_bus_close_unref(bus) }
        #expect(sd_bus_set_fd(bus, fds[0], fds[0]) >= 0)
        #expect(sd_bus_start(bus) >= 0)

        func message(_ member: String, _ build: (OpaquePointer) throws -> Void) throws -> String {
            var made: OpaquePointer?
            #expect(sd_bus_message_new_method_call(bus, &made, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                                   "org.freedesktop.systemd1.Manager", member) >= 0)
            let message = try #require(made)
            defer { sd_bus_message_unref(message) }
            try build(message)
            #expect(sd_bus_message_seal(message, 1, 0) >= 0)
            return String(cString: sd_bus_message_get_signature(message, 1))
        }
        #expect(try message("StartTransientUnit") { message in
            try SystemdManagerBus.appendStartTransientUnit(message, unit: "app-lifecycled-a.scope",
                                                           properties: UnitProperty.scope(app: "a", pid: 7))
        } == "ssa(sv)a(sa(sv))")
        #expect(try message("SetUnitProperties") { message in
            try SystemdManagerBus.appendSetUnitProperties(message, unit: "app-lifecycled-a.scope",
                                                          properties: UnitProperty.weights(.background, memoryLow: .infinity))
        } == "sba(sv)")
    }
}
