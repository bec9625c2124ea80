import Glibc
import LifecycleModel

/// The daemon's owner of the sound-server rail: it runs the `SoundServer` client when `[Sources] Audio=yes`, maps
/// the pids of the playing streams to apps by the display's window-to-app rule (the app's process tree as placement
/// finds it, or its session), and feeds the set of playing apps to the model, which treats them as
/// `BackgroundModes=audio` while they play.
final class AudioFollower {
    private unowned let host: any DaemonHost
    private let placement: any ProcessPlacement
    private let loop: EventLoop
    private var server: SoundServer?
    private var config: (enabled: Bool, server: String?)?
    private var reportedApps: Set<String> = []

    init(loop: EventLoop, host: any DaemonHost, placement: any ProcessPlacement) {
        self.loop = loop
        self.host = host
        self.placement = placement
    }

    /// Start, stop or restart the client for `[Sources]` (`Audio=`, `AudioServer=`); nothing when they did not
    /// change.
    func apply(_ sources: SourcesConfig) {
        guard config == nil || config! != (sources.audio, sources.audioServer) else { return }
        config = (sources.audio, sources.audioServer)
        server?.stop()
        server = nil
        if sources.audio {
            server = SoundServer(loop: loop, server: sources.audioServer,
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
        var apps: Set<String> = []
        for name in host.appNames {
            guard let runtime = host.runtime(name), let leader = runtime.pid,
                  host.withRecord(name, { $0.state.isRunning }) == true else { continue }
            let members = Set(placement.members(of: runtime))
            if pids.contains(where: { members.contains($0) || DisplayFollower.session(of: $0) == leader }) {
                apps.insert(name)
            }
        }
        guard apps != reportedApps else { return }
        reportedApps = apps
        host.audioChanged(playing: apps)
    }
}
