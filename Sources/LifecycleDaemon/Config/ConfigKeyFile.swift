// The syntax of a key file, apart from what any key means: sections, assignments, comments, continuations.

extension ConfigLoader {
    /// One meaningful line of a key file, numbered from 1; a continued line carries the number of its first line.
    enum KeyFileItem: Equatable {
        /// `[Name]`; nil for a malformed header, whose keys are then skipped rather than credited to the section before.
        case section(String?, line: Int)
        /// `Key=value`, both trimmed.
        case assignment(key: String, value: String, line: Int)
    }

    /// Splits `text` into sections and assignments. Comment (`#`, `;`) and blank lines are dropped; a line ending in
    /// an unescaped `\` is joined to the next with the backslash turned into a space, skipping comment lines in
    /// between (as systemd does). Anything else is an error diagnostic and the line is skipped.
    static func readKeyFile(_ text: String, file: String) -> ([KeyFileItem], [ConfigDiagnostic]) {
        var items: [KeyFileItem] = []
        var diagnostics: [ConfigDiagnostic] = []
        var pending: (text: String, line: Int)?

        func interpret(_ line: String, number: Int) {
            if line.hasPrefix("[") {
                let name = line.hasSuffix("]") && line.count >= 2 ? trimmed(line.dropFirst().dropLast()) : ""
                if name.isEmpty || name.contains("[") || name.contains("]") {
                    diagnostics.append(ConfigDiagnostic(
                        severity: .error, file: file, line: number,
                        message: "invalid section header '\(excerpt(line))', ignoring it and the keys under it"))
                    items.append(.section(nil, line: number))
                } else {
                    items.append(.section(name, line: number))
                }
            } else if let equals = line.firstIndex(of: "=") {
                let key = trimmed(line[..<equals])
                if key.isEmpty {
                    diagnostics.append(ConfigDiagnostic(
                        severity: .error, file: file, line: number,
                        message: "missing key before '=' in '\(excerpt(line))', ignoring line"))
                } else {
                    items.append(.assignment(key: key, value: trimmed(line[line.index(after: equals)...]), line: number))
                }
            } else {
                diagnostics.append(ConfigDiagnostic(
                    severity: .error, file: file, line: number,
                    message: "'\(excerpt(line))' is not a [Section], a Key=value or a comment, ignoring line"))
            }
        }

        let body = text.unicodeScalars.first == "\u{FEFF}" ? String(text.unicodeScalars.dropFirst()) : text
        // Split on "\n" bytes: as Characters, "\r\n" is one grapheme that would not match "\n". Lines are split and
        // trimmed on the UTF-8 bytes, not on Unicode scalars: "\n", space, tab and CR are ASCII, and no byte of
        // another character's UTF-8 equals them, so the cuts are the same, and a byte walk costs far less than a scalar walk.
        let utf8 = body.utf8
        var lineStart = utf8.startIndex
        var number = 0
        var more = true
        while more {
            let lineEnd = utf8[lineStart...].firstIndex(of: UInt8(ascii: "\n")) ?? utf8.endIndex
            more = lineEnd != utf8.endIndex
            number += 1
            var first = lineStart, last = lineEnd
            while first < last, isBlankByte(utf8[first]) { first = utf8.index(after: first) }
            while last > first, isBlankByte(utf8[utf8.index(before: last)]) { last = utf8.index(before: last) }
            let line = String(Substring(utf8[first..<last]))
            if more { lineStart = utf8.index(after: lineEnd) }
            let isComment = line.hasPrefix("#") || line.hasPrefix(";")
            if var continued = pending {
                if isComment { continue }
                if endsInContinuation(line) {
                    continued.text += line.dropLast() + " "
                    pending = continued
                } else {
                    interpret(trimmed(continued.text + line), number: continued.line)
                    pending = nil
                }
            } else if line.isEmpty || isComment {
                continue
            } else if endsInContinuation(line) {
                pending = (line.dropLast() + " ", number)
            } else {
                interpret(line, number: number)
            }
        }
        if let continued = pending {
            interpret(trimmed(continued.text), number: continued.line)
        }
        return (items, diagnostics)
    }

    /// `trimmed`'s blanks (space, tab, CR), as UTF-8 bytes.
    private static func isBlankByte(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") || byte == UInt8(ascii: "\r")
    }

    /// An odd number of trailing backslashes: the last one is not itself escaped.
    private static func endsInContinuation(_ line: String) -> Bool {
        var count = 0
        for scalar in line.unicodeScalars.reversed() {
            guard scalar == "\\" else { break }
            count += 1
        }
        return count % 2 == 1
    }

    /// The line as a message quotes it: long lines cut, so one bad line cannot flood the journal.
    private static func excerpt(_ line: String) -> String {
        line.count <= 60 ? line : line.prefix(57) + "..."
    }
}
