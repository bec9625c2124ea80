import CSupport
import Glibc
import LifecycleModel
import LifecycleProtocol

/// One app as the daemon persists it: enough to find its process again after the daemon's own restart or
/// crash (pid and start time, so that a recycled pid is never taken for it), to undo its suspension the way
/// it was done, and the model's lasting state (`AppSnapshot`).
struct PersistedApp: Equatable {
    var name: String
    var pid: Int32?
    /// Field 22 of /proc/PID/stat (clock ticks since boot): with the pid, the identity of the process.
    var startTime: UInt64?
    /// `signal` or `freezer`, while suspended.
    var suspendedWith: String?
    /// The client's reconnection token (given in the daemon's hello).
    var token: String?
    var snapshot: AppSnapshot
}

extension PersistedApp: JSONReadable, JSONWritable {
    init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        self.init(name: try fields.required("name"), pid: try fields.optional("pid"), startTime: try fields.optional("startTime"),
                  suspendedWith: try fields.optional("suspendedWith"), token: try fields.optional("token"),
                  snapshot: try fields.required("snapshot"))
    }

    /// Members in key order, nil optionals left out (AppSnapshot.writeJSON writes the snapshot).
    func writeJSON(into writer: inout JSONWriter) {
        writer.beginObject()
        writer.member("name", name)
        writer.member("pid", pid)
        writer.member("snapshot", snapshot)
        writer.member("startTime", startTime)
        writer.member("suspendedWith", suspendedWith)
        writer.member("token", token)
        writer.endObject()
    }
}

/// RUNTIME_DIR/state/NAME.json, one file per app, for the next daemon to read after this one's restart or crash.
///
/// A save writes the whole file into the spare NAME.json.tmp and swaps the two names in one step (`renameat2`
/// with `RENAME_EXCHANGE`), so NAME.json always names a whole file, even for a daemon killed mid-save
/// (docs/PLATFORM.md, "Files"). The spare then holds the previous save and takes the next one: no inode is created
/// or freed per save, which is what makes a rename over a fresh file slow. Where the file system cannot exchange,
/// or NAME.json does not exist yet, a plain rename replaces it. The only reader is the next daemon, which starts
/// when this one is gone.
///
/// The directory is one the daemon made and checked: its own, mode 0700, not a symlink; files are opened relative
/// to it with `O_NOFOLLOW`, and created 0600. The state names processes the next daemon signals, so a directory or
/// file another user could have placed is refused.
///
/// No fsync: the file outlives the daemon, not the machine. A daemon crash loses nothing the kernel has accepted
/// with write(); a machine crash ends every process the file describes, and /run is a tmpfs.
///
/// A save of the bytes last written for an app writes nothing. The store remembers a digest of them (length and
/// SipHash under this process's random seed, so no app can aim a collision) rather than the bytes, which for
/// hundreds of apps with queued notifications would be megabytes. NAME.json.tmp files are not state (`loadAll`
/// removes them).
final class StateStore {
    let directory: String
    private let coder = LineCoder()
    /// The checked state directory (`checkedDirectory`), opened at the first use.
    private var directoryFD: FileDescriptor?
    /// What this daemon last wrote for each app: the digest of the bytes (nil when uncertain: a save failed
    /// halfway) and the process identity saved, so that a save need not read /proc/PID/stat again.
    private var saved: [String: Saved] = [:]

    private struct Saved {
        var digest: Digest?
        var identity: (pid: pid_t, startTime: UInt64)?
    }

    struct Digest: Equatable {
        let count: Int
        let hash: Int
        init(_ bytes: [UInt8]) {
            count = bytes.count
            var hasher = Hasher()
            bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
            hash = hasher.finalize()
        }
    }

    init(runtimeDirectory: String) {
        directory = runtimeDirectory + "/state"
    }

