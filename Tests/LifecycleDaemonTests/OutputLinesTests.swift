import Testing
@testable import LifecycleDaemon

@Suite struct OutputLinesTests {
    /// Feeds `output` in chunks of `chunk` bytes and returns the lines, the rest of an unfinished one last.
    private func split(_ output: [UInt8], chunk: Int, maxLine: Int = 4096) -> [[UInt8]] {
        var splitter = OutputLineSplitter(maxLine: maxLine)
        var lines: [[UInt8]] = []
        var offset = 0
        while offset < output.count {
            let piece = Array(output[offset..<min(output.count, offset + chunk)])
            piece.withUnsafeBufferPointer { bytes in splitter.feed(bytes) { lines.append(Array($0)) } }
            #expect(splitter.pending.count <= maxLine, "what is held stays within one piece")
            offset += chunk
        }
        splitter.finish { lines.append(Array($0)) }
        return lines
    }

    /// The line's bytes, in order, with a newline after each but the last: what the app wrote, minus the cuts.
    private func joined(_ lines: [[UInt8]]) -> [UInt8] { Array(lines.joined()) }

    @Test func aLineLongerThanTheBufferKeepsEveryByte() {
        let line = (0..<20_000).map { UInt8(ascii: "a") + UInt8($0 % 26) }
        for chunk in [1, 7, 4095, 4096, 4097, 16 * 1024, 100_000] {
            let lines = split(line + [UInt8(ascii: "\n")], chunk: chunk)
            #expect(joined(lines) == line, "chunk \(chunk)")
            #expect(lines.allSatisfy { $0.count <= 4096 }, "chunk \(chunk)")
            #expect(lines.map(\.count) == [4096, 4096, 4096, 4096, 3616], "chunk \(chunk)")
        }
    }

    @Test func aLineOfExactlyTheLimitIsOneLineWithoutAnEmptyOne() {
        let line = [UInt8](repeating: UInt8(ascii: "x"), count: 4096)
        for chunk in [4096, 4097, 1000] {
            #expect(split(line + [UInt8(ascii: "\n")] + Array("next\n".utf8), chunk: chunk) == [line, Array("next".utf8)])
        }
    }

    @Test func shortLinesAcrossChunksComeWhole() {
        let text = (0..<500).map { "line \($0) " + String(repeating: "z", count: $0 % 37) }
        let output = Array(text.joined(separator: "\n").utf8) + [UInt8(ascii: "\n")]
        for chunk in [1, 3, 64, 4096, 16 * 1024] {
            #expect(split(output, chunk: chunk).map { String(decoding: $0, as: UTF8.self) } == text, "chunk \(chunk)")
        }
    }

    @Test func anUnfinishedLineIsGivenAtTheEnd() {
        #expect(split(Array("one\ntwo".utf8), chunk: 2) == [Array("one".utf8), Array("two".utf8)])
        #expect(split(Array("\n\n".utf8), chunk: 1) == [[], []])
    }

    @Test func aCutNeverSplitsAUTF8Sequence() {
        // "é" is two bytes: at an odd offset, the limit falls inside one.
        let line = Array(("a" + String(repeating: "é", count: 5000)).utf8)
        let lines = split(line + [UInt8(ascii: "\n")], chunk: 4096)
        #expect(joined(lines) == line)
        for piece in lines { #expect(String(validating: piece, as: UTF8.self) != nil) }
        #expect(lines.first?.count == 4095)
    }

    @Test func bytesThatAreNoUTF8AreCutWhereTheyFall() {
        let line = [UInt8](repeating: 0x80, count: 9000)
        let lines = split(line + [UInt8(ascii: "\n")], chunk: 5000)
        #expect(lines.map(\.count) == [4096, 4096, 808])
    }

    // MARK: Rate limit

    @Test func theBurstIsWrittenThenLinesAreDroppedAndCountedOnce() {
        var limit = OutputRateLimit(interval: .seconds(30), burstLines: 3, burstBytes: 1 << 20)
        var written = 0, arms = 0
        for step in 0..<10 {
            let verdict = limit.admit(size: 10, at: .milliseconds(step))
            if verdict.write { written += 1 }
            if verdict.armTimer { arms += 1 }
            #expect(verdict.endedWithDrops == 0)
        }
        #expect(written == 3)
        #expect(arms == 1, "one report per interval")
        #expect(limit.intervalEnd == .seconds(30))
        #expect(limit.expire(at: .seconds(29)) == 0, "not before the interval ends")
        #expect(limit.expire(at: .seconds(30)) == 7)
        #expect(limit.admit(size: 10, at: .seconds(31)) == .init(write: true), "a new interval, a new burst")
    }

    @Test func theByteBoundDropsLongLinesToo() {
        var limit = OutputRateLimit(interval: .seconds(1), burstLines: 1000, burstBytes: 10_000)
        let written = (0..<10).filter { _ in limit.admit(size: 4096, at: .zero).write }.count
        #expect(written == 2)
        #expect(limit.dropped == 8)
    }

    @Test func anIntervalThatEndedBeforeItsTimerIsReportedWithTheNextLine() {
        var limit = OutputRateLimit(interval: .seconds(1), burstLines: 1, burstBytes: 1 << 20)
        _ = limit.admit(size: 1, at: .zero)
        _ = limit.admit(size: 1, at: .milliseconds(1))
        _ = limit.admit(size: 1, at: .milliseconds(2))
        #expect(limit.admit(size: 1, at: .seconds(2)) == .init(write: true, endedWithDrops: 2))
        #expect(limit.takeDropped() == 0)
    }

    @Test func takingTheCountLeavesTheBurstSpent() {
        var limit = OutputRateLimit(interval: .seconds(30), burstLines: 2, burstBytes: 1 << 20)
        for step in 0..<5 { _ = limit.admit(size: 1, at: .milliseconds(step)) }
        #expect(limit.takeDropped() == 3)
        #expect(limit.admit(size: 1, at: .seconds(1)) == .init(write: false, armTimer: true), "the interval goes on")
        #expect(limit.expire(at: .seconds(30)) == 1)
        #expect(limit.admit(size: 1, at: .seconds(31)).write)
    }
}
