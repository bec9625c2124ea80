import CPulse
import CSupport
import Glibc

/// The daemon's client of the sound server (PulseAudio, or PipeWire's PulseAudio service): it subscribes to the
/// sink inputs (the playing streams) and their clients, and reports the pids of those that play: a client's
/// `application.process.id`, which the client writes itself, counts only when the kernel bears it out
/// (`ServerPeers`). It runs on the loop through `PulseMainloop`; nothing polls. Without a sound server it says so and
/// waits: for the server's socket to appear in its directory (inotify) when that socket is not there, else (a
/// socket that refuses, a server not on a socket) tries again, waiting twice as long each time, up to a minute.
/// Nothing here logs.
final class SoundServer {
    /// Whom it talks to, for `lifectl status`.
    enum Link: Equatable {
        case connecting
        case connected
        /// No server: why, and what brings the next attempt.
        case unavailable(String, next: ReconnectingSource.NextAttempt)
    }


    private let loop: EventLoop
    private let mainloop: PulseMainloop
    /// libpulse's server string (nil: `$PULSE_SERVER`, or libpulse's default).
    let server: String?
    private let playing: (Set<pid_t>) -> Void
    private let linkChanged: (Link) -> Void
    private var context: OpaquePointer?
    private lazy var reconnection = ReconnectingSource(loop: loop, name: "audio", first: .seconds(1), cap: .seconds(60)) { [unowned self] in self.connect() }
    private(set) var link = Link.connecting
    /// A listing of the sink inputs is under way; `stale`: a change came meanwhile, so another follows it.
    private var listing = false
    private var stale = false
    /// What the listing under way found: each client's claimed pid, and the clients of the streams that play.
    private var claims: [UInt32: pid_t] = [:]
    /// The uncorked streams: sink input index → client index.
    private var playingStreams: [UInt32: UInt32] = [:]
    /// The last listing's confirmed streams and their pids, kept for a monitor's verdict to be applied to.
    private var confirmedStreams: [UInt32: pid_t] = [:]
    /// How long a stream may play only silence and still count (nil: levels are not read).
    let silenceBound: Duration?
    /// The level monitor of each confirmed stream, by sink input index, when `silenceBound` is set.
    private var monitors: [UInt32: LevelMonitor] = [:]
    private(set) var playingPids: Set<pid_t> = []
    /// Playing streams whose claimed process the kernel does not bear out, left out of `playingPids`.
    private(set) var unconfirmedStreams = 0
    /// The kernel's view of the connected server's clients; nil when the server is not on a socket file.
    private var peers: ServerPeers?
    private var stopped = false

    /// Connects at the loop's next iteration; `playing` is called on the loop's thread with the pids whose streams play, whenever that
    /// set changes (empty when the server goes away); `linkChanged` when the connection comes or goes.
    init(loop: EventLoop, server: String?, silenceBound: Duration? = nil, playing: @escaping (Set<pid_t>) -> Void, linkChanged: @escaping (Link) -> Void = { _ in }) {
        self.loop = loop
        self.server = server
        self.silenceBound = silenceBound
        self.playing = playing
        self.linkChanged = linkChanged
        mainloop = PulseMainloop(loop: loop)
        // From the loop, not from here: the callbacks never run inside this initializer.
        reconnection.now()
    }

    deinit { stop() }

    func stop() {
        guard !stopped else { return }
        stopped = true
        reconnection.cancel()
        dropContext()
    }

    var description: String {
        let name = server ?? "the default sound server"
        switch link {
        case .connecting: return "audio: connecting to \(name)"
        case .connected:
            let unconfirmed = unconfirmedStreams == 0 ? ""
                : ", \(unconfirmedStreams) playing stream\(unconfirmedStreams == 1 ? "" : "s") of an unconfirmed process"
            return "audio: \(name), \(playingPids.count) playing process\(playingPids.count == 1 ? "" : "es")\(unconfirmed)"
        case .unavailable(let why, .after(let delay)):
            return "audio: off, no sound server (\(why)); retrying in \(describe(delay))"
        case .unavailable(let why, .whenSocketAppears(let path)):
            return "audio: off, no sound server (\(why)); waiting for \(path) to appear"
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
            reconnection.succeeded()
            peers = serverSocket.flatMap { ServerPeers(socketPath: $0) }
            if peers != nil { askServerName() }
            setLink(.connected)
            pa_context_set_subscribe_callback(context, { _, type, _, userdata in
                let facility = type.rawValue & PA_SUBSCRIPTION_EVENT_FACILITY_MASK.rawValue
                if facility == PA_SUBSCRIPTION_EVENT_SINK_INPUT.rawValue || facility == PA_SUBSCRIPTION_EVENT_CLIENT.rawValue {
                    SoundServer.from(userdata).list()
                }
            }, userdata)
            // Clients too: a client may change the pid it claims, and a new client may claim one already claimed.
            let mask = PA_SUBSCRIPTION_MASK_SINK_INPUT.rawValue | PA_SUBSCRIPTION_MASK_CLIENT.rawValue
            pa_operation_unref(pa_context_subscribe(context, pa_subscription_mask_t(rawValue: mask), nil, nil))
            list()
        case PA_CONTEXT_FAILED, PA_CONTEXT_TERMINATED:
            unavailable(String(cString: pa_strerror(pa_context_errno(context))))
        default:
            break
        }
    }

