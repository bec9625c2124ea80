import Glibc
import LifecycleModel

// What a display server shows, as any display source reports it, and the rule that turns windows into facts about
// the configured apps. The rule is pure: which processes belong to an app comes in as a function, so that tests
// feed it without processes.

/// One window as the display server reports it.
struct DisplayWindow: Sendable, Equatable {
    /// The display server's own id for the window (sway's con_id, an X11 window id): focus and hide requests name it.
    var id: Int64
    /// The process that owns the window, when the display server knows it.
    var pid: pid_t?
    /// The Wayland app_id, or the X11 WM_CLASS class name.
    var appID: String?
    /// The X11 WM_CLASS instance name, which `AppId=` matches as well as the class.
    var instance: String?
    /// Shown on an output now (not on another workspace, minimized, in the scratchpad or unmapped).
    var visible: Bool
    /// Holds the keyboard focus of the seat.
    var focused: Bool

    init(id: Int64, pid: pid_t? = nil, appID: String? = nil, instance: String? = nil, visible: Bool, focused: Bool = false) {
        self.id = id
        self.pid = pid
        self.appID = appID
        self.instance = instance
        self.visible = visible
        self.focused = focused
    }
}

/// What the display server shows: every window, read whole (at connect, after a change that may move several), or,
/// from a source that follows each change (X11), only the windows that changed since its last report.
struct WindowPicture: Sendable, Equatable {
    /// Every window; in a report of changes, only those added or changed since the last report.
    var windows: [DisplayWindow] = []
    /// The loop's time of the event that started the change this picture shows, so that a grace time counts from
    /// the event rather than from when the picture was complete; nil for a picture read at connect.
    var changedAt: Duration?
    /// nil for a whole picture; in a report of changes, the windows gone since the last report.
    var gone: [Int64]?

    var isWhole: Bool { gone == nil }

    /// A report of changes: `windows` added or changed, `gone` closed, since the source's last report.
    static func changes(_ windows: [DisplayWindow], gone: [Int64], changedAt: Duration? = nil) -> WindowPicture {
        WindowPicture(windows: windows, changedAt: changedAt, gone: gone)
    }

    var focused: DisplayWindow? { windows.first { $0.focused } }
}

/// The window-to-app rule (docs/PROTOCOL.md, "what the app sees"): a window belongs to the configured app named by
/// its `AppId=` (the Wayland app_id or X11 WM_CLASS), else to the app whose process tree holds the window's pid.
/// A window no configured app owns is left alone.
struct WindowOwnership {
    /// One configured, running app as the rule sees it.
    struct App {
        var name: String
        /// `[App] AppId=`: for windows that another process opens on the app's behalf.
        var appID: String?
        /// Whether `pid` is in the app's process tree (its cgroup, else its process group or session).
        var holds: (pid_t) -> Bool
    }

    var apps: [App]
    /// The owner of a process, found once for every app (`ProcessOwners`); without it each app's `holds` is asked.
    var processOwner: ((pid_t) -> String?)?
    private let byAppID: [String: String]

    init(apps: [App], processOwner: ((pid_t) -> String?)? = nil) {
        self.apps = apps
        self.processOwner = processOwner
        var byAppID: [String: String] = [:]
        for app in apps { if let appID = app.appID, byAppID[appID] == nil { byAppID[appID] = app.name } }
        self.byAppID = byAppID
    }

    /// The app that owns `window`, if any.
    func owner(of window: DisplayWindow) -> String? {
        for appID in [window.appID, window.instance].compactMap({ $0 }) {
            if let name = byAppID[appID] { return name }
        }
        guard let pid = window.pid, pid > 0 else { return nil }
        if let processOwner { return processOwner(pid) }
        return apps.first { $0.holds(pid) }?.name
    }

    /// The per-app facts the model takes.
    func facts(of picture: WindowPicture) -> DisplayFacts {
        var tally = WindowTally()
        _ = tally.take(picture, rule: self)
        return tally.facts
    }

    /// The windows of `app` in `picture`, focused first, then visible ones.
    func windows(of app: String, in picture: WindowPicture) -> [DisplayWindow] {
        var tally = WindowTally()
        _ = tally.take(picture, rule: self)
        return tally.windows(of: app)
    }
}

