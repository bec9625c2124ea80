/// One problem found in a config file. Loading never stops at one: each bad line or value becomes a diagnostic
/// and the loader carries on with what it could read. The library never logs; `lifecycled` logs these.
public struct ConfigDiagnostic: Sendable, Equatable, CustomStringConvertible {
    public enum Severity: String, Sendable {
        /// Something was ignored that does no harm: an unknown section or key.
        case warning
        /// A value, line, file or app was rejected; a default (or an earlier value) is used instead.
        case error
    }

    public var severity: Severity
    /// Relative to the config directory when the file is inside it (`apps/notes.conf`), else as given.
    public var file: String
    /// 1-based; the first line of a continued line; nil when the problem concerns the whole file.
    public var line: Int?
    /// The key without `=`, when the problem concerns one assignment.
    public var key: String?
    public var message: String

    public init(severity: Severity, file: String, line: Int? = nil, key: String? = nil, message: String) {
        self.severity = severity
        self.file = file
        self.line = line
        self.key = key
        self.message = message
    }

    /// `FILE:LINE: KEY=: MESSAGE`, leaving out the parts that are nil.
    public var description: String {
        var text = file
        if let line { text += ":\(line)" }
        if let key { text += ": \(key)=" }
        return text + ": " + message
    }
}

/// Why a value could not be parsed. The description is the first half of a diagnostic's message;
/// the loader adds what it did instead (", using 10s", ", ignoring").
public enum ConfigSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A `"` or `'` (the associated character) opened a group that the value never closes.
    case unterminatedQuote(Character)
    /// A backslash followed by a character that has no escape meaning.
    case unknownEscape(Character)
    /// The value ends with a single backslash.
    case danglingBackslash
    /// `Exec=` gave no words, or an empty program name.
    case emptyCommand
    /// Not a duration; `allowsInfinity` decides which examples the message shows.
    case invalidDuration(String, allowsInfinity: Bool)
    /// `infinity` where the key needs a finite duration.
    case infinityNotAllowed
    /// A duration beyond what a signed 64-bit count of nanoseconds holds (about 292 years).
    case durationTooLarge(String)
    /// Not one of the words the key accepts.
    case invalidChoice(String, expected: [String])
    /// Not a non-negative decimal integer.
    case invalidCount(String)
    /// A path that does not start with `/`.
    case relativePath(String)
    /// An `Environment=` word that is not `NAME=VALUE` with NAME made of letters, digits and `_`, not starting with a digit.
    case invalidEnvironmentAssignment(String)
    /// Neither a user or group name nor a numeric id.
    case invalidUserOrGroup(String)
    /// Not a PSI trigger the kernel accepts (`some|full STALL_US WINDOW_US`).
    case invalidPressureTrigger(String)
    /// A `[Scenes] Configuration=` word that is not `ROLE:NAME`.
    case invalidSceneConfiguration(String)
    /// Not a size: `infinity`, or bytes with an optional K, M, G or T.
    case invalidSize(String)

    public var description: String {
        switch self {
        case .unterminatedQuote(let quote):
            "unterminated \(quote) quote"
        case .unknownEscape(let character):
            "unknown escape '\\\(character)' (known: \\\\, \\\", \\', \\n, \\t, '\\ ')"
        case .danglingBackslash:
            "backslash at the end of the value escapes nothing"
        case .emptyCommand:
            "no program to run"
        case .invalidDuration(let text, let allowsInfinity):
            "invalid duration '\(text)' (expected e.g. \(Self.durationExamples(allowsInfinity)))"
        case .infinityNotAllowed:
            "infinity is not allowed here (expected e.g. \(Self.durationExamples(false)))"
        case .durationTooLarge(let text):
            "duration '\(text)' is too large"
        case .invalidChoice(let text, let expected):
            "invalid value '\(text)' (expected \(Self.alternatives(expected)))"
        case .invalidCount(let text):
            "invalid number '\(text)' (expected a non-negative integer)"
        case .relativePath(let text):
            "'\(text)' is not an absolute path"
        case .invalidEnvironmentAssignment(let text):
            "invalid assignment '\(text)' (expected NAME=VALUE, NAME made of letters, digits and _, not starting with a digit)"
        case .invalidUserOrGroup(let text):
            "invalid name '\(text)' (expected a user or group name, or a numeric id)"
        case .invalidPressureTrigger(let text):
            "invalid pressure trigger '\(text)' (expected some or full, a stall and a window in microseconds,"
                + " the window 500000 to 10000000 and the stall 1 to the window, e.g. 'some 150000 1000000')"
        case .invalidSceneConfiguration(let text):
            "invalid scene configuration '\(text)' (expected ROLE:NAME, e.g. window:Main or externalDisplay:Slides;"
                + " letters, digits, _, . and - only)"
        case .invalidSize(let text):
            "invalid size '\(text)' (expected infinity, a number of bytes, or a number with K, M, G or T, e.g. 512M)"
        }
    }

    private static func durationExamples(_ allowsInfinity: Bool) -> String {
        allowsInfinity ? "10, 500ms, 1min 30s, infinity" : "10, 500ms, 1min 30s"
    }

    private static func alternatives(_ words: [String]) -> String {
        guard let last = words.last else { return "nothing" }
        return words.count == 1 ? last : words.dropLast().joined(separator: ", ") + " or " + last
    }
}
