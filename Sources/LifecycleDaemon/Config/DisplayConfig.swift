import Glibc

/// `[Display]` of `lifecycled.conf`: which display server the states follow (docs/CONFIG.md).
public struct DisplayConfig: Sendable, Equatable {
    /// `Source=`.
    public enum Source: String, Sendable, Equatable, CaseIterable {
        /// Focus and foreground only through lifectl.
        case none
        /// The i3/sway IPC socket.
        case sway
        /// An EWMH window manager on X11.
        case x11
        /// sway when a socket is given or found, else x11 when a display is, else gnome when a unit of the app slice
        /// carries GNOME's focus mark (DisplayFollower), else none.
        case auto
        /// The integrator that owns the display reports it over the D-Bus API (SetDisplay, SetDisplayPids).
        case dbus
        /// GNOME Shell's focus marks on the app units' cgroups (`user.xdg.inactive-since`), without an extension.
        case gnome
    }

    public var source: Source = .none
    /// `SwaySocket=`: default `$SWAYSOCK`, else the first `sway-ipc.*.sock` in a runtime directory.
    public var swaySocket: String?
    /// `X11Display=`: default `$DISPLAY`.
    public var x11Display: String?
    /// `GnomeGraceSec=`: how long an app whose window lost the focus stays visible (inactive) under `Source=gnome`.
    public var gnomeGrace: Duration = .seconds(10)

    public init() {}

    /// The source to run and where it connects, as `auto` and the defaults resolve them. `runtimeDirectories`: where
    /// a sway socket is looked for when neither the key nor `$SWAYSOCK` names one.
    public func resolved(environment: [String: String], runtimeDirectories: [String] = DisplayConfig.userRuntimeDirectories())
        -> (source: Source, address: String?) {
        let swaySocket = swaySocket ?? environment["SWAYSOCK"].flatMap { $0.isEmpty ? nil : $0 }
            ?? Self.findSwaySocket(in: runtimeDirectories)
        let display = x11Display ?? environment["DISPLAY"].flatMap { $0.isEmpty ? nil : $0 }
        switch source {
        case .none: return (.none, nil)
        case .sway: return (.sway, swaySocket)
        case .x11: return (.x11, display)
        case .dbus: return (.dbus, nil)
        case .gnome: return (.gnome, nil)
        case .auto:
            if let swaySocket { return (.sway, swaySocket) }
            if let display { return (.x11, display) }
            return (.none, nil)
        }
    }

    /// `/run/user/UID` of every user with one, then `$XDG_RUNTIME_DIR`'s usual place for root.
    public static func userRuntimeDirectories(root: String = "/run/user") -> [String] {
        guard let directory = opendir(root) else { return [] }
        defer { closedir(directory) }
        var found: [String] = []
        while let entry = readdir(directory) {
            let name = directoryEntryName(entry)
            if name.first?.isNumber == true { found.append("\(root)/\(name)") }
        }
        return found.sorted()
    }

    /// The first `sway-ipc.*.sock` in `directories` (sway names its socket after the user id and its pid).
    static func findSwaySocket(in directories: [String]) -> String? {
        for path in directories {
            guard let directory = opendir(path) else { continue }
            defer { closedir(directory) }
            var names: [String] = []
            while let entry = readdir(directory) {
                let name = directoryEntryName(entry)
                if name.hasPrefix("sway-ipc."), name.hasSuffix(".sock") { names.append(name) }
            }
            if let name = names.sorted().first { return "\(path)/\(name)" }
        }
        return nil
    }
}
