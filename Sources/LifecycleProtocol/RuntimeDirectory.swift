/// Where the daemon keeps its sockets, shared by `lifecycled` and `lifectl` so that both agree.
public enum RuntimeDirectory {
    /// `LIFECYCLED_RUNTIME_DIR` if set; else `/run/lifecycled` for root and `$XDG_RUNTIME_DIR/lifecycled`
    /// for everyone else (falling back to `/tmp/lifecycled-UID` when XDG_RUNTIME_DIR is unset).
    public static func path(environment: [String: String], uid: UInt32) -> String {
        path(lifecycledRuntimeDir: environment["LIFECYCLED_RUNTIME_DIR"], xdgRuntimeDir: environment["XDG_RUNTIME_DIR"], uid: uid)
    }

    /// The same from the two variables' values, for lifectl, which reads just these two rather than the whole
    /// environment.
    public static func path(lifecycledRuntimeDir: String?, xdgRuntimeDir: String?, uid: UInt32) -> String {
        if let explicit = lifecycledRuntimeDir, !explicit.isEmpty { return explicit }
        if uid == 0 { return "/run/lifecycled" }
        if let xdg = xdgRuntimeDir, !xdg.isEmpty { return xdg + "/lifecycled" }
        return "/tmp/lifecycled-\(uid)"
    }

    /// The system daemon's directory, where a user's lifectl looks when its own directory has no daemon.
    public static let system = "/run/lifecycled"

    /// Where lifectl looks for the daemon, in order: the directory `path` gives, then, for a user other than
    /// root who named no directory (no `LIFECYCLED_RUNTIME_DIR`, no `--runtime-dir`), the system daemon's.
    public static func candidates(lifecycledRuntimeDir: String?, xdgRuntimeDir: String?, uid: UInt32) -> [String] {
        let own = path(lifecycledRuntimeDir: lifecycledRuntimeDir, xdgRuntimeDir: xdgRuntimeDir, uid: uid)
        let named = lifecycledRuntimeDir.map { !$0.isEmpty } ?? false
        return named || own == system ? [own] : [own, system]
    }

    public static func controlSocket(in directory: String) -> String { directory + "/control.sock" }
    /// Where a client reconnects after a restart of the daemon (LIFECYCLE_SOCKET).
    public static func appSocket(in directory: String) -> String { directory + "/app.sock" }
}
