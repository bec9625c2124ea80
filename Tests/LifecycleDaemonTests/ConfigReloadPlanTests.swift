import Foundation
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// A reload's plan carried out by `ConfigReload` over a fake port (`FakePort`) and a real registry, with real
/// config files in a temporary directory and no daemon: the apps come, change and go through the registry alone,
/// and a running app whose file is gone is terminated first and forgotten once stopped.
@Suite(.serialized) struct ConfigReloadPlanTests {
    let directory: URL
    let port = FakePort()
    let registry: AppRegistry
    let configuration: ConfigReload

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("lifecycled-reload-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("apps"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("run"), withIntermediateDirectories: true)
        // No system source: they are not what these tests drive, and their descriptors would show in the source
        // tests' count of the process's own.
        try "[Sources]\nTimeChange=no\nLocaleChange=no\nBattery=no\nMemoryPressure=no\nUserDefaults=no\nAudio=no\n"
            .write(to: directory.appendingPathComponent("lifecycled.conf"), atomically: true, encoding: .utf8)
        let loop = try EventLoop()
        let observers = AppObservers()
        let serviceManager = ServiceManager(environment: [:])
        let fdStore = FDStore(serviceManager: serviceManager)
        let retired = RetiredSources(loop: loop)
        let placement = ProcessGroupPlacement()
        let stateStore = StateStore(runtimeDirectory: directory.appendingPathComponent("run").path)
        let processes = ProcessSupervisor(loop: loop, host: port, suspension: Suspension(loop: loop, host: port), fdStore: fdStore,
                                          retired: retired, environment: [:])
        let requests = ControlRequests(loop: loop, host: port, placement: placement)
        let externalApps = ExternalApps(host: port, placement: placement, processes: processes, fdStore: fdStore)
        let persistence = Persistence(loop: loop, host: port, store: stateStore, placement: placement, processes: processes,
                                      externalApps: externalApps, fdStore: fdStore, retired: retired)
        registry = AppRegistry(host: port, observers: observers, keepers: [requests, persistence])
        port.registry = registry
        let display = DisplayFollower(loop: loop, host: port, requests: requests)
        let adoption = Adoption(host: port, loop: loop, registry: registry, display: display,
                                stopLedger: StopLedger(stateDirectory: stateStore.directory), stateDirectory: stateStore.directory,
                                environment: [:], managerBus: nil)
        configuration = ConfigReload(host: port, loop: loop, directory: directory.path, environment: [:],
                                     serviceManager: serviceManager, registry: registry, observers: observers,
                                     placement: placement, processes: processes, persistence: persistence,
                                     externalApps: externalApps, adoption: adoption, display: display,
                                     audio: AudioFollower(loop: loop, host: port))
    }

    func write(_ name: String, _ text: String) throws {
        try text.write(to: directory.appendingPathComponent("apps/\(name).conf"), atomically: true, encoding: .utf8)
    }

    func delete(_ name: String) throws {
        try FileManager.default.removeItem(at: directory.appendingPathComponent("apps/\(name).conf"))
    }

    func appInputs() -> [String] { port.inputs.filter { !$0.hasPrefix("settings") && !$0.hasPrefix("power") } }

    @Test func aReloadAddsChangesAndRemovesAppsThroughTheRegistry() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try write("mail", "[App]\nExec=/bin/sleep 300\n")
        try write("notes", "[App]\nExec=/bin/sleep 300\n")
        configuration.load()
        #expect(registry.names == ["mail", "notes"])
        #expect(appInputs() == ["add mail", "add notes"])

        try write("mail", "[App]\nExec=/bin/sleep 300\n\n[Lifecycle]\nBackgroundTimeSec=42\n")
        try delete("notes")
        try write("calendar", "[App]\nExec=/bin/sleep 300\n")
        let plan = try #require(configuration.reload())
        #expect(plan.changed.map(\.name) == ["mail"])
        #expect(registry.names == ["calendar", "mail"])
        #expect(registry.runtime("mail")?.config.policy.backgroundTime == .seconds(42))
        #expect(port.model.app("mail")?.policy.backgroundTime == .seconds(42))
        #expect(port.model.state(of: "notes") == nil)
        #expect(appInputs() == ["add mail", "add notes", "configure mail backgroundTime 42.0 seconds", "add calendar",
                                "remove notes"])
    }

    @Test func aRunningAppWhoseFileIsGoneIsTerminatedFirstAndForgottenOnlyOnceStopped() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try write("mail", "[App]\nExec=/bin/sleep 300\n")
        configuration.load()
        // The fake port performs nothing: the model holds mail as launched, with no process behind it.
        #expect(port.handle(.request(.launch(background: true), app: "mail", origin: "test")).refusal == nil)
        try delete("mail")
        configuration.reload()
        #expect(appInputs().last == "request terminate mail from reload")
        #expect(registry.runtime("mail")?.removeWhenStopped == true, "held until it stops")
        #expect(port.model.state(of: "mail")?.isRunning == true)

        try write("mail", "[App]\nExec=/bin/sleep 300\n")
        configuration.reload()
        #expect(registry.runtime("mail")?.removeWhenStopped == false, "a file that is back cancels the removal")
    }

    @Test func aFileWithAnErrorKeepsItsAppAsItRuns() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        try write("mail", "[App]\nExec=/bin/sleep 300\n\n[Lifecycle]\nBackgroundTimeSec=7\n")
        configuration.load()
        try write("mail", "[App]\nExec=/bin/sleep 300\n\n[Lifecycle]\nBackgroundTimeSec=\"9\n")
        let plan = try #require(configuration.reload())
        #expect(plan.rejected.map(\.file) == ["apps/mail.conf"])
        #expect(appInputs() == ["add mail"])
        #expect(registry.runtime("mail")?.config.policy.backgroundTime == .seconds(7))
    }
}