    /// Creates the directory (0700: the state names processes and holds apps' data) and checks it.
    func prepare() throws(SystemError) {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw SystemError(operation: "create \(directory)", errno: errno)
        }
        _ = try checkedDirectory()
    }

    /// The state directory, opened without following a symlink and checked to be the daemon's own with mode 0700.
    private func checkedDirectory() throws(SystemError) -> FileDescriptor {
        if let directoryFD { return directoryFD }
        let opened: FileDescriptor
        do {
            opened = try FileDescriptor.open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        } catch where error.errno == ELOOP || error.errno == ENOTDIR {
            throw SystemError(operation: "use \(directory) as the state directory (a symlink or not a directory)", errno: error.errno)
        }
        let info = try opened.status()
        let mode = info.st_mode & 0o7777
        guard info.st_uid == geteuid(), mode == 0o700 else {
            throw SystemError(
                operation: "use \(directory) as the state directory (owner uid \(info.st_uid), mode \(String(mode, radix: 8)); "
                    + "expected uid \(geteuid()), mode 700)",
                errno: EPERM)
        }
        directoryFD = opened
        return opened
    }

    /// The start time last saved for this app's process `pid`: a process's start time never changes, so a
    /// save need not read /proc/PID/stat again while the pid is the same (nil: not saved yet for this pid).
    func savedStartTime(of name: String, pid: pid_t) -> UInt64? {
        guard let identity = saved[name]?.identity, identity.pid == pid else { return nil }
        return identity.startTime
    }

    /// Writes the app's file, unless it already holds exactly these bytes (then returns false).
    @discardableResult
    func save(_ app: PersistedApp) throws(SystemError) -> Bool {
        let bytes = encode(app)
        let digest = Digest(bytes)
        if let last = saved[app.name]?.digest, last == digest { return false }
        // Whatever happens below, the file may no longer hold what was last saved.
        saved[app.name]?.digest = nil
        let directory = try checkedDirectory()
        let spare = app.name + ".json.tmp", live = app.name + ".json"
        let file = try openSpare(spare, in: directory)
        do {
            try file.write(bytes)
            try retryingEINTR("truncate \(file.path)") { ftruncate(file.rawValue, off_t(bytes.count)) }
            try file.close()
            try swap(spare, live, in: directory)
        } catch {
            unlinkat(directory.rawValue, spare, 0)
            throw error
        }
        let identity = app.pid.flatMap { pid in app.startTime.map { (pid: pid, startTime: $0) } }
        saved[app.name] = Saved(digest: digest, identity: identity)
        return true
    }

    /// Opens the spare NAME.json.tmp for writing from its start. When there is none, or the name holds anything but a
    /// file this daemon can write (a symlink, a FIFO), the name is unlinked (a link, never its target) and the spare
    /// created afresh, 0600.
    private func openSpare(_ name: String, in directory: FileDescriptor) throws(SystemError) -> FileDescriptor {
        let shown = "\(self.directory)/\(name)"
        if let existing = try? FileDescriptor.open(name, O_WRONLY | O_NOFOLLOW | O_NONBLOCK, relativeTo: directory,
                                                   describedAs: shown),
           let info = try? existing.status(), info.st_mode & S_IFMT == S_IFREG {
            return existing
        }
        if unlinkat(directory.rawValue, name, 0) != 0 && errno != ENOENT {
            throw SystemError(operation: "remove \(shown)", errno: errno)
        }
        return try FileDescriptor.open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600,
                                       relativeTo: directory, describedAs: shown)
    }

    /// Puts the spare's bytes under the live name: an exchange keeps the old file as the next spare; a rename, where
    /// the live name does not exist yet or the file system cannot exchange, consumes the spare.
    private func swap(_ spare: String, _ live: String, in directory: FileDescriptor) throws(SystemError) {
        do {
            try retryingEINTR("exchange \(self.directory)/\(spare) with \(live)") {
                cs_rename_exchange(directory.rawValue, spare, live)
            }
            return
        } catch where error.errno == ENOENT || error.errno == EINVAL || error.errno == ENOSYS {}
        try retryingEINTR("rename \(self.directory)/\(spare)") {
            renameat(directory.rawValue, spare, directory.rawValue, live)
        }
    }

    /// The file's bytes: the app as one JSON line.
    func encode(_ app: PersistedApp) -> [UInt8] { coder.encode(app) }

    func remove(_ name: String) {
        saved[name] = nil
        guard let directory = try? checkedDirectory() else { return }
        unlinkat(directory.rawValue, name + ".json", 0)
        unlinkat(directory.rawValue, name + ".json.tmp", 0)
    }

    /// Every app file, and a sentence for each one that could not be read (it is then ignored). Nothing when the
    /// directory is missing or fails its check (`prepare` reports why).
    func loadAll() -> (apps: [PersistedApp], problems: [String]) {
        guard let directory = try? checkedDirectory() else { return ([], []) }
        // fdopendir takes the descriptor it is given: a duplicate, so that `directoryFD` stays open.
        let duplicated = fcntl(directory.rawValue, F_DUPFD_CLOEXEC, 0)
        let copy = duplicated >= 0 ? FileDescriptor(owning: duplicated, path: self.directory) : nil
        guard let copy, let listing = fdopendir(copy.rawValue) else {
            return ([], ["\(self.directory): \(SystemError(operation: "list \(self.directory)", errno: errno))"])
        }
        _ = copy.take()
        defer { closedir(listing) }
        rewinddir(listing)
        var apps: [PersistedApp] = [], problems: [String] = []
        while let entry = readdir(listing) {
            let name = directoryEntryName(entry)
            if name.hasSuffix(".json.tmp") {
                // A save cut short: not state.
                unlinkat(directory.rawValue, name, 0)
                continue
            }
            guard name.hasSuffix(".json") else { continue }
            let path = self.directory + "/" + name
            do {
                let file = try FileDescriptor.open(name, O_RDONLY | O_NOFOLLOW, relativeTo: directory, describedAs: path)
                var bytes = try file.readAll(chunkSize: 64 * 1024)
                // JSON allows whitespace after the value: the newline, and any spaces before it, are not the app's.
                while let last = bytes.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: " ") { bytes.removeLast() }
                let app = try coder.decode(PersistedApp.self, from: bytes)
                // The name inside picks the app, its cgroup and the file a removal unlinks: it must be the file's own.
                guard app.name + ".json" == name else {
                    problems.append("\(path): it names the app '\(app.name)', not '\(name.dropLast(5))'")
                    continue
                }
                apps.append(app)
            } catch {
                problems.append("\(path): \(error)")
            }
        }
        return (apps.sorted { $0.name < $1.name }, problems)
    }
}
