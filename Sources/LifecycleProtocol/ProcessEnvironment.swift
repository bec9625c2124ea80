import Glibc

/// The process environment as key/value pairs, read from `environ` (no Foundation needed).
public enum ProcessEnvironment {
    public static func all() -> [(String, String)] {
        var result: [(String, String)] = []
        var pointer = environ
        while let entry = pointer.pointee {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                result.append((String(text[..<equals]), String(text[text.index(after: equals)...])))
            }
            pointer += 1
        }
        return result
    }

    public static func get(_ key: String) -> String? { getenv(key).map { String(cString: $0) } }
}
