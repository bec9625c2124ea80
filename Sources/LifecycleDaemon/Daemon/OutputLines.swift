import Glibc

/// Cuts an app's output into lines as it arrives in chunks: every byte is in exactly one line, a line longer than
/// `maxLine` bytes is given in pieces of at most `maxLine` (cut before a UTF-8 sequence, never inside one), and the
/// newline itself belongs to no line. Pure, so that the boundaries are unit tests.
///
/// What a chunk costs is linear in its size: lines are found with `memchr` from a read offset, and the bytes of an
/// unfinished line (at most `maxLine`) move to the front once per chunk, never once per line.
struct OutputLineSplitter {
    let maxLine: Int
    /// The bytes of the line in progress.
    private(set) var pending: [UInt8] = []

    init(maxLine: Int) {
        precondition(maxLine >= 4, "a piece must hold a whole UTF-8 sequence")
        self.maxLine = maxLine
    }

    /// Hands `emit` every line (or piece) that `chunk` completes, in order.
    mutating func feed(_ chunk: UnsafeBufferPointer<UInt8>, _ emit: (UnsafeBufferPointer<UInt8>) -> Void) {
        guard chunk.count > 0 else { return }
        pending.append(contentsOf: chunk)
        let consumed = pending.withUnsafeBufferPointer { bytes -> Int in
            var start = 0
            while start < bytes.count {
                // One byte past a full piece tells a line of exactly `maxLine` bytes from a longer one.
                let window = min(bytes.count - start, maxLine + 1)
                if let found = memchr(bytes.baseAddress! + start, Int32(UInt8(ascii: "\n")), window) {
                    let end = bytes.baseAddress!.distance(to: found.assumingMemoryBound(to: UInt8.self))
                    emit(UnsafeBufferPointer(rebasing: bytes[start..<end]))
                    start = end + 1
                } else if window > maxLine {
                    let end = Self.pieceEnd(bytes, start: start, limit: start + maxLine)
                    emit(UnsafeBufferPointer(rebasing: bytes[start..<end]))
                    start = end
                } else {
                    break
                }
            }
            return start
        }
        if consumed == pending.count {
            // A burst of output must not keep its buffer for the app's life.
            pending = []
        } else if consumed > 0 {
            pending.removeFirst(consumed)
        }
    }

    /// The end of the output: what is left of an unfinished line, if anything, goes to `emit`.
    mutating func finish(_ emit: (UnsafeBufferPointer<UInt8>) -> Void) {
        if !pending.isEmpty { pending.withUnsafeBufferPointer { emit($0) } }
        pending = []
    }

    /// Where a piece that may go up to `limit` ends: before the UTF-8 sequence that `limit` would cut, unless the
    /// bytes there are no UTF-8 (a run of continuation bytes longer than a sequence), which are cut where they fall.
    private static func pieceEnd(_ bytes: UnsafeBufferPointer<UInt8>, start: Int, limit: Int) -> Int {
        var end = limit
        // A continuation byte (10xxxxxx) at the cut belongs to the sequence before it.
        while end > start, limit - end < 3, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        guard end > start, bytes[end] & 0xC0 != 0x80 else { return limit }
        return end
    }
}

/// How much of one app's output reaches the log, as journald's `RateLimitIntervalSec=`/`RateLimitBurst=`: at most
/// `burstLines` lines and `burstBytes` bytes in each interval, which begins at the first line after the last one
/// ended; what is over is dropped and counted, and the count is logged once when the interval ends. Pure: time is
/// passed in.
struct OutputRateLimit {
    let interval: Duration
    let burstLines: Int
    let burstBytes: Int
    private var windowStart: Duration?
    private var lines = 0
    private var bytes = 0
    /// Lines dropped in the current interval.
    private(set) var dropped = 0

    /// journald's defaults for a whole service are 10,000 messages in 30 s; the byte bound keeps an app that
    /// writes long lines from filling a disk at the same line count.
    static let standard = OutputRateLimit(interval: .seconds(30), burstLines: 10_000, burstBytes: 1 << 20)

    init(interval: Duration, burstLines: Int, burstBytes: Int) {
        self.interval = interval
        self.burstLines = burstLines
        self.burstBytes = burstBytes
    }

    /// What to do with one line: write it or not; before it, log `endedWithDrops` lines as dropped when an
    /// interval with drops ended before its timer fired; `armTimer` on the interval's first drop (the moment to
    /// arm the timer that reports them).
    struct Verdict: Equatable {
        var write: Bool
        var endedWithDrops = 0
        var armTimer = false
    }

    /// Whether a line of `size` bytes written at `now` may go to the log.
    mutating func admit(size: Int, at now: Duration) -> Verdict {
        var verdict = Verdict(write: false)
        if let windowStart, now - windowStart >= interval { verdict.endedWithDrops = endInterval() }
        if windowStart == nil { windowStart = now }
        // Once a line is dropped, the rest of the interval is dropped too: the log never has holes in it that
        // the count does not account for.
        if dropped == 0 && lines < burstLines && bytes + size <= burstBytes {
            lines += 1
            bytes += size
            verdict.write = true
        } else {
            dropped += 1
            verdict.armTimer = dropped == 1
        }
        return verdict
    }

    /// When the interval that began at the first line is over (nil when no line was written or dropped yet).
    var intervalEnd: Duration? { windowStart.map { $0 + interval } }

    /// Ends the current interval if it is over at `now`, returning the lines it dropped.
    mutating func expire(at now: Duration) -> Int {
        guard let windowStart, now - windowStart >= interval else { return 0 }
        return endInterval()
    }

    /// The lines dropped so far, counted as reported; the interval goes on (its burst stays spent), so that an
    /// app's end, which reports its count at once, gives its next launch no new burst.
    mutating func takeDropped() -> Int {
        defer { dropped = 0 }
        return dropped
    }

    private mutating func endInterval() -> Int {
        let count = dropped
        windowStart = nil
        lines = 0
        bytes = 0
        dropped = 0
        return count
    }
}
