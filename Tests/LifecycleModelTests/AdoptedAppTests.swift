import Testing
@testable import LifecycleModel

/// Apps adopted from the desktop (`AppPolicy.adopted`): attached without a spawn or a message, never restarted, and
/// let go as they are (`Supervisor.release`).
@Suite("Adopted apps")
struct AdoptedAppTests {
    static let adopted = AppPolicy.with {
        $0.adopted = true
        $0.speaksProtocol = false
        $0.restart = .always
        $0.backgroundTime = .seconds(1)
    }

    @Test("attaching an adopted app goes notRunning → inactive without a spawn or a message; its grace time suspends it")
    func attachWithoutSpawnOrMessage() throws {
        var h = Harness("a", policy: Self.adopted)
        let attached = try h.model.attach("a", launchedBy: "adopted", now: h.now)
        #expect(!attached.contains { if case .spawn = $0 { true } else { false } })
        #expect(attached.contains(.transition(app: "a", from: .notRunning, to: .inactive, reason: "attached (adopted)")))
        #expect(h.sends() == [])
        try h.request(.background, "a")
        #expect(h.state("a") == .background)
        h.advance(by: .seconds(1))
        h.fire(.grace, "a")
        #expect(h.state("a") == .suspended)
        #expect(h.log.contains(.stopProcess(app: "a")))
    }

    @Test("an adopted app's exit is never followed by a restart, whatever Restart= says")
    func exitDoesNotRestart() throws {
        var h = Harness("a", policy: Self.adopted)
        _ = try h.model.attach("a", launchedBy: "adopted", now: h.now)
        let exited = h.exit("a", .exited(1))
        #expect(h.state("a") == .notRunning)
        #expect(exited.armed(.restart) == [])
    }

    @Test("release forgets an adopted app in any state, active included, without an effect; a configured app is not released")
    func releaseForgetsAsItIs() throws {
        var h = Harness(["a": Self.adopted, "plain": AppPolicy()])
        _ = try h.model.attach("a", launchedBy: "adopted", now: h.now)
        try h.request(.focus, "a")
        #expect(h.model.activeApp == "a")
        let released = h.model.release("a")
        #expect(released)
        #expect(h.model.app("a") == nil)
        #expect(h.model.activeApp == nil)
        let configuredReleased = h.model.release("plain")
        #expect(!configuredReleased)
        #expect(h.model.app("plain") != nil)
        // The name is free again: the same app may be adopted anew.
        h.model.add("a", policy: Self.adopted)
        _ = try h.model.attach("a", launchedBy: "adopted", now: h.now)
        #expect(h.state("a") == .inactive)
    }
}
