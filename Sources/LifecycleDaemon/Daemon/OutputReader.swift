import CSupport
import Glibc

/// An app's stdout and stderr when there is no journal: read from a pipe and written to the daemon's stderr line
/// by line, each line prefixed with the app's name.
///
/// What an app's output can cost the daemon is bounded (docs/RELIABILITY.md):
/// - it is read `readBudget` bytes per wakeup, then the loop serves every other source before this one again (its
///   source is level-triggered, as `Connection`'s), so an app that writes without pause never holds the loop;
/// - it is cut into lines in linear time, and what is held is one unfinished line of at most `maxLine` bytes;
/// - what reaches the log is rate-limited per app (`OutputRateLimit.standard`); the rest is dropped and counted,
///   and the count is logged once when the interval ends.
final class OutputReader {
    private let fd: FileDescriptor
    private let app: String
    private let prefix: [UInt8]
    private unowned let loop: EventLoop
    private var splitter = OutputLineSplitter(maxLine: OutputReader.maxLine)
    private var limit: OutputRateLimit
    private var source: EventSource?
    private var reportTimer: LoopTimer?
    /// A line longer than this is written in pieces rather than held.
    static let maxLine = 4096
    /// Read at most this much per wakeup, then yield to the loop (fairness under a flood).
    static let readBudget = 64 * 1024
    private static let readChunk = 16 * 1024

    /// Owns `fd`, the pipe's reading end: it closes with the reader.
    init(fd: FileDescriptor, app: String, loop: EventLoop, limit: OutputRateLimit = .standard) throws(SystemError) {
        self.fd = fd
        self.app = app
        prefix = Array((app + ": ").utf8)
        self.loop = loop
        self.limit = limit
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
                    splitter.finish { write($0) }
                    close()
                    return
                }
                budget -= count
                splitter.feed(UnsafeBufferPointer(rebasing: buffer[..<count])) { write($0) }
                // A short read emptied the pipe; whatever arrives meanwhile, an end of file included, fires the
                // level-triggered source again.
                if count < buffer.count { return }
            }
        }
    }

    private func write(_ line: UnsafeBufferPointer<UInt8>) {
        let verdict = limit.admit(size: line.count, at: loop.now)
        if verdict.endedWithDrops > 0 { reportDropped(verdict.endedWithDrops) }
        if verdict.write { Log.writeOutput(prefix: prefix, line) }
        if verdict.armTimer, let end = limit.intervalEnd { armReport(at: end) }
    }

    private func armReport(at end: Duration) {
        if reportTimer == nil {
            reportTimer = try? LoopTimer(loop: loop) { [unowned self] in
                self.reportDropped(self.limit.expire(at: self.loop.now))
            }
        }
        reportTimer?.arm(after: max(.zero, end - loop.now))
    }

    private func reportDropped(_ count: Int) {
        guard count > 0 else { return }
        Log.warning("\(app): \(count) line\(count == 1 ? "" : "s") of output dropped (more than \(limit.burstLines) lines or \(limit.burstBytes / 1024) KiB within \(describe(limit.interval)))")
    }

    func close() {
        guard let source else { return }
        source.cancel()
        self.source = nil
        try? fd.close()
        // An app that ended mid-flood: its count is not left to a timer that outlives the reader.
        reportTimer?.cancel()
        reportTimer = nil
        reportDropped(limit.expire(at: loop.now, force: true))
    }
}
