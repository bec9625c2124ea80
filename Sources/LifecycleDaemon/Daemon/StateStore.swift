import CSupport
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

/// RUNTIME_DIR/state/NAME.json, one file per app, each written whole to a temporary file and renamed over
/// the old one: a reader (the next daemon) sees the old file or the new one, never a torn one.
///
/// An app saved again (most are saved at each transition) keeps two files open, NAME.json and NAME.json.tmp: the
/// save writes the temporary one whole (pwrite, ftruncate) and swaps the two names in one atomic step
/// (renameat2 RENAME_EXCHANGE), so the old file becomes the next temporary one. No file is made and none freed per
/// save: 4.6 µs instead of 13.6 for create, write, close and rename on this machine's tmpfs, where the four saves
/// of an app switch were a third of its time (docs/BENCHMARKS.md). The name NAME.json still always names a whole
/// file; a reader that keeps it open past the next save but one may see that save's bytes (the next daemon reads
/// each file once, after this one is gone). At most `pairedCapacity` apps keep their pair open, the least recently
/// saved closed first: a thousand apps do not hold two thousand descriptors. NAME.json.tmp files are not state
/// (`loadAll` removes them).
///
/// No fsync: the file outlives the daemon, not the machine. A daemon crash (even `kill -9`) loses nothing the
/// kernel has accepted with write(); a machine crash also ends every process the file describes, and the
/// runtime directory is volatile (/run is a tmpfs). Measured on this machine's ext4 (docs/RELIABILITY.md):
/// write+fsync+rename of a 20 KB file 6.9 ms, write+rename 0.7 ms, per transition.
///
/// Saves are skipped when nothing changed: the store remembers a digest of the bytes it last wrote for each app
/// (their length and a 64-bit SipHash under this process's random seed, so no app can aim a collision), and a
/// save of the same bytes writes nothing (the file already holds them). A digest, not the bytes: 500 apps holding
/// queued notifications kept megabytes of copies (the soak test's RSS check).
final class StateStore {
    let directory: String
    private let coder = LineCoder()
    /// What the store knows of each app's file: one record, found with one lookup per save (four lookups and the
    /// paths built anew at every save were a quarter of a save's instructions once its encoding was cheap).
    private var files: [String: AppFile] = [:]

    /// One app's file: its paths (as C strings, made once, for open and rename), the digest of what this daemon last wrote to
    /// it, and the process identity it last saved.
    private final class AppFile {
        let path: ContiguousArray<CChar>
        let temporary: ContiguousArray<CChar>
        /// The names inside the directory, for openat and renameat on `directoryFD`.
        let name: ContiguousArray<CChar>
        let temporaryName: ContiguousArray<CChar>
        /// nil: not written by this daemon, or its content is uncertain (a save failed halfway).
        var digest: Digest?
        /// So that a save need not read /proc/PID/stat again.
        var identity: (pid: pid_t, startTime: UInt64)?
        /// The file exists as this daemon wrote it whole (a first save is a create and a rename).
        var written = false
        /// NAME.json and NAME.json.tmp, open while the app is among the recently saved (`pairedCapacity`), and
        /// their lengths (-1: unknown): a save of at least as many bytes as the temporary one holds need not truncate it.
        var pair: (final: Int32, temporary: Int32)?
        var finalLength = -1
        var temporaryLength = -1
        /// When it was last saved through its pair (the store's counter), for the least recently used.
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

    /// How many apps keep their two files open at most (`AppFile.pair`).
    static let pairedCapacity = 32
    /// The apps whose pair is open.
    private var paired: [AppFile] = []
    private var useCounter: UInt64 = 0
    /// The state directory's filesystem refused a swap (`exchange`): no pairs.
    private var exchangeUnsupported = false

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
        for file in paired { if let pair = file.pair { close(pair.final); close(pair.temporary) } }
    }

