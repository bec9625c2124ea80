#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Testing
@testable import LifecycleDaemon

/// A config directory under /tmp, removed with everything in it when the test ends, passed or failed.
private final class ReloadConfigDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/lifecycled-reload-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SystemError(operation: "mkdtemp", errno: errno) }
        path = String(cString: made)
        mkdir(path + "/apps", 0o755)
    }

    deinit { _ = system("rm -rf '\(path)'") }

    func write(_ relative: String, _ text: String) throws {
        try writeFile(path + "/" + relative, text)
    }

    func remove(_ relative: String) { unlink(path + "/" + relative) }

    func load() -> LoadedConfig { ConfigLoader.load(directory: path) }
}

private func writeFile(_ path: String, _ text: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    guard fd >= 0 else { throw SystemError(operation: "open \(path)", errno: errno) }
    defer { close(fd) }
    _ = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
}

/// `ReloadPlan`: which file a reload applies, which app it keeps on its running configuration, and which it removes,
/// from real config directories read by `ConfigLoader` (so that the diagnostics' file names are the loader's own).
@Suite("Reload plan: a file with an error is not applied, only a file that is gone removes its app")
struct ReloadPlanTests {
    /// Loads the directory as the daemon's first load and returns the apps it would run.
    private func inForce(_ directory: ReloadConfigDirectory) -> [String: AppConfig] {
        Dictionary(uniqueKeysWithValues: ReloadPlan.initial(directory.load()).added.map { ($0.name, $0) })
    }

    @Test("a stray quote in a running app's Exec= keeps the app on its configuration; the error names the file")
    func strayQuoteKeepsTheRunningConfiguration() throws {
        let directory = try ReloadConfigDirectory()
        try directory.write("apps/notes.conf", "[App]\nExec=/usr/bin/notes --mode calm\n")
        try directory.write("apps/clock.conf", "[App]\nExec=clock\n")
        let running = inForce(directory)

        try directory.write("apps/notes.conf", "[App]\nExec=/usr/bin/notes \"--mode calm\n")
        let plan = ReloadPlan.reload(inForce: running, fresh: directory.load())

        #expect(plan.removed.isEmpty, "a broken file is not a removed file")
        #expect(plan.changed.isEmpty && plan.added.isEmpty)
        #expect(plan.daemon != nil, "the other files still apply")
        #expect(plan.rejected.map(\.file) == ["apps/notes.conf"])
        #expect(plan.rejected.first?.outcome == "not applied: notes keeps the configuration it runs with")
        #expect(plan.rejected.first?.errors.first?.description.contains("unterminated \" quote") == true, "\(plan.rejected)")
    }

    @Test("a value the loader would replace with its default is not applied at a reload either")
    func invalidValueIsNotAppliedAtReload() throws {
        let directory = try ReloadConfigDirectory()
        try directory.write("apps/notes.conf", "[App]\nExec=notes\n[Lifecycle]\nBackgroundTimeSec=1h\n")
        let running = inForce(directory)

        try directory.write("apps/notes.conf", "[App]\nExec=notes\n[Lifecycle]\nBackgroundTimeSec=\"2h\n")
        let plan = ReloadPlan.reload(inForce: running, fresh: directory.load())

        #expect(plan.changed.isEmpty, "the running 1h stays; the default 10s would suspend the app at once")
        #expect(plan.rejected.map(\.file) == ["apps/notes.conf"])
    }

    @Test("fixed, the file applies; deleted, the app is removed; new with an error, it is not added")
    func fixedDeletedAndNewFiles() throws {
        let directory = try ReloadConfigDirectory()
        try directory.write("apps/notes.conf", "[App]\nExec=notes\n")
        try directory.write("apps/clock.conf", "[App]\nExec=clock\n")
        let running = inForce(directory)

        try directory.write("apps/notes.conf", "[App]\nExec=notes --new\n")
        directory.remove("apps/clock.conf")
        try directory.write("apps/mail.conf", "[App]\nExec=\"mail\n")
        try directory.write("apps/maps.conf", "[App]\nExec=maps\n")
        let plan = ReloadPlan.reload(inForce: running, fresh: directory.load())

        #expect(plan.changed.map(\.exec) == [["notes", "--new"]])
        #expect(plan.removed == ["clock"])
        #expect(plan.added.map(\.name) == ["maps"])
        #expect(plan.rejected.map(\.description) == ["apps/mail.conf: not applied: 'mail' is not added until its file loads without an error"])
    }

    @Test("an error in lifecycled.conf, or an unreadable directory, applies nothing")
    func brokenDaemonFileAppliesNothing() throws {
        let directory = try ReloadConfigDirectory()
        try directory.write("lifecycled.conf", "[Defaults]\nBackgroundTimeSec=30\n")
        try directory.write("apps/notes.conf", "[App]\nExec=notes\n")
        let running = inForce(directory)

        try directory.write("lifecycled.conf", "[Defaults]\nBackgroundTimeSec=\"60\n")
        try directory.write("apps/notes.conf", "[App]\nExec=notes --new\n")
        let plan = ReloadPlan.reload(inForce: running, fresh: directory.load())
        #expect(plan.daemon == nil)
        #expect(plan.changed.isEmpty && plan.added.isEmpty && plan.removed.isEmpty)
        #expect(plan.rejected.map(\.file) == ["lifecycled.conf"])

        let gone = ReloadPlan.reload(inForce: running, fresh: ConfigLoader.load(directory: directory.path + "/nonexistent"))
        #expect(gone.daemon == nil && gone.removed.isEmpty, "a missing directory removes no app")
    }

    @Test("at start a file that cannot be loaded is reported as not loaded; one with a bad value loads")
    func firstLoad() throws {
        let directory = try ReloadConfigDirectory()
        try directory.write("apps/notes.conf", "[App]\nExec=\"notes\n")
        try directory.write("apps/clock.conf", "[App]\nExec=clock\n[Lifecycle]\nBackgroundTimeSec=tenn\n")
        let plan = ReloadPlan.initial(directory.load())
        #expect(plan.added.map(\.name) == ["clock"])
        #expect(plan.rejected.map(\.description) == ["apps/notes.conf: not loaded: app 'notes' is left out until its file loads"])
    }

    @Test func appNameOfADiagnosticFile() {
        #expect(ReloadPlan.appName(of: "apps/notes.conf") == "notes")
        #expect(ReloadPlan.appName(of: "lifecycled.conf") == nil)
        #expect(ReloadPlan.appName(of: "apps") == nil)
        #expect(ReloadPlan.appName(of: "apps/.conf") == nil)
        #expect(ReloadPlan.appName(of: "/etc/lifecycled") == nil)
    }
}
