import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// Memory protection for the apps in front (`MemoryLow=`): `memory.low` on the app's cgroup while it is in the
/// foreground, none in the background or suspended, and an adopted scope's own value given back.
///
/// What is laid out: this hybrid machine's cgroup2 has no memory controller (memory is bound to v1), so no group
/// here has a memory.low. The groups are directories of plain files named like cgroup files, as the kernel presents
/// them on a pure cgroup2 host with the memory controller enabled; the code takes paths, so it does not know the
/// difference. A plain file keeps the tail of a longer earlier value where the kernel replaces the whole value, so
/// each value is read with `take`, which empties the file for the next write, and a value the test lays out before
/// the daemon's first write is no longer than that write. The real kernel and systemd are checked in the VM of
/// `make test-systemd` (systemd/vm-squeeze.sh).
@Suite struct MemoryProtectionTests {
    /// A delegated root whose app groups get cpu, io and memory, and one app group in it.
    private func delegatedGroup(_ fake: TemporaryDirectory) throws -> (CgroupSupport, AppCgroup) {
        let root = fake.path
        for (name, text) in ["cgroup.controllers": "cpu io memory\n", "cgroup.subtree_control": "", "cgroup.procs": "4242\n"] {
            try writeNewFile(root + "/" + name, text)
        }
        try makeDirectory(root + "/supervisor")
        try writeNewFile(root + "/supervisor/cgroup.procs", "")
        try makeDirectory(root + "/app-demo")
        for name in ["cgroup.procs", "cgroup.freeze", "cpu.weight", "io.weight", "memory.low"] {
            try writeNewFile(root + "/app-demo/" + name, "")
        }
        let support = try CgroupSupport.takeDelegated(DelegatedSubtree(root: root), layout: .unified, daemonPID: 4242)
        return (support, try support.makeAppCgroup(app: "demo"))
    }

    private func app(_ memoryLow: MemoryProtection = .infinity, place: any AppPlace) -> AppRuntime {
        var config = AppConfig(name: "demo", exec: ["demo"])
        config.memoryLow = memoryLow
        return AppRuntime(name: "demo", config: config, place: place)
    }

