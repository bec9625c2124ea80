import TestSupport
import Foundation
import Glibc
@testable import LifecycleDaemon
import Testing

/// `rfc3339`, the `since` of a status reply, writes its digits into a buffer: the same text as printf's for any
/// time, including the ends of a year, of the epoch's first second and of the four-digit years.
@Suite("RFC 3339 times")
struct RFC3339Tests {
    private func reference(_ seconds: Double) -> String {
        let whole = seconds.rounded(.down)
        var time = time_t(whole)
        var parts = tm()
        gmtime_r(&time, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec, Int32((seconds - whole) * 1000))
    }

    @Test func matchesPrintfEverywhere() {
        var times: [Double] = [0, 0.001, 0.999, 59.5, 951_782_400.25, 1_735_689_599.999, 1_735_689_600, 253_402_300_799.999]
        var generator = SplitMix64.seeded(0x3339_2026)
        let seed = generator.state
        for _ in 0..<2000 { times.append(Double.random(in: 0..<4_102_444_800, using: &generator)) }
        for seconds in times {
            #expect(rfc3339(seconds) == reference(seconds), "\(seconds) (seed \(seed))")
        }
        #expect(rfc3339(1_735_689_600.5) == "2025-01-01T00:00:00.500Z")
    }
}