    /// How many apps hold their pair of files open (for tests).
    var pairedCount: Int { paired.count }

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
        let bytes = encode(app)
        let digest = Digest(bytes)
        let file = record(for: app.name)
        if file.digest == digest { return false }
        // Whatever happens below, the file may no longer hold what was last saved.
        file.digest = nil
        if file.written && directoryFD >= 0 && !exchangeUnsupported {
            if file.pair == nil { openPair(file) }
            if file.pair != nil {
                if exchange(file, bytes) {
                    saved(file, digest, app)
                    return true
                }
                closePair(file)  // and write it the first way, which reports what failed
            }
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
        close(fd)
        let final = directoryFD >= 0 ? file.name : file.path
        let renamed = temporary.withUnsafeBufferPointer { temporary in
            final.withUnsafeBufferPointer { renameat(at, temporary.baseAddress!, at, $0.baseAddress!) }
        }
        guard renamed == 0 else {
            let error = errno
            temporary.withUnsafeBufferPointer { _ = unlinkat(at, $0.baseAddress!, 0) }
            throw SystemError(operation: "rename \(file.temporaryPath)", errno: error)
        }
        file.written = true
        saved(file, digest, app)
        return true
    }

    private func saved(_ file: AppFile, _ digest: Digest, _ app: PersistedApp) {
        file.digest = digest
        if let pid = app.pid, let startTime = app.startTime {
            file.identity = (pid, startTime)
        } else {
            file.identity = nil
        }
    }

    /// Writes `bytes` whole into NAME.json.tmp and swaps it with NAME.json. False if any step failed (the pair is
    /// then closed by the caller, and NAME.json still names a whole file: the last step is the atomic swap).
    private func exchange(_ file: AppFile, _ bytes: [UInt8]) -> Bool {
        guard let pair = file.pair else { return false }
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { pwrite(pair.temporary, $0.baseAddress, $0.count, off_t(written)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return false }
            written += count
        }
        // A save at least as long as the file it reuses overwrites all of it: no truncate then (of the four saves of
        // an app switch, whose lengths follow the state's name, half).
        if file.temporaryLength < 0 || file.temporaryLength > bytes.count {
            guard ftruncate(pair.temporary, off_t(bytes.count)) == 0 else { return false }
        }
        let swapped = file.temporaryName.withUnsafeBufferPointer { temporary in
            file.name.withUnsafeBufferPointer { cs_rename_exchange(directoryFD, temporary.baseAddress!, $0.baseAddress!) }
        }
        guard swapped == 0 else {
            // A filesystem without RENAME_EXCHANGE (some network and FUSE ones): every save the first way from now on,
            // not a pair opened and closed around each failed swap.
            if errno == EINVAL || errno == ENOSYS || errno == EOPNOTSUPP { exchangeUnsupported = true }
            return false
        }
        // What was the temporary file is NAME.json now, and the old NAME.json the next temporary one.
        file.pair = (final: pair.temporary, temporary: pair.final)
        (file.finalLength, file.temporaryLength) = (bytes.count, file.finalLength)
        useCounter &+= 1
        file.lastUse = useCounter
        return true
    }

    /// Opens NAME.json (as this daemon last wrote it) and NAME.json.tmp (made if missing), closing the pair of the
    /// least recently saved app first when `pairedCapacity` apps hold theirs. Leaves `pair` nil if either fails.
    private func openPair(_ file: AppFile) {
        if paired.count >= Self.pairedCapacity, let oldest = paired.indices.min(by: { paired[$0].lastUse < paired[$1].lastUse }) {
            closePair(paired[oldest])
        }
        let final = file.name.withUnsafeBufferPointer { openat(directoryFD, $0.baseAddress!, O_WRONLY | O_CLOEXEC) }
        guard final >= 0 else { return }
        let temporary = file.temporaryName.withUnsafeBufferPointer {
            openat(directoryFD, $0.baseAddress!, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        }
        guard temporary >= 0 else {
            close(final)
            return
        }
        file.pair = (final, temporary)
        (file.finalLength, file.temporaryLength) = (-1, -1)
        paired.append(file)
    }

    private func closePair(_ file: AppFile) {
        guard let pair = file.pair else { return }
        close(pair.final)
        close(pair.temporary)
        file.pair = nil
        paired.removeAll { $0 === file }
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
        if let file = files.removeValue(forKey: name) { closePair(file) }
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
                // An earlier daemon's temporary file (a save cut short, or a pair's spare): not state.
                unlinkat(dirfd(dir), name, 0)
                continue
            }
            guard name.hasSuffix(".json") else { continue }
            let file = directory + "/" + name
            do {
                var bytes = try readWholeFile(file)
                if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
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
