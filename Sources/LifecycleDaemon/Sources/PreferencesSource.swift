import CSupport
import LifecycleModel

/// `userDefaultsDidChange`, `UserDefaults.didChangeNotification`: an app's own preferences file
/// (`PreferencesFile=`) changed on disk. Posted to that app only, with `{"path": …}`. The file is watched
/// through its directory, by name, so that a rewrite in place (`IN_CLOSE_WRITE`) and an atomic replace by
/// rename (`IN_MOVED_TO`) are both seen; its removal counts too. A write that leaves the bytes as they were
/// posts nothing. The app's own user controls the file, so what one event costs is bounded: no symlink is
/// followed, only a regular file is read, and only its first `preferencesReadLimit` bytes
/// (`FileFingerprint(regularFileAt:limit:)`).
final class PreferencesSource {
    static let type = "userDefaultsDidChange"

    private struct Watch {
        var path: String
        var subscription: Int?
        var content: FileFingerprint
        var problem: String?
    }

    private let watcher: DirectoryWatcher
    private let post: (String, JSONValue, String?) -> Void
    private var watches: [String: Watch] = [:]

    init(watcher: DirectoryWatcher, post: @escaping (String, JSONValue, String?) -> Void) {
        self.watcher = watcher
        self.post = post
    }

    deinit { stop() }

    var descriptions: [String] {
        var lines = ["\(Self.type): inotify on each app's PreferencesFile= (\(watches.values.filter { $0.problem == nil }.count) watched)"]
        for app in watches.keys.sorted() {
            let watch = watches[app]!
            lines.append("\(Self.type) \(app): \(watch.path)" + (watch.problem.map { " off (\($0))" } ?? ""))
        }
        return lines
    }

    /// Watches `path` for `app`, replacing what was watched for it before.
    func watch(app: String, path: String) {
        unwatch(app: app)
        var watch = Watch(path: path, content: FileFingerprint(regularFileAt: path, limit: preferencesReadLimit))
        guard path.hasPrefix("/") else {
            watch.problem = "not an absolute path"
            watches[app] = watch
            return
        }
        let (directory, name) = splitParent(path)
        do {
            watch.subscription = try watcher.subscribe(
                directory: directory, names: [name],
                mask: CS_IN_CLOSE_WRITE | CS_IN_MOVED_TO | CS_IN_CREATE | CS_IN_DELETE | CS_IN_MOVED_FROM
            ) { [weak self] events in self?.changed(app: app, events) }
        } catch {
            watch.problem = error.description
        }
        watches[app] = watch
    }

    func unwatch(app: String) {
        guard let watch = watches.removeValue(forKey: app) else { return }
        if let subscription = watch.subscription { watcher.unsubscribe(subscription) }
    }

    func stop() {
        for app in Array(watches.keys) { unwatch(app: app) }
    }

    private func changed(app: String, _ events: [DirectoryEvent]) {
        guard var watch = watches[app] else { return }
        if events.contains(where: { $0.mask & CS_IN_IGNORED != 0 }) {
            watch.subscription = nil
            watch.problem = "its directory was removed"
        }
        let now = FileFingerprint(regularFileAt: watch.path, limit: preferencesReadLimit)
        let different = now != watch.content
        watch.content = now
        watches[app] = watch
        if different { post(Self.type, ["path": .string(watch.path)], app) }
    }
}
