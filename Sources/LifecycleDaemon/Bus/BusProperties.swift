import CBus
import CSystemd
import Glibc
import LifecycleModel
import LifecycleProtocol

/// An app object's properties, as read for `Get` and compared for `PropertiesChanged`: a change is announced by
/// comparing what the object shows now with what it last showed, so that every change is announced once and
/// nothing that did not change is.
struct BusAppProperties: Equatable {
    var name: String
    var state: String
    var pid: UInt32
    /// Microseconds since the epoch (CLOCK_REALTIME) of the last transition.
    var since: UInt64
    var `protocol`: String
    /// Running, and not the daemon's child: taken back from a previous daemon, or an external process.
    var adopted: Bool
    var deadlineMisses: UInt32
    var queuedNotifications: UInt32
    /// id, role, configuration, state.
    var scenes: [[String]]
    /// The last memory reclaim: its outcome ("" before the first), resident and swapped bytes before, and after.
    var reclaimOutcome: String
    var reclaimBytes: [UInt64]

    static let names = ["Name", "State", "Pid", "Since", "Protocol", "Adopted", "DeadlineMisses", "QueuedNotifications", "Scenes",
                        "Reclaim"]

    init(_ status: AppStatus, runtime: AppRuntime) {
        name = status.name
        state = status.state.rawValue
        pid = UInt32(bitPattern: status.pid ?? 0)
        since = UInt64(max(0, runtime.sinceWall * 1_000_000))
        self.protocol = status.protocol
        adopted = runtime.pid != nil && runtime.child == nil
        deadlineMisses = UInt32(clamping: status.deadlineMisses)
        queuedNotifications = UInt32(clamping: status.queuedNotifications)
        scenes = (status.scenes ?? []).map { [$0.scene, $0.role, $0.configuration, $0.state] }
        reclaimOutcome = status.reclaim?.outcome ?? ""
        reclaimBytes = status.reclaim.map { [$0.residentBefore, $0.swappedBefore, $0.residentAfter ?? 0, $0.swappedAfter ?? 0] }
            ?? [0, 0, 0, 0]
    }

    func changed(from old: BusAppProperties) -> [String] {
        var names: [String] = []
        if state != old.state { names.append("State") }
        if pid != old.pid { names.append("Pid") }
        if since != old.since { names.append("Since") }
        if self.protocol != old.protocol { names.append("Protocol") }
        if adopted != old.adopted { names.append("Adopted") }
        if deadlineMisses != old.deadlineMisses { names.append("DeadlineMisses") }
        if queuedNotifications != old.queuedNotifications { names.append("QueuedNotifications") }
        if scenes != old.scenes { names.append("Scenes") }
        if reclaimOutcome != old.reclaimOutcome || reclaimBytes != old.reclaimBytes { names.append("Reclaim") }
        return names
    }

    /// Appends the value of `property`; false for a name the interface does not have.
    func append(_ property: String, to writer: inout BusWriter) -> Bool {
        switch property {
        case "Name": writer.string(name)
        case "State": writer.string(state)
        case "Pid": writer.uint32(pid)
        case "Since": writer.uint64(since)
        case "Protocol": writer.string(self.protocol)
        case "Adopted": writer.bool(adopted)
        case "DeadlineMisses": writer.uint32(deadlineMisses)
        case "QueuedNotifications": writer.uint32(queuedNotifications)
        case "Scenes":
            writer.container(BusType.array, "(ssss)") { writer in
                for scene in scenes {
                    writer.container(BusType.structure, "ssss") { writer in for field in scene { writer.string(field) } }
                }
            }
        case "Reclaim":
            writer.container(BusType.structure, "stttt") { writer in
                writer.string(reclaimOutcome)
                for bytes in reclaimBytes { writer.uint64(bytes) }
            }
        default: return false
        }
        return true
    }
}

/// The manager object's properties: the daemon's, and how many apps are in each state.
struct BusManagerProperties: Equatable {
    var version: String
    var cgroupLayout: String
    var displaySource: String
    var counts: [AppState: UInt32]

    static let countNames: [(String, AppState)] = [("AppsNotRunning", .notRunning), ("AppsInactive", .inactive),
                                                   ("AppsActive", .active), ("AppsBackground", .background),
                                                   ("AppsSuspended", .suspended)]

    func changed(from old: BusManagerProperties) -> [String] {
        var names: [String] = []
        if displaySource != old.displaySource { names.append("DisplaySource") }
        for (name, state) in Self.countNames where counts[state] != old.counts[state] { names.append(name) }
        return names
    }

    func append(_ property: String, to writer: inout BusWriter) -> Bool {
        switch property {
        case "Version": writer.string(version)
        case "CgroupLayout": writer.string(cgroupLayout)
        case "DisplaySource": writer.string(displaySource)
        default:
            guard let state = Self.countNames.first(where: { $0.0 == property })?.1 else { return false }
            writer.uint32(counts[state] ?? 0)
        }
        return true
    }
}

/// App object paths, escaped as `sd_bus_path_encode` does (any name is a valid path element).
enum BusPath {
    static let manager = String(cString: cbusManagerPath)
    static let appPrefix = String(cString: cbusAppPrefix)

    static func app(_ name: String) -> String {
        var encoded: UnsafeMutablePointer<CChar>?
        guard sd_bus_path_encode(appPrefix, name, &encoded) >= 0, let encoded else { return appPrefix }
        defer { free(encoded) }
        return String(cString: encoded)
    }

    /// The app name of an app object's path, nil for any other path.
    static func appName(_ path: String) -> String? {
        var decoded: UnsafeMutablePointer<CChar>?
        guard sd_bus_path_decode(path, appPrefix, &decoded) > 0, let decoded else { return nil }
        defer { free(decoded) }
        let name = String(cString: decoded)
        return name.isEmpty ? nil : name
    }
}
