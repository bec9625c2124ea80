import Foundation
import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// The places an app can have: the process group alone, cgroups (which place an app that has no cgroup, none could
/// be made or an external app stopped by its process group, as the process group does), and an adopted process
/// tree, read from real processes.
@Suite struct ProcessPlacementTests {
    private func app(external: Bool = false, place: any AppPlace = ProcessGroupPlacement()) -> AppRuntime {
        var config = AppConfig(name: "a", exec: ["a"])
        config.policy.external = external
        return AppRuntime(name: "a", config: config, place: place)
    }

    private func expectProcessGroupAlone(_ placement: any ProcessPlacement, _ app: AppRuntime) {
        #expect(placement.freezer(of: app) == nil)
        #expect(!placement.reachesBeyondProcessGroup(app))
        #expect(!placement.contains(1, in: app))
        #expect(placement.displayPath(of: app) == nil)
        #expect(placement.members(of: app) == [], "an app that is not running has no processes")
        #expect(!placement.isFrozen(app))
    }

    @Test func theProcessGroupPlacementHasNoGroupsNoFreezerAndNothingForTheChildToJoin() {
        let placement = ProcessGroupPlacement()
        let app = app()
        #expect(placement.prepareLaunch(app) == [])
        #expect(!placement.canFreeze)
        #expect(!placement.canPlaceInGroups)
        #expect(placement.leftoverNames().isEmpty)
        #expect(throws: SystemError.self) { try placement.freeze(app) }
        expectProcessGroupAlone(placement, app)
    }

    @Test func anAppWithoutACgroupIsPlacedByItsProcessGroupUnderCgroupsToo() {
        let placement = CgroupPlacement(CgroupSupport(layout: .unified))
        let app = app()
        #expect(app.cgroup == nil)
        #expect(placement.canPlaceInGroups)
        expectProcessGroupAlone(placement, app)
    }

    @Test func anExternalAppStoppedByItsProcessGroupIsNotGivenACgroupWhenReadopted() {
        let placement = CgroupPlacement(CgroupSupport(layout: .unified))
        let app = app(external: true)
        #expect(app.usesProcessGroupAlone)
        placement.adopt(app)
        #expect(app.cgroup == nil)
        expectProcessGroupAlone(placement, app)
    }

    /// A shell with two children, one of which has a child of its own: a real process tree.
    private func spawnTree() throws -> (shell: pid_t, all: Set<pid_t>) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "sleep 300 & sh -c 'sleep 300 & wait' & wait"]
        try process.run()
        let shell = process.processIdentifier
        var all: Set<pid_t> = []
        for _ in 0..<500 {
            all = Set(ProcessTree.read().subtree(of: shell))
            if all.count == 4 { break }
            usleep(10_000)
        }
        return (shell, all)
    }

    private func end(_ tree: (shell: pid_t, all: Set<pid_t>)) {
        for pid in tree.all { kill(pid, SIGKILL) }
        var status: Int32 = 0
        waitpid(tree.shell, &status, 0)
    }

    @Test func anAdoptedProcessTreeHoldsTheProcessAndItsDescendantsReadFromTheirChildrenFiles() throws {
        let tree = try spawnTree()
        defer { end(tree) }
        #expect(tree.all.count == 4, "the shell, its two children and a grandchild")
        let place = AdoptedProcessTree()
        let app = app(place: place)
        app.began(pid: tree.shell, token: nil)
        #expect(Set(place.members(of: app)) == tree.all)
        #expect(Set(ProcessTree.descendants(of: tree.shell)) == tree.all)
        #expect(place.reachesBeyondProcessGroup(app))
        #expect(place.freezer(of: app) == nil)
        #expect(throws: SystemError.self) { try place.freeze(app) }
        #expect(ProcessTree.descendants(of: 999_999_999) == [], "a process that is gone has no tree")
    }

    @Test func aProcessBelongsToTheAppWhoseLeaderIsItsAncestorAndTheAnswerIsKeptUntilTheAppsChange() throws {
        let tree = try spawnTree()
        defer { end(tree) }
        let owners = ProcessOwners(unifiedMount: nil)
        owners.update([ProcessOwners.App(name: "tree", leader: tree.shell)])
        for pid in tree.all { #expect(owners.owner(of: pid) == "tree") }
        #expect(owners.owner(of: getpid()) == nil, "the test runner is no process of the app")
        // Kept while the apps are the same: the answer stands without a read, even once the process is gone.
        let grandchild = tree.all.max()!
        kill(grandchild, SIGKILL)
        while ProcessTable.state(of: grandchild).map({ $0 != "Z" }) ?? false { usleep(1000) }
        owners.update([ProcessOwners.App(name: "tree", leader: tree.shell)])
        #expect(owners.owner(of: grandchild) == "tree")
        // Another app set: asked anew.
        owners.update([ProcessOwners.App(name: "other", leader: getpid())])
        #expect(owners.owner(of: tree.shell) == "other", "the shell is the test runner's child")
        #expect(owners.owner(of: 1) == nil)
    }

    /// A /proc with one process, 4242, whose parent is init, in `cgroup`; removed by the caller.
    func fakeProc(_ name: String, cgroup: String) -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("\(name)-\(getpid())").path
        try? FileManager.default.createDirectory(atPath: root + "/4242", withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: root + "/4242/stat", contents: Data("4242 (app) S 1 4242 4242 0 -1".utf8))
        FileManager.default.createFile(atPath: root + "/4242/cgroup", contents: Data("0::\(cgroup)\n".utf8))
        return root
    }

    @Test func aProcessInAnAppsCgroupBelongsToItWhateverItsAncestors() {
        let root = fakeProc("owners", cgroup: "/lifecycled/app-x/sub")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let owners = ProcessOwners(procRoot: root, unifiedMount: "/sys/fs/cgroup")
        let relative = owners.relative("/sys/fs/cgroup/lifecycled/app-x")
        #expect(relative == "/lifecycled/app-x")
        owners.update([ProcessOwners.App(name: "x", leader: 10, cgroup: relative)])
        #expect(owners.owner(of: 4242) == "x", "a sub-group of the app's group is the app's")
        owners.update([ProcessOwners.App(name: "y", leader: 10, cgroup: "/lifecycled/app-xy")])
        #expect(owners.owner(of: 4242) == nil, "a group whose name only begins the same is another")
    }

    @Test func aProcessOfNoAppIsFoundInTheAppsCgroupOnceMovedThereWhileTheAppsStayTheSame() {
        let root = fakeProc("owners-moved", cgroup: "/user.slice/session-1.scope")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let owners = ProcessOwners(procRoot: root, unifiedMount: "/sys/fs/cgroup")
        let apps = [ProcessOwners.App(name: "scoped", leader: 10, cgroup: "/app.slice/app-sway-org.example.Scoped-1.scope")]
        owners.update(apps)
        #expect(owners.owner(of: 4242) == nil, "seen before its launcher moved it")
        // The launcher moves it: no app changed, and the answer follows the move.
        FileManager.default.createFile(atPath: root + "/4242/cgroup",
                                       contents: Data("0::/app.slice/app-sway-org.example.Scoped-1.scope\n".utf8))
        owners.update(apps)
        #expect(owners.owner(of: 4242) == "scoped")
    }
}
