import CSupport
import Glibc
import LifecycleModel

/// `significantTimeChange`, UIKit's `UIApplication.significantTimeChangeNotification`: the clock was set, the
/// day changed (local midnight), or the time zone changed.
///
/// - Clock set and midnight come from one CLOCK_REALTIME timerfd armed at the next local midnight with
///   `TFD_TIMER_CANCEL_ON_SET`: it expires at midnight, and its read fails with ECANCELED when the clock is
///   set (by anyone: `date -s`, an NTP step, and also a resume from suspend). Either way it is armed again at
///   the next midnight, which a jump may have moved.
/// - The time zone comes from the localtime file, watched through its directory: `timedatectl` and `ln -sf`
///   replace the symlink, `dpkg-reconfigure` may rewrite a copy. A change of content is a change of zone; the C
///   library is told (`tzset()`) and midnight re-armed in the new zone.
///
/// A setting of the clock counts only when it moves the wall clock against the monotonic one by at least
/// `significantStep`: UIKit posts for midnight, a carrier's time update and daylight saving time, not for the small
/// steps a virtual machine's or an NTP client's clock discipline makes many times a minute. Small steps add up against
/// the wall clock as it was at the last post, so a drift is posted once, when it has grown past the step.
///
/// No periodic wakeup: at most one expiry a day.
final class TimeChangeSource {
    static let type = "significantTimeChange"

    private let watcher: DirectoryWatcher
    private let localtimePath: String
    private let post: (String, JSONValue, String?) -> Void
    private var timer: FileDescriptor?
    private var timerFD: Int32 { timer?.rawValue ?? -1 }
    private var timerSource: EventSource?
    private var subscription: Int?
    private var localtime: FileFingerprint
    private var nextMidnight: Int64?
    private var timerProblem: String?
    private var zoneProblem: String?
    /// How many times the loop woke the timer (for the no-polling test).
    private(set) var wakeups = 0
    /// The smallest move of the wall clock that is a significant time change.
    static let significantStep: Duration = .seconds(1)
    /// CLOCK_REALTIME minus CLOCK_MONOTONIC when the clock was last counted as set (or the source started).
    private var wallOffset = TimeChangeSource.currentWallOffset()

    init(loop: EventLoop, watcher: DirectoryWatcher, localtimePath: String, post: @escaping (String, JSONValue, String?) -> Void) {
        self.watcher = watcher
        self.localtimePath = localtimePath
        self.post = post
        localtime = FileFingerprint(path: localtimePath)

        do {
            timer = FileDescriptor(owning: try retryingEINTR("create a CLOCK_REALTIME timerfd") { cs_realtime_timer_open() }, path: "the midnight timer")
            timerSource = try loop.watch(fd: timerFD, events: IOEvents.readable) { [weak self] _ in self?.timerFired() }
            try arm()
        } catch {
            timerProblem = error.description
            closeTimer()
        }

        let (directory, name) = splitParent(localtimePath)
        do {
            subscription = try watcher.subscribe(
                directory: directory, names: [name],
                mask: CS_IN_CREATE | CS_IN_MOVED_TO | CS_IN_CLOSE_WRITE | CS_IN_DELETE | CS_IN_MOVED_FROM | CS_IN_ATTRIB
            ) { [weak self] events in self?.localtimeChanged(events) }
        } catch {
            zoneProblem = error.description
        }
    }

    deinit { stop() }

    var descriptions: [String] {
        let timer = if let timerProblem {
            "clock set and midnight off (\(timerProblem))"
        } else {
            "timerfd cancel-on-set, next midnight \(nextMidnight.map(LocalMidnight.localDescription) ?? "?") local"
        }
        let zone = if let zoneProblem { "\(localtimePath) off (\(zoneProblem))" } else { "\(localtimePath) via inotify" }
        return ["\(Self.type): \(timer); \(zone)"]
    }

    func stop() {
        closeTimer()
        if let subscription { watcher.unsubscribe(subscription) }
        subscription = nil
    }

    private func closeTimer() {
        timerSource?.cancel()
        timerSource = nil
        timer = nil
    }

    /// Arms the timer at the next local midnight from the wall clock now.
    private func arm() throws(SystemError) {
        let midnight = LocalMidnight.next(after: LocalMidnight.wallClockNow(), utcOffset: LocalMidnight.systemUTCOffset)
        try retryingEINTR("arm the midnight timer") { cs_realtime_timer_arm(timerFD, midnight) }
        nextMidnight = midnight
    }

    private func timerFired() {
        wakeups += 1
        let reason: String
        switch cs_realtime_timer_consume(timerFD) {
        case CS_TIMER_EXPIRED: reason = "midnight"
        case CS_TIMER_CLOCK_SET:
            let offset = Self.currentWallOffset()
            guard Self.isSignificant(from: wallOffset, to: offset) else {
                rearm()
                return Log.debug("\(Self.type): the clock was set by \(offset - wallOffset) since the last change posted; under \(Self.significantStep), not posted")
            }
            wallOffset = offset
            reason = "clockSet"
        case CS_TIMER_NOTHING: return
        default:
            timerProblem = SystemError(operation: "read the midnight timer", errno: errno).description
            closeTimer()
            return
        }
        rearm()
        post(Self.type, ["reason": .string(reason)], nil)
    }

    /// Whether the wall clock moved against the monotonic one by at least `significantStep`, either way.
    static func isSignificant(from before: Duration, to after: Duration) -> Bool {
        let step = after - before
        return step >= significantStep || step <= .zero - significantStep
    }

    static func currentWallOffset() -> Duration {
        var wall = timespec(), monotonic = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        clock_gettime(CLOCK_MONOTONIC, &monotonic)
        return Duration(secondsComponent: Int64(wall.tv_sec) - Int64(monotonic.tv_sec),
                        attosecondsComponent: (Int64(wall.tv_nsec) - Int64(monotonic.tv_nsec)) * 1_000_000_000)
    }

    private func rearm() {
        guard timerFD >= 0 else { return }
        do {
            try arm()
        } catch {
            timerProblem = error.description
            closeTimer()
        }
    }

    private func localtimeChanged(_ events: [DirectoryEvent]) {
        if events.contains(where: { $0.mask & CS_IN_IGNORED != 0 }) {
            subscription = nil
            zoneProblem = "its directory was removed"
        }
        let now = FileFingerprint(path: localtimePath)
        guard now != localtime else { return }
        localtime = now
        // glibc's localtime_r does not look at /etc/localtime again by itself; tzset() does (when TZ is unset).
        tzset()
        rearm()
        post(Self.type, ["reason": "timeZone"], nil)
    }
}
