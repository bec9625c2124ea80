#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// The loader's only contact with the file system: read one file, list one directory. Kept apart so the parsers
// stay pure and so tests can drive the parsers with strings and the loader with a temporary directory.

extension ConfigLoader {
    /// Why a config file or directory could not be read; `description` completes "Failed to read …: ".
    enum FileError: Error, Equatable, CustomStringConvertible {
        /// A system call failed; `errno` says why (ENOENT, EACCES, EISDIR, ...).
        case system(operation: String, errno: Int32)
        case notUTF8
        case tooLarge(limit: Int)
        /// Not a regular file (after symlinks): a FIFO, a socket, a device, a directory. `kind` names it.
        case notRegular(kind: String)

        /// The file or directory does not exist, which for the optional ones is no error.
        var isNotFound: Bool {
            if case .system(_, ENOENT) = self { true } else { false }
        }

        var description: String {
            switch self {
            case .system(let operation, let code): "\(operation): \(String(cString: strerror(code)))"
            case .notUTF8: "not valid UTF-8"
            case .tooLarge(let limit): "larger than \(limit / 1024 / 1024) MiB"
            case .notRegular(let kind): "not a regular file (\(kind))"
            }
        }
    }

    /// A config file is a few hundred bytes; the bound keeps a mistaken path (a device, a log) from eating memory.
    static let maximumFileSize = 4 * 1024 * 1024

    /// The whole of the file at `path`, as UTF-8 text. It must be a regular file: a symlink to one is followed (an
    /// administrator may link an app file from elsewhere), and anything else is refused before a byte is read.
    static func readTextFile(_ path: String) throws(FileError) -> String {
        let file: FileDescriptor
        do {
            // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer, and the daemon with it.
            file = try FileDescriptor.open(path, O_RDONLY | O_NONBLOCK)
        } catch {
            // A socket cannot be opened at all (ENXIO): say what it is rather than "no such device".
            var status = stat()
            if error.errno == ENXIO, stat(path, &status) == 0, status.st_mode & S_IFMT != S_IFREG {
                throw .notRegular(kind: fileKind(status.st_mode))
            }
            throw .system(operation: "open", errno: error.errno)
        }
        let status: stat
        do { status = try file.status() } catch { throw .system(operation: "fstat", errno: error.errno) }
        guard status.st_mode & S_IFMT == S_IFREG else { throw .notRegular(kind: fileKind(status.st_mode)) }
        guard Int(status.st_size) <= maximumFileSize else { throw .tooLarge(limit: maximumFileSize) }
        let bytes: [UInt8]
        do {
            // One byte over the bound tells a file at the bound from one that grew since the fstat.
            bytes = try file.readAll(limit: maximumFileSize + 1)
        } catch {
            throw .system(operation: "read", errno: error.errno)
        }
        if bytes.count > maximumFileSize { throw .tooLarge(limit: maximumFileSize) }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .notUTF8 }
        return text
    }

    /// The names in the directory at `path`, without `.` and `..`, sorted so diagnostics come in a stable order.
    static func listDirectory(_ path: String) throws(FileError) -> [String] {
        guard let directory = opendir(path) else { throw .system(operation: "opendir", errno: errno) }
        defer { closedir(directory) }
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(directory) else {
                if errno != 0 { throw .system(operation: "readdir", errno: errno) }
                break
            }
            let name = directoryEntryName(entry)
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    /// What a file of `mode` is, in words for a diagnostic.
    static func fileKind(_ mode: mode_t) -> String {
        switch mode & S_IFMT {
        case S_IFDIR: "a directory"
        case S_IFIFO: "a FIFO"
        case S_IFSOCK: "a socket"
        case S_IFCHR: "a character device"
        case S_IFBLK: "a block device"
        case S_IFLNK: "a symlink"
        default: "not a file"
        }
    }

    /// Whether `path` names a directory (following symlinks); the errno when it cannot be examined.
    static func isDirectory(_ path: String) throws(FileError) -> Bool {
        var status = stat()
        guard stat(path, &status) == 0 else { throw .system(operation: "stat", errno: errno) }
        return status.st_mode & S_IFMT == S_IFDIR
    }

}
