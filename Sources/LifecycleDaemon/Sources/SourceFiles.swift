import Glibc

// Reading the files the notification sources watch: whole, bounded, and compared by content, so that an
// event that changed nothing (a `touch`, a rewrite with the same bytes, the several events of one replace)
// posts nothing.

/// What a watched file holds, as far as "did it change" goes.
enum FileFingerprint: Equatable {
    case missing
    /// The length and an FNV-1a hash of the bytes (followed through symlinks).
    case content(size: Int, hash: UInt64)
    /// It exists but cannot be read (EACCES, EISDIR…; ELOOP for a symlink where none is followed).
    case unreadable(errno: Int32)
    /// Where only regular files are read: something else is there (a FIFO, a device, a directory); its type bits.
    case notRegular(type: mode_t)
    /// A regular file over the read bound: its size, its modification time and a hash of the bytes up to the bound.
    case sampled(size: Int, modified: Int64, hash: UInt64)

    init(path: String) {
        do {
            let bytes = try readWatchedFile(path)
            self = .content(size: bytes.count, hash: Self.hash(bytes))
        } catch where error.errno == ENOENT || error.errno == ENOTDIR {
            self = .missing
        } catch {
            self = .unreadable(errno: error.errno)
        }
    }

    /// A file someone other than root controls (an app's `PreferencesFile=`): what it costs the daemon is bounded
    /// whatever is put there. A symlink is not followed (`O_NOFOLLOW`: a link to `/dev/zero` or to another user's
    /// file is read as nothing), only a regular file is read (`O_NONBLOCK`: a FIFO never holds the open), and at
    /// most `limit` bytes of it: a larger file is told apart by its size, modification time and first `limit` bytes,
    /// so a change past the bound that keeps both size and time is not seen.
    init(regularFileAt path: String, limit: Int) {
        do {
            let file = try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY)
            let status = try file.status()
            guard status.st_mode & S_IFMT == S_IFREG else {
                self = .notRegular(type: status.st_mode & S_IFMT)
                return
            }
            // One byte over the bound tells a file at the bound from a larger one, even one that grew since fstat.
            let bytes = try file.readAll(limit: limit + 1, chunkSize: min(limit + 1, 16 * 1024))
            if bytes.count > limit || Int(status.st_size) > limit {
                let modified = Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec)
                self = .sampled(size: max(Int(status.st_size), bytes.count), modified: modified,
                                hash: Self.hash(bytes.prefix(limit)))
            } else {
                self = .content(size: bytes.count, hash: Self.hash(bytes))
            }
        } catch where error.errno == ENOENT || error.errno == ENOTDIR {
            self = .missing
        } catch {
            self = .unreadable(errno: error.errno)
        }
    }

    /// FNV-1a: cheap, and a change detector needs no more.
    private static func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}

/// What is read of an app's preferences file per event: preferences are a few hundred bytes, and the app's own
/// user can put anything at the path.
let preferencesReadLimit = 64 * 1024

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
