/// `Restart=`: what happens when the app's process exits on its own.
public enum RestartPolicy: String, Sendable, Equatable, CaseIterable {
    case no
    case onFailure = "on-failure"
    case always
}

/// The per-app knobs of the model. Defaults are modelled on iOS and systemd; the config maps keys onto this.
public struct AppPolicy: Sendable, Equatable {
    /// `Protocol=lifecycle` (true) or `none`: a program that speaks no protocol gets no messages
    /// and is managed with priorities and stops alone (like macOS App Nap).
    public var speaksProtocol = true
    /// `BackgroundTimeSec=`: time in the background before suspension; `nil` means never suspend on its own.
    /// iOS gives an app "about 5 seconds" after didEnterBackground unless it asks for more; we default to 10 s
    /// because Linux programs did not grow up expecting to be stopped.
    public var backgroundTime: Duration? = .seconds(10)
    /// `LaunchTimeoutSec=`: time to say hello and acknowledge didFinishLaunching (iOS's launch watchdog: 20 s).
    public var launchTimeout: Duration = .seconds(20)
    /// `AckTimeoutSec=`: deadline for every other callback (iOS: about 5 s for didEnterBackground).
    public var ackTimeout: Duration = .seconds(5)
    /// `TimeoutStopSec=`: between SIGTERM and SIGKILL.
    public var stopTimeout: Duration = .seconds(5)
    /// `Restart=`.
    public var restart: RestartPolicy = .no
    /// `RestartSec=`: first restart delay; it doubles with every start inside the start-limit interval.
    public var restartDelay: Duration = .milliseconds(100)
    /// `RestartMaxDelaySec=`: the cap of the doubling.
    public var restartMaxDelay: Duration = .seconds(30)
    /// `StartLimitBurst=` starts within `StartLimitIntervalSec=`, after which the app is `failed`.
    public var startLimitBurst = 5
    public var startLimitInterval: Duration = .seconds(10)
    /// `BackgroundTaskTimeSec=`: how long an app holding background tasks may run in the background,
    /// counted from entering it (UIKit's backgroundTimeRemaining starts at about 30 s).
    public var backgroundTaskTime: Duration = .seconds(30)
    /// `ExpirationWarningSec=`: how long before that time runs out the app gets `backgroundTimeWillExpire`.
    public var expirationWarning: Duration = .seconds(5)
    /// `BackgroundModes=`: UIKit's audio / voip / location modes: the app keeps running in the background
    /// (at background priority) and is never suspended for its grace time being over.
    public var backgroundModes: Set<String> = []
    /// `QueueLimit=`: the most payloads a `none` notification type keeps for the app while it sleeps.
    public var queueLimit = 64
    /// `[Scenes]`: the app uses UIKit's scene lifecycle; nil keeps the app-level lifecycle alone.
    public var scenes: ScenePolicy?
    /// `External=yes`: the daemon never starts the app; a process started by someone else attaches on the app
    /// socket (docs/PROTOCOL.md). Requests that would launch it are refused, and it is never restarted.
    public var external = false
    /// `OnlyOnBattery=yes`: suspended for its grace time only while the machine runs on battery; on external power
    /// it runs on in the background, and plugging in resumes it.
    public var onlyOnBattery = false
    /// `ResumeEverySec=`: a suspended app is resumed into the background this often (nil: never), so that it can
    /// keep its connections (xsuspender's resume_every); a protocol app gets `performFetch` (UIKit's background fetch).
    public var resumeEvery: Duration?
    /// `ResumeForSec=`: how long such a wake lasts before the app is suspended again (a protocol app: the deadline
    /// of its `performFetch`, or its ack, whichever comes first).
    public var resumeFor: Duration = .seconds(10)
    /// `Reclaim=`: once the app has been suspended for `reclaimAfter`, the daemon asks the kernel to take its memory
    /// out of RAM (into swap, compressed with zram), as iOS compresses a suspended app's memory and Android's
    /// CachedAppOptimizer compacts cached apps. The app faults its pages back in when it runs again.
    public var reclaim = true
    /// `ReclaimAfterSec=`: how long an app stays suspended before its memory is reclaimed. A resume before then costs
    /// nothing; the delay spares the apps a user switches straight back to (docs/CONFIG.md gives the measurement).
    public var reclaimAfter: Duration = .seconds(30)
    /// Adopted from the desktop (`[Adopt]`): a process someone else started and no file configures. Like an
    /// external app it is never launched nor restarted by the daemon, and it speaks no protocol.
    public var adopted = false

    public init() {}
}
