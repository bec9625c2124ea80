import Foundation
import FuzzTargets
import Testing

/// The fuzzers' checks (Fuzz/Targets) on their seed corpora and on every input a fuzzer found something with
/// (Fuzz/regressions/TARGET/, named after what they found): each stays here, so that the bug cannot come back
/// unnoticed.
@Suite("fuzz corpora and regressions")
struct FuzzRegressionTests {
    static let fuzz = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fuzz").path

    @Test("the protocol fuzzer's seeds and regressions pass its checks")
    func protocolInputs() throws {
        let seeds = try fuzzInputs(["\(Self.fuzz)/corpus/protocol"])
        #expect(seeds.count > 10)
        for input in try seeds + fuzzInputs(["\(Self.fuzz)/regressions/protocol"]) {
            let findings = input.bytes.withUnsafeBufferPointer(ProtocolFuzz.check)
            #expect(findings.failures.isEmpty, "\(input.path): \(findings.failures)")
        }
    }

    @Test("JSONDecoder refuses a number like 0e3, valid JSON that the hand reader of replies reads: a known, tolerated difference")
    func zeroWithExponentIsAKnownDifference() throws {
        let input = try #require(try fuzzInputs(["\(Self.fuzz)/regressions/protocol/zero-exponent-number-in-reply"]).first)
        let findings = input.bytes.withUnsafeBufferPointer(ProtocolFuzz.check)
        #expect(findings.failures.isEmpty)
        #expect(findings.knownDifferences.count == 1, "\(findings.knownDifferences)")
        // An ack's id must be an integer: LineCoder leaves `0e3` there to JSONDecoder, which refuses it.
        let ack = try #require(try fuzzInputs(["\(Self.fuzz)/regressions/protocol/zero-exponent-number"]).first)
        let ackFindings = ack.bytes.withUnsafeBufferPointer(ProtocolFuzz.check)
        #expect(ackFindings.failures.isEmpty && ackFindings.knownDifferences.isEmpty, "\(ackFindings)")
    }

    @Test("the config fuzzer's seeds and regressions pass its checks")
    func configInputs() throws {
        let seeds = try fuzzInputs(["\(Self.fuzz)/corpus/config"])
        #expect(seeds.count > 5)
        for input in try seeds + fuzzInputs(["\(Self.fuzz)/regressions/config"]) {
            let failures = input.bytes.withUnsafeBufferPointer(ConfigFuzz.check)
            #expect(failures.isEmpty, "\(input.path): \(failures)")
        }
    }
}
