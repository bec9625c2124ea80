import Glibc
import LifecycleModel

/// The daemon's owner of the sound-server rail: it runs the `SoundServer` client when `[Sources] Audio=yes`, maps
/// the pids of the playing streams to apps by the display's window-to-app rule (`ProcessOwners`), and feeds the set of playing apps to the model, which treats them as
/// `BackgroundModes=audio` while they play.
final class AudioFollower {
    private unowned let host: any DaemonHost
    private let loop: EventLoop
    private var server: SoundServer?
    private var config: (enabled: Bool, server: String?, silence: Duration?)?
    private var reportedApps: Set<String> = []
    /// The owner of each stream's process, kept while the apps stay the same.
    private let owners = ProcessOwners()

    init(loop: EventLoop, host: any DaemonHost) {
        self.loop = loop
        self.host = host
    }

    /// Start, stop or restart the client for `[Sources]` (`Audio=`, `AudioServer=`, `AudioSilenceSec=`); nothing when they did not
    /// change.
    func apply(_ sources: SourcesConfig) {
        guard config == nil || config! != (sources.audio, sources.audioServer, sources.audioSilence) else { return }
        config = (sources.audio, sources.audioServer, sources.audioSilence)
        server?.stop()
        server = nil
        if sources.audio {
            server = SoundServer(loop: loop, server: sources.audioServer, silenceBound: sources.audioSilence,
                                 playing: { [unowned self] pids in self.playing(pids) },
                                 linkChanged: { [unowned self] _ in
                                     if let line = self.server?.description { Log.info(line) }
                                 })
        } else {
            playing([])
        }
    }

    func stop() {
        server?.stop()
        server = nil
    }

    /// For `lifectl status` and the log.
    var description: String {
        guard let server else { return "audio: off (Audio=no)" }
        let names = reportedApps.sorted()
        return server.description + (names.isEmpty ? "" : " (\(names.joined(separator: ", ")))")
    }

    private func playing(_ pids: Set<pid_t>) {
        owners.update(from: host)
        let apps = Set(pids.compactMap { owners.owner(of: $0) })
        guard apps != reportedApps else { return }
        reportedApps = apps
        host.handle(.audio(playing: apps))
    }
}
