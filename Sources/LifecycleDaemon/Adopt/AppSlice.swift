import Glibc

// Where a desktop session's apps live: systemd's user manager starts each app a desktop launcher opens in a
// transient unit under the user's `app.slice` (systemd's desktop-environment conventions,
// https://systemd.io/DESKTOP_ENVIRONMENTS/). These are pure readings of /proc's texts, so that tests feed them.

/// The `app.slice` the daemon watches, and how it was found (for the log and `lifectl status`).
struct AppSlice: Equatable {
    /// The slice's directory in the cgroup2 hierarchy.
    var path: String
    /// The slice as /proc/PID/cgroup names it (below the mount, with a leading `/`).
    var cgroup: String
    /// `AppSlice=`, the daemon's own cgroup, or `User=`.
    var foundBy: String

    /// The slice for `config`: `AppSlice=` below the cgroup2 mount; else, for a daemon in a user's session (its
    /// own cgroup under `user@UID.service`), that session's `app.slice`; else, for root with `User=`, that user's.
    /// Throws a sentence saying why none is found.
    static func find(_ config: AdoptConfig, mountinfo: String, ownCgroup: String, uid: (String) -> UInt32?)
        throws(AdoptFailure) -> AppSlice {
        guard let mount = unifiedMount(mountinfo: mountinfo) else {
            throw AdoptFailure("no cgroup2 hierarchy is mounted (/proc/self/mountinfo)")
        }
        if let relative = config.appSlice { return AppSlice(path: mount + "/" + relative, cgroup: "/" + relative, foundBy: "AppSlice=") }
        if let user = config.user {
            guard let id = uid(user) else { throw AdoptFailure("User=\(user): no such user") }
            return AppSlice(path: mount + "/" + userSlice(uid: id), cgroup: "/" + userSlice(uid: id), foundBy: "User=\(user)")
        }
        guard let own = unifiedCgroup(procSelfCgroup: ownCgroup), let slice = sessionSlice(of: own) else {
            throw AdoptFailure("lifecycled runs in no user's session (its cgroup is not under user@UID.service):"
                + " set [Adopt] User= to adopt from a user's session, or AppSlice=")
        }
        return AppSlice(path: mount + slice, cgroup: slice, foundBy: "its own cgroup")
    }

    /// The mount point of the cgroup2 hierarchy (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on hybrid hosts):
    /// the fifth field of the mountinfo line whose type (after ` - `) is `cgroup2`.
    static func unifiedMount(mountinfo: String) -> String? {
        for line in mountinfo.split(separator: "\n") {
            let halves = line.split(separator: " - ", maxSplits: 1)
            guard halves.count == 2, halves[1].split(separator: " ").first == "cgroup2" else { continue }
            let fields = halves[0].split(separator: " ")
            if fields.count > 4 { return unescapeMountPath(String(fields[4])) }
        }
        return nil
    }

    /// mountinfo writes space, tab, newline and backslash in octal (`\040`).
    static func unescapeMountPath(_ text: String) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3, let value = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(value)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The cgroup2 line (`0::PATH`) of /proc/PID/cgroup.
    static func unifiedCgroup(procSelfCgroup text: String) -> String? {
        text.split(separator: "\n").first { $0.hasPrefix("0::") }.map { String($0.dropFirst(3)) }
    }

    /// `…/user@UID.service` of a cgroup inside a user's session (its service manager's cgroup), nil outside one.
    static func managerCgroup(of cgroup: String) -> String? {
        let parts = cgroup.split(separator: "/")
        guard let manager = parts.firstIndex(where: { $0.hasPrefix("user@") && $0.hasSuffix(".service") }) else { return nil }
        return "/" + parts[...manager].joined(separator: "/")
    }

    /// `…/user@UID.service/app.slice` of a cgroup inside a user's session, nil outside one.
    static func sessionSlice(of cgroup: String) -> String? {
        managerCgroup(of: cgroup).map { $0 + "/app.slice" }
    }

    /// A user's `app.slice` as systemd lays it out: `user.slice/user-UID.slice/user@UID.service/app.slice`.
    static func userSlice(uid: UInt32) -> String {
        "user.slice/user-\(uid).slice/user@\(uid).service/app.slice"
    }
}

/// Why adoption cannot start, as a sentence.
struct AdoptFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// A unit a desktop launcher made: `app-[<launcher>-]<AppID>-<random>.scope`, or
/// `app-[<launcher>-]<AppID>[@<random>].service`, the AppID with `-` escaped as `\x2d`.
struct LauncherUnit: Equatable {
    var unit: String
    var launcher: String?
    var appID: String

    init?(unit: String) {
        self.unit = unit
        guard unit.hasPrefix("app-") else { return nil }
        var body = Substring(unit.dropFirst(4))
        if body.hasSuffix(".scope") {
            body = body.dropLast(6)
            // The random part is mandatory for a scope, and never escaped.
            guard let dash = body.lastIndex(of: "-"), body.index(after: dash) < body.endIndex else { return nil }
            body = body[..<dash]
        } else if body.hasSuffix(".service") {
            body = body.dropLast(8)
            if let at = body.lastIndex(of: "@") { body = body[..<at] }
        } else {
            return nil
        }
        let words = body.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        let id = words.count == 2 ? words[1] : words[0]
        launcher = words.count == 2 ? String(words[0]) : nil
        appID = Self.unescape(String(id))
        guard !appID.isEmpty, launcher?.isEmpty != true else { return nil }
    }

    /// systemd's unit name escaping of the few characters a desktop file id may hold (`\x2d` for `-`).
    static func unescape(_ text: String) -> String {
        var bytes = Array(text.utf8)[...]
        var out: [UInt8] = []
        while let byte = bytes.popFirst() {
            if byte == UInt8(ascii: "\\"), bytes.first == UInt8(ascii: "x"), bytes.count >= 3,
               let value = UInt8(String(decoding: bytes.dropFirst().prefix(2), as: UTF8.self), radix: 16) {
                out.append(value)
                bytes = bytes.dropFirst(3)
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
