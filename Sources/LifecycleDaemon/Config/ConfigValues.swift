// The value parsers of the key table: each turns a trimmed value into a Swift value or throws a
// `ConfigSyntaxError` that says what was expected. Pure functions, no I/O.

extension ConfigLoader {
    /// Splits `Exec=` and `Environment=` values into words, as systemd does: whitespace separates words,
    /// `"…"` and `'…'` group text (quotes may start or end mid-word: `a"b c"` is the one word `ab c`),
    /// and a backslash escapes the next character, inside quotes too: `\\`, `\"`, `\'`, `\n`, `\t` and `\ `.
    /// No shell: no variables, globs, pipes or redirections. `""` is an empty word.
    /// - Throws: `.unterminatedQuote` for a quote never closed, `.unknownEscape` for another escape,
    ///   `.danglingBackslash` for a backslash at the very end.
    public static func splitWords(_ text: String) throws(ConfigSyntaxError) -> [String] {
        var words: [String] = []
        var word = String.UnicodeScalarView()
        var inWord = false
        var quote: Unicode.Scalar?
        var escaping = false
        for scalar in text.unicodeScalars {
            if escaping {
                escaping = false
                switch scalar {
                case "\\", "\"", "'", " ": word.append(scalar)
                case "n": word.append("\n")
                case "t": word.append("\t")
                default: throw .unknownEscape(Character(scalar))
                }
                inWord = true
            } else if scalar == "\\" {
                escaping = true
            } else if let open = quote {
                if scalar == open { quote = nil } else { word.append(scalar) }
            } else if scalar == "\"" || scalar == "'" {
                quote = scalar
                inWord = true
            } else if isWordSeparator(scalar) {
                if inWord {
                    words.append(String(word))
                    word.removeAll()
                    inWord = false
                }
            } else {
                word.append(scalar)
                inWord = true
            }
        }
        if escaping { throw .danglingBackslash }
        if let open = quote { throw .unterminatedQuote(Character(open)) }
        if inWord { words.append(String(word)) }
        return words
    }

