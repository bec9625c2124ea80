import CSupport
import Glibc
import LifecycleModel

/// What one battery reports: its charge (0…1) and UIKit-like state.
struct BatteryReading: Equatable {
    var level: Double?
    var state: String
}

/// One kernel uevent: `ACTION@DEVPATH`, then `KEY=value` properties, NUL-separated.
struct KernelUevent: Equatable {
    var action: String
    var devpath: String
    var properties: [String: String]

    /// Parses one datagram from the kernel's uevent socket; nil if it is not in the kernel's format
    /// (udev's messages start with `libudev`, and are on another group anyway).
    static func parse(_ bytes: some Collection<UInt8>) -> KernelUevent? {
        let fields = bytes.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        guard let header = fields.first, let at = header.firstIndex(of: "@") else { return nil }
        var properties: [String: String] = [:]
        for field in fields.dropFirst() {
            guard let equals = field.firstIndex(of: "=") else { continue }
            properties[String(field[..<equals])] = String(field[field.index(after: equals)...])
        }
        return KernelUevent(action: String(header[..<at]), devpath: String(header[header.index(after: at)...]), properties: properties)
    }
}

/// `batteryLevelDidChange` and `batteryStateDidChange`, UIDevice's battery notifications, from the power-supply
/// class: one directory per supply with `type`, `capacity` (percent) and `status`.
///
/// sysfs attributes change without any inotify event, so on a real system the trigger is the kernel's uevent
/// (`SUBSYSTEM=power_supply`), after which the files are read again. The socket's filter lets the kernel drop the
/// other subsystems' uevents, so that the machine's other devices do not wake the loop. A
/// directory tree that is not sysfs (a test, a container's stand-in) does get inotify events, so the configured
/// tree is watched that way too; on sysfs those watches simply never fire. Posts only when a value read differs
/// from the last one; the values at start are read without posting. A battery that appears later posts both;
/// one that disappears posts `state: unknown`. Peripheral batteries (`scope` `Device`: a mouse, a headset) are
/// not the device's battery and are skipped.
final class BatterySource {
    static let levelType = "batteryLevelDidChange"
    static let stateType = "batteryStateDidChange"
    /// Files of a supply whose change matters.
    static let supplyFiles: Set<String> = [
        "type", "scope", "status", "capacity", "energy_now", "energy_full", "charge_now", "charge_full",
    ]

    private let watcher: DirectoryWatcher
    private let root: String
    private let post: (String, JSONValue, String?) -> Void
    private var batteries: [String: BatteryReading] = [:]
    private var ueventSocket: FileDescriptor?
    private var ueventFD: Int32 { ueventSocket?.rawValue ?? -1 }
    private var ueventSource: EventSource?
    private var ueventProblem: String?
    private var rootSubscription: Int?
    private var rootProblem: String?
    private var supplySubscriptions: [String: Int] = [:]
    /// How many times the loop woke the uevent socket, and how many kernel uevents it read (for tests).
    /// Called on the loop's thread when the machine goes on battery or on external power (never from `init`).
    var powerChanged: ((Bool) -> Void)?
    /// A battery of the machine discharges: it runs on battery. False without a battery.
    var onBattery: Bool { batteries.values.contains { $0.state == "discharging" } }

    private(set) var wakeups = 0
    private(set) var uevents = 0

    init(loop: EventLoop, watcher: DirectoryWatcher, root: String, post: @escaping (String, JSONValue, String?) -> Void) {
        self.watcher = watcher
        self.root = root
        self.post = post
        do {
            ueventSocket = FileDescriptor(owning: try retryingEINTR("open the kernel uevent socket") { cs_uevent_open("power_supply") }, path: "the kernel uevent socket")
            ueventSource = try loop.watch(fd: ueventFD, events: IOEvents.readable) { [weak self] _ in self?.readUevents() }
        } catch {
            ueventProblem = error.description
            closeUevents()
        }
        do {
            rootSubscription = try watcher.subscribe(
                directory: root, names: nil,
                mask: CS_IN_CREATE | CS_IN_DELETE | CS_IN_MOVED_TO | CS_IN_MOVED_FROM
            ) { [weak self] events in self?.rootChanged(events) }
        } catch {
            rootProblem = error.description
        }
        rescan(posting: false)
    }

    deinit { stop() }

    var descriptions: [String] {
        var how: [String] = []
        if let ueventProblem { how.append("no uevents (\(ueventProblem))") } else { how.append("kernel uevents (power_supply)") }
        if let rootProblem { how.append("no inotify (\(rootProblem))") } else { how.append("inotify on \(root)") }
        let now = batteries.isEmpty
            ? "no battery now"
            : batteries.keys.sorted().map { name in
                let reading = batteries[name]!
                let level = reading.level.map { "\(Int(($0 * 100).rounded()))%" } ?? "level unknown"
                return "\(name) \(level) \(reading.state)"
            }.joined(separator: ", ")
        let off = ueventProblem != nil && rootProblem != nil ? "off: " : ""
        return ["\(Self.levelType), \(Self.stateType): \(off)\(how.joined(separator: " and ")); \(now)"]
    }

