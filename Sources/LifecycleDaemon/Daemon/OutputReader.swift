import CSupport
import Glibc

/// An app's stdout and stderr when there is no journal: read from a pipe and written to the daemon's stderr line
/// by line, each line prefixed with the app's name.
///
/// What an app's output can cost the daemon is bounded (docs/RELIABILITY.md):
/// - it is read `readBudget` bytes per wakeup, then the loop serves every other source before this one again (its
///   source is level-triggered, as `Connection`'s), so an app that writes without pause never holds the loop;
/// - it is cut into lines in linear time, and what is held is one unfinished line of at most `maxLine` bytes;
/// - what reaches the log is rate-limited per app (`AppOutputLog`); the rest is dropped and counted, and the
///   count is logged once.
final class OutputReader {
    private let fd: FileDescriptor
    private let log: AppOutputLog
    private var splitter = OutputLineSplitter(maxLine: OutputReader.maxLine)
    private var source: EventSource?
    /// A line longer than this is written in pieces rather than held.
    static let maxLine = 4096
    /// Read at most this much per wakeup, then yield to the loop (fairness under a flood).
    static let readBudget = 64 * 1024
    private static let readChunk = 16 * 1024

    /// Owns `fd`, the pipe's reading end: it closes with the reader. The lines go to `log`, the app's.
    init(fd: FileDescriptor, log: AppOutputLog, loop: EventLoop) throws(SystemError) {
        self.fd = fd
        self.log = log
        _ = cs_set_nonblocking(fd.rawValue)
        source = try loop.watch(fd: fd.rawValue, events: IOEvents.readable) { [unowned self] _ in self.readAvailable() }
    }

    deinit { close() }

    private func readAvailable() {
        // On the stack, not zero-filled: this runs for every chunk any app writes.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.readChunk) { buffer in
            var budget = Self.readBudget
            while source != nil {
                // Still readable after the budget: the level-triggered source fires again once the others had their turn.
                guard budget > 0 else { return }
                let count: Int
                do throws(SystemError) {
                    count = try fd.read(into: UnsafeMutableRawBufferPointer(buffer))
                } catch where error.errno == EAGAIN || error.errno == EWOULDBLOCK {
                    return
                } catch {
                    count = 0
                }
                guard count > 0 else {
                    // End of file or a hard error: the app closed its output.
                    splitter.finish { log.write($0) }
                    close()
                    return
                }
                budget -= count
                splitter.feed(UnsafeBufferPointer(rebasing: buffer[..<count])) { log.write($0) }
                // A short read emptied the pipe; whatever arrives meanwhile, an end of file included, fires the
                // level-triggered source again.
                if count < buffer.count { return }
            }
        }
    }

    func close() {
        guard let source else { return }
        source.cancel()
        self.source = nil
        try? fd.close()
        log.outputClosed()
    }
}