    /// The connected server's socket file, when it is on one.
    private var serverSocket: String? {
        context.flatMap { pa_context_get_server($0) }.flatMap { ServerPeers.socketPath(inServerString: String(cString: $0)) }
    }

    /// Asks the server's name before the first listing, whose answers then come after this one's (a context's
    /// replies come in the order asked).
    private func askServerName() {
        guard let context else { return }
        let operation = pa_context_get_server_info(context, { _, info, userdata in
            guard let name = info?.pointee.server_name else { return }
            SoundServer.from(userdata).named(String(cString: name))
        }, userdata)
        if let operation { pa_operation_unref(operation) }
    }

    /// PipeWire's PulseAudio service ("PulseAudio (on PipeWire VERSION)") lists PipeWire's own clients too: their
    /// connections to PipeWire's socket count as connections to the server, so that their streams are confirmed
    /// as the others are.
    private func named(_ name: String) {
        guard name.contains("on PipeWire"), let socket = serverSocket,
              let pipeWire = ServerPeers.pipeWireSocket(besidePulseSocket: socket) else { return }
        peers?.addSocket(pipeWire)
    }

    /// Reads every client and sink input anew: a change event says which one changed, not whether it plays or
    /// whom it claims, and clients and streams are few.
    private func list() {
        guard let context else { return }
        if listing {
            stale = true
            return
        }
        listing = true
        stale = false
        claims = [:]
        playingStreams = [:]
        let operation = pa_context_get_client_info_list(context, { _, info, end, userdata in
            let server = SoundServer.from(userdata)
            if end != 0 { return server.listStreams() }
            guard let info, let value = pa_proplist_gets(info.pointee.proplist, "application.process.id"),
                  let pid = pid_t(String(cString: value)), pid > 0 else { return }
            server.claims[info.pointee.index] = pid
        }, userdata)
        if let operation { pa_operation_unref(operation) } else { listing = false }
    }

    private func listStreams() {
        guard let context, listing else { return }
        let operation = pa_context_get_sink_input_info_list(context, { _, info, end, userdata in
            let server = SoundServer.from(userdata)
            if end != 0 { return server.listed() }
            guard let info, info.pointee.corked == 0 else { return }
            server.playingStreams[info.pointee.index] = info.pointee.client
        }, userdata)
        if let operation { pa_operation_unref(operation) } else { listing = false }
    }

    private func listed() {
        listing = false
        if stale { return list() }
        let confirmed = peers?.confirmed(claims) ?? []
        confirmedStreams = [:]
        var unconfirmed = 0
        for (stream, client) in playingStreams {
            if let pid = claims[client], confirmed.contains(pid) { confirmedStreams[stream] = pid } else { unconfirmed += 1 }
        }
        unconfirmedStreams = unconfirmed
        if let silenceBound, let context {
            for (stream, monitor) in monitors where confirmedStreams[stream] == nil {
                monitor.close()
                monitors[stream] = nil
            }
            for stream in confirmedStreams.keys where monitors[stream] == nil {
                monitors[stream] = LevelMonitor(context: context, sinkInput: stream, bound: silenceBound) { [unowned self] in
                    self.reportConfirmed()
                }
            }
        }
        reportConfirmed()
    }

    /// The pids of the confirmed streams that are not silent past the bound.
    private func reportConfirmed() {
        var pids: Set<pid_t> = []
        for (stream, pid) in confirmedStreams where monitors[stream]?.silent != true { pids.insert(pid) }
        report(pids)
    }

    private func report(_ pids: Set<pid_t>) {
        guard pids != playingPids else { return }
        playingPids = pids
        playing(pids)
    }

