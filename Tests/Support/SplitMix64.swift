import Foundation

/// SplitMix64: a small generator whose whole run follows from its seed, shared by every test target's random tests.
public struct SplitMix64: RandomNumberGenerator {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    /// Seeded from `seed`, or from LIFECYCLE_TEST_SEED when it is set (to replay another run); the seed used is
    /// printed, so that a failure can be run again.
    public static func seeded(_ seed: UInt64, test: String = #function) -> SplitMix64 {
        let chosen = ProcessInfo.processInfo.environment["LIFECYCLE_TEST_SEED"].flatMap { UInt64($0) } ?? seed
        print("\(test): seed \(chosen) (LIFECYCLE_TEST_SEED=\(chosen) replays it)")
        return SplitMix64(seed: chosen)
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
