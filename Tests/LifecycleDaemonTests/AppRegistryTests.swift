import Foundation
import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// The registry is the one place that adds, adopts, reconfigures and forgets apps: each of these reaches the model
/// through the port, the runtime table, the observers and the keepers together. Driven through a fake port
/// (`FakePort`), without a daemon.
@Suite struct AppRegistryTests {
    let port = FakePort()
    let observers = AppObservers()
    let observer = RecordingObserver()
    let keeper: RecordingKeeper
    let registry: AppRegistry

    init() {
        keeper = RecordingKeeper(port: port)
        registry = AppRegistry(host: port, observers: observers, keepers: [keeper])
        port.registry = registry
        observers.add(observer)
    }

    func app(_ name: String, policy: AppPolicy = AppPolicy()) -> AppRuntime {
        AppRuntime(name: name, config: AppConfig(name: name, exec: ["/bin/true"], policy: policy), place: ProcessGroupPlacement())
    }

    @Test func anAddedAppIsInTheModelTheTableAndToldToObservers() {
        registry.add(app("mail"))
        #expect(port.inputs == ["add mail"])
        #expect(port.model.state(of: "mail") == .notRunning)
        #expect(registry.runtime("mail")?.name == "mail")
        #expect(registry.names == ["mail"])
        #expect(observer.changes == ["added mail"])
    }

    @Test func aForgottenAppLeavesTheKeepersFirstThenTheModelTableAndObservers() {
        registry.add(app("mail"))
        registry.forget("mail")
        #expect(keeper.forgotten == ["mail (still held)"], "a keeper reads the app before it goes")
        #expect(port.inputs == ["add mail", "remove mail"])
        #expect(port.model.state(of: "mail") == nil)
        #expect(registry.runtime("mail") == nil)
        #expect(observer.changes == ["added mail", "removed mail"])
        registry.forget("mail")
        #expect(port.inputs.count == 2, "an unknown name is nothing to forget")
    }

    @Test func aReconfiguredAppTakesTheNewSettingsInTheModelAndTheTable() {
        registry.add(app("mail"))
        var config = registry.runtime("mail")!.config
        config.policy.backgroundTime = .seconds(42)
        registry.configure("mail", config)
        #expect(port.inputs == ["add mail", "configure mail backgroundTime 42.0 seconds"])
        #expect(port.model.app("mail")?.policy.backgroundTime == .seconds(42))
        #expect(registry.runtime("mail")?.config.policy.backgroundTime == .seconds(42))
    }

    @Test func anAdoptedProcessIsAddedAttachedAndRunsInTheModel() throws {
        let sleeper = Process()
        sleeper.executableURL = URL(fileURLWithPath: "/bin/sleep")
        sleeper.arguments = ["30"]
        try sleeper.run()
        // SIGKILL: the test process blocks the signals its loops take, and a child inherits the blocked mask.
        defer { kill(sleeper.processIdentifier, SIGKILL); sleeper.waitUntilExit() }
        var policy = AppPolicy()
        policy.adopted = true
        policy.speaksProtocol = false
        policy.restart = .no

        let refusal = registry.adopt(app("term", policy: policy), leader: sleeper.processIdentifier, pidfd: nil, launchedBy: "adopted")
        #expect(refusal == nil)
        #expect(port.inputs == ["add term", "attach term by adopted"])
        #expect(registry.runtime("term")?.pid == sleeper.processIdentifier)
        #expect(registry.runtime("term")?.pidfd != nil, "the leader's pidfd, opened when the caller has none")
        #expect(port.model.state(of: "term")?.isRunning == true)
        #expect(observer.changes == ["added term"])
        #expect(registry.configured.isEmpty, "an adopted app has no file")
    }
}
