import Glibc

// Reading the files the notification sources watch: whole, bounded, and compared by content, so that an
// event that changed nothing (a `touch`, a rewrite with the same bytes, the several events of one replace)
// posts nothing.

/// What a watched file holds, as far as "did it change" goes.
enum FileFingerprint: Equatable {
    case missing
    /// The length and an FNV-1a hash of the bytes (followed through symlinks).
    case content(size: Int, hash: UInt64)
    /// It exists but cannot be read (EACCES, EISDIR…).
    case unreadable(errno: Int32)

    init(path: String) {
        do {
            let bytes = try readWatchedFile(path)
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for byte in bytes {
                hash ^= UInt64(byte)
                hash = hash &* 0x0000_0100_0000_01b3
            }
            self = .content(size: bytes.count, hash: hash)
        } catch where error.errno == ENOENT || error.errno == ENOTDIR {
            self = .missing
        } catch {
            self = .unreadable(errno: error.errno)
        }
    }
}

/// Watched files are small (a zone file is 2–3 KiB, a preferences file rarely more than a few hundred); the
/// bound keeps a mistaken path (a device, a log) from eating memory.
let watchedFileLimit = 16 * 1024 * 1024

/// The bytes of `path`, up to `limit`; throws ENOENT for a missing file (or a dangling symlink).
func readWatchedFile(_ path: String, limit: Int = watchedFileLimit) throws(SystemError) -> [UInt8] {
    try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK).readAll(limit: limit)
}

/// `/etc/localtime` → (`/etc`, `localtime`); `/x` → (`/`, `x`). For absolute paths.
func splitParent(_ path: String) -> (directory: String, name: String) {
    var trimmed = Substring(path)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    guard let slash = trimmed.lastIndex(of: "/") else { return (".", String(trimmed)) }
    let directory = trimmed[..<slash]
    return (directory.isEmpty ? "/" : String(directory), String(trimmed[trimmed.index(after: slash)...]))
}