    @Test func theAppInFrontIsProtectedAndAHiddenOrSuspendedOneIsNot() throws {
        let fake = try TemporaryDirectory()
        let (support, cgroup) = try delegatedGroup(fake)
        let placement = CgroupPlacement(support)
        let demo = app(place: placement)
        demo.cgroup = cgroup
        let memoryLow = fake.path + "/app-demo/memory.low"
        #expect(cgroup.memoryLowFile == memoryLow)
        #expect(support.mechanisms.contains(
            "foreground memory protection: cgroup2 memory.low (the app's MemoryLow=), none in the background or suspended"))

        // No members: nothing of any process is touched; the group has cpu.weight, so no nice either.
        var applied = placement.apply(.foreground, previous: nil, to: demo, leader: getpid(), members: [])
        #expect(try take(memoryLow) == "max", "an app in the foreground is protected, all of it by default")
        applied = placement.apply(.background, previous: applied, to: demo, leader: getpid(), members: [])
        #expect(try take(memoryLow) == "0", "a hidden app has no protection")
        applied = placement.apply(.suspended, previous: applied, to: demo, leader: getpid(), members: [])
        #expect(try take(memoryLow) == "", "suspended weighs as the background: nothing is written")
        applied = placement.apply(.foreground, previous: applied, to: demo, leader: getpid(), members: [])
        #expect(try take(memoryLow) == "max", "back in front, protected again")

        demo.config.memoryLow = .bytes(512 << 20)
        _ = placement.apply(.foreground, previous: nil, to: demo, leader: getpid(), members: [])
        #expect(try take(memoryLow) == "536870912", "MemoryLow=512M")
    }

    @Test func anAppGroupWithoutTheMemoryControllerIsLeftAlone() throws {
        let fake = try TemporaryDirectory()
        try makeDirectory(fake.path + "/app-demo")
        try writeNewFile(fake.path + "/app-demo/cpu.weight", "")
        let cgroup = AppCgroup(app: "demo", unifiedPath: fake.path + "/app-demo", cpuPath: nil, freezerPath: nil)
        #expect(cgroup.memoryLowFile == nil)
        try cgroup.protectMemory(.foreground, .infinity)
        #expect(!fileExists(fake.path + "/app-demo/memory.low"))
    }

    @Test func anAdoptedScopeGetsItsOwnMemoryLowBackOnReleaseAndAfterACrash() throws {
        let fake = try TemporaryDirectory()
        let scope = fake.path + "/app-gnome-org.example.Notes-1234.scope"
        let state = fake.path + "/state"
        try makeDirectory(scope)
        try makeDirectory(state)
        for name in ["cgroup.procs", "cgroup.freeze"] { try writeNewFile(scope + "/" + name, "") }
        // What the desktop (or its user's manager) had set on the scope: 64 bytes, as short as the daemon's "max".
        try writeNewFile(scope + "/memory.low", "64\n")
        let memoryLow = scope + "/memory.low"

        let originals = OriginalPriorities(stateDirectory: state)
        let place = AdoptedScope(originals: originals)
        let notes = app(place: place)
        notes.cgroup = AppCgroup(app: "demo", unifiedPath: scope, cpuPath: nil, freezerPath: nil)

        var applied = place.apply(.foreground, previous: nil, to: notes, leader: getpid(), members: [])
        #expect(try take(memoryLow) == "max")
        #expect(try readKernelFile(state + "/adopted-priorities") == "file 64 \(memoryLow)\n",
                "the scope's own value is recorded before the first write")
        applied = place.apply(.background, previous: applied, to: notes, leader: getpid(), members: [])
        #expect(try take(memoryLow) == "0")

        originals.giveBack("demo")
        #expect(try take(memoryLow) == "64", "released: the scope has its own value again")
        #expect(!fileExists(state + "/adopted-priorities"))

        // Adopted again, in front, and the daemon dies: the next one gives the value back before it adopts anything.
        try writeNewFile(memoryLow, "64\n")
        _ = place.apply(.foreground, previous: nil, to: notes, leader: getpid(), members: [])
        #expect(try take(memoryLow) == "max")
        OriginalPriorities(stateDirectory: state).giveBackLeftovers()
        #expect(try take(memoryLow) == "64", "given back by the next daemon after a crash")
    }

    @Test func aScopeUnderSystemdGetsMemoryLowWithItsWeights() {
        #expect(UnitProperty.weights(.foreground, memoryLow: .infinity).last == .uint64("MemoryLow", UInt64.max),
                "systemd's infinity on the bus")
        #expect(UnitProperty.weights(.foreground, memoryLow: .bytes(1 << 30)).last == .uint64("MemoryLow", 1 << 30))
        for hidden in [PriorityClass.background, .suspended] {
            #expect(UnitProperty.weights(hidden, memoryLow: .infinity).last == .uint64("MemoryLow", 0))
        }
    }

    @Test func memoryLowIsReadInLifecycleDefaultsAndAdopt() {
        let (daemon, diagnostics) = ConfigLoader.parseDaemon(
            text: "[Defaults]\nMemoryLow=1G\n[Adopt]\nMemoryLow=0\n", file: "lifecycled.conf")
        #expect(diagnostics == [])
        #expect(daemon.defaults.memoryLow == .bytes(1 << 30))
        #expect(daemon.adopt.memoryLow == .bytes(0))
        #expect(DaemonConfig().defaults.memoryLow == .infinity && DaemonConfig().adopt.memoryLow == .infinity)

        let (app, appDiagnostics) = ConfigLoader.parseApp(name: "notes", text: "[App]\nExec=notes\n[Lifecycle]\nMemoryLow=256M\n",
                                                          file: "apps/notes.conf", defaults: daemon.defaults)
        #expect(appDiagnostics == [])
        #expect(app?.memoryLow == .bytes(256 << 20))
        let (inherited, _) = ConfigLoader.parseApp(name: "notes", text: "[App]\nExec=notes\n", file: "apps/notes.conf",
                                                   defaults: daemon.defaults)
        #expect(inherited?.memoryLow == .bytes(1 << 30), "from [Defaults]")
    }

    @Test func aMemoryLowThatIsNoSizeIsAnErrorAndKeepsTheValueInEffect() throws {
        for text in ["lots", "12X", "-1", "1.5G", "M", "99999999999999999999", "20000000T"] {
            #expect(throws: ConfigSyntaxError.invalidSize(text)) { try ConfigLoader.parseMemoryProtection(text) }
        }
        #expect(try ConfigLoader.parseMemoryProtection("infinity") == .infinity)
        #expect(try ConfigLoader.parseMemoryProtection("4096") == .bytes(4096))
        #expect(try ConfigLoader.parseMemoryProtection("2T") == .bytes(2 << 40))
        let (app, diagnostics) = ConfigLoader.parseApp(name: "notes", text: "[App]\nExec=notes\n[Lifecycle]\nMemoryLow=lots\n",
                                                       file: "apps/notes.conf", defaults: AppDefaults())
        #expect(app?.memoryLow == .infinity)
        #expect(diagnostics.map(\.message) == [
            "invalid size 'lots' (expected infinity, a number of bytes, or a number with K, M, G or T, e.g. 512M), using infinity",
        ])
    }
}

/// The value a write left in a plain file standing in for a kernel attribute, and the file emptied for the next one.
private func take(_ path: String) throws -> String {
    let text = try readKernelFile(path)
    guard truncate(path, 0) == 0 else { throw SystemError(operation: "truncate \(path)", errno: errno) }
    return text.hasSuffix("\n") ? String(text.dropLast()) : text
}

private func writeNewFile(_ path: String, _ text: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw SystemError(operation: "create \(path)", errno: errno) }
    close(fd)
    if !text.isEmpty { try writeKernelFile(path, text) }
}
