import CPulse
import Glibc

/// libpulse's `pa_mainloop_api` on the daemon's sd-event loop: each io, time and defer event of libpulse is an
/// `EventSource` of the loop, so the sound-server client needs no thread of its own and never polls. libpulse
/// calls these functions only from callbacks of the loop (or from the client's own calls, on the loop's thread).
final class PulseMainloop {
    let loop: EventLoop
    /// The table libpulse calls through; its address is what `pa_context_new` keeps, so it lives as long as this.
    let api: UnsafeMutablePointer<pa_mainloop_api>

    init(loop: EventLoop) {
        self.loop = loop
        api = .allocate(capacity: 1)
        api.initialize(to: pa_mainloop_api(
            userdata: nil,
            io_new: { api, fd, events, callback, userdata in
                PulseMainloop.from(api).newIO(fd: fd, events: events, callback: callback, userdata: userdata)
            },
            io_enable: { event, events in PulseIO.from(event).enable(events) },
            io_free: { event in PulseIO.release(event) },
            io_set_destroy: { event, destroy in PulseIO.from(event).destroy = destroy },
            time_new: { api, time, callback, userdata in
                PulseMainloop.from(api).newTime(time, callback: callback, userdata: userdata)
            },
            time_restart: { event, time in PulseTime.from(event).restart(time) },
            time_free: { event in PulseTime.release(event) },
            time_set_destroy: { event, destroy in PulseTime.from(event).destroy = destroy },
            defer_new: { api, callback, userdata in
                PulseMainloop.from(api).newDefer(callback: callback, userdata: userdata)
            },
            defer_enable: { event, on in PulseDefer.from(event).enable(on != 0) },
            defer_free: { event in PulseDefer.release(event) },
            defer_set_destroy: { event, destroy in PulseDefer.from(event).destroy = destroy },
            // The daemon's loop is not libpulse's to stop.
            quit: { _, _ in }))
        api.pointee.userdata = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        api.deinitialize(count: 1)
        api.deallocate()
    }

    fileprivate static func from(_ api: UnsafeMutablePointer<pa_mainloop_api>?) -> PulseMainloop {
        Unmanaged<PulseMainloop>.fromOpaque(api!.pointee.userdata).takeUnretainedValue()
    }

    private func newIO(fd: Int32, events: pa_io_event_flags_t, callback: pa_io_event_cb_t?,
                       userdata: UnsafeMutableRawPointer?) -> OpaquePointer? {
        let event = PulseIO(api: api, fd: fd, callback: callback, userdata: userdata)
        let handle = OpaquePointer(Unmanaged.passRetained(event).toOpaque())
        event.handle = handle
        event.source = try? loop.watch(fd: fd, events: PulseIO.epoll(events)) { [unowned event] revents in
            event.fired(revents)
        }
        if event.source == nil || events.rawValue == 0 { event.source?.disarm() }
        return handle
    }

    private func newTime(_ time: UnsafePointer<timeval>?, callback: pa_time_event_cb_t?,
                         userdata: UnsafeMutableRawPointer?) -> OpaquePointer? {
        let event = PulseTime(api: api, callback: callback, userdata: userdata)
        let handle = OpaquePointer(Unmanaged.passRetained(event).toOpaque())
        event.handle = handle
        event.source = try? loop.timer { [unowned event] in event.fired() }
        event.restart(time)
        return handle
    }

    private func newDefer(callback: pa_defer_event_cb_t?, userdata: UnsafeMutableRawPointer?) -> OpaquePointer? {
        let event = PulseDefer(api: api, callback: callback, userdata: userdata)
        let handle = OpaquePointer(Unmanaged.passRetained(event).toOpaque())
        event.handle = handle
        event.source = try? loop.deferred { [unowned event] in event.fired() }
        event.enable(true)
        return handle
    }
}

/// One of libpulse's io events: an I/O source of the loop, enabled for the events libpulse asks for.
private final class PulseIO {
    let api: UnsafeMutablePointer<pa_mainloop_api>
    let fd: Int32
    let callback: pa_io_event_cb_t?
    let userdata: UnsafeMutableRawPointer?
    var destroy: pa_io_event_destroy_cb_t?
    var source: EventSource?
    var handle: OpaquePointer?

    init(api: UnsafeMutablePointer<pa_mainloop_api>, fd: Int32, callback: pa_io_event_cb_t?, userdata: UnsafeMutableRawPointer?) {
        self.api = api
        self.fd = fd
        self.callback = callback
        self.userdata = userdata
    }

    static func from(_ handle: OpaquePointer?) -> PulseIO {
        Unmanaged<PulseIO>.fromOpaque(UnsafeRawPointer(handle!)).takeUnretainedValue()
    }

    static func release(_ handle: OpaquePointer?) {
        let event = Unmanaged<PulseIO>.fromOpaque(UnsafeRawPointer(handle!))
        let io = event.takeUnretainedValue()
        io.source?.cancel()
        io.destroy?(io.api, handle, io.userdata)
        event.release()
    }

