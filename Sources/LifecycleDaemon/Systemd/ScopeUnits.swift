import Glibc
import LifecycleModel

/// The names and properties of the transient scope units apps run in under systemd (`ScopePlacement`): one
/// `app-lifecycled-NAME.scope` per app in `lifecycled.slice`, so that `systemctl status`, `systemd-cgls` and the
/// journal show each app as a unit of its own, and the daemon's service cgroup holds the daemon alone.
enum ScopeUnits {
    static let slice = "lifecycled.slice"
    static let prefix = "app-lifecycled-"
    static let suffix = ".scope"

    /// The scope unit of app `name`, its name escaped as `systemd-escape` does: an app name may hold `-`, which
    /// in a unit name separates the parts of a slice path, so it becomes `\x2d`.
    static func unitName(app name: String) -> String { prefix + escape(name) + suffix }

    /// The app whose scope unit `unit` is, or nil for any other unit.
    static func appName(unit: String) -> String? {
        guard unit.hasPrefix(prefix), unit.hasSuffix(suffix), unit.count > prefix.count + suffix.count else { return nil }
        return unescape(String(unit.dropFirst(prefix.count).dropLast(suffix.count)))
    }

    /// The scope's cgroup below the manager's root (`managerRoot`): a unit's cgroup is its slices' path and then
    /// its own name, and neither `lifecycled.slice` nor `app-…` needs the cgroup escaping systemd applies to names
    /// that start with `_` or `.` or meet a controller's file names.
    static func cgroupPath(app name: String, mount: String = "/sys/fs/cgroup") -> String {
        mount + "/" + slice + "/" + unitName(app: name)
    }

    /// Where the units of the daemon's manager have their cgroups, below the cgroup2 mount: systemd's are at its
    /// root (""), a user's manager's below its own `…/user@UID.service`, found in the daemon's own cgroup (the
    /// `0::` line of /proc/self/cgroup). Nil for a user's daemon outside a user manager's subtree.
    static func managerRoot(procSelfCgroup: String, euid: uid_t) -> String? {
        if euid == 0 { return "" }
        return AppSlice.unifiedCgroup(procSelfCgroup: procSelfCgroup).flatMap(AppSlice.managerCgroup(of:))
    }

    /// systemd's `unit_name_escape`: letters, digits, `:`, `_` and `.` (but a leading `.`) stay; `/` becomes `-`;
    /// every other byte becomes `\xNN`.
    static func escape(_ text: String) -> String {
        var result = ""
        for (index, byte) in text.utf8.enumerated() {
            let scalar = Unicode.Scalar(byte)
            let kept = (byte < 0x80) && (isASCIILetter(byte) || isDigit(byte)
                || byte == UInt8(ascii: ":") || byte == UInt8(ascii: "_") || (byte == UInt8(ascii: ".") && index > 0))
            if byte == UInt8(ascii: "/") {
                result.append("-")
            } else if kept {
                result.unicodeScalars.append(scalar)
            } else {
                result += "\\x" + hex(byte >> 4) + hex(byte & 0xf)
            }
        }
        return result
    }

    /// The inverse of `escape`; nil for text `escape` cannot have produced.
    static func unescape(_ text: String) -> String? {
        var bytes: [UInt8] = []
        var input = Array(text.utf8)[...]
        while let byte = input.first {
            if byte == UInt8(ascii: "\\") {
                guard input.count >= 4, input[input.startIndex + 1] == UInt8(ascii: "x"),
                      let high = hexValue(input[input.startIndex + 2]), let low = hexValue(input[input.startIndex + 3])
                else { return nil }
                bytes.append(high << 4 | low)
                input = input.dropFirst(4)
            } else {
                bytes.append(byte == UInt8(ascii: "-") ? UInt8(ascii: "/") : byte)
                input = input.dropFirst()
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func isASCIILetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }
    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
    private static func hex(_ nibble: UInt8) -> String { String(nibble, radix: 16) }
    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// One property of a unit as StartTransientUnit and SetUnitProperties take it: a name and a typed value, the
/// `(sv)` of their `a(sv)` argument.
enum UnitProperty: Equatable {
    case string(String, String)
    case uint64(String, UInt64)
    case pids(String, [UInt32])
    case bool(String, Bool)

    var name: String {
        switch self {
        case .string(let name, _), .uint64(let name, _), .pids(let name, _), .bool(let name, _): name
        }
    }

    /// The D-Bus signature of the value inside the variant.
    var signature: String {
        switch self {
        case .string: "s"
        case .uint64: "t"
        case .pids: "au"
        case .bool: "b"
        }
    }

    /// What a new app scope starts with: the app's process (systemd moves it in), the slice, and collection once
    /// the scope is inactive or failed, so that the next launch of the app can take the same name at once (an app
    /// killed by a signal leaves its scope failed, which would otherwise keep the name). `Delegate=yes`, because
    /// systemd moves further processes into a running unit (`AttachProcessesToUnit`: what the app forked before its
    /// scope existed) only for delegated units; the daemon makes no cgroup below a scope.
    static func scope(app name: String, pid: pid_t) -> [UnitProperty] {
        [.string("Description", "lifecycled app \(name)"),
         .string("Slice", ScopeUnits.slice),
         .pids("PIDs", [UInt32(bitPattern: pid)]),
         .bool("Delegate", true),
         .string("CollectMode", "inactive-or-failed")]
    }

    /// The weights of a priority class, the same numbers the cgroupfs placement writes to cpu.weight and io.weight,
    /// and its memory protection (`PriorityClass.memoryLow`), which systemd writes to memory.low.
    static func weights(_ priority: PriorityClass, memoryLow protection: MemoryProtection) -> [UnitProperty] {
        let weight = UInt64(priority.cgroupWeight)
        return [.uint64("CPUWeight", weight), .uint64("IOWeight", weight),
                .uint64("MemoryLow", priority.memoryLow(protection).unitValue)]
    }
}
