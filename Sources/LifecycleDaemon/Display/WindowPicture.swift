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

/// Every window the display server shows or hides, read whole (at connect, after a change that may move several).
struct WindowPicture: Sendable, Equatable {
    var windows: [DisplayWindow] = []
    /// The loop's time of the event that started the change this picture shows, so that a grace time counts from
    /// the event rather than from when the picture was complete; nil for a picture read at connect.
    var changedAt: Duration?

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
        var visible: Set<String> = []
        var windowed: Set<String> = []
        for window in picture.windows {
            guard let name = owner(of: window) else { continue }
            windowed.insert(name)
            if window.visible { visible.insert(name) }
        }
        return DisplayFacts(visible: visible, windowed: windowed, focused: picture.focused.flatMap(owner(of:)))
    }

    /// The windows of `app`, focused first, then visible ones: the one a focus request names comes first.
    func windows(of app: String, in picture: WindowPicture) -> [DisplayWindow] {
        picture.windows.filter { owner(of: $0) == app }
            .sorted { ($0.focused ? 0 : $0.visible ? 1 : 2, $0.id) < ($1.focused ? 0 : $1.visible ? 1 : 2, $1.id) }
    }
}
