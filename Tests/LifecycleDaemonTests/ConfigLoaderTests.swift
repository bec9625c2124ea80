#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// A config directory under /tmp, removed with everything in it when the test ends, passed or failed.
private final class TemporaryConfigDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/lifecycled-config-XXXXXX".utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) != nil }
        try #require(created, "mkdtemp: errno \(errno)")
        path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    deinit { remove(path) }

    func makeDirectory(_ relative: String) throws {
        try #require(mkdir(path + "/" + relative, 0o755) == 0, "mkdir \(relative): errno \(errno)")
    }

    func write(_ relative: String, _ text: String) throws {
        let file = try #require(fopen(path + "/" + relative, "w"), "fopen \(relative): errno \(errno)")
        defer { fclose(file) }
        try #require(fputs(text, file) >= 0)
    }

    private func remove(_ path: String) {
        var status = stat()
        guard lstat(path, &status) == 0 else { return }
        if status.st_mode & S_IFMT == S_IFDIR, let directory = opendir(path) {
            var names: [String] = []
            while let entry = readdir(directory) {
                let name = directoryEntryName(entry)
                if name != "." && name != ".." { names.append(name) }
            }
            closedir(directory)
            for name in names { remove(path + "/" + name) }
            rmdir(path)
        } else {
            unlink(path)
        }
    }
}

@Suite struct ConfigLoaderTests {
    @Test func loadsDaemonDefaultsAndEveryValidAppFromADirectoryTree() throws {
        let directory = try TemporaryConfigDirectory()
        try directory.write("lifecycled.conf", "[Defaults]\nBackgroundTimeSec=30\nRestart=on-failure\n")
        try directory.makeDirectory("apps")
        try directory.write("apps/notes.conf", "[App]\nExec=/usr/bin/notes\n[Lifecycle]\nBackgroundTimeSec=tenn\n")
        try directory.write("apps/clock.conf", "[App]\nExec=clock\nRestart=always\n")
        try directory.write("apps/README", "not an app")
        try directory.write("apps/notes.conf~", "an editor backup")
        try directory.write("apps/.#notes.conf", "an editor lock")

        let loaded = ConfigLoader.load(directory: directory.path)

        #expect(loaded.daemon.defaults.policy.backgroundTime == .seconds(30))
        #expect(loaded.apps.keys.sorted() == ["clock", "notes"])
        #expect(loaded.apps["notes"]?.policy.backgroundTime == .seconds(30), "an invalid value falls back to [Defaults]")
        #expect(loaded.apps["notes"]?.policy.restart == .onFailure)
        #expect(loaded.apps["clock"]?.policy.restart == .always)
        #expect(loaded.diagnostics.map(\.description) == [
            "apps/notes.conf:4: BackgroundTimeSec=: invalid duration 'tenn' (expected e.g. 10, 500ms, 1min 30s, infinity), using 30s",
        ])
    }

    @Test func brokenAppFilesAreReportedAndTheOtherAppsStillLoad() throws {
        let directory = try TemporaryConfigDirectory()
        try directory.makeDirectory("apps")
        try directory.write("apps/good.conf", "[App]\nExec=good\n")
        try directory.write("apps/noexec.conf", "[App]\nDescription=forgot Exec\n")
        try directory.write("apps/-bad name.conf", "[App]\nExec=bad\n")
        try directory.write("apps/garbage.conf", "[App]\nExec=garbage\nwhat is this\n")
        try directory.makeDirectory("apps/unreadable.conf")

        let loaded = ConfigLoader.load(directory: directory.path)

        #expect(loaded.daemon == DaemonConfig(), "an absent lifecycled.conf means all defaults")
        #expect(loaded.apps.keys.sorted() == ["garbage", "good"])
        #expect(loaded.diagnostics.map(\.file) == [
            "apps/-bad name.conf", "apps/garbage.conf", "apps/noexec.conf", "apps/unreadable.conf",
        ])
        #expect(loaded.diagnostics.allSatisfy { $0.severity == .error })
        #expect(loaded.diagnostics[1].line == 3)
        #expect(loaded.diagnostics[3].description == "apps/unreadable.conf: Failed to read: not a regular file (a directory), app 'unreadable' not loaded")
    }

    @Test func unreadableDaemonFileIsReportedAndDefaultsApply() throws {
        let directory = try TemporaryConfigDirectory()
        try directory.makeDirectory("lifecycled.conf")

        let loaded = ConfigLoader.load(directory: directory.path + "/")

        #expect(loaded.daemon == DaemonConfig())
        #expect(loaded.apps.isEmpty)
        #expect(loaded.diagnostics.map(\.description) == ["lifecycled.conf: Failed to read: not a regular file (a directory), using the defaults"])
    }

    @Test func missingDirectoryIsOneErrorAndNoApps() {
        let loaded = ConfigLoader.load(directory: "/nonexistent/lifecycled-config")

        #expect(loaded.apps.isEmpty)
        #expect(loaded.daemon == DaemonConfig())
        #expect(loaded.diagnostics == [ConfigDiagnostic(
            severity: .error, file: "/nonexistent/lifecycled-config",
            message: "Failed to read config directory: stat: No such file or directory")])
    }

    @Test func directoryWithoutAppsFolderLoadsNoAppsQuietly() throws {
        let directory = try TemporaryConfigDirectory()

        let loaded = ConfigLoader.load(directory: directory.path)

        #expect(loaded == LoadedConfig())
    }
}

@Suite("Notification types, memory and background-task keys")
struct NotificationConfigTests {
    @Test("[NotificationTypes] declares types with their coalescing; mistakes name the line")
    func declaresNotificationTypes() {
        let text = "[NotificationTypes]\norientationDidChange=latest\nmessageReceived=none\nbad name=count\nx=sometimes\n[Memory]\nTerminateAfterSec=2\n"
        let (daemon, diagnostics) = ConfigLoader.parseDaemon(text: text, file: "lifecycled.conf")
        #expect(daemon.notificationTypes == ["orientationDidChange": .latest, "messageReceived": .none])
        #expect(daemon.memory.terminateAfter == .seconds(2))
        #expect(diagnostics.map(\.description) == [
            "lifecycled.conf:4: bad name=: invalid notification type name, ignoring",
            "lifecycled.conf:5: x=: invalid coalescing 'sometimes' (expected latest, count, merge or none), ignoring",
        ])
    }

    @Test("background tasks, modes and the queue limit are [Lifecycle] keys, with defaults from [Defaults]")
    func backgroundTaskKeys() {
        let (defaults, _) = ConfigLoader.parseDaemon(text: "[Defaults]\nBackgroundTaskTimeSec=20\n", file: "lifecycled.conf")
        let text = "[App]\nExec=/bin/true\n[Lifecycle]\nExpirationWarningSec=2\nBackgroundModes=audio voip\nQueueLimit=8\n"
        let (app, diagnostics) = ConfigLoader.parseApp(name: "player", text: text, file: "apps/player.conf",
                                                       defaults: defaults.defaults)
        #expect(diagnostics.isEmpty)
        #expect(app?.policy.backgroundTaskTime == .seconds(20))
        #expect(app?.policy.expirationWarning == .seconds(2))
        #expect(app?.policy.backgroundModes == ["audio", "voip"])
        #expect(app?.policy.queueLimit == 8)
        let (_, bad) = ConfigLoader.parseApp(name: "p", text: "[App]\nExec=/bin/true\n[Lifecycle]\nQueueLimit=0\n",
                                             file: "apps/p.conf", defaults: AppDefaults())
        #expect(bad.map(\.description).first?.contains("QueueLimit=") == true)
    }
}
