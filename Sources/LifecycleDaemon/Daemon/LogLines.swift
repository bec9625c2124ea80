import Glibc
import LifecycleModel

/// One log record: its journal event (nil for a plain line), its level, its message, and its structured fields
/// (docs/JOURNAL.md). Built by pure functions, written by `Log.record`.
struct LogLine {
    var event: JournalEvent?
    var level: Log.Level
    var message: String
    var fields: [(String, String)] = []
}

/// The words and fields of the daemon's records about apps: a note the model returned, and a transition.
/// Pure, so that each line is a unit test.
enum LogLines {
    /// The record for `note` about app `app`: everything the line says comes with the note, and the pid of its
    /// process where the line names it.
    static func line(app name: String, note: Note, pid: pid_t? = nil) -> LogLine {
        switch note {
        case .deadlineMissed(let callback, let id, let limit, let misses):
            return LogLine(event: .deadlineMissed, level: .warning,
                           message: "\(name): \(callback.rawValue) (id \(id)) was not acknowledged within \(describe(limit)); going on (\(misses) missed so far)",
                           fields: [("LIFECYCLE_APP", name), ("LIFECYCLE_CALLBACK", callback.rawValue), ("LIFECYCLE_MISSES", String(misses))])
        case .launchWatchdog(let limit):
            return LogLine(event: .deadlineMissed, level: .error,
                           message: "\(name): did not finish launching within \(describe(limit)); killing it (launch watchdog)",
                           fields: [("LIFECYCLE_APP", name), ("LIFECYCLE_CALLBACK", "didFinishLaunching"), ("LIFECYCLE_REASON", "launch watchdog")])
        case .noHello(let limit):
            return LogLine(level: .notice, message: "\(name): no hello within \(describe(limit)); managing it without messages")
        case .restartScheduled(let delay, let attempt, let burst, let interval):
            return LogLine(event: .restart, level: .notice,
                           message: "\(name): restarting in \(describe(delay)) (start \(attempt) of at most \(burst) within \(describe(interval)))",
                           fields: [("LIFECYCLE_APP", name), ("LIFECYCLE_RESTART_DELAY_USEC", String(milliseconds(delay) * 1000)),
                                    ("LIFECYCLE_ATTEMPT", String(attempt))])
        case .startLimitHit(let starts, let within):
            return LogLine(event: .startLimit, level: .error,
                           message: "\(name): started \(starts) times within \(describe(within)); giving up, it stays failed until `lifectl launch \(name)`",
                           fields: [("LIFECYCLE_APP", name), ("LIFECYCLE_STARTS", String(starts))])
        case .stoppedExternally:
            return LogLine(level: .notice, message: "\(name): its process was stopped by someone else; now suspended")
        case .continuedExternally:
            return LogLine(level: .notice, message: "\(name): its process was continued by someone else; now in the background")
        case .readopted(let state):
            let pid = pid.map(String.init) ?? "?"
            return LogLine(event: .launch, level: .notice,
                           message: "\(name): re-adopted process \(pid) in state \(state.rawValue) from the previous lifecycled",
                           fields: [("LIFECYCLE_APP", name), ("LIFECYCLE_PID", pid), ("LIFECYCLE_LAUNCHED_BY", "re-adoption"),
                                    ("LIFECYCLE_TO", state.rawValue)])
        case .adoptedRunning:
            return LogLine(level: .notice, message: "\(name): saved as suspended, but its processes run; taking it back in the background")
        case .adoptedStopped(let saved):
            return LogLine(level: .notice, message: "\(name): saved as \(saved.rawValue), but its processes are stopped (the previous lifecycled died mid-suspension); continuing them")
        case .spawnFailed(let reason):
            return LogLine(level: .error, message: "\(name): Failed to start: \(reason)")
        case .killTimeout(let limit):
            return LogLine(level: .warning, message: "\(name): did not exit within \(describe(limit)) of SIGTERM; sending SIGKILL")
        case .taskOverrun(let tasks, let limit, let overruns):
            return LogLine(level: .warning,
                           message: "\(name): background tasks still open when their \(describe(limit)) ran out: \(tasks.joined(separator: ", ")); suspending it anyway (\(overruns) overruns so far)")
        case .tasksAbandoned(let tasks):
            return LogLine(level: .notice, message: "\(name): suspended with background tasks open: \(tasks.joined(separator: ", "))")
        case .memoryWarning(let count):
            return LogLine(level: .warning, message: "Memory pressure: sent didReceiveMemoryWarning to \(count) apps")
        case .terminatedForMemory(let bytes):
            return LogLine(event: .memoryTermination, level: .warning,
                           message: "\(name): terminated while suspended to relieve memory pressure (jetsam)" + (bytes.map { ", \($0 / 1024) KiB resident" } ?? ""),
                           fields: [("LIFECYCLE_APP", name), ("LIFECYCLE_REASON", "memory pressure")]
                               + (bytes.map { [("LIFECYCLE_RSS_BYTES", String($0))] } ?? []))
        case .nothingToTerminate:
            return LogLine(level: .warning, message: "Memory pressure persists, and no suspended app is left to terminate")
        case .messageDeadlineMissed(let message, let id, let limit, let misses):
            return LogLine(event: .deadlineMissed, level: .warning,
                           message: "\(name): \(message) (id \(id)) was not acknowledged within \(describe(limit)); going on (\(misses) missed so far)",
                           fields: [("LIFECYCLE_APP", name), ("LIFECYCLE_CALLBACK", message), ("LIFECYCLE_MISSES", String(misses))])
        case .sceneTransition(let scene, let from, let to, let reason):
            let fromName = from?.rawValue ?? "disconnected", toName = to?.rawValue ?? "disconnected"
            return LogLine(event: .transition, level: .info, message: "\(name)/\(scene): \(fromName) → \(toName) (\(reason))",
                           fields: [("LIFECYCLE_APP", name), ("LIFECYCLE_SCENE", scene), ("LIFECYCLE_FROM", fromName),
                                    ("LIFECYCLE_TO", toName), ("LIFECYCLE_REASON", reason)])
        case .unknownSceneConfiguration(let scene, let asked, let used):
            return LogLine(level: .warning,
                           message: "\(name)/\(scene): configurationForConnecting answered '\(asked)', which its [Scenes] does not declare for the role; using '\(used)'")
        case .scenesDiscarded(let scenes):
            return LogLine(level: .info, message: "\(name): discarded scene session\(scenes.count == 1 ? "" : "s") \(scenes.joined(separator: ", "))")
        case .sceneSessionReclaimed(let scene, let limit):
            return LogLine(level: .notice,
                           message: "\(name)/\(scene): discarding this least recently used disconnected scene session to make room for a new one (MaxSceneSessions=\(limit))")
        case .sceneSessionCreated(let scene, let role):
            return LogLine(level: .info, message: "\(name)/\(scene): new scene session (role \(role))")
        case .savedStateTooLarge(let scene, let size, let limit):
            return LogLine(level: .warning,
                           message: "\(name)/\(scene): the state saved at sceneDidEnterBackground is about \(size) bytes of JSON, over \(limit); keeping the one saved before")
        case .backgroundWake(let length):
            return LogLine(level: .info, message: "\(name): background wake for \(describe(length)) (ResumeEverySec=)")
        case .fetchCompleted(let result):
            return LogLine(level: .info, message: "\(name): performFetch acknowledged (\(result?.rawValue ?? "no result"))")
        case .keptRunning(let reason?):
            return LogLine(level: .info, message: "\(name): not suspended in the background while \(reason.rawValue)")
        case .keptRunning(nil):
            return LogLine(level: .info, message: "\(name): its background time runs again")
        }
    }

