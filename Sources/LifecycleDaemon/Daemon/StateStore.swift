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
/// NAME.json always names a whole file, even for a daemon killed mid-save (docs/PLATFORM.md, "Files"): a save
/// writes the whole file under NAME.json.tmp, then swaps the two names in one step (`renameat2` with
/// `RENAME_EXCHANGE`), so the previous save goes to NAME.json.tmp and is written over at the next save. Both files
/// stay open between saves, so a save is one pwrite and one rename, with no inode made or freed. The first save of
/// an app, one after its files changed behind the daemon's back, and every save on a file system that cannot
/// exchange names make a new NAME.json.tmp and rename it over NAME.json. The only reader is the next daemon, which
/// starts when this one is gone. NAME.json.tmp files are not state (`loadAll` removes them).
///
/// The directory is one the daemon made and checked: its own, mode 0700, not a symlink; files are opened relative
/// to it with `O_NOFOLLOW`, and created 0600. The state names processes the next daemon signals, so a directory or
/// file another user could have placed is refused.
///
/// No fsync: the file outlives the daemon, not the machine. A daemon crash loses nothing the kernel has accepted
/// with write(); a machine crash ends every process the file describes, and /run is a tmpfs.
final class StateStore {
    let directory: String
    private let coder = LineCoder()
    /// The checked state directory (`checkedDirectory`), opened at the first use.
    private var directoryFD: FileDescriptor?
    /// The process identity last saved for each app, so that a save need not read /proc/PID/stat again.
    private var savedIdentity: [String: (pid: pid_t, startTime: UInt64)] = [:]
    /// The two files of each recently saved app, open: `current` is the one NAME.json names, `spare` (after the
    /// second save) the one NAME.json.tmp names, which the next save writes.
    private struct Kept {
        var current: FileDescriptor
        var spare: FileDescriptor?
        var used: UInt64
    }
    private var kept: [String: Kept] = [:]
    private var saves: UInt64 = 0
    /// Apps whose files stay open (two descriptors each), the least recently saved going first.
    let keptLimit: Int
    /// False once the file system refused to exchange two names: every save then renames a new file.
    private(set) var exchanges = true
    /// How many apps have their files kept open.
    var keptCount: Int { kept.count }

    init(runtimeDirectory: String, keptLimit: Int = 64) {
        directory = runtimeDirectory + "/state"
        self.keptLimit = keptLimit
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
        guard let identity = savedIdentity[name], identity.pid == pid else { return nil }
        return identity.startTime
    }

    /// Writes the app's whole file under NAME.json.tmp and swaps it with NAME.json (or renames it over NAME.json).
    func save(_ app: PersistedApp) throws(SystemError) {
        let bytes = encode(app)
        let directory = try checkedDirectory()
        let temporary = app.name + ".json.tmp", target = app.name + ".json"
        saves += 1
        let previous = kept.removeValue(forKey: app.name)
        if let previous, let spare = previous.spare, exchanges, Self.rewrite(spare, with: bytes),
           exchange(temporary, target, in: directory) {
            keep(app.name, Kept(current: spare, spare: previous.current, used: saves))
            remember(app)
            return
        }
        // A new NAME.json.tmp: the first save, a spare gone or changed behind the daemon's back, or no exchange.
        let file = try createTemporary(temporary, in: directory)
        do {
            try file.write(bytes, at: 0)
            if let previous, exchanges, Self.statusIfLinkedOnce(previous.current) != nil, exchange(temporary, target, in: directory) {
                keep(app.name, Kept(current: file, spare: previous.current, used: saves))
            } else {
                try retryingEINTR("rename \(self.directory)/\(temporary)") {
                    renameat(directory.rawValue, temporary, directory.rawValue, target)
                }
                if exchanges { keep(app.name, Kept(current: file, spare: nil, used: saves)) }
            }
        } catch {
            unlinkat(directory.rawValue, temporary, 0)
            throw error
        }
        remember(app)
    }

    private func remember(_ app: PersistedApp) {
        savedIdentity[app.name] = app.pid.flatMap { pid in app.startTime.map { (pid: pid, startTime: $0) } }
    }

    /// Swaps NAME.json.tmp and NAME.json; false if they could not be (a name missing, or a file system that cannot,
    /// which also ends exchanges for good).
    private func exchange(_ temporary: String, _ target: String, in directory: FileDescriptor) -> Bool {
        if cs_rename_exchange(directory.rawValue, temporary, target) == 0 { return true }
        if errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP {
            Log.info("\(self.directory): the file system cannot exchange two names; each save writes a new file")
            exchanges = false
            kept.removeAll()
        }
        return false
    }

    /// The open file's status if it still has exactly the one name the store gave it (nothing removed, replaced or
    /// linked it); else nil.
    private static func statusIfLinkedOnce(_ file: FileDescriptor) -> stat? {
        guard let info = try? file.status(), info.st_nlink == 1 else { return nil }
        return info
    }

    /// Writes `bytes` over the kept spare with one pwrite from offset 0; where the file is longer (an earlier, longer
    /// save), they are padded with spaces before their newline to its length, which JSON allows and `loadAll` reads
    /// past. False, with nothing to undo, if the spare no longer has its one name or the write fails.
    private static func rewrite(_ file: FileDescriptor, with bytes: [UInt8]) -> Bool {
        guard let info = statusIfLinkedOnce(file) else { return false }
        let length = Int(info.st_size)
        if length <= bytes.count { return (try? file.write(bytes, at: 0)) != nil }
        var padded = bytes
        padded.insert(contentsOf: repeatElement(UInt8(ascii: " "), count: length - bytes.count), at: padded.count - 1)
        return (try? file.write(padded, at: 0)) != nil
    }

    private func keep(_ name: String, _ files: Kept) {
        if kept.count >= keptLimit, let oldest = kept.min(by: { $0.value.used < $1.value.used })?.key {
            kept[oldest] = nil
        }
        kept[name] = files
    }

    /// Creates NAME.json.tmp afresh, 0600. Whatever the name already holds (a save cut short, a symlink, a FIFO) is
    /// unlinked first: the name, never what a link points to.
    private func createTemporary(_ name: String, in directory: FileDescriptor) throws(SystemError) -> FileDescriptor {
        let shown = "\(self.directory)/\(name)"
        func create() throws(SystemError) -> FileDescriptor {
            try FileDescriptor.open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600, relativeTo: directory, describedAs: shown)
        }
        do {
            return try create()
        } catch where error.errno == EEXIST {
            if unlinkat(directory.rawValue, name, 0) != 0 && errno != ENOENT {
                throw SystemError(operation: "remove \(shown)", errno: errno)
            }
            return try create()
        }
    }

    /// The file's bytes: the app as one JSON line.
    func encode(_ app: PersistedApp) -> [UInt8] { coder.encode(app) }

    func remove(_ name: String) {
        savedIdentity[name] = nil
        kept[name] = nil
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
