import CPulse
import Glibc

/// The daemon's client of the sound server (PulseAudio, or PipeWire's PulseAudio service): it subscribes to the
/// sink inputs (the playing streams) and reports the pids of those that play, from each stream's
/// `application.process.id`. It runs on the loop through `PulseMainloop`; nothing polls. Without a sound server it
/// says so and tries again, waiting twice as long each time, up to a minute. Nothing here logs.
final class SoundServer {
    /// Whom it talks to, for `lifectl status`.
    enum Link: Equatable {
        case connecting
        case connected
        /// No server: why, and when the next attempt comes.
        case unavailable(String, retryIn: Duration)
    }

    private let loop: EventLoop
    private let mainloop: PulseMainloop
    /// libpulse's server string (nil: `$PULSE_SERVER`, or libpulse's default).
    let server: String?
    private let playing: (Set<pid_t>) -> Void
    private let linkChanged: (Link) -> Void
    private var context: OpaquePointer?
    private var reconnection: Reconnection?
    private(set) var link = Link.connecting
    /// A listing of the sink inputs is under way; `stale`: a change came meanwhile, so another follows it.
    private var listing = false
    private var stale = false
    private var found: Set<pid_t> = []
    private(set) var playingPids: Set<pid_t> = []
    private var stopped = false

    /// Connects at the loop's next iteration; `playing` is called on the loop's thread with the pids whose streams play, whenever that
    /// set changes (empty when the server goes away); `linkChanged` when the connection comes or goes.
    init(loop: EventLoop, server: String?, playing: @escaping (Set<pid_t>) -> Void, linkChanged: @escaping (Link) -> Void = { _ in }) {
        self.loop = loop
        self.server = server
        self.playing = playing
        self.linkChanged = linkChanged
        mainloop = PulseMainloop(loop: loop)
        reconnection = try? Reconnection(loop: loop, first: .seconds(1), cap: .seconds(60)) { [unowned self] in self.connect() }
        // From the loop, not from here: the callbacks never run inside this initializer.
        reconnection?.now()
    }

    deinit { stop() }

    func stop() {
        guard !stopped else { return }
        stopped = true
        reconnection?.cancel()
        dropContext()
    }

    var description: String {
        let name = server ?? "the default sound server"
        switch link {
        case .connecting: return "audio: connecting to \(name)"
        case .connected: return "audio: \(name), \(playingPids.count) playing process\(playingPids.count == 1 ? "" : "es")"
        case .unavailable(let why, let retryIn):
            return "audio: off, no sound server (\(why)); retrying in \(describe(retryIn))"
        }
    }

    private var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    private static func from(_ userdata: UnsafeMutableRawPointer?) -> SoundServer {
        Unmanaged<SoundServer>.fromOpaque(userdata!).takeUnretainedValue()
    }

    private func connect() {
        guard !stopped else { return }
        dropContext()
        setLink(.connecting)
        guard let context = pa_context_new(mainloop.api, "lifecycled") else { return unavailable("pa_context_new failed") }
        self.context = context
        pa_context_set_state_callback(context, { context, userdata in
            SoundServer.from(userdata).stateChanged()
        }, userdata)
        // A failed connect may already have reported the failure through the state callback, which dropped the
        // context: only a context still held is asked why.
        if pa_context_connect(context, server, PA_CONTEXT_NOAUTOSPAWN, nil) < 0, self.context == context {
            unavailable(String(cString: pa_strerror(pa_context_errno(context))))
        }
    }

    private func stateChanged() {
        guard let context else { return }
        switch pa_context_get_state(context) {
        case PA_CONTEXT_READY:
            reconnection?.succeeded()
            setLink(.connected)
            pa_context_set_subscribe_callback(context, { _, type, _, userdata in
                let facility = type.rawValue & PA_SUBSCRIPTION_EVENT_FACILITY_MASK.rawValue
                if facility == PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue { SoundServer.from(userdata).list() }
            }, userdata)
            pa_operation_unref(pa_context_subscribe(context, PA_SUBSCRIPTION_MASK_SINK_INPUT, nil, nil))
            list()
        case PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED:
            unavailable(String(cString: pa_strerror(pa_context_errno(context))))
        default:
            break
        }
    }

    /// Reads every sink input anew: a change event says which stream changed, not whether it plays, and streams
    /// are few.
    private func list() {
        guard let context else { return }
        if listing {
            stale = true
            return
        }
        listing = true
        stale = false
        found = []
        let operation = pa_context_get_sink_input_info_list(context, { _, info, end, userdata in
            let server = SoundServer.from(userdata)
            if end != 0 { return server.listed() }
            guard let info, info.pointee.corked == 0,
                  let value = pa_proplist_gets(info.pointee.proplist, "application.process.id"),
                  let pid = pid_t(String(cString: value)), pid > 0 else { return }
            server.found.insert(pid)
        }, userdata)
        if let operation { pa_operation_unref(operation) } else { listing = false }
    }

    private func listed() {
        listing = false
        if stale { return list() }
        report(found)
    }

    private func report(_ pids: Set<pid_t>) {
        guard pids != playingPids else { return }
        playingPids = pids
        playing(pids)
    }

    private func unavailable(_ why: String) {
        dropContext()
        report([])
        let delay = reconnection?.schedule() ?? .zero
        setLink(.unavailable(why, retryIn: delay))
    }

    private func setLink(_ next: Link) {
        guard next != link else { return }
        link = next
        linkChanged(next)
    }

    private func dropContext() {
        guard let context else { return }
        self.context = nil
        listing = false
        pa_context_set_state_callback(context, nil, nil)
        pa_context_set_subscribe_callback(context, nil, nil)
        pa_context_disconnect(context)
        pa_context_unref(context)
    }
}
