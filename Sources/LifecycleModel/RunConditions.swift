// What keeps an app in the background from being suspended, as data: its declared background modes, a stream it
// plays (treated as the audio mode while it plays), and external power for an app that is only suspended on
// battery. The Supervisor asks `LifecycleRules.keepRunning` wherever it would let the grace time run.

/// Why an app in the background runs on when its grace time would suspend it.
public enum KeepRunningReason: String, Sendable, Equatable, CaseIterable {
    /// `BackgroundModes=` (audio, voip, location).
    case backgroundModes = "background modes"
    /// A stream of its processes plays on the sound server: `BackgroundModes=audio` while it plays.
    case playingAudio = "playing audio"
    /// `OnlyOnBattery=yes` and the machine is on external power.
    case externalPower = "on external power"
}

/// The facts about the machine that the keep-running rules read, reported by the daemon's sources.
public struct RunConditions: Sendable, Equatable {
    /// Apps with a playing (uncorked) stream on the sound server.
    public var playingAudio: Set<String> = []
    /// The machine runs on battery. False without a battery: such a machine is always on external power.
    public var onBattery = false

    public init(playingAudio: Set<String> = [], onBattery: Bool = false) {
        self.playingAudio = playingAudio
        self.onBattery = onBattery
    }
}

/// What a `performFetch` found, as its ack says (UIKit's UIBackgroundFetchResult).
public enum FetchResult: String, Sendable, Equatable, CaseIterable {
    case newData
    case noData
    case failed
}

extension LifecycleRules {
    /// Why `app` runs on in the background instead of being suspended for its grace time (nil: nothing keeps it).
    /// The first reason that applies, in the order of `KeepRunningReason`.
    public static func keepRunning(_ app: String, policy: AppPolicy, conditions: RunConditions) -> KeepRunningReason? {
        if !policy.backgroundModes.isEmpty { return .backgroundModes }
        if conditions.playingAudio.contains(app) { return .playingAudio }
        if policy.onlyOnBattery, !conditions.onBattery { return .externalPower }
        return nil
    }

    /// The background modes the app has now: its declared ones, and audio while it plays.
    public static func effectiveBackgroundModes(_ app: String, policy: AppPolicy, conditions: RunConditions) -> Set<String> {
        conditions.playingAudio.contains(app) ? policy.backgroundModes.union(["audio"]) : policy.backgroundModes
    }

    /// A suspended app that the change of conditions resumes: plugging in resumes an app only suspended on battery.
    static func resumes(_ policy: AppPolicy, from old: RunConditions, to new: RunConditions) -> Bool {
        policy.onlyOnBattery && old.onBattery && !new.onBattery
    }
}
