import Testing

/// What the audio tests need of a sound server, so that one test runs against PulseAudio (`PulseServer`) and
/// PipeWire's PulseAudio service (`PipeWireServer`) alike.
protocol SoundServerHarness: AnyObject {
    /// libpulse's server string.
    var address: String { get }
    /// Starts the server and waits until it plays streams.
    func start() throws
    /// How many sink inputs (streams) the server has, as `pactl` lists them.
    func sinkInputs() throws -> Int
    func stop()
}

/// The sound servers the audio tests are run against.
enum SoundServerKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case pulseAudio = "PulseAudio"
    case pipeWire = "PipeWire"

    var testDescription: String { rawValue }

    /// A new server of this kind, started.
    func start() throws -> any SoundServerHarness {
        let server: any SoundServerHarness = switch self {
        case .pulseAudio: try PulseServer()
        case .pipeWire: try PipeWireServer()
        }
        try server.start()
        return server
    }
}
