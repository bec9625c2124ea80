import Glibc

/// RUNTIME_DIR/lifecycled.lock, held with `flock` for as long as the daemon runs: one daemon per runtime directory,
/// since a second one would take over the sockets and re-adopt the apps the first one still supervises. The kernel
/// releases the lock when the last descriptor of it closes, so a crashed daemon leaves no stale lock behind; the
/// descriptor is `O_CLOEXEC`, so that apps never inherit it and keep it held after their daemon is gone.
final class RuntimeDirectoryLock {
    static let fileName = "lifecycled.lock"

    /// The other daemon that holds the lock.
    struct Held: Error, CustomStringConvertible {
        var directory: String
        /// The holder's pid, as it wrote it into the lock file (nil: unreadable, or not written yet).
        var holder: pid_t?

        var description: String {
            let who = holder.map { "lifecycled (pid \($0))" } ?? "lifecycled"
            return "another \(who) already serves the runtime directory \(directory); stop it first, or give this one "
                + "its own with --runtime-dir"
        }
    }

    enum Failure: Error, CustomStringConvertible {
        case held(Held)
        case system(SystemError)

        var description: String {
            switch self {
            case .held(let held): return held.description
            case .system(let error): return "\(error)"
            }
        }
    }

    private let file: FileDescriptor
    let path: String

    /// Takes the lock of `directory` (which must exist) without waiting, and writes this process's pid into it.
    init(directory: String) throws(Failure) {
        path = directory + "/" + Self.fileName
        do {
            // O_NOFOLLOW: a symlink planted there must not make the daemon create or truncate another file.
            file = try FileDescriptor.open(path, O_RDWR | O_CREAT | O_NOFOLLOW, mode: 0o644)
        } catch {
            throw .system(error)
        }
        if flock(file.rawValue, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            guard code == EWOULDBLOCK else { throw .system(SystemError(operation: "lock \(path)", errno: code)) }
            throw .held(Held(directory: directory, holder: Self.holder(file)))
        }
        // The holder's pid, for the message a second daemon gives and for whoever looks.
        _ = ftruncate(file.rawValue, 0)
        let text = "\(getpid())\n"
        do {
            try file.writeOnce(text, at: 0)
        } catch {
            Log.debug("Failed to write the pid into \(path): \(error), ignoring")
        }
    }

    private static func holder(_ file: FileDescriptor) -> pid_t? {
        guard let bytes = try? file.readAll(from: 0) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first ?? ""
        return pid_t(text).flatMap { $0 > 0 ? $0 : nil }
    }
}