    /// Parses a duration the way systemd does: a bare number is seconds (`5`, `0.5`); a number may carry a unit,
    /// `ms`/`msec`, `s`/`sec`, `m`/`min`, `h`; components add up (`1min 30s`, `1h30min`); `infinity` alone
    /// means no limit where `allowInfinity`.
    /// - Returns: the duration, or nil for `infinity` (only when `allowInfinity`).
    /// - Throws: `.invalidDuration`, `.infinityNotAllowed` or `.durationTooLarge`; never returns nil otherwise.
    public static func parseDuration(_ text: String, allowInfinity: Bool) throws(ConfigSyntaxError) -> Duration? {
        let trimmed = trimmed(text)
        if trimmed == "infinity" {
            if allowInfinity { return nil }
            throw .infinityNotAllowed
        }
        let invalid = ConfigSyntaxError.invalidDuration(trimmed, allowsInfinity: allowInfinity)
        let bytes = Array(trimmed.utf8)
        var index = 0
        var total: Int64 = 0
        var components = 0
        func skipBlanks() {
            while index < bytes.count, bytes[index] == UInt8(ascii: " ") || bytes[index] == UInt8(ascii: "\t") { index += 1 }
        }
        func digits() -> ArraySlice<UInt8> {
            let start = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            return bytes[start..<index]
        }
        skipBlanks()
        while index < bytes.count {
            let whole = digits()
            var fraction: ArraySlice<UInt8> = []
            if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
                index += 1
                fraction = digits()
                if fraction.isEmpty { throw invalid }
            }
            if whole.isEmpty { throw invalid }
            skipBlanks()
            let unitStart = index
            while index < bytes.count, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(bytes[index]) { index += 1 }
            guard let nanosecondsPerUnit = durationUnits[String(decoding: bytes[unitStart..<index], as: UTF8.self)] else {
                throw invalid
            }
            guard let component = nanoseconds(whole: whole, fraction: fraction, unit: nanosecondsPerUnit) else {
                throw .durationTooLarge(trimmed)
            }
            let (sum, overflow) = total.addingReportingOverflow(component)
            if overflow { throw .durationTooLarge(trimmed) }
            total = sum
            components += 1
            skipBlanks()
        }
        if components == 0 { throw invalid }
        return .nanoseconds(total)
    }

    /// Formats a duration so that `parseDuration` reads it back: `10s`, `100ms`, `1min 30s`, `0`, `infinity` (nil).
    public static func formatDuration(_ duration: Duration?) -> String {
        guard let duration else { return "infinity" }
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0, attoseconds >= 0 else { return "\(duration)" }
        var parts: [String] = []
        if seconds >= 3600 { parts.append("\(seconds / 3600)h") }
        if seconds % 3600 >= 60 { parts.append("\(seconds % 3600 / 60)min") }
        if seconds % 60 > 0 { parts.append("\(seconds % 60)s") }
        let nanoseconds = attoseconds / 1_000_000_000
        if nanoseconds > 0 {
            let milliseconds = nanoseconds / 1_000_000
            let rest = nanoseconds % 1_000_000
            if rest == 0 {
                parts.append("\(milliseconds)ms")
            } else {
                var digits = String(rest)
                digits = String(repeating: "0", count: 6 - digits.count) + digits
                while digits.hasSuffix("0") { digits.removeLast() }
                parts.append("\(milliseconds).\(digits)ms")
            }
        }
        return parts.isEmpty ? "0" : parts.joined(separator: " ")
    }

    /// `StartLimitBurst=`: a non-negative decimal integer.
    static func parseCount(_ text: String) throws(ConfigSyntaxError) -> Int {
        guard !text.isEmpty, text.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              let count = Int(text) else {
            throw .invalidCount(text)
        }
        return count
    }

    /// One of the raw values of `Choice`, spelled exactly.
    static func parseChoice<Choice: RawRepresentable & CaseIterable>(_ text: String) throws(ConfigSyntaxError) -> Choice
    where Choice.RawValue == String {
        guard let choice = Choice(rawValue: text) else {
            throw .invalidChoice(text, expected: Choice.allCases.map(\.rawValue))
        }
        return choice
    }

    /// `MemoryLow=`: `infinity`, or a number of bytes with an optional `K`, `M`, `G` or `T` (powers of 1024, as
    /// systemd reads them).
    static func parseMemoryProtection(_ text: String) throws(ConfigSyntaxError) -> MemoryProtection {
        if text == "infinity" { return .infinity }
        let shifts: [Character: UInt64] = ["K": 10, "M": 20, "G": 30, "T": 40]
        let shift = text.last.flatMap { shifts[$0] } ?? 0
        let digits = shift == 0 ? Substring(text) : text.dropLast()
        guard !digits.isEmpty, digits.utf8.allSatisfy(isDigit), let count = UInt64(digits),
              count <= UInt64.max >> shift else { throw .invalidSize(text) }
        return .bytes(count << shift)
    }

    static func formatMemoryProtection(_ protection: MemoryProtection) -> String {
        switch protection {
        case .infinity: "infinity"
        case .bytes(let count): String(count)
        }
    }

    /// `Protocol=lifecycle|none`, as `AppPolicy.speaksProtocol`.
    static func parseProtocol(_ text: String) throws(ConfigSyntaxError) -> Bool {
        switch text {
        case "lifecycle": return true
        case "none": return false
        default: throw .invalidChoice(text, expected: ["lifecycle", "none"])
        }
    }

    /// `WorkingDirectory=`: kept as written, but it must be absolute (the daemon's own directory means nothing to an app).
    static func parseAbsolutePath(_ text: String) throws(ConfigSyntaxError) -> String {
        guard text.hasPrefix("/") else { throw .relativePath(text) }
        return text
    }

    /// A boolean as systemd spells it: `yes`/`no`, `true`/`false`, `on`/`off`, `1`/`0` (and `y`, `n`, `t`, `f`),
    /// in any case.
    static func parseBoolean(_ text: String) throws(ConfigSyntaxError) -> Bool {
        switch text.lowercased() {
        case "1", "yes", "y", "true", "t", "on": return true
        case "0", "no", "n", "false", "f", "off": return false
        default: throw .invalidChoice(text, expected: ["yes", "no"])
        }
    }

    static func formatBoolean(_ value: Bool) -> String { value ? "yes" : "no" }

    /// `LocaleFiles=`: one or more absolute paths, split into words as `Exec=` (so a path with spaces is quoted).
    static func parseAbsolutePaths(_ text: String) throws(ConfigSyntaxError) -> [String] {
        let words = try splitWords(text)
        for word in words { _ = try parseAbsolutePath(word) }
        return words
    }

    /// `PressureTrigger=`: what the kernel accepts as a PSI trigger (Documentation/accounting/psi.rst):
    /// `some` or `full`, a stall threshold and a window in microseconds, the window 500 ms to 10 s and the
    /// threshold at most the window. Kept in the kernel's words, with single spaces.
    static func parsePressureTrigger(_ text: String) throws(ConfigSyntaxError) -> String {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" })
        guard words.count == 3, words[0] == "some" || words[0] == "full",
              words[1].utf8.allSatisfy(isDigit), words[2].utf8.allSatisfy(isDigit),
              let threshold = UInt64(words[1]), let window = UInt64(words[2]),
              (500_000...10_000_000).contains(window), (1...window).contains(threshold)
        else { throw .invalidPressureTrigger(text) }
        return words.joined(separator: " ")
    }

    /// `User=`, `Group=`: a numeric id below 4294967295 (which is `(uid_t) -1`), or a name of letters, digits,
    /// `_`, `.` and `-` that does not start with a digit, `.` or `-`, at most 256 characters, optionally ending in `$`.
    static func parseUserOrGroup(_ text: String) throws(ConfigSyntaxError) -> String {
        let bytes = Array(text.utf8)
        if let first = bytes.first, isDigit(first) {
            guard bytes.allSatisfy(isDigit), let id = UInt32(text), id != .max else { throw .invalidUserOrGroup(text) }
            return text
        }
        let body = bytes.last == UInt8(ascii: "$") ? bytes.dropLast() : bytes[...]
        guard let first = body.first, first == UInt8(ascii: "_") || isLetter(first), body.count <= 256,
              body.allSatisfy({ isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") })
        else { throw .invalidUserOrGroup(text) }
        return text
    }

    /// `Environment=`: words (split as `Exec=`) of the form `NAME=VALUE`.
    static func parseEnvironment(_ text: String) throws(ConfigSyntaxError) -> [String] {
        let words = try splitWords(text)
        for word in words {
            guard let equals = word.firstIndex(of: "="), isValidEnvironmentName(word[..<equals]) else {
                throw .invalidEnvironmentAssignment(word)
            }
        }
        return words
    }

    /// Adds `assignments` to `environment`; an assignment to a name already there replaces it in place,
    /// so each name appears once, where it first appeared, with its last value.
    static func mergeEnvironment(_ environment: [String], _ assignments: [String]) -> [String] {
        var merged = environment
        for assignment in assignments {
            let name = environmentName(assignment)
            if let index = merged.firstIndex(where: { environmentName($0) == name }) {
                merged[index] = assignment
            } else {
                merged.append(assignment)
            }
        }
        return merged
    }

    /// `Exec=`: at least one word, and a non-empty program.
    static func parseCommand(_ text: String) throws(ConfigSyntaxError) -> [String] {
        let words = try splitWords(text)
        guard let program = words.first, !program.isEmpty else { throw .emptyCommand }
        return words
    }

    /// App names become file names, cgroup names and `lifectl` arguments, hence the narrow alphabet:
    /// `[A-Za-z0-9][A-Za-z0-9_.-]{0,63}`.
    static func isValidAppName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, bytes.count <= 64, isLetter(first) || isDigit(first) else { return false }
        return bytes.allSatisfy { isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-") }
    }

    /// Leading and trailing spaces, tabs and carriage returns removed.
    static func trimmed<Text: StringProtocol>(_ text: Text) -> String {
        let scalars = text.unicodeScalars
        guard let start = scalars.firstIndex(where: { !isBlank($0) }),
              let end = scalars.lastIndex(where: { !isBlank($0) }) else { return "" }
        // A copy of the bytes; building a UnicodeScalarView appends scalar by scalar (most of a config file's parse).
        return String(decoding: text.utf8[start..<scalars.index(after: end)], as: UTF8.self)
    }

    // MARK: - Helpers

    private static let durationUnits: [String: Int64] = [
        "": 1_000_000_000,
        "ms": 1_000_000, "msec": 1_000_000,
        "s": 1_000_000_000, "sec": 1_000_000_000,
        "m": 60_000_000_000, "min": 60_000_000_000,
        "h": 3_600_000_000_000,
    ]

    /// `whole.fraction` units in nanoseconds; digits finer than a nanosecond are dropped; nil on overflow.
    private static func nanoseconds(whole: ArraySlice<UInt8>, fraction: ArraySlice<UInt8>, unit: Int64) -> Int64? {
        var value: Int64 = 0
        for digit in whole {
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = shifted.addingReportingOverflow(Int64(digit - UInt8(ascii: "0")))
            if overflow1 || overflow2 { return nil }
            value = sum
        }
        let (scaled, overflow) = value.multipliedReportingOverflow(by: unit)
        if overflow { return nil }
        var place = unit
        var fractional: Int64 = 0
        for digit in fraction {
            place /= 10
            if place == 0 { break }
            fractional += Int64(digit - UInt8(ascii: "0")) * place
        }
        let (total, overflow3) = scaled.addingReportingOverflow(fractional)
        return overflow3 ? nil : total
    }

    private static func environmentName(_ assignment: String) -> Substring {
        assignment.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
    }

    private static func isValidEnvironmentName(_ name: Substring) -> Bool {
        guard let first = name.utf8.first, !isDigit(first) else { return false }
        return name.utf8.allSatisfy { isLetter($0) || isDigit($0) || $0 == UInt8(ascii: "_") }
    }

    private static func isWordSeparator(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r"
    }

    private static func isBlank(_ scalar: Unicode.Scalar) -> Bool {
        scalar == " " || scalar == "\t" || scalar == "\r"
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private static func isLetter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
    }
}
