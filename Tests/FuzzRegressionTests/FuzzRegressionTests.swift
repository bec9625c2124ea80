import Foundation
import FuzzTargets
import LifecycleProtocol
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

    @Test("a number like 0e3 (RFC 8259's int and exp, with a zero) is read as the number it is, in a reply and as an ack's id")
    func zeroWithExponentIsRead() throws {
        for name in ["zero-exponent-number-in-reply", "zero-exponent-number"] {
            let input = try #require(try fuzzInputs(["\(Self.fuzz)/regressions/protocol/\(name)"]).first)
            let findings = input.bytes.withUnsafeBufferPointer(ProtocolFuzz.check)
            #expect(findings.failures.isEmpty, "\(name): \(findings.failures)")
        }
        let ack = try LineCoder().decode(ClientMessage.self, from: Array(#"{"type":"ack","id":0e3}"#.utf8))
        #expect(ack == .ack(id: 0))
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
