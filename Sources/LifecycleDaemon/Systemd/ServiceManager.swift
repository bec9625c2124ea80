import CSystemd
import Glibc

/// The service manager protocol (sd-daemon): READY/RELOADING/STOPPING/STATUS through `sd_notify`, and
/// sockets passed in by a `.socket` unit. Without `NOTIFY_SOCKET` (not under systemd) every call is a no-op.
/// The watchdog is fed by the event loop itself (`sd_event_set_watchdog`), so a stuck loop is caught.
final class ServiceManager {
    private let enabled: Bool
    /// Under a service manager, whose fd store may hold connections and pidfds.
    var storesFDs: Bool { enabled }
    private var statusTimer: EventSource?
    private var pendingStatus: String?
    private var lastStatus: String?
    private var lastSent: Duration = .zero
    /// STATUS= goes out only after READY=1, which carries the first one.
    private var isReady = false
    /// STATUS= is kept current but sent at most this often: a burst of transitions is one update.
    static let statusInterval: Duration = .milliseconds(100)

    init(environment: [String: String]) {
        enabled = environment["NOTIFY_SOCKET"] != nil
    }

    /// Under a service manager (NOTIFY_SOCKET is set): only then can a SIGTERM be the stop half of a restart.
    var isEnabled: Bool { enabled }

    /// READY=1: the sockets listen and the auto-launch apps run.
    func ready(status: String) {
        send("READY=1\nSTATUS=\(status)")
        lastStatus = status
        isReady = true
    }

    /// RELOADING=1 with the monotonic time of the request, as systemd ≥ 253 asks for `Type=notify-reload`
    /// (older managers ignore the extra field).
    func reloading() {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let usec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
        send("RELOADING=1\nMONOTONIC_USEC=\(usec)")
    }

    func stopping() { send("STOPPING=1") }

    /// A new status line: sent at once if the last one went out long enough ago, else once the interval is over.
    /// The line is only computed under a service manager: it counts every app (O(apps)), and the daemon asks
    /// on every transition (callgrind: 12% of an app switch's instructions at 10 apps, more with more apps).
    func status(_ line: @autoclosure () -> String, loop: EventLoop) {
        guard enabled, isReady else { return }
        let line = line()
        guard line != lastStatus else { return }
        pendingStatus = line
        let elapsed = loop.now - lastSent
        if elapsed >= Self.statusInterval {
            flushStatus(loop: loop)
        } else if statusTimer == nil {
            statusTimer = try? loop.timer { [unowned self, unowned loop] in self.flushStatus(loop: loop) }
            statusTimer?.arm(after: Self.statusInterval - elapsed)
        } else {
            statusTimer?.arm(after: Self.statusInterval - elapsed)
        }
    }

    private func flushStatus(loop: EventLoop) {
        guard let line = pendingStatus else { return }
        pendingStatus = nil
        lastStatus = line
        lastSent = loop.now
        send("STATUS=\(line)")
    }

    /// FDSTORE=1: the service manager keeps a copy of `fd` under `name` and passes it back when the daemon is
    /// started again (LISTEN_FDS/LISTEN_FDNAMES), so that a client's connection outlives a crash of the
    /// daemon. False without a service manager, or when it refused (FileDescriptorStoreMax= reached).
    @discardableResult
    func storeFD(_ fd: Int32, name: String) -> Bool {
        guard enabled else { return false }
        var descriptor = fd
        return sd_pid_notify_with_fds(0, 0, "FDSTORE=1\nFDNAME=\(name)", &descriptor, 1) > 0
    }

    /// FDSTOREREMOVE=1: the stored descriptors named `name` are closed by the service manager.
    func removeStoredFDs(name: String) { send("FDSTOREREMOVE=1\nFDNAME=\(name)") }

    private func send(_ message: String) {
        guard enabled else { return }
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
