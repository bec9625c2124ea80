import CSystemd
import Glibc

/// The service manager protocol (sd-daemon): READY/RELOADING/STOPPING/STATUS through `sd_notify`, and
/// sockets passed in by a `.socket` unit. Without `NOTIFY_SOCKET` (not under systemd) every call is a no-op.
/// The watchdog is fed by the event loop itself (`sd_event_set_watchdog`), so a stuck loop is caught.
final class ServiceManager {
    /// Under a service manager (NOTIFY_SOCKET is set): only then are there a status to keep, an fd store, and a
    /// SIGTERM that may be the stop half of a restart.
    let isEnabled: Bool
    /// The daemon's status line, given at READY=1 (which carries the first one); STATUS= goes out only after it.
    private var statusLine: (() -> String)?
    private var statusTimer: EventSource?
    /// A STATUS= is due when `statusTimer` fires.
    private var statusPending = false
    private var lastStatus: String?
    private var lastComputed: Duration?
    /// STATUS= is kept current but computed and sent at most this often: a burst of transitions is one update.
    static let statusInterval: Duration = .milliseconds(100)

    init(environment: [String: String]) {
        isEnabled = environment["NOTIFY_SOCKET"] != nil
    }

    /// READY=1: the sockets listen and the auto-launch apps run. `statusLine` is asked for each STATUS= from now on.
    func ready(statusLine: @escaping () -> String) {
        self.statusLine = statusLine
        guard isEnabled else { return }
        let status = statusLine()
        send("READY=1\nSTATUS=\(status)")
        lastStatus = status
    }

    /// RELOADING=1 with the monotonic time of the request, as systemd ≥ 253 asks for `Type=notify-reload`
    /// (older managers ignore the extra field).
    func reloading() {
        send("RELOADING=1\nMONOTONIC_USEC=\(MonotonicDeadline.now())")
    }

    func stopping() { send("STOPPING=1") }

    /// The status may have changed (the daemon says so on every transition). The line counts every app, which
    /// with many apps would outweigh the transition itself, so it is computed, and sent if it changed, at once if
    /// the last one was computed long enough ago, else once the interval is over; and never without a service
    /// manager.
    func statusChanged(loop: EventLoop) {
        guard isEnabled, statusLine != nil, !statusPending else { return }
        let elapsed = lastComputed.map { loop.now - $0 } ?? Self.statusInterval
        if elapsed >= Self.statusInterval { return flushStatus(loop: loop) }
        if statusTimer == nil { statusTimer = try? loop.timer { [unowned self, unowned loop] in self.flushStatus(loop: loop) } }
        guard let statusTimer else { return flushStatus(loop: loop) }
        statusPending = true
        statusTimer.arm(after: Self.statusInterval - elapsed)
    }

    private func flushStatus(loop: EventLoop) {
        statusPending = false
        guard let statusLine else { return }
        lastComputed = loop.now
        let line = statusLine()
        guard line != lastStatus else { return }
        lastStatus = line
        send("STATUS=\(line)")
    }

    /// FDSTORE=1: the service manager keeps a copy of `fd` under `name` and passes it back when the daemon is
    /// started again (LISTEN_FDS/LISTEN_FDNAMES), so that a client's connection outlives a crash of the
    /// daemon. False without a service manager, or when it refused (FileDescriptorStoreMax= reached).
    @discardableResult
    func storeFD(_ fd: Int32, name: String) -> Bool {
        guard isEnabled else { return false }
        var descriptor = fd
        return sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=\(name)", &descriptor, 1) > 0
    }

    /// FDSTOREREMOVE=1: the stored descriptors named `name` are closed by the service manager.
    func removeStoredFDs(name: String) { send("FDSTOREREMOVE=1\nFDNAME=\(name)") }

    private func send(_ message: String) {
        guard isEnabled else { return }
        _ = sd_notify(0, message)
    }

    /// Listening sockets passed by the service manager (`sd_listen_fds_with_names`), by name.
    /// LISTEN_* are unset afterwards so that apps do not inherit them.
    static func passedSockets() -> [String: Int32] {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(1, &names)
        guard count > 0 else { return [:] }
        var sockets: [String: Int32] = [:]
        for index in 0..<Int(count) {
            let fd = SD_LISTEN_FDS_START + Int32(index)
            let name = names?[index].map { String(cString: $0) } ?? "unknown"
            sockets[name] = fd
            // The apps must not inherit them.
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            free(names?[index])
        }
        free(names)
        return sockets
    }
}
