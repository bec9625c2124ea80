import Glibc

/// Refusals on the control socket, logged once per peer uid and interval: the first in full, the rest counted
/// and summed up in one line ("N more refused requests from uid U") when the interval ends. Any local user can
/// be refused as fast as it can send, and a line per refusal would let it fill the journal and rotate away
/// what matters, as journald's own rate limit guards against.
final class RefusalLog {
    /// How long after a logged refusal the next ones are only counted.
    static let interval: Duration = .seconds(5)
    private let loop: EventLoop
    private struct Window {
        var more = 0
        var timer: EventSource?
    }
    /// One per uid refused within the last interval; each goes when its interval ends.
    private var windows: [uid_t: Window] = [:]

    init(loop: EventLoop) { self.loop = loop }

    /// Log `message` for the first refusal of `uid` in an interval; count the others.
    func refused(uid: uid_t, _ message: @autoclosure () -> String) {
        if windows[uid] != nil {
            windows[uid]!.more += 1
            return
        }
        Log.notice(message())
        // Without a timer the window would never close: every refusal is then logged.
        guard let timer = try? loop.timer({ [unowned self] in self.close(uid) }) else { return }
        timer.arm(after: Self.interval)
        windows[uid] = Window(timer: timer)
    }

    private func close(_ uid: uid_t) {
        guard let window = windows.removeValue(forKey: uid) else { return }
        if window.more > 0 {
            Log.notice("\(window.more) more refused requests from uid \(uid) in the last \(Self.interval.components.seconds)s")
        }
    }

    /// The daemon stops: say what was counted.
    func flush() {
        for uid in windows.keys.sorted() { close(uid) }
    }
}
