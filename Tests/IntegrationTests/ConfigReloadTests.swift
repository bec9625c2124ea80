import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// Reloading the configuration end to end: a file with an error keeps its app on the configuration it runs with,
/// only a file that is gone removes its app (its saved state once its process has ended), and `lifectl reload`
/// answers once the reload is done, failing with the errors.
@Suite("Config reload: broken files keep their app, lifectl reload reports", .serialized)
struct ConfigReloadTests {
    let python = DaemonHarness.pythonClient
    var sceneApp: String {
        "[App]\nExec=\(python)\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
            + "[Scenes]\nSupportsMultipleScenes=yes\nConfiguration=window:Main window:Editor\n"
    }

    /// The daemon's `configErrors`, as `lifectl status --json` gives them.
    func configErrors(_ daemon: DaemonHarness) throws -> [String] {
        let output = try daemon.lifectl("status", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any])
        return try #require((object["daemon"] as? [String: Any])?["configErrors"] as? [String])
    }

    func stateFile(_ daemon: DaemonHarness, _ app: String) -> String {
        daemon.runtimeDirectory.appendingPathComponent("state/\(app).json").path
    }

    /// SIGHUP, then wait for one more "Reloaded the configuration" in the log.
    func sighup(_ daemon: DaemonHarness) throws {
        let before = daemon.log.components(separatedBy: "Reloaded the configuration").count
        daemon.reload()
        try daemon.waitUntil("the reload is done") { daemon.log.components(separatedBy: "Reloaded the configuration").count > before }
    }

    @Test("SIGHUP with a stray quote in a running app's Exec=: same process, state and scene sessions; the status lists the error; fixed, it applies")
    func strayQuoteKeepsTheRunningApp() throws {
        try DaemonHarness.running(["notes": sceneApp]) { daemon in
            try daemon.control("focus", "notes")
            try daemon.control("scene", "close", "notes", "s1")
            try daemon.control("scene", "open", "notes")
            let before = try daemon.status("notes")
            let pid = try #require(before.pid)
            try daemon.waitUntil("the state file is saved") { FileManager.default.fileExists(atPath: stateFile(daemon, "notes")) }

            let good = try String(contentsOf: daemon.configDirectory.appendingPathComponent("apps/notes.conf"), encoding: .utf8)
            try good.replacingOccurrences(of: "Exec=\(python)", with: "Exec=\(python) \"--half")
                .write(to: daemon.configDirectory.appendingPathComponent("apps/notes.conf"), atomically: true, encoding: .utf8)
            try sighup(daemon)

            let after = try daemon.status("notes")
            #expect(after.pid == pid && after.state.rawValue == "active", "\(daemon.log)")
            #expect(after.scenes == before.scenes, "the scene sessions and their saved state are kept")
            #expect(after.scenes?.contains { $0.savedState != nil } == true)
            #expect(FileManager.default.fileExists(atPath: stateFile(daemon, "notes")))
            #expect(Kernel.state(pid) != nil)
            #expect(!daemon.types("notes").contains("willTerminate"))
            let errors = try configErrors(daemon)
            #expect(errors.contains { $0.hasPrefix("apps/notes.conf:") && $0.contains("unterminated") }, "\(errors)")
            #expect(errors.contains("apps/notes.conf: not applied: notes keeps the configuration it runs with"), "\(errors)")
            #expect(daemon.log.contains("apps/notes.conf: not applied: notes keeps the configuration it runs with"))
            let human = try daemon.lifectl("status")
            #expect(human.stdout.contains("apps/notes.conf: not applied"), "\(human.stdout)")

            try good.replacingOccurrences(of: "[App]\n", with: "[App]\nDescription=fixed\n")
                .write(to: daemon.configDirectory.appendingPathComponent("apps/notes.conf"), atomically: true, encoding: .utf8)
            try sighup(daemon)
            #expect(try configErrors(daemon).isEmpty)
            #expect(daemon.log.contains("notes: configuration changed"))
            #expect(try daemon.status("notes").pid == pid, "Exec= applies at the next launch")
        }
    }

    @Test("a deleted file removes its app: terminated, and its state file deleted only once its process has ended")
    func deletedFileRemovesTheAppAfterItEnds() throws {
        // Ignores SIGTERM (sleep inherits the ignored signal): the app lives until SIGKILL, TimeoutStopSec= later.
        let stubborn = "[App]\nExec=sh -c 'trap \"\" TERM; exec sleep 100000'\nProtocol=none\n"
            + "[Lifecycle]\nBackgroundTimeSec=infinity\nTimeoutStopSec=3\n"
        try DaemonHarness.running(["stubborn": stubborn, "other": sceneApp]) { daemon in
            try daemon.control("launch", "stubborn")
            let pid = try #require(try daemon.status("stubborn").pid)
            try daemon.waitUntil("the state file is saved") { FileManager.default.fileExists(atPath: stateFile(daemon, "stubborn")) }

            try daemon.removeApp("stubborn")
            let reloaded = try daemon.lifectl("reload")
            #expect(reloaded.status == 0, "\(reloaded)")
            #expect(Kernel.state(pid) != nil, "SIGTERM is ignored: the process lives until its SIGKILL")
            #expect(FileManager.default.fileExists(atPath: stateFile(daemon, "stubborn")),
                    "the saved state stays while the app's process runs")

            try daemon.waitUntil("the app is removed") { try !daemon.list().map(\.name).contains("stubborn") }
            #expect(Kernel.state(pid) == nil || Kernel.state(pid) == "Z")
            #expect(!FileManager.default.fileExists(atPath: stateFile(daemon, "stubborn")))
            #expect(try daemon.list().map(\.name) == ["other"])
        }
    }

    @Test("a file back before its app has stopped cancels the removal")
    func fileBackCancelsTheRemoval() throws {
        let stubborn = "[App]\nExec=sh -c 'trap \"\" TERM; exec sleep 100000'\nProtocol=none\n"
            + "[Lifecycle]\nBackgroundTimeSec=infinity\nTimeoutStopSec=2\n"
        try DaemonHarness.running(["stubborn": stubborn]) { daemon in
            try daemon.control("launch", "stubborn")
            try daemon.removeApp("stubborn")
            #expect(try daemon.lifectl("reload").status == 0)
            try daemon.app("stubborn", stubborn)
            #expect(try daemon.lifectl("reload").status == 0)
            try daemon.waitForState("stubborn", "notRunning")
            usleep(300_000)
            #expect(try daemon.list().map(\.name) == ["stubborn"], "the file is there: the app stays configured")
            try daemon.control("launch", "stubborn")
        }
    }

    @Test("a daemon restarted while app files are broken keeps their saved state: fixed, the app takes it back; deleted, it goes")
    func restartWithBrokenFilesKeepsTheirState() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("fixed", sceneApp)
        try harness.app("deleted", sceneApp)
        try harness.start()
        for name in ["fixed", "deleted"] {
            try harness.control("focus", name)
            try harness.control("scene", "close", name, "s1")
        }
        let scenes = try harness.status("fixed").scenes
        #expect(scenes?.first?.savedState != nil)
        let good = try String(contentsOf: harness.configDirectory.appendingPathComponent("apps/fixed.conf"), encoding: .utf8)
        for name in ["fixed", "deleted"] {
            try good.replacingOccurrences(of: "Exec=", with: "Exec=\"")
                .write(to: harness.configDirectory.appendingPathComponent("apps/\(name).conf"), atomically: true, encoding: .utf8)
        }

        try harness.crash()
        try harness.start(keepLog: true)
        #expect(try harness.list().isEmpty, "at start a broken file leaves its app out")
        let errors = try configErrors(harness)
        #expect(errors.contains("apps/fixed.conf: not loaded: app 'fixed' is left out until its file loads"), "\(errors)")
        #expect(FileManager.default.fileExists(atPath: stateFile(harness, "fixed")), "the saved state is kept")
        #expect(FileManager.default.fileExists(atPath: stateFile(harness, "deleted")))

        try good.write(to: harness.configDirectory.appendingPathComponent("apps/fixed.conf"), atomically: true, encoding: .utf8)
        try harness.removeApp("deleted")
        let reloaded = try harness.lifectl("reload")
        #expect(reloaded.status == 0, "\(reloaded)")
        #expect(try harness.list().map(\.name) == ["fixed"])
        let back = try harness.status("fixed")
        #expect(back.scenes?.map(\.scene) == scenes?.map(\.scene), "the scene sessions are back")
        #expect(back.scenes?.first?.savedState == scenes?.first?.savedState)
        #expect(!FileManager.default.fileExists(atPath: stateFile(harness, "deleted")), "the app whose file is gone is removed for good")
        try harness.control("focus", "fixed")
    }

    @Test("lifectl reload: 0 when every file applies; 1 with the errors when one does not; a broken lifecycled.conf applies nothing")
    func lifectlReloadReportsErrors() throws {
        try DaemonHarness.running(["a": sceneApp]) { daemon in
            try daemon.app("b", sceneApp)
            let good = try daemon.lifectl("reload")
            #expect(good.status == 0 && good.stdout == "configuration reloaded\n" && good.stderr.isEmpty, "\(good)")
            #expect(try daemon.list().map(\.name) == ["a", "b"], "the reply comes once the reload is done")
            #expect(try daemon.lifectl("-q", "reload").stdout.isEmpty)
            #expect(try daemon.lifectl("--json", "reload").stdout == "{}\n")

            try daemon.app("c", "[App]\nExec='\(python)\n")
            let broken = try daemon.lifectl("reload")
            #expect(broken.status == 1, "\(broken)")
            #expect(broken.stderr.contains("the configuration was reloaded without these files:"), "\(broken.stderr)")
            #expect(broken.stderr.contains("apps/c.conf:"), "\(broken.stderr)")
            #expect(broken.stderr.contains("unterminated ' quote"), "\(broken.stderr)")
            #expect(broken.stderr.contains("apps/c.conf: not applied: 'c' is not added until its file loads without an error"), "\(broken.stderr)")
            #expect(try daemon.list().map(\.name) == ["a", "b"])
            try daemon.removeApp("c")

            try daemon.daemonConfig("[Defaults]\nBackgroundTimeSec=\"30\n")
            try daemon.removeApp("b")
            let main = try daemon.lifectl("reload")
            #expect(main.status == 1)
            #expect(main.stderr.contains("the configuration was not reloaded:"), "\(main.stderr)")
            #expect(main.stderr.contains("lifecycled.conf:"), "\(main.stderr)")
            #expect(try daemon.list().map(\.name) == ["a", "b"], "nothing applied: b is not removed")

            let refused = try daemon.lifectl("reload", asUser: 65534)
            #expect(refused.status == 1 && refused.stderr.contains("permission denied"), "\(refused)")
            #expect(try daemon.lifectl("reload", "a").status == 2, "reload takes no app")
        }
    }
}
