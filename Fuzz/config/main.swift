// fuzz-config: the config fuzzer (FuzzTargets.ConfigFuzz). Built by Fuzz/run.sh with -sanitize=fuzzer and
// -DFUZZING, it is libFuzzer (its options and corpus directories as arguments). Built plainly (swift build), it
// replays the files or directories given: `fuzz-config Fuzz/corpus/config Fuzz/regressions/config`.
import FuzzTargets
import Glibc

#if FUZZING
import CFuzzerDriver

// libFuzzer's own main is linked in too (it calls this); SwiftPM's main wins, and hands over below.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    ConfigFuzz.run(UnsafeBufferPointer(start: data, count: size))
    return 0
}

var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
    ConfigFuzz.run(UnsafeBufferPointer(start: data, count: size))
    return 0
})
#else
// Replays the inputs named; a broken check is printed, and the exit status is 1.
var broken = 0
let inputs = try fuzzInputs(Array(CommandLine.arguments.dropFirst()))
for input in inputs {
    let failures = input.bytes.withUnsafeBufferPointer { ConfigFuzz.check($0) }
    if !failures.isEmpty {
        broken += 1
        print("\(input.path): " + failures.joined(separator: "; "))
    }
}
print("fuzz-config: \(inputs.count) inputs replayed, \(broken) with a broken check")
exit(broken == 0 ? 0 : 1)
#endif
