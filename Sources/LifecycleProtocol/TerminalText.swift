/// Text from the daemon made safe to print on a terminal. Names, background-task names, reasons and saved states
/// come from apps, which are untrusted: a control character printed raw (ESC, BEL, a C1 code such as CSI) lets an
/// app send escape sequences to the terminal of whoever runs `lifectl`, often root's (retitle it, rewrite what it
/// shows, or worse on some terminals). Each one is shown as `\xHH` instead, so that a person sees it was there.
public enum TerminalText {
    /// `text` with every C0 control character (U+0000–U+001F, tab and newline included: each field is one line),
    /// DEL (U+007F) and C1 control character (U+0080–U+009F) written as `\xHH`; everything else as it is.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var result = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard isControl(scalar) else {
                result.append(scalar)
                continue
            }
            let hex = Array("0123456789abcdef".unicodeScalars)
            result.append(contentsOf: ["\\", "x", hex[Int(scalar.value >> 4)], hex[Int(scalar.value & 0xf)]])
        }
        return String(result)
    }

    /// `text` of several lines (lifectl's help, an error that lists a reload's problems line by line), each line
    /// escaped as `escaped` does: its newlines stay, every other control character is shown.
    public static func escapedLines(_ text: String) -> String {
        // By scalars: "\r\n" is one Character, and its "\r" is shown.
        text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false)
            .map { escaped(String(String.UnicodeScalarView($0))) }.joined(separator: "\n")
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value)
    }
}
