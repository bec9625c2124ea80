import CSupport
import Glibc

/// An app's stdout and stderr when there is no journal: read from a pipe and written to the daemon's
/// stderr line by line, each line prefixed with the app's name.
final class OutputReader {
    private let fd: FileDescriptor
    private let prefix: String
    private var pending: [UInt8] = []
    private var source: EventSource?
    /// A line longer than this is written in pieces rather than held.
    static let maxLine = 4096

    /// Owns `fd`, the pipe's reading end: it closes with the reader.
    init(fd: FileDescriptor, app: String, loop: EventLoop) throws(SystemError) {
        self.fd = fd
        prefix = app + ": "
        _ = cs_set_nonblocking(fd.rawValue)
        source = try loop.watch(fd: fd.rawValue, events: IOEvents.readable) { [unowned self] _ in self.readAvailable() }
    }

    deinit { close() }

    private func readAvailable() {
        // On the stack, not zero-filled: this runs for every chunk any app writes.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16 * 1024) { buffer in readAll(into: buffer) }
    }

    private func readAll(into buffer: UnsafeMutableBufferPointer<UInt8>) {
        while true {
            let count: Int
            do throws(SystemError) {
                count = try fd.read(into: UnsafeMutableRawBufferPointer(buffer))
            } catch where error.errno == EAGAIN || error.errno == EWOULDBLOCK {
                return
            } catch {
                count = 0
            }
            if count > 0 {
                pending.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[..<count]))
                emitLines()
                continue
            }
            // End of file or a hard error: the app closed its output.
            if !pending.isEmpty { Log.writeLine(prefix + String(decoding: pending, as: UTF8.self)) }
            pending = []
            close()
            return
        }
    }

    private func emitLines() {
        while let end = pending.firstIndex(of: UInt8(ascii: "\n")) ?? (pending.count >= Self.maxLine ? Self.maxLine : nil) {
            Log.writeLine(prefix + String(decoding: pending[..<end], as: UTF8.self))
            pending.removeSubrange(...min(end, pending.count - 1))
        }
        // A burst of output must not keep its buffer for the app's life.
        if pending.isEmpty { pending = [] }
    }

    func close() {
        guard let source else { return }
        source.cancel()
        self.source = nil
        try? fd.close()
    }
}
