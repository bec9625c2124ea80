import CSupport
import Glibc
import LifecycleModel

/// `currentLocaleDidChange`, `NSLocale.currentLocaleDidChangeNotification`: the system locale files changed
/// (`/etc/locale.conf`, systemd's and `localectl`'s; `/etc/default/locale`, Debian's `update-locale`).
/// Each is watched through its directory, by name. The payload is the file's `KEY=value` pairs; a file that
/// disappears posts `{}` (the C locale). A change that leaves the pairs as they were posts nothing.
final class LocaleSource {
    static let type = "currentLocaleDidChange"

    private let watcher: DirectoryWatcher
    private let files: [String]
    private let post: (String, JSONValue, String?) -> Void
    /// The pairs last read from each file; nil while it is missing or unreadable.
    private var values: [String: [String: String]?] = [:]
    private var subscriptions: [Int] = []
    private var problems: [String] = []

    init(watcher: DirectoryWatcher, files: [String], post: @escaping (String, JSONValue, String?) -> Void) {
        self.watcher = watcher
        var unique: [String] = []
        for file in files where !unique.contains(file) { unique.append(file) }
        self.files = unique
        self.post = post
        for file in self.files { values[file] = Self.read(file) }

        // One subscription per directory, naming all of its files.
        var byDirectory: [String: Set<String>] = [:]
        for file in self.files {
            let (directory, name) = splitParent(file)
            byDirectory[directory, default: []].insert(name)
        }
        for directory in byDirectory.keys.sorted() {
            do {
                subscriptions.append(try watcher.subscribe(
                    directory: directory, names: byDirectory[directory],
                    mask: CS_IN_CREATE | CS_IN_MOVED_TO | CS_IN_CLOSE_WRITE | CS_IN_DELETE | CS_IN_MOVED_FROM
                ) { [weak self] events in self?.changed(in: directory, events) })
            } catch {
                problems.append(error.description)
            }
        }
    }

    deinit { stop() }

    var descriptions: [String] {
        let watched = files.joined(separator: ", ")
        if problems.isEmpty { return ["\(Self.type): \(watched) via inotify"] }
        if problems.count == Set(files.map { splitParent($0).directory }).count {
            return ["\(Self.type): off (\(problems.joined(separator: "; ")))"]
        }
        return ["\(Self.type): \(watched) via inotify, partly off (\(problems.joined(separator: "; ")))"]
    }

    func stop() {
        for subscription in subscriptions { watcher.unsubscribe(subscription) }
        subscriptions = []
    }

    private func changed(in directory: String, _ events: [DirectoryEvent]) {
        let names = Set(events.compactMap(\.name))
        let everything = events.contains { $0.name == nil }
        for file in files {
            let (fileDirectory, name) = splitParent(file)
            guard fileDirectory == directory, everything || names.contains(name) else { continue }
            let now = Self.read(file)
            guard now != values[file] else { continue }
            values[file] = now
            post(Self.type, .object((now ?? [:]).mapValues { .string($0) }), nil)
        }
    }

    private static func read(_ file: String) -> [String: String]? {
        guard let bytes = try? readWatchedFile(file, limit: 64 * 1024) else { return nil }
        return parseLocaleFile(String(decoding: bytes, as: UTF8.self))
    }

    /// The `KEY=value` lines of a locale file, as pam_env and systemd read them: `#` comments and blank lines
    /// skipped, an optional `export `, values optionally in matching `"…"` or `'…'`. Lines that are not an
    /// assignment to a variable name are skipped.
    static func parseLocaleFile(_ text: String) -> [String: String] {
        var pairs: [String: String] = [:]
        for raw in text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }) {
            var line = raw.drop { $0 == " " || $0 == "\t" }
            if line.hasPrefix("export ") { line = line.dropFirst("export ".count).drop { $0 == " " } }
            guard !line.isEmpty, !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { continue }
            let key = String(line[..<equals])
            guard let first = key.unicodeScalars.first, !("0"..."9").contains(first),
                  key.unicodeScalars.allSatisfy({ ("A"..."Z").contains($0) || ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" })
            else { continue }
            var value = String(line[line.index(after: equals)...])
            while let last = value.last, last == " " || last == "\t" || last == "\r" { value.removeLast() }
            if value.count >= 2, let quote = value.first, quote == "\"" || quote == "'", value.last == quote {
                value = String(value.dropFirst().dropLast())
            }
            pairs[key] = value
        }
        return pairs
    }
}
