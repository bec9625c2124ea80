import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// The STATUS= line and the parts of `lifectl status` the daemon computes itself.
@Suite struct StatusReportTests {
    @Test func theStatusLineCountsRunningAppsByStateInLifecycleOrder() {
        let line = StatusReport.line([(.suspended, 0), (.active, 2), (.notRunning, 0), (.background, 1), (.suspended, 0)])
        #expect(line == "5 apps: 1 active, 1 background, 2 suspended; 3 notifications queued")
    }

    @Test func theStatusLineOfIdleAppsIsTheirCountAlone() {
        #expect(StatusReport.line([(.notRunning, 0), (.notRunning, 0)]) == "2 apps")
        #expect(StatusReport.line([]) == "0 apps")
    }

    @Test func theSuspendMethodIsTheOneInForceElseTheFreezerOnlyWhereAskedForAndAvailable() {
        #expect(StatusReport.suspendMethod(inForce: .freezer(.cgroup2), configured: .signal, freezerAvailable: false) == "freezer (cgroup2)")
        #expect(StatusReport.suspendMethod(inForce: nil, configured: .freezer, freezerAvailable: true) == "freezer")
        #expect(StatusReport.suspendMethod(inForce: nil, configured: .freezer, freezerAvailable: false) == "signal")
        #expect(StatusReport.suspendMethod(inForce: nil, configured: .signal, freezerAvailable: true) == "signal")
    }

    @Test func anAppStatusCarriesTheProcessSideAndTheRecord() {
        var model = Supervisor()
        _ = model.handle(.add(app: "mail", policy: AppPolicy()), now: .zero)
        let status = model.withApp("mail") { record in
            StatusReport.app(record, process: StatusReport.Process(pid: nil, sinceWall: 100, suspendMethod: "signal", cgroupPath: nil),
                             wallNow: 160.5, now: .zero)
        }
        #expect(status?.name == "mail")
        #expect(status?.state == .notRunning)
        #expect(status?.since == "1970-01-01T00:01:40.000Z")
        #expect(status?.sinceSeconds == 60.5)
        #expect(status?.suspendMethod == "signal")
        #expect(status?.scenes == nil)
    }
}
