import Glibc

/// What adoption never touches, checked before anything is adopted: a freeze of one of these stops the desktop
/// itself (the compositor, its panels, the sound server) or the daemon. Pure: the facts about the processes come in.
struct AdoptRails {
    /// App ids and unit names never adopted, compared without case: compositors and shells, panels and bars,
    /// wallpaper and lock screens, notification daemons, input methods, audio servers and portals. A window or
    /// scope of one of these stopped takes the session down with it.
    static let builtInExclusions: [String] = [
        // compositors, shells, X servers
        "sway", "mutter", "gnome-shell", "org.gnome.Shell", "kwin", "kwin_wayland", "kwin_x11", "org.kde.kwin",
        "plasmashell", "org.kde.plasmashell", "Xwayland", "Xorg", "openbox", "i3", "xfwm4",
        // panels, bars, docks, wallpaper, lock screens
        "waybar", "swaybar", "polybar", "xfce4-panel", "lxpanel", "tint2", "swaybg", "swaylock", "swayidle",
        "org.kde.krunner",
        // notification daemons
        "mako", "dunst", "swaync", "xfce4-notifyd", "notify-osd", "org.freedesktop.Notifications",
        // input methods
        "ibus", "ibus-daemon", "ibus-x11", "fcitx", "fcitx5", "org.fcitx.Fcitx5",
        // audio servers
        "pipewire", "pipewire-pulse", "wireplumber", "pulseaudio",
        // portals and the session's own services
        "xdg-desktop-portal", "xdg-desktop-portal-gtk", "xdg-desktop-portal-gnome", "xdg-desktop-portal-kde",
        "xdg-desktop-portal-wlr", "lifecycled",
    ]

    /// The uid whose processes may be adopted (the session's user).
    var uid: uid_t
    /// `Exclude=`, added to the built-in list.
    var configured: [String]
    /// The daemon, its ancestors and the session's leader, and the display server's process, when known.
    var protected: Set<pid_t>

    /// Why an app named `appID` (from unit `unit`) may not be adopted, or nil.
    func excluded(appID: String, unit: String? = nil) -> String? {
        let names = [appID.lowercased()] + (unit.map { [$0.lowercased()] } ?? [])
        if let match = configured.first(where: { names.contains($0.lowercased()) }) { return "it is in Exclude= (\(match))" }
        if Self.builtInExclusions.contains(where: { names.contains($0.lowercased()) }) {
            return "it is part of the desktop (the built-in exclusions)"
        }
        return nil
    }

    /// Why processes `pids` may not be adopted together, or nil: one of them belongs to another user, or is the
    /// daemon, one of its ancestors, the session's leader or the display server.
    func refuses(_ pids: [pid_t], uidOf: (pid_t) -> uid_t?) -> String? {
        if let own = pids.first(where: protected.contains) { return "it holds process \(own), which lifecycled or the session needs running" }
        if let other = pids.first(where: { pid in uidOf(pid).map { $0 != uid } ?? false }) {
            return "process \(other) belongs to another user"
        }
        return nil
    }

    /// Whether a cgroup path lies under the session's `session.slice` (the compositor and the session's services).
    static func underSessionSlice(_ path: String) -> Bool {
        path.split(separator: "/").contains("session.slice")
    }

    /// The daemon's ancestors and its session's leader, read from `tree`.
    static func ownLine(in tree: ProcessTree, pid: pid_t = getpid()) -> Set<pid_t> {
        ownLine(ancestors: tree.ancestors(of: pid), pid: pid)
    }

    /// The daemon's ancestors (read one by one) and its session's leader.
    static func ownLine(pid: pid_t = getpid()) -> Set<pid_t> {
        ownLine(ancestors: ProcessTree.ancestors(of: pid), pid: pid)
    }

    private static func ownLine(ancestors: [pid_t], pid: pid_t) -> Set<pid_t> {
        var line = Set(ancestors)
        line.insert(pid)
        let session = getsid(0)
        if session > 0 { line.insert(session) }
        return line.subtracting([0])
    }
}