    /// The message of an app's transition.
    static func transitionMessage(app name: String, from: AppState, to: AppState, reason: String) -> String {
        "\(name): \(from.rawValue) → \(to.rawValue) (\(reason))"
    }

    /// The journal fields of an app's transition.
    static func transitionFields(app name: String, from: AppState, to: AppState, reason: String, pid: pid_t?) -> [(String, String)] {
        [("LIFECYCLE_APP", name), ("LIFECYCLE_FROM", from.rawValue), ("LIFECYCLE_TO", to.rawValue), ("LIFECYCLE_REASON", reason)]
            + (pid.map { [("LIFECYCLE_PID", String($0))] } ?? [])
    }
}

extension Log {
    /// Writes `line` as a journal event when it has one, else as a plain line of its level.
    static func record(_ line: LogLine) {
        if let event = line.event {
            Log.event(event, line.level, line.message, line.fields)
        } else {
            write(line.level, line.message)
        }
    }
}

func milliseconds(_ duration: Duration) -> Int { Int(duration / .milliseconds(1)) }

/// "1.5s", "200ms", "infinity": a duration as log lines show it.
func describe(_ duration: Duration?) -> String {
    guard let duration else { return "infinity" }
    let (seconds, attoseconds) = duration.components
    let millis = seconds * 1000 + attoseconds / 1_000_000_000_000_000
    if millis % 1000 == 0 { return "\(millis / 1000)s" }
    if millis < 1000 { return "\(millis)ms" }
    return "\(Double(millis) / 1000)s"
}
