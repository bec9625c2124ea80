import Glibc
import LifecycleModel
import LifecycleProtocol

/// One app as the daemon persists it: enough to find its process again after the daemon's own restart or
/// crash (pid and start time, so that a recycled pid is never taken for it), to undo its suspension the way
/// it was done, and the model's lasting state (`AppSnapshot`).
struct PersistedApp: Codable, Equatable {
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

extension PersistedApp {
    /// The file's JSON as the Codable conformance gives it through JSONEncoder (LineCoder's bytes), written by hand:
    /// keys in sorted order, nil optionals left out (AppSnapshot.writeJSON says why and how).
    func writeJSON(into writer: inout JSONWriter) throws(JSONWriter.Unrepresentable) {
        writer.raw(#"{"name":"#)
        writer.string(name)
        if let pid {
            writer.raw(#","pid":"#)
            writer.integer(Int64(pid))
        }
        writer.raw(#","snapshot":"#)
        try snapshot.writeJSON(into: &writer)
        if let startTime {
            writer.raw(#","startTime":"#)
            writer.unsigned(startTime)
        }
        if let suspendedWith {
            writer.raw(#","suspendedWith":"#)
            writer.string(suspendedWith)
        }
        if let token {
            writer.raw(#","token":"#)
            writer.string(token)
        }
        writer.byte(UInt8(ascii: "}"))
    }
}

/// RUNTIME_DIR/state/NAME.json, one file per app.
///
/// An app's first save (and any save that does not fit the file's page, below) writes a temporary file whole and
/// renames it over NAME.json: the name always names a whole file. The descriptor of what is now NAME.json stays
/// open, and later saves (most apps are saved at each transition) rewrite it **in place**: one pwrite at offset 0
/// of the whole new content, padded with spaces before its newline to a multiple of `paddingUnit` bytes and to
/// at least the file's length, so that no save needs a truncate. That is allowed only while the padded content fits
/// in `pageBytes` (one page, the smallest Linux has): a write of at most one page at offset 0 is copied into the
/// page cache in one step, and the kernel checks for a fatal signal only between pages
/// (`generic_perform_write`, which tmpfs and the page-cache filesystems use), so a daemon killed during it (even
/// `kill -9`) leaves the old bytes or the new ones, never a mix. The buffer is the daemon's own, just written,
/// so the copy does not fault halfway. A save went from 4.6 µs (a pair of open files swapped by RENAME_EXCHANGE)
/// and 13.6 µs (create, write, close, rename) to 1.3 µs on this machine's tmpfs (the pwrite 0.6, the fstat below
/// the rest); an app switch makes four (docs/BENCHMARKS.md). What is given up: a reader **running at the same
/// time** as a save may see part of the old bytes and part of the new. The file is for the next daemon, which reads it once this one is gone; anything
/// else asks the daemon (`lifectl status`). A save checks, with fstat, that the file it wrote is still linked: one
/// removed or replaced behind the store is made again the first way. At most `keptCapacity` apps keep their
/// file open, the least recently saved closed first: a thousand apps do not hold a thousand descriptors.
/// NAME.json.tmp files are not state (`loadAll` removes them).
///
/// No fsync: the file outlives the daemon, not the machine. A daemon crash (even `kill -9`) loses nothing the
/// kernel has accepted with write(); a machine crash also ends every process the file describes, and the
/// runtime directory is volatile (/run is a tmpfs). Measured on this machine's ext4 (docs/RELIABILITY.md):
/// write+fsync+rename of a 20 KB file 6.9 ms, write+rename 0.7 ms, per transition.
///
/// Saves are skipped when nothing changed: the store remembers the bytes it last wrote for each app whose file it
/// keeps open, and a digest of them for the others (their length and a 64-bit SipHash under this process's random
/// seed, so no app can aim a collision); a save of the same bytes writes nothing (the file already holds them). A
/// digest, not the bytes, beyond the 32 kept files: 500 apps holding queued notifications kept megabytes of copies
/// (the soak test's RSS check).
final class StateStore {
    let directory: String
    private let coder = LineCoder()
    /// What the store knows of each app's file: one record, found with one lookup per save (four lookups and the
    /// paths built anew at every save were a quarter of a save's instructions once its encoding was cheap).
    private var files: [String: AppFile] = [:]

    /// One app's file: its paths (as C strings, made once, for open and rename), what this daemon last wrote to it,
    /// and the process identity it last saved.
    private final class AppFile {
        let path: ContiguousArray<CChar>
        let temporary: ContiguousArray<CChar>
        /// The names inside the directory, for openat and renameat on `directoryFD`.
        let name: ContiguousArray<CChar>
        let temporaryName: ContiguousArray<CChar>
        /// What this daemon last wrote to it (unpadded), nil when not written by this daemon or uncertain (a save
        /// failed halfway): the bytes themselves while the file is kept open (at most `keptCapacity` files, each at
        /// most a page; comparing is a memcmp, where the digest is a SipHash of the whole file, 4% of an app
        /// switch's instructions), their digest otherwise.
        var written: Written?
        /// So that a save need not read /proc/PID/stat again.
        var identity: (pid: pid_t, startTime: UInt64)?
        /// NAME.json as this daemon last wrote it whole, open while the app is among the recently saved
        /// (`keptCapacity`) and its content fits one page, and its length then.
        var kept: Int32?
        var length = 0
        /// When it was last saved (the store's counter), for the least recently used.
        var lastUse: UInt64 = 0

        init(directory: String, app: String) {
            path = "\(directory)/\(app).json".utf8CString
            temporary = "\(directory)/\(app).json.tmp".utf8CString
            name = "\(app).json".utf8CString
            temporaryName = "\(app).json.tmp".utf8CString
        }

        /// For messages.
        var temporaryPath: String { temporary.withUnsafeBufferPointer { String(cString: $0.baseAddress!) } }
    }

    private enum Written {
        case bytes([UInt8])
        case digest(Digest)

        func holds(_ bytes: [UInt8]) -> Bool {
            switch self {
            case .bytes(let last):
                last.count == bytes.count && last.withUnsafeBytes { a in
                    bytes.withUnsafeBytes { b in a.isEmpty || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 }
                }
            case .digest(let digest): digest == Digest(bytes)
            }
        }
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

    /// How many apps keep their file open at most (`AppFile.kept`).
    static let keptCapacity = 32
    /// The most a save in place writes: one page (4 KiB, the smallest page size of Linux's architectures).
    static let pageBytes = 4096
    /// Files are padded to a multiple of this, so that the states of one app (whose names differ in length) mostly
    /// give files of one length: the in-place save then writes over the whole file without growing it.
    static let paddingUnit = 256
    /// The apps whose file is open.
    private var kept: [AppFile] = []
    private var useCounter: UInt64 = 0

    /// The directory, opened by `prepare()`: saves open and rename their files relative to it, which spares
    /// each of those calls the walk of the whole path (two per save). -1 before: saves use the whole paths.
    private var directoryFD: Int32 = -1
    /// Why the directory could not be opened (errno), or 0: saves then use the whole paths, one at a time.
    private(set) var directoryOpenError: Int32 = 0

    init(runtimeDirectory: String) {
        directory = runtimeDirectory + "/state"
    }

    deinit {
        if directoryFD >= 0 { close(directoryFD) }
        for file in kept { if let fd = file.kept { close(fd) } }
    }

    /// How many apps hold their file open (for tests).
    var keptCount: Int { kept.count }

    /// Create the directory (0700: the state names processes and holds apps' data).
    func prepare() throws(SystemError) {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw SystemError(operation: "create \(directory)", errno: errno)
        }
        if directoryFD < 0 {
            directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            directoryOpenError = directoryFD < 0 ? errno : 0
        }
    }

    private func path(_ name: String) -> String { "\(directory)/\(name).json" }

    private func record(for name: String) -> AppFile {
        if let file = files[name] { return file }
        let file = AppFile(directory: directory, app: name)
        files[name] = file
        return file
    }

    /// The start time last saved for this app's process `pid`: a process's start time never changes, so a
    /// save need not read /proc/PID/stat again while the pid is the same (nil: not saved yet for this pid).
    func savedStartTime(of name: String, pid: pid_t) -> UInt64? {
        guard let identity = files[name]?.identity, identity.pid == pid else { return nil }
        return identity.startTime
    }

    /// Writes the app's file, unless it already holds exactly these bytes (then returns false).
    @discardableResult
    func save(_ app: PersistedApp) throws(SystemError) -> Bool {
        var bytes = encode(app)
        let content = bytes  // before the padding
        let file = record(for: app.name)
        if file.written?.holds(content) == true { return false }
        // Whatever happens below, the file may no longer hold what was last saved.
        file.written = nil
        if let fd = file.kept {
            if Self.pad(&bytes, toAtLeast: file.length), rewrite(fd, bytes) {
                file.length = bytes.count
                markUsed(file)
                saved(file, content, app)
                return true
            }
            // Too long for a page, or the write failed, or the file is no longer NAME.json: made again the first way
            // (which reports what failed), the padding kept.
            release(file)
        } else {
            _ = Self.pad(&bytes, toAtLeast: 0)
        }
        let at = directoryFD >= 0 ? directoryFD : AT_FDCWD
        let temporary = directoryFD >= 0 ? file.temporaryName : file.temporary
        let fd = temporary.withUnsafeBufferPointer { openat(at, $0.baseAddress!, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
        guard fd >= 0 else { throw SystemError(operation: "open \(file.temporaryPath)", errno: errno) }
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                let error = errno
                close(fd)
                temporary.withUnsafeBufferPointer { _ = unlinkat(at, $0.baseAddress!, 0) }
                throw SystemError(operation: "write \(file.temporaryPath)", errno: error)
            }
            written += count
        }
        let final = directoryFD >= 0 ? file.name : file.path
        let renamed = temporary.withUnsafeBufferPointer { temporary in
            final.withUnsafeBufferPointer { renameat(at, temporary.baseAddress!, at, $0.baseAddress!) }
        }
        guard renamed == 0 else {
            let error = errno
            close(fd)
            temporary.withUnsafeBufferPointer { _ = unlinkat(at, $0.baseAddress!, 0) }
            throw SystemError(operation: "rename \(file.temporaryPath)", errno: error)
        }
        // The descriptor is NAME.json's now: kept for the next saves in place, if this content fits a page.
        if bytes.count <= Self.pageBytes {
            keep(file, fd, length: bytes.count)
        } else {
            close(fd)
        }
        saved(file, content, app)
        return true
    }

    private func saved(_ file: AppFile, _ content: [UInt8], _ app: PersistedApp) {
        file.written = file.kept != nil ? .bytes(content) : .digest(Digest(content))
        if let pid = app.pid, let startTime = app.startTime {
            file.identity = (pid, startTime)
        } else {
            file.identity = nil
        }
    }

    /// `bytes` (JSON and its newline) with spaces before the newline, up to a multiple of `paddingUnit` and to at
    /// least `length` bytes (JSON allows whitespace after the value). False, and `bytes` as they were, when that is
    /// more than `pageBytes`.
    static func pad(_ bytes: inout [UInt8], toAtLeast length: Int) -> Bool {
        let target = max((bytes.count + paddingUnit - 1) / paddingUnit * paddingUnit, length)
        guard target <= pageBytes, target > bytes.count, bytes.last == UInt8(ascii: "\n") else {
            return bytes.count <= pageBytes && length <= bytes.count
        }
        bytes[bytes.count - 1] = UInt8(ascii: " ")
        bytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: target - bytes.count - 1))
        bytes.append(UInt8(ascii: "\n"))
        return true
    }

    /// One pwrite of the whole file at offset 0 (at most a page: never torn by the daemon's death), then a check
    /// that the file is still NAME.json (linked). False if either fails.
    private func rewrite(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var count: Int
        repeat {
            count = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        } while count < 0 && errno == EINTR
        guard count == bytes.count else { return false }
        var info = stat()
        return fstat(fd, &info) == 0 && info.st_nlink > 0
    }

    /// Keeps `fd` (NAME.json) open for saves in place, closing the least recently saved app's first when
    /// `keptCapacity` apps hold theirs.
    private func keep(_ file: AppFile, _ fd: Int32, length: Int) {
        if kept.count >= Self.keptCapacity, let oldest = kept.indices.min(by: { kept[$0].lastUse < kept[$1].lastUse }) {
            release(kept[oldest])
        }
        file.kept = fd
        file.length = length
        markUsed(file)
        kept.append(file)
    }

    private func markUsed(_ file: AppFile) {
        useCounter &+= 1
        file.lastUse = useCounter
    }

    private func release(_ file: AppFile) {
        guard let fd = file.kept else { return }
        close(fd)
        file.kept = nil
        if case .bytes(let last)? = file.written { file.written = .digest(Digest(last)) }
        kept.removeAll { $0 === file }
    }

    /// The file's bytes: what `LineCoder.encode` gives (JSON and a newline), by `PersistedApp.writeJSON`.
    func encode(_ app: PersistedApp) -> [UInt8] {
        var writer = JSONWriter(capacity: 1024)
        do {
            try app.writeJSON(into: &writer)
        } catch {
            // A payload number JSON cannot hold: LineCoder's verdict, as it was before the hand-written path.
            return coder.encode(app)
        }
        writer.byte(UInt8(ascii: "\n"))
        return writer.bytes
    }

    func remove(_ name: String) {
        if let file = files.removeValue(forKey: name) { release(file) }
        unlink(path(name))
        unlink(path(name) + ".tmp")
    }

    /// Every app file, and a sentence for each one that could not be read (it is then ignored).
    func loadAll() -> (apps: [PersistedApp], problems: [String]) {
        guard let dir = opendir(directory) else { return ([], []) }
        defer { closedir(dir) }
        var apps: [PersistedApp] = [], problems: [String] = []
        while let entry = readdir(dir) {
            let name = directoryEntryName(entry)
            if name.hasSuffix(".json.tmp") {
                // An earlier daemon's temporary file (a save cut short, or an earlier version's spare): not state.
                unlinkat(dirfd(dir), name, 0)
                continue
            }
            guard name.hasSuffix(".json") else { continue }
            let file = directory + "/" + name
            do {
                var bytes = try readWholeFile(file)
                // The newline, and the padding before it (`pad`).
                while let last = bytes.last, last == UInt8(ascii: "\n") || last == UInt8(ascii: " ") { bytes.removeLast() }
                apps.append(try coder.decode(PersistedApp.self, from: bytes))
            } catch {
                problems.append("\(file): \(error)")
            }
        }
        return (apps.sorted { $0.name < $1.name }, problems)
    }

    private func readWholeFile(_ path: String) throws(SystemError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError(operation: "open \(path)", errno: errno) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw SystemError(operation: "read \(path)", errno: errno) }
            if count == 0 { return bytes }
            bytes += buffer[..<count]
        }
    }
}
