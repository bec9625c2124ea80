import LifecycleProtocol
import Testing

@Suite("Text for a terminal")
struct TerminalTextTests {
    @Test("an OSC escape an app put in a name is shown as \\xHH, not sent to the terminal")
    func escapesAnOperatingSystemCommand() {
        #expect(TerminalText.escaped("upload\u{1B}]0;pwned\u{07}") == "upload\\x1b]0;pwned\\x07")
    }

    @Test("every C0 control, DEL and every C1 control is escaped; printable text, accents and emoji are not")
    func escapesEveryControlCharacterAndNothingElse() {
        #expect(TerminalText.escaped("a\u{0}b\tc\nd\u{7F}e\u{9B}f\u{80}") == "a\\x00b\\x09c\\x0ad\\x7fe\\x9bf\\x80")
        let printable = "notes ~!@#$%^&*()_+ é ü ß 日本 🎵 \\x1b \u{A0}"
        #expect(TerminalText.escaped(printable) == printable)
    }

    @Test("text of several lines keeps its newlines, an empty line included; every other control character is escaped")
    func escapesEachLineOnItsOwn() {
        #expect(TerminalText.escapedLines("usage:\n\n  a\u{1B}[31m\tb\r\n") == "usage:\n\n  a\\x1b[31m\\x09b\\x0d\n")
        #expect(TerminalText.escapedLines("one line") == "one line")
    }
}
