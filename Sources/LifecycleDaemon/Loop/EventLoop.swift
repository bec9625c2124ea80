import CSystemd
import Glibc

/// The daemon's one event loop: an sd-event loop on the main thread that owns all mutable state.
///
/// Sources are Swift objects; the C callbacks capture nothing and reach the object through
/// unretained userdata. Whoever keeps the `EventSource` keeps the source alive; dropping it (or
/// `cancel()`) disables and frees the sd-event source, so no callback can reach a freed object.
public final class EventLoop {
    let event: OpaquePointer
    /// The watched children by pid, for stop and continue notices (see `watchChild`).
    private let children = ChildRegistry()
    /// The one SIGCHLD source that collects stop and continue notices, made with the first watched child.
    private var stopSource: EventSource?
    /// What runs once the current callback returns (`afterCallback`), shared with every source.
    private let epilogue = CallbackEpilogue()
    /// The deferred call that runs `epilogue` when work is queued outside any callback.
    private var epilogueKick: EventSource?

    public init() throws(SystemError) {
        var event: OpaquePointer?
        let result = sd_event_new(&event)
        guard result >= 0, let event else { throw SystemError(operation: "create the event loop", errno: -result) }
        self.event = event
        // Pings the systemd watchdog from the loop itself when WATCHDOG_USEC is set (so a stuck loop is caught),
        // and does nothing when it is not.
        _ = sd_event_set_watchdog(event, 1)
    }

    deinit { sd_event_unref(event) }

    /// Runs until `exit(code:)`; returns the code.
    public func run() -> Int32 { sd_event_loop(event) }

    public func exit(code: Int32 = 0) { _ = sd_event_exit(event, code) }

    /// The loop's monotonic time of the current iteration.
    public var now: Duration {
        var usec: UInt64 = 0
        _ = sd_event_now(event, CLOCK_MONOTONIC, &usec)
        return .microseconds(Int64(usec))
    }

    /// The number of the current iteration. sd-event dispatches one source per iteration, so what a callback read
    /// of the kernel may be reused within that callback and is read again in the next one.
    public var iteration: UInt64 {
        var iteration: UInt64 = 0
        _ = sd_event_get_iteration(event, &iteration)
        return iteration
    }

    /// Runs `handler` once the callback being dispatched returns, in the same iteration of the loop: several
    /// calls in one callback run in order, after it. Outside a callback (start-up), at the next iteration.
    /// Unlike `deferred`, it costs no sd-event source and no iteration of its own: a deferred call is one more
    /// pass through sd-event's prepare, an epoll_wait() with no timeout, and a source made and freed.
    public func afterCallback(_ handler: @escaping () -> Void) {
        epilogue.handlers.append(handler)
        guard !epilogue.dispatching, epilogueKick == nil else { return }
        // Its dispatch runs the epilogue, as every callback's does.
        epilogueKick = try? deferred { [unowned self] in self.epilogueKick = nil }
    }

    // MARK: Sources

    /// Calls `handler(revents)` whenever `fd` is ready for `events` (EPOLLIN, EPOLLOUT…).
    public func watch(fd: Int32, events: UInt32, _ handler: @escaping (UInt32) -> Void) throws(SystemError) -> EventSource {
        let source = EventSource(.io(handler), epilogue)
        var pointer: OpaquePointer?
        let result = sd_event_add_io(event, &pointer, fd, events, { _, _, revents, userdata in
            EventSource.dispatch(userdata) { $0.fire(revents: revents) }
            return 0
        }, source.userdata)
        guard result >= 0 else { throw SystemError(operation: "watch fd \(fd)", errno: -result) }
        source.pointer = pointer
        return source
    }

    /// A timer, disarmed until `arm(after:)`.
    public func timer(_ handler: @escaping () -> Void) throws(SystemError) -> EventSource {
        let source = EventSource(.timer(handler), epilogue)
        var pointer: OpaquePointer?
        let result = sd_event_add_time_relative(event, &pointer, CLOCK_MONOTONIC, UInt64.max / 2, 0, { _, _, userdata in
            EventSource.dispatch(userdata) { $0.fire() }
            return 0
        }, source.userdata)
        guard result >= 0 else { throw SystemError(operation: "add a timer", errno: -result) }
        source.pointer = pointer
        _ = sd_event_source_set_enabled(pointer, Int32(SD_EVENT_OFF))
        return source
    }