    private func unavailable(_ why: String) {
        dropContext()
        unconfirmedStreams = 0
        report([])
        // AudioFollower reports the link, so the loss is not logged here.
        setLink(.unavailable(why, next: reconnection.failed(nil, socket: expectedSocket)))
    }

    /// The socket libpulse is to connect to, when the server string is a path: `server`, else `$PULSE_SERVER`,
    /// else the user's server in `$PULSE_RUNTIME_PATH` or `$XDG_RUNTIME_DIR/pulse`, else the system-wide server's
    /// (libpulse's last default, PulseAudio's system mode), which a system service without a user's environment
    /// waits for.
    static let systemSocket = "/run/pulse/native"

    private var expectedSocket: String? {
        if let server { return ServerPeers.socketPath(inServerString: server) }
        let environment = { (name: String) in getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        if let server = environment("PULSE_SERVER") { return ServerPeers.socketPath(inServerString: server) }
        if let runtime = environment("PULSE_RUNTIME_PATH") { return runtime + "/native" }
        return environment("XDG_RUNTIME_DIR").map { $0 + "/pulse/native" } ?? Self.systemSocket
    }

    private func setLink(_ next: Link) {
        guard next != link else { return }
        link = next
        linkChanged(next)
    }

    private func dropContext() {
        guard let context else { return }
        self.context = nil
        peers = nil
        for monitor in monitors.values { monitor.close() }
        monitors = [:]
        confirmedStreams = [:]
        listing = false
        pa_context_set_state_callback(context, nil, nil)
        pa_context_set_subscribe_callback(context, nil, nil)
        pa_context_disconnect(context)
        pa_context_unref(context)
    }
}

/// The level of one sink input, from a peak-detecting record stream on its sink's monitor at one reading a second
/// (`PA_STREAM_PEAK_DETECT`: the server sends the peak of each second, not the samples). A stream is silent once
/// every reading for `bound` was zero; the first non-zero reading makes it sound again. It counts as sounding
/// from its start, so a stream is never let go sooner than `bound`.
private final class LevelMonitor {
    private var stream: OpaquePointer?
    private let bound: Duration
    private let changed: () -> Void
    private var lastSound = ContinuousClock.now
    private(set) var silent = false

    init(context: OpaquePointer, sinkInput: UInt32, bound: Duration, changed: @escaping () -> Void) {
        self.bound = bound
        self.changed = changed
        var spec = pa_sample_spec(format: PA_SAMPLE_FLOAT32LE, rate: 1, channels: 1)
        guard let stream = pa_stream_new(context, "lifecycled level", &spec, nil) else { return }
        self.stream = stream
        pa_stream_set_monitor_stream(stream, sinkInput)
        pa_stream_set_read_callback(stream, { stream, _, userdata in
            Unmanaged<LevelMonitor>.fromOpaque(userdata!).takeUnretainedValue().read()
        }, Unmanaged.passUnretained(self).toOpaque())
        // One reading per fragment, so that each arrives when the server has it.
        var attributes = pa_buffer_attr(maxlength: UInt32.max, tlength: UInt32.max, prebuf: UInt32.max,
                                        minreq: UInt32.max, fragsize: UInt32(MemoryLayout<Float>.size))
        let flags = PA_STREAM_DONT_MOVE.rawValue | PA_STREAM_PEAK_DETECT.rawValue | PA_STREAM_ADJUST_LATENCY.rawValue
        if pa_stream_connect_record(stream, nil, &attributes, pa_stream_flags_t(rawValue: flags)) < 0 { close() }
    }

    func close() {
        guard let stream else { return }
        self.stream = nil
        pa_stream_set_read_callback(stream, nil, nil)
        pa_stream_disconnect(stream)
        pa_stream_unref(stream)
    }

    private func read() {
        var sound = false
        while let stream, pa_stream_readable_size(stream) > 0 {
            var data: UnsafeRawPointer?
            var length = 0
            guard pa_stream_peek(stream, &data, &length) == 0, length > 0 else { break }
            if let data {
                for offset in stride(from: 0, to: length - 3, by: 4) {
                    let bits = UInt32(littleEndian: data.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
                    if Float(bitPattern: bits) != 0 { sound = true }
                }
            }
            pa_stream_drop(stream)
        }
        let now = ContinuousClock.now
        if sound { lastSound = now }
        let nowSilent = now - lastSound >= bound
        guard nowSilent != silent else { return }
        silent = nowSilent
        changed()
    }
}
