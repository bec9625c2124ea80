// The seam between the daemon and a display server: a source connects, reports the whole picture whenever it may
// have changed, and carries out focus and hide requests. The model hears only per-app facts (DisplayFollower), so a
// new display server is a new source and nothing else.

/// A display server the daemon follows. Driven from the daemon's loop; never blocks.
protocol DisplaySource: AnyObject {
    /// The source's name as `[Display] Source=` spells it, for the log and `lifectl status`.
    var name: String { get }
    /// Where it connects (a socket path, a display name), for the log and `lifectl status`.
    var address: String { get }
    /// Connected, with a picture read since.
    var connected: Bool { get }
    /// Connect, and keep reconnecting on loss; `report` gets every new picture (the whole picture after each connect).
    func start(report: @escaping (WindowPicture) -> Void)
    /// Disconnect for good.
    func stop()
    /// Ask the display server to give the window the focus (showing it first if it is hidden).
    func focus(window: Int64)
    /// Ask the display server to hide the window.
    func hide(window: Int64)
    /// Whether the display server takes focus and hide requests at all (else lifectl's verbs go the usual way).
    var canRequest: Bool { get }
}

extension DisplaySource {
    var canRequest: Bool { true }
}