    /// Calls `handler` with the child's `si_code` (CLD_EXITED, CLD_KILLED, CLD_DUMPED, CLD_STOPPED, CLD_CONTINUED)
    /// and `si_status`. sd-event reaps the child after an exit callback, so no zombie stays.
    /// SIGCHLD must be blocked in every thread before this is called (docs/PLATFORM.md).
    ///
    /// Exits come from an sd-event child source for WEXITED alone, which sd-event watches through the child's
    /// pidfd. Stops and continues come from one SIGCHLD source for the whole loop, which asks the kernel which
    /// children changed (`waitid(P_ALL, WSTOPPED|WCONTINUED)`). Asking sd-event for WSTOPPED|WCONTINUED instead
    /// makes it drop the pidfds and call waitid() once per watched child on every SIGCHLD, a cost that grows
    /// with the number of apps (docs/PLATFORM.md).
    public func watchChild(pid: pid_t, _ handler: @escaping (_ code: Int32, _ status: Int32) -> Void) throws(SystemError) -> EventSource {
        if stopSource == nil {
            stopSource = try onSignal(SIGCHLD) { [unowned self] in self.collectStopsAndContinues() }
        }
        let source = EventSource(.child(handler), epilogue)
        var pointer: OpaquePointer?
        let result = sd_event_add_child(event, &pointer, pid, WEXITED, { _, info, userdata in
            guard let info else { return 0 }
            let (code, status) = (info.pointee.si_code, info.pointee._sifields._sigchld.si_status)
            EventSource.dispatch(userdata) { $0.fire(code: code, status: status) }
            return 0
        }, source.userdata)
        guard result >= 0 else { throw SystemError(operation: "watch child \(pid)", errno: -result) }
        source.pointer = pointer
        source.watchedChild = (pid, children)
        children.sources[pid] = Unmanaged.passUnretained(source)
        return source
    }

    /// Every stop and continue the kernel holds for our children, each to its watcher (none for a child that is
    /// not watched: its notice is consumed and dropped). Exits are left alone (no WEXITED): sd-event takes them.
    private func collectStopsAndContinues() {
        while true {
            var info = siginfo_t()
            let result = try? retryingEINTR("wait for a stop or continue") { waitid(P_ALL, 0, &info, WSTOPPED | WCONTINUED | WNOHANG) }
            let pid = info._sifields._sigchld.si_pid
            guard result == 0, pid != 0 else { return }  // ECHILD, or nothing more to report
            children.sources[pid]?.takeUnretainedValue().fire(code: info.si_code, status: info._sifields._sigchld.si_status)
        }
    }

    /// Calls `handler` on each delivery of `signal`, which sd-event blocks for the calling thread.
    public func onSignal(_ signal: Int32, _ handler: @escaping () -> Void) throws(SystemError) -> EventSource {
        let source = EventSource(.signal(handler), epilogue)
        var pointer: OpaquePointer?
        let result = sd_event_add_signal(event, &pointer, signal | Int32(SD_EVENT_SIGNAL_PROCMASK), { _, _, userdata in
            EventSource.dispatch(userdata) { $0.fire() }
            return 0
        }, source.userdata)
        guard result >= 0 else { throw SystemError(operation: "watch signal \(signal)", errno: -result) }
        source.pointer = pointer
        return source
    }

    /// Runs `handler` once, at the next iteration, after the current callback returns.
    public func deferred(_ handler: @escaping () -> Void) throws(SystemError) -> EventSource {
        let source = EventSource(.timer(handler), epilogue)
        var pointer: OpaquePointer?
        let result = sd_event_add_defer(event, &pointer, { _, userdata in
            EventSource.dispatch(userdata) { $0.fire() }
            return 0
        }, source.userdata)
        guard result >= 0 else { throw SystemError(operation: "add a deferred call", errno: -result) }
        source.pointer = pointer
        _ = sd_event_source_set_enabled(pointer, Int32(SD_EVENT_ONESHOT))
        return source
    }
}