/// The windows as the source reported them, and the per-app facts the rule makes of them, kept by counting each
/// app's windows and visible ones: a report of changes costs the windows it names, not every window.
struct WindowTally {
    /// Every window reported, as last reported.
    private(set) var windows: [Int64: DisplayWindow] = [:]
    private var focusedWindow: Int64?
    /// The windows that count for an app: whose they are and whether they show.
    private var counted: [Int64: (owner: String, visible: Bool)] = [:]
    /// Per app, how many windows it has and how many of them show.
    private var perApp: [String: (windows: Int, visible: Int)] = [:]
    private var visible: Set<String> = []
    private var windowed: Set<String> = []
    /// A fact may have changed since `settle()`.
    private(set) var moved = false

    /// Takes a report under `rule`; every window is counted again when `recount`. A whole picture is compared
    /// with the windows as they were, and counted as the changes it makes. Returns the windows added or changed
    /// (every window, in order, after a recount or in a whole picture) and those gone.
    mutating func take(_ picture: WindowPicture, rule: WindowOwnership, recount: Bool = false) -> (changed: [DisplayWindow], gone: [Int64]) {
        var gone = picture.gone ?? []
        var changed = picture.windows
        if picture.isWhole {
            let present = Set(picture.windows.map(\.id))
            gone = windows.keys.filter { !present.contains($0) }
            changed = picture.windows.filter { windows[$0.id] != $0 }
        }
        for id in gone {
            windows[id] = nil
            if focusedWindow == id { focusedWindow = nil }
        }
        for window in changed {
            windows[window.id] = window
            if window.focused { focusedWindow = window.id } else if focusedWindow == window.id { focusedWindow = nil }
        }
        if recount {
            self.recount(rule)
        } else {
            for id in gone { uncount(id) }
            for window in changed {
                uncount(window.id)
                count(window, rule)
            }
        }
        if picture.isWhole { return (picture.windows, gone) }
        return (recount ? windows.values.sorted { $0.id < $1.id } : picture.windows, gone)
    }

    mutating func recount(_ rule: WindowOwnership) {
        counted = [:]
        perApp = [:]
        visible = []
        windowed = []
        moved = true
        for window in windows.values { count(window, rule) }
    }

    /// The facts as the counts make them now.
    var facts: DisplayFacts {
        var facts = DisplayFacts()
        facts.visible = visible
        facts.windowed = windowed
        facts.focused = focusedApp
        if let focused = facts.focused {
            if !visible.contains(focused) { facts.visible.insert(focused) }
            if !windowed.contains(focused) { facts.windowed.insert(focused) }
        }
        return facts
    }

    /// The facts were read: `moved` says again whether a count changed one.
    mutating func settle() { moved = false }

    /// The app whose window has the focus, if any.
    var focusedApp: String? { focusedWindow.flatMap { counted[$0]?.owner } }

    /// The windows of `app`, focused first, then visible ones: the one a focus request names comes first.
    func windows(of app: String) -> [DisplayWindow] {
        counted.filter { $0.value.owner == app }.compactMap { windows[$0.key] }
            .sorted { ($0.focused ? 0 : $0.visible ? 1 : 2, $0.id) < ($1.focused ? 0 : $1.visible ? 1 : 2, $1.id) }
    }

    private mutating func count(_ window: DisplayWindow, _ rule: WindowOwnership) {
        guard let owner = rule.owner(of: window) else { return }
        counted[window.id] = (owner, window.visible)
        var app = perApp[owner, default: (0, 0)]
        app.windows += 1
        if window.visible { app.visible += 1 }
        perApp[owner] = app
        if app.windows == 1 { windowed.insert(owner); moved = true }
        if window.visible && app.visible == 1 { visible.insert(owner); moved = true }
    }

    private mutating func uncount(_ id: Int64) {
        guard let (owner, shown) = counted.removeValue(forKey: id), var app = perApp[owner] else { return }
        app.windows -= 1
        if shown { app.visible -= 1 }
        perApp[owner] = app.windows == 0 ? nil : app
        if app.windows == 0 { windowed.remove(owner); moved = true }
        if shown && app.visible == 0 { visible.remove(owner); moved = true }
    }
}
