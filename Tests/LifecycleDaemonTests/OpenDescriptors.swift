import Glibc
@testable import LifecycleDaemon

/// This process's open descriptors, each with what it names (its /proc/self/fd link: a path, `socket:[…]`,
/// `anon_inode:…`), by its number as /proc/self/fd lists it. For tests that look for descriptors by what they are.
func openDescriptorTargets() -> [(name: String, target: String)] {
    var found: [(name: String, target: String)] = []
    for name in (try? ConfigLoader.listDirectory("/proc/self/fd")) ?? [] {
        var target = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/fd/" + name, &target, target.count - 1)
        guard length > 0 else { continue }  // closed meanwhile (the listing's own directory)
        found.append((name, String(decoding: target[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)))
    }
    return found
}