/// A timer that runs its handler at a due time, with an optional lazy cancel for deadlines that are armed and
/// met many times a second (a callback's ack). A lazy `cancel()` only forgets the due time: the sd-event source
/// stays armed and fires once more, for nothing, and arming again no later than that source's time touches
/// nothing. Disarming and re-arming the source instead would move sd-event's timerfd twice per callback. The
/// cost is at most one wakeup per timer after its last use, within its delay (the ack timeout, 5 s by default).
public final class LoopTimer {
    private unowned let loop: EventLoop
    private let lazyCancel: Bool
    private let handler: () -> Void
    private var source: EventSource?
    /// When the handler is to run; nil when not armed or cancelled.
    private var due: Duration?
    /// When the sd-event source is armed to fire; nil when it is off.
    private var fires: Duration?
    private var accuracy: Duration?

    public init(loop: EventLoop, lazyCancel: Bool = false, _ handler: @escaping () -> Void) throws(SystemError) {
        self.loop = loop
        self.lazyCancel = lazyCancel
        self.handler = handler
        source = try loop.timer { [unowned self] in self.fired() }
    }

    /// Runs the handler once, `delay` from now, replacing any earlier arming.
    public func arm(after delay: Duration) { arm(at: loop.now + delay) }

    /// Runs the handler once at `due` on the loop's clock (at once if that has passed), replacing any earlier arming.
    /// `accuracy`: how late it may run (`EventSource.arm`).
    public func arm(at due: Duration, accuracy: Duration? = nil) {
        self.due = due
        self.accuracy = accuracy
        // The source fires first (at a time no later than this one) and arms itself again for what is due then.
        if lazyCancel, let fires, fires <= due { return }
        source?.arm(after: max(due - loop.now, .zero), accuracy: accuracy)
        fires = due
    }

    /// The handler will not run (until armed again).
    public func cancel() {
        due = nil
        guard !lazyCancel else { return }
        source?.disarm()
        fires = nil
    }

    /// Whether the handler is to run (armed and not cancelled).
    public var isArmed: Bool { due != nil }

    /// How late (µs) sd-event may fire the source, as its last arming set it.
    var timeAccuracy: UInt64? { source?.timeAccuracy }

    private func fired() {
        fires = nil  // a one-shot source is off once it fired
        guard let due else { return }  // cancelled since: it stays off
        let now = loop.now
        if now < due {
            source?.arm(after: due - now, accuracy: accuracy)
            fires = due
            return
        }
        self.due = nil
        handler()
    }
}

/// epoll event bits (Swift's Glibc module has no sys/epoll.h; these values are the kernel ABI).
public enum IOEvents {
    public static let readable: UInt32 = 0x001   // EPOLLIN
    public static let writable: UInt32 = 0x004   // EPOLLOUT
    public static let error: UInt32 = 0x008      // EPOLLERR
    public static let hangup: UInt32 = 0x010     // EPOLLHUP
}

/// One sd-event source and its Swift handler. Not Sendable: it lives and dies on the loop's thread.
public final class EventSource {
    enum Handler {
        case io((UInt32) -> Void)
        case timer(() -> Void)
        case child((Int32, Int32) -> Void)
        case signal(() -> Void)
    }

    fileprivate var pointer: OpaquePointer?
    private let handler: Handler
    private let epilogue: CallbackEpilogue
    /// For child sources: the pid and the loop's registry it is listed in, until cancelled.
    fileprivate var watchedChild: (pid: pid_t, registry: ChildRegistry)?

    fileprivate init(_ handler: Handler, _ epilogue: CallbackEpilogue) {
        self.handler = handler
        self.epilogue = epilogue
    }

    deinit { cancel() }

    fileprivate var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    fileprivate static func from(_ userdata: UnsafeMutableRawPointer?) -> EventSource {
        Unmanaged<EventSource>.fromOpaque(userdata!).takeUnretainedValue()
    }

