import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// The two placements the daemon has today: the process group alone, and cgroups, which place an app that has no
/// cgroup (none could be made, or an external app stopped by its process group) as the process group does.
@Suite struct ProcessPlacementTests {
    private func app(external: Bool = false) -> AppRuntime {
        var config = AppConfig(name: "a", exec: ["a"])
        config.policy.external = external
        return AppRuntime(name: "a", config: config)
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
}
