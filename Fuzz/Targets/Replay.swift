import Foundation

/// The inputs in the files named (a directory: every file in it but hidden ones, sorted by name), with their
/// paths: what the fuzz executables replay when they are not built for libFuzzer, and what the regression tests
/// run through the checks (the seed corpus and every input a fuzzer found a failure with).
public func fuzzInputs(_ paths: [String]) throws -> [(path: String, bytes: [UInt8])] {
    var inputs: [(path: String, bytes: [UInt8])] = []
    for path in paths {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { throw ReplayError(path: path) }
        let files = isDirectory.boolValue
            ? try FileManager.default.contentsOfDirectory(atPath: path).filter { !$0.hasPrefix(".") }.sorted().map { path + "/" + $0 }
            : [path]
        for file in files { inputs.append((file, [UInt8](try Data(contentsOf: URL(fileURLWithPath: file))))) }
    }
    return inputs
}

struct ReplayError: Error, CustomStringConvertible {
    var path: String
    var description: String { "no such file or directory: \(path)" }
}
