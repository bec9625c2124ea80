import Glibc
import LifecycleModel
import LifecycleProtocol

/// The replies to `lifectl status` and the service manager's STATUS= line, built from values the daemon passes in.
/// Pure, so that each reply is a unit test.
enum StatusReport {
    /// What the daemon's side knows of an app's process, beside the model's record.
    struct Process {
        var pid: pid_t?
        /// Wall-clock seconds of the last transition.
        var sinceWall: Double
        /// `signal`, `freezer`, or the mechanism of the suspension in force (`suspendMethod(...)`).
        var suspendMethod: String
        /// The app's cgroup as a person reads it, if it has one.
        var cgroupPath: String?
        /// For an adopted app: its scope or process (`AppRuntime.adoptedAs`).
        var adoptedAs: String? = nil
        /// Its last memory reclaim.
        var reclaim: ReclaimRecord? = nil
    }

    /// The suspension in force if there is one, else the one the next suspension uses: the freezer only where the
    /// app asks for it and one is at hand.
    static func suspendMethod(inForce: SuspendMechanism?, configured: SuspendMethod, freezerAvailable: Bool) -> String {
        inForce?.description ?? (configured == .freezer && freezerAvailable ? "freezer" : "signal")
    }

    /// One app's status. `wallNow` and `now` are the wall-clock and monotonic times of the reply.
    static func app(_ record: borrowing AppRecord, process: Process, wallNow: Double, now: MonotonicTime) -> AppStatus {
        let protocolState: String
        if !record.policy.speaksProtocol {
            protocolState = "none"
        } else if !record.state.isRunning {
            protocolState = "lifecycle"
        } else {
            protocolState = record.muted ? "silent" : record.connected ? "lifecycle" : "waiting"
        }
        var status = AppStatus(name: record.name, state: record.state, pid: process.pid, since: rfc3339(process.sinceWall),
                               sinceSeconds: max(0, wallNow - process.sinceWall), protocol: protocolState,
                               launches: record.launches, deadlineMisses: record.deadlineMisses,
                               awaiting: record.awaitingCallback?.rawValue, suspendMethod: process.suspendMethod,
                               cgroup: process.cgroupPath)
        status.adopted = process.adoptedAs
        status.reclaim = process.reclaim?.status()
        status.queuedNotifications = record.queue.count
        status.queuedPosts = record.queue.postCount
        status.observing = record.observing.sorted()
        status.backgroundTasks = record.tasks.map { TaskStatus(task: $0.id, name: $0.name) }
        status.backgroundTimeRemaining = record.tasks.isEmpty ? nil
            : record.backgroundTimeRemaining(now: now).map { Double(milliseconds($0)) / 1000 }
        status.taskOverruns = record.taskOverruns
        status.backgroundModes = record.policy.backgroundModes.sorted()
        status.memoryTerminations = record.memoryTerminations
        status.terminatedInBackground = record.terminatedInBackground
        if record.usesScenes {
            status.scenes = record.sessions.map {
                SceneStatus(scene: $0.id, role: $0.role, configuration: $0.configuration,
                            state: $0.state?.rawValue ?? "disconnected", savedState: $0.savedState)
            }
        }
        return status
    }

    /// `status` without its scenes' saved states, each marked `savedStateHidden` where it had one.
    static func hidingSavedState(_ status: AppStatus) -> AppStatus {
        var status = status
        status.scenes = status.scenes?.map { scene in
            guard scene.savedState != nil else { return scene }
            var hidden = scene
            hidden.savedState = nil
            hidden.savedStateHidden = true
            return hidden
        }
        return status
    }

    /// The daemon's own part of `lifectl status --daemon`.
    static func daemon(pid: pid_t, options: DaemonOptions, cgroups: CgroupSupport, configErrors: [String],
                       uptime: Duration, sources: [String], catalog: NotificationCatalog) -> DaemonStatus {
        var status = DaemonStatus(pid: pid, version: daemonVersion, configDirectory: options.configDirectory,
                                  runtimeDirectory: options.runtimeDirectory, cgroupLayout: cgroups.layout.rawValue,
                                  mechanisms: cgroups.mechanisms + (cgroups.fallbackReason.map { ["fallback: \($0)"] } ?? []),
                                  configErrors: configErrors, uptimeSeconds: Double(uptime / .milliseconds(1)) / 1000)
        status.sources = sources
        status.notificationTypes = catalog.types.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.rawValue)" }
        status.controlProtocol = ControlRequest.protocolVersion
        return status
    }

    /// One line for systemd's STATUS=, from each app's state and queued notifications:
    /// "4 apps: 1 active, 1 inactive, 1 background, 1 suspended; 3 notifications queued".
    static func line(_ apps: [(state: AppState, queued: Int)]) -> String {
        var counts: [AppState: Int] = [:]
        var queued = 0
        for app in apps {
            counts[app.state, default: 0] += 1
            queued += app.queued
        }
        let parts = AppState.allCases.filter { $0 != .notRunning }.compactMap { state in
            counts[state].map { "\($0) \(state.rawValue)" }
        }
        return "\(apps.count) apps" + (parts.isEmpty ? "" : ": " + parts.joined(separator: ", "))
            + (queued > 0 ? "; \(queued) notifications queued" : "")
    }
}

/// Seconds since the epoch, from CLOCK_REALTIME.
func wallClockNow() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// RFC 3339 in UTC with milliseconds, e.g. 2026-12-02T14:33:10.125Z.
func rfc3339(_ seconds: Double) -> String {
    let whole = seconds.rounded(.down)
    var time = time_t(whole)
    var parts = tm()
    gmtime_r(&time, &parts)
    let millis = Int32((seconds - whole) * 1000)
    let year = parts.tm_year + 1900
    guard (0...9999).contains(year), (0...999).contains(millis) else {
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(millis, 3))Z"
    }
    // Every status reply carries one: the digits go into one fixed buffer instead of seven padded strings.
    var text: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
               UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
        (0, 0, 0, 0, 0x2D, 0, 0, 0x2D, 0, 0, 0x54, 0, 0, 0x3A, 0, 0, 0x3A, 0, 0, 0x2E, 0, 0, 0, 0x5A)  // "    -  -  T  :  :  .   Z"
    return withUnsafeMutableBytes(of: &text) { bytes in
        func put(_ value: Int32, at offset: Int, width: Int) {
            var rest = value
            for position in stride(from: offset + width - 1, through: offset, by: -1) {
                bytes[position] = UInt8(truncatingIfNeeded: 0x30 + rest % 10)
                rest /= 10
            }
        }
        put(year, at: 0, width: 4)
        put(parts.tm_mon + 1, at: 5, width: 2)
        put(parts.tm_mday, at: 8, width: 2)
        put(parts.tm_hour, at: 11, width: 2)
        put(parts.tm_min, at: 14, width: 2)
        put(parts.tm_sec, at: 17, width: 2)
        put(millis, at: 20, width: 3)
        return String(decoding: bytes, as: UTF8.self)
    }
}
