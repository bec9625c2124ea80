import Glibc

/// Where the daemon reads its configuration when `--config` names no directory.
public enum ConfigDirectory {
    /// The system daemon's.
    public static let system = "/etc/lifecycled"

    /// For root, `/etc/lifecycled`. For anyone else (a desktop session's `systemctl --user` daemon), the XDG base
    /// directories: `$XDG_CONFIG_HOME/lifecycled` (`~/.config/lifecycled`) when it exists, else
    /// `/etc/xdg/lifecycled` (XDG_CONFIG_DIRS' default) when that does, else the user's own (absent: every default).
    public static func path(uid: UInt32, environment: [String: String], exists: (String) -> Bool = isDirectory) -> String {
        guard uid != 0 else { return system }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 }
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil } ?? home.map { $0 + "/.config" }
        let own = configHome.map { $0 + "/lifecycled" }
        if let own, exists(own) { return own }
        let shared = (environment["XDG_CONFIG_DIRS"].flatMap { $0.isEmpty ? nil : $0 } ?? "/etc/xdg")
            .split(separator: ":").map { String($0) + "/lifecycled" }.filter { $0.hasPrefix("/") }
        if let found = shared.first(where: exists) { return found }
        return own ?? shared.first ?? system
    }

    public static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }
}