    static func epoll(_ events: pa_io_event_flags_t) -> UInt32 {
        var mask: UInt32 = 0
        if events.rawValue & PA_IO_EVENT_INPUT.rawValue != 0 { mask |= IOEvents.readable }
        if events.rawValue & PA_IO_EVENT_OUTPUT.rawValue != 0 { mask |= IOEvents.writable }
        return mask
    }

    func enable(_ events: pa_io_event_flags_t) {
        let mask = Self.epoll(events)
        guard let source else { return }
        if mask == 0 {
            source.disarm()
        } else {
            source.setEvents(mask)
            source.enable()
        }
    }

    func fired(_ revents: UInt32) {
        var flags: UInt32 = 0
        if revents & IOEvents.readable != 0 { flags |= PA_IO_EVENT_INPUT.rawValue }
        if revents & IOEvents.writable != 0 { flags |= PA_IO_EVENT_OUTPUT.rawValue }
        if revents & IOEvents.hangup != 0 { flags |= PA_IO_EVENT_HANGUP.rawValue }
        if revents & IOEvents.error != 0 { flags |= PA_IO_EVENT_ERROR.rawValue }
        callback?(api, handle, fd, pa_io_event_flags_t(rawValue: flags), userdata)
    }
}

/// One of libpulse's time events: a timer of the loop, armed for the absolute time libpulse gives.
private final class PulseTime {
    let api: UnsafeMutablePointer<pa_mainloop_api>
    let callback: pa_time_event_cb_t?
    let userdata: UnsafeMutableRawPointer?
    var destroy: pa_time_event_destroy_cb_t?
    var source: EventSource?
    var handle: OpaquePointer?
    /// The time libpulse asked for, handed back to its callback.
    var due = timeval()

    /// libpulse marks a time on the monotonic clock with this bit in `tv_usec` (pa_timeval_rtstore); without it
    /// the time is on the wall clock.
    static let monotonicFlag = 1 << 30

    init(api: UnsafeMutablePointer<pa_mainloop_api>, callback: pa_time_event_cb_t?, userdata: UnsafeMutableRawPointer?) {
        self.api = api
        self.callback = callback
        self.userdata = userdata
    }

    static func from(_ handle: OpaquePointer?) -> PulseTime {
        Unmanaged<PulseTime>.fromOpaque(UnsafeRawPointer(handle!)).takeUnretainedValue()
    }

    static func release(_ handle: OpaquePointer?) {
        let event = Unmanaged<PulseTime>.fromOpaque(UnsafeRawPointer(handle!))
        let time = event.takeUnretainedValue()
        time.source?.cancel()
        time.destroy?(time.api, handle, time.userdata)
        event.release()
    }

    /// Arm for `time` (nil: disarm).
    func restart(_ time: UnsafePointer<timeval>?) {
        guard let time, let source else {
            source?.disarm()
            return
        }
        due = time.pointee
        var target = time.pointee
        let monotonic = target.tv_usec & Self.monotonicFlag != 0
        if monotonic { target.tv_usec &= ~Self.monotonicFlag }
        var now = timespec()
        clock_gettime(monotonic ? CLOCK_MONOTONIC : CLOCK_REALTIME, &now)
        let delayUs = (Int64(target.tv_sec) - Int64(now.tv_sec)) * 1_000_000 + Int64(target.tv_usec) - Int64(now.tv_nsec) / 1000
        source.arm(after: .microseconds(max(0, delayUs)))
    }

    func fired() {
        var time = due
        callback?(api, handle, &time, userdata)
    }
}

/// One of libpulse's defer events: called on every iteration of the loop while enabled.
private final class PulseDefer {
    let api: UnsafeMutablePointer<pa_mainloop_api>
    let callback: pa_defer_event_cb_t?
    let userdata: UnsafeMutableRawPointer?
    var destroy: pa_defer_event_destroy_cb_t?
    var source: EventSource?
    var handle: OpaquePointer?

    init(api: UnsafeMutablePointer<pa_mainloop_api>, callback: pa_defer_event_cb_t?, userdata: UnsafeMutableRawPointer?) {
        self.api = api
        self.callback = callback
        self.userdata = userdata
    }

    static func from(_ handle: OpaquePointer?) -> PulseDefer {
        Unmanaged<PulseDefer>.fromOpaque(UnsafeRawPointer(handle!)).takeUnretainedValue()
    }

    static func release(_ handle: OpaquePointer?) {
        let event = Unmanaged<PulseDefer>.fromOpaque(UnsafeRawPointer(handle!))
        let deferred = event.takeUnretainedValue()
        deferred.source?.cancel()
        deferred.destroy?(deferred.api, handle, deferred.userdata)
        event.release()
    }

    func enable(_ on: Bool) {
        if on { source?.enable() } else { source?.disarm() }
    }

    func fired() { callback?(api, handle, userdata) }
}