    /// One callback from sd-event: `body` fires the source, then the loop's epilogue runs. The epilogue is
    /// taken first, as the callback may free the source.
    fileprivate static func dispatch(_ userdata: UnsafeMutableRawPointer?, _ body: (EventSource) -> Void) {
        let source = from(userdata)
        let epilogue = source.epilogue
        epilogue.dispatching = true
        body(source)
        epilogue.finish()
    }

    /// Disable and free the source; its handler is never called again.
    public func cancel() {
        if let pointer { sd_event_source_disable_unref(pointer) }
        pointer = nil
        if let (pid, registry) = watchedChild, registry.sources[pid]?.toOpaque() == Unmanaged.passUnretained(self).toOpaque() {
            registry.sources[pid] = nil
        }
        watchedChild = nil
    }

    /// For timers: fire once after `delay` from now, replacing any earlier arming. `accuracy`: how late it may
    /// fire, for a timer whose end is a promise (a grace time); else a twentieth of the delay.
    public func arm(after delay: Duration, accuracy: Duration? = nil) {
        guard let pointer else { return }
        let (seconds, attoseconds) = delay.components
        let usec = UInt64(max(0, seconds)) * 1_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000_000)
        // sd-event lets a timer fire up to its accuracy late so that wakeups coalesce, and its default accuracy is
        // far too coarse for the stop recheck: a twentieth of the delay instead, never coarser than that default.
        let slack = accuracy.map { UInt64(max(1, $0 / .microseconds(1))) } ?? min(250_000, max(1, usec / 20))
        _ = sd_event_source_set_time_accuracy(pointer, slack)
        _ = sd_event_source_set_time_relative(pointer, usec)
        _ = sd_event_source_set_enabled(pointer, Int32(SD_EVENT_ONESHOT))
    }

    /// For timers: how late (µs) sd-event may fire it, as `arm(after:)` set it.
    var timeAccuracy: UInt64? {
        guard let pointer else { return nil }
        var usec: UInt64 = 0
        return sd_event_source_get_time_accuracy(pointer, &usec) >= 0 ? usec : nil
    }

    /// For timers and I/O: stop firing until armed or enabled again.
    public func disarm() {
        guard let pointer else { return }
        _ = sd_event_source_set_enabled(pointer, Int32(SD_EVENT_OFF))
    }

    /// sd-event dispatches the pending source of the lowest priority value first (0, `SD_EVENT_PRIORITY_NORMAL`,
    /// for every source unless set); among equals, the one pending longest.
    public func setPriority(_ priority: Int64) {
        guard let pointer else { return }
        _ = sd_event_source_set_priority(pointer, priority)
    }

    /// For I/O and deferred sources: fire whenever ready (a deferred source: on every iteration) until disarmed.
    public func enable() {
        guard let pointer else { return }
        _ = sd_event_source_set_enabled(pointer, Int32(SD_EVENT_ON))
    }

    /// For I/O sources: change the events waited for (EPOLLIN, EPOLLOUT…).
    public func setEvents(_ events: UInt32) {
        guard let pointer else { return }
        _ = sd_event_source_set_io_events(pointer, events)
    }

    fileprivate func fire(revents: UInt32 = 0) {
        switch handler {
        case .io(let handler): handler(revents)
        case .timer(let handler), .signal(let handler): handler()
        case .child: break
        }
    }

    fileprivate func fire(code: Int32, status: Int32) {
        if case .child(let handler) = handler { handler(code, status) }
    }
}

/// What runs after the callback being dispatched (`EventLoop.afterCallback`).
final class CallbackEpilogue {
    var handlers: [() -> Void] = []
    var dispatching = false

    /// Runs the queued handlers, and those they queue, in order; then no callback is being dispatched.
    func finish() {
        var next = 0
        while next < handlers.count {
            let handler = handlers[next]
            next += 1
            handler()
        }
        handlers.removeAll(keepingCapacity: true)
        dispatching = false
    }
}

/// The loop's child sources by pid, unretained: a source leaves the registry when it is cancelled, and
/// freeing it cancels it.
final class ChildRegistry {
    var sources: [pid_t: Unmanaged<EventSource>] = [:]
}