    func stop() {
        closeUevents()
        if let rootSubscription { watcher.unsubscribe(rootSubscription) }
        rootSubscription = nil
        for subscription in supplySubscriptions.values { watcher.unsubscribe(subscription) }
        supplySubscriptions = [:]
    }

    private func closeUevents() {
        ueventSource?.cancel()
        ueventSource = nil
        ueventSocket = nil
    }

    private func readUevents() {
        wakeups += 1
        var relevant = false
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while ueventFD >= 0 {
            let count = buffer.withUnsafeMutableBytes { raw in
                cs_uevent_receive(ueventFD, raw.baseAddress!.assumingMemoryBound(to: CChar.self), raw.count)
            }
            if count < 0 {
                // ENOBUFS: the socket overflowed and messages were lost; read everything again to be sure.
                if errno == ENOBUFS { relevant = true; continue }
                break
            }
            guard count > 0, let event = KernelUevent.parse(buffer[0..<count]) else { continue }
            uevents += 1
            if event.properties["SUBSYSTEM"] == "power_supply" { relevant = true }
        }
        if relevant { rescan(posting: true) }
    }

    private func rootChanged(_ events: [DirectoryEvent]) {
        if events.contains(where: { $0.mask & CS_IN_IGNORED != 0 }) {
            rootSubscription = nil
            rootProblem = "\(root) was removed"
        }
        rescan(posting: true)
    }

    private func supplyChanged(_ name: String, _ events: [DirectoryEvent]) {
        // The supply's directory went (its subscription with it): forget it, so a new one of that name is watched.
        if events.contains(where: { $0.mask & CS_IN_IGNORED != 0 }) { supplySubscriptions[name] = nil }
        rescan(posting: true)
    }

    /// Reads every supply again, posts what changed and keeps one inotify subscription per supply directory.
    private func rescan(posting: Bool) {
        let names = (try? ConfigLoader.listDirectory(root)) ?? []
        var seen: [String: BatteryReading] = [:]
        for name in names {
            let directory = root + "/" + name
            if supplySubscriptions[name] == nil, rootProblem == nil {
                supplySubscriptions[name] = try? watcher.subscribe(
                    directory: directory, names: Self.supplyFiles,
                    mask: CS_IN_CLOSE_WRITE | CS_IN_MOVED_TO | CS_IN_CREATE | CS_IN_DELETE
                ) { [weak self] events in self?.supplyChanged(name, events) }
            }
            if let reading = Self.readBattery(directory) { seen[name] = reading }
        }
        for (name, subscription) in supplySubscriptions where !names.contains(name) {
            watcher.unsubscribe(subscription)
            supplySubscriptions[name] = nil
        }
        let previous = batteries
        let wasOnBattery = onBattery
        batteries = seen
        guard posting else { return }
        if onBattery != wasOnBattery { powerChanged?(onBattery) }
        for name in Set(previous.keys).union(seen.keys).sorted() {
            let before = previous[name]
            let after = seen[name] ?? BatteryReading(level: nil, state: "unknown")
            if let level = after.level, level != before?.level {
                post(Self.levelType, ["level": .number(level), "supply": .string(name)], nil)
            }
            if after.state != before?.state {
                post(Self.stateType, ["state": .string(after.state), "supply": .string(name)], nil)
            }
        }
    }

    /// The reading of the supply in `directory`, or nil if it is not the device's own battery.
    static func readBattery(_ directory: String) -> BatteryReading? {
        func attribute(_ name: String) -> String? {
            guard let bytes = try? readWatchedFile(directory + "/" + name, limit: 4096) else { return nil }
            return ConfigLoader.trimmed(String(decoding: bytes, as: UTF8.self).split(separator: "\n").first ?? "")
        }
        guard attribute("type") == "Battery", attribute("scope") != "Device" else { return nil }
        return BatteryReading(
            level: level(capacity: attribute("capacity"),
                         energy: (attribute("energy_now"), attribute("energy_full")),
                         charge: (attribute("charge_now"), attribute("charge_full"))),
            state: batteryState(status: attribute("status")))
    }

    /// 0…1 from `capacity` (percent), else from `energy_now/energy_full` or `charge_now/charge_full`, which some
    /// batteries report instead.
    static func level(capacity: String?, energy: (String?, String?) = (nil, nil), charge: (String?, String?) = (nil, nil)) -> Double? {
        if let capacity, let percent = Int(capacity) { return Double(min(100, max(0, percent))) / 100 }
        for (now, full) in [energy, charge] {
            if let now = now.flatMap(Double.init), let full = full.flatMap(Double.init), full > 0 {
                return min(1, max(0, now / full))
            }
        }
        return nil
    }

    /// The kernel's `status` words in UIKit-like names.
    static func batteryState(status: String?) -> String {
        switch status {
        case "Charging": "charging"
        case "Discharging": "discharging"
        case "Full": "full"
        case "Not charging": "notCharging"
        default: "unknown"
        }
    }
}
