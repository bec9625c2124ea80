import CSupport
import Glibc

/// GNOME Shell (mutter) as a display source, without a GNOME Shell extension: mutter writes the extended attribute
/// `user.xdg.inactive-since` on the cgroup directory of each app unit under the session's `app.slice` whose window
/// gains or loses the focus (`-1` while focused, else the monotonic time in microseconds when it lost it). Each
/// unit with processes is one window: the focused one is focused, one that lost the focus less than
/// `GnomeGraceSec=` ago is visible, any other is hidden. The slice is watched with one inotify watch (a changed
/// attribute of a unit directory is an event of the slice named after the unit) and the grace's end is one timer
/// armed for the next expiry: nothing is polled. GNOME offers no focus or hide request without an extension, so
/// lifectl's verbs go the usual way.
final class GnomeSource: DisplaySource {
    let name = "gnome"
    var address: String { slicePath ?? "(no app slice)" }
    private(set) var connected = false
    private let loop: EventLoop
    private let grace: Duration
    private let findSlice: () throws(AdoptFailure) -> AppSlice
    private var slicePath: String?
    private var report: ((WindowPicture) -> Void)?
    private let watcher: DirectoryWatcher
    private var watch: Int?
    private var expiry: LoopTimer?
    /// A stable window id per unit, so that a window keeps its id while its unit lives.
    private var ids: [String: Int64] = [:]
    private var nextID: Int64 = 1
    /// Units whose attribute was unreadable, logged once each.
    private var garbled: Set<String> = []

    /// The extended attribute mutter writes.
    static let attribute = "user.xdg.inactive-since"

    init(loop: EventLoop, grace: Duration, findSlice: @escaping () throws(AdoptFailure) -> AppSlice) {
        self.loop = loop
        self.grace = grace
        self.findSlice = findSlice
        watcher = DirectoryWatcher(loop: loop)
    }

    func start(report: @escaping (WindowPicture) -> Void) {
        self.report = report
        let slice: AppSlice
        do {
            slice = try findSlice()
        } catch {
            return Log.warning("display: Source=gnome, but \(error); focus follows lifectl alone")
        }
        slicePath = slice.path
        do {
            watch = try watcher.subscribe(directory: slice.path, names: nil,
                                          mask: CS_IN_ATTRIB | CS_IN_CREATE | CS_IN_DELETE | CS_IN_MOVED_TO | CS_IN_MOVED_FROM) {
                [unowned self] events in self.changed(events)
            }
            expiry = try LoopTimer(loop: loop) { [unowned self] in self.read() }
        } catch {
            return Log.warning("display: Source=gnome, but \(slice.path) cannot be watched: \(error); focus follows lifectl alone")
        }
        connected = true
        Log.info("display: following GNOME's focus marks (\(Self.attribute)) in \(slice.path) (found by \(slice.foundBy))")
        read()
    }

    func stop() {
        if let watch { watcher.unsubscribe(watch) }
        watch = nil
        expiry?.cancel()
        watcher.stop()
        connected = false
    }

    // GNOME offers neither without an extension: `canRequest` is false, so these are never asked.
    func focus(window: Int64) {}
    func hide(window: Int64) {}
    var canRequest: Bool { false }

    private func changed(_ events: [DirectoryEvent]) {
        if events.contains(where: { $0.mask & CS_IN_IGNORED != 0 }) {
            connected = false
            return Log.warning("display: \(address) is gone; GNOME's focus is not followed any more")
        }
        read()
    }

    /// Reads every unit's mark and reports the whole picture; the timer is armed for the next end of a grace.
    private func read() {
        guard connected, let slicePath else { return }
        let now = loop.now
        var windows: [DisplayWindow] = []
        var nextExpiry: Duration?
        var seen: Set<String> = []
        for unit in Self.units(in: slicePath) {
            guard let launcher = LauncherUnit(unit: unit) else { continue }
            let path = slicePath + "/" + unit
            guard let pid = AppCgroup(app: launcher.appID, unifiedPath: path, cpuPath: nil, freezerPath: nil).pids().min()
            else { continue }
            seen.insert(unit)
            let raw = Self.readAttribute(path)
            let mark = raw.map { InactiveSince(attribute: $0, now: now) } ?? .never
            if case .garbled = mark, garbled.insert(unit).inserted {
                Log.warning("display: \(unit) carries \(Self.attribute) lifecycled cannot read; it counts as never focused")
            }
            let visibility = mark.visibility(now: now, grace: grace)
            if let end = visibility.until { nextExpiry = min(nextExpiry ?? end, end) }
            windows.append(DisplayWindow(id: id(of: unit), pid: pid, appID: launcher.appID,
                                         visible: visibility.visible, focused: visibility.focused))
        }
        ids = ids.filter { seen.contains($0.key) }
        garbled.formIntersection(seen)
        if let nextExpiry { expiry?.arm(after: max(nextExpiry - now, .zero)) } else { expiry?.cancel() }
        report?(WindowPicture(windows: windows))
    }

    private func id(of unit: String) -> Int64 {
        if let id = ids[unit] { return id }
        ids[unit] = nextID
        nextID += 1
        return nextID - 1
    }

    static func units(in slice: String) -> [String] {
        guard let directory = opendir(slice) else { return [] }
        defer { closedir(directory) }
        var units: [String] = []
        while let entry = readdir(directory) {
            let name = directoryEntryName(entry)
            if name.hasPrefix("app-") { units.append(name) }
        }
        return units.sorted()
    }

    /// The attribute's bytes as text, nil when the unit carries none.
    static func readAttribute(_ path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = buffer.withUnsafeMutableBytes { cs_getxattr(path, attribute, $0.baseAddress, UInt($0.count)) }
        // Longer than any number: garbage, read as such.
        if count < 0 { return count == -Int(ERANGE) ? "?" : nil }
        return String(decoding: buffer[..<Int(count)], as: UTF8.self)
    }

    /// Whether any unit in `slice` carries the attribute (`Source=auto` picks gnome then).
    static func marked(_ slice: String) -> Bool {
        units(in: slice).contains { readAttribute(slice + "/" + $0) != nil }
    }
}

/// One unit's `user.xdg.inactive-since`, read.
enum InactiveSince: Equatable {
    /// `-1`: its window holds the focus.
    case focused
    /// It lost the focus at this monotonic time.
    case since(Duration)
    /// No attribute: never focused.
    case never
    /// Unreadable (not a number, another negative one, too big, a time ahead of `now`): never focused.
    case garbled

    init(attribute text: String, now: Duration) {
        let trimmed = text.trimmingCharacters(in: " \n\t\0")
        guard let value = Int64(trimmed), value >= -1, value <= Int64.max / 1000 else { self = .garbled; return }
        if value == -1 { self = .focused; return }
        let time = Duration.microseconds(value)
        self = time <= now ? .since(time) : .garbled
    }

    /// What the window is `now`, and until when (the end of the grace, when that changes it).
    func visibility(now: Duration, grace: Duration) -> (focused: Bool, visible: Bool, until: Duration?) {
        switch self {
        case .focused: return (true, true, nil)
        case .since(let time):
            let end = time + grace
            return end > now ? (false, true, end) : (false, false, nil)
        case .never, .garbled: return (false, false, nil)
        }
    }
}

private extension String {
    func trimmingCharacters(in set: String) -> String {
        let padding = Set(set)
        return String(String(self.drop { padding.contains($0) }.reversed()).drop { padding.contains($0) }.reversed())
    }
}
