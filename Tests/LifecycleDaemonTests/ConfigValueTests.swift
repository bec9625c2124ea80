import Testing
@testable import LifecycleDaemon

@Suite struct ConfigWordSplittingTests {
    @Test func whitespaceSeparatesWords() throws {
        #expect(try ConfigLoader.splitWords("  /usr/bin/notes \t--sync   now ") == ["/usr/bin/notes", "--sync", "now"])
    }

    @Test func quotesGroupWordsAndMayStartMidWord() throws {
        #expect(try ConfigLoader.splitWords(#"notes "a b" 'c  d' --name="My Notes" x"y z"w"#)
            == ["notes", "a b", "c  d", "--name=My Notes", "xy zw"])
    }

    @Test func quotesOfTheOtherKindAreLiteralInsideQuotes() throws {
        #expect(try ConfigLoader.splitWords(#"echo "it's" 'say "hi"'"#) == ["echo", "it's", #"say "hi""#])
    }

    @Test func emptyQuotesAreAnEmptyWord() throws {
        #expect(try ConfigLoader.splitWords(#"prog "" ''"#) == ["prog", "", ""])
    }

    @Test func backslashEscapesWorkInAndOutOfQuotes() throws {
        #expect(try ConfigLoader.splitWords(#"a\ b \"q\" "x\ty" 'n\n' back\\slash \'"#)
            == ["a b", "\"q\"", "x\ty", "n\n", #"back\slash"#, "'"])
    }

    @Test func noShellExpansionHappens() throws {
        #expect(try ConfigLoader.splitWords("echo $HOME * | wc ~") == ["echo", "$HOME", "*", "|", "wc", "~"])
    }

    @Test func unterminatedQuoteIsAnError() {
        #expect(throws: ConfigSyntaxError.unterminatedQuote("\"")) { try ConfigLoader.splitWords(#"notes "unfinished"#) }
        #expect(throws: ConfigSyntaxError.unterminatedQuote("'")) { try ConfigLoader.splitWords("notes 'unfinished") }
    }

    @Test func unknownEscapeAndDanglingBackslashAreErrors() {
        #expect(throws: ConfigSyntaxError.unknownEscape("x")) { try ConfigLoader.splitWords(#"a\xb"#) }
        #expect(throws: ConfigSyntaxError.danglingBackslash) { try ConfigLoader.splitWords(#"a \"#) }
    }

    @Test func emptyTextHasNoWords() throws {
        #expect(try ConfigLoader.splitWords("   ") == [])
    }
}

@Suite struct ConfigDurationTests {
    private func parse(_ text: String, infinity: Bool = false) throws(ConfigSyntaxError) -> Duration? {
        try ConfigLoader.parseDuration(text, allowInfinity: infinity)
    }

    @Test func bareNumberIsSeconds() throws {
        #expect(try parse("5") == .seconds(5))
        #expect(try parse("0.5") == .milliseconds(500))
        #expect(try parse("0") == .zero)
        #expect(try parse(" 10 ") == .seconds(10))
    }

    @Test func everyUnitIsUnderstood() throws {
        #expect(try parse("500ms") == .milliseconds(500))
        #expect(try parse("500msec") == .milliseconds(500))
        #expect(try parse("3s") == .seconds(3))
        #expect(try parse("3sec") == .seconds(3))
        #expect(try parse("2min") == .seconds(120))
        #expect(try parse("2m") == .seconds(120))
        #expect(try parse("1h") == .seconds(3600))
        #expect(try parse("1.5h") == .seconds(5400))
        #expect(try parse("2.25ms") == .microseconds(2250))
        #expect(try parse("5 s") == .seconds(5))
    }

    @Test func componentsAddUp() throws {
        #expect(try parse("1min 30s") == .seconds(90))
        #expect(try parse("1h30min") == .seconds(5400))
        #expect(try parse("1s 250ms") == .milliseconds(1250))
        #expect(try parse("1min 30") == .seconds(90))
    }

    @Test func infinityOnlyWhereAllowed() throws {
        #expect(try parse("infinity", infinity: true) == nil)
        #expect(throws: ConfigSyntaxError.infinityNotAllowed) { try parse("infinity") }
        #expect(throws: ConfigSyntaxError.invalidDuration("1s infinity", allowsInfinity: true)) {
            try parse("1s infinity", infinity: true)
        }
    }

    @Test(arguments: ["", "tenn", "10x", "-5", "5.", ".5", "1..5s", "10S", "s", "1 min 30 parsecs"])
    func invalidDurationsAreRejected(text: String) {
        #expect(throws: ConfigSyntaxError.invalidDuration(ConfigLoader.trimmed(text), allowsInfinity: false)) { try parse(text) }
    }

    @Test func overflowIsRejected() {
        #expect(throws: ConfigSyntaxError.durationTooLarge("99999999999h")) { try parse("99999999999h") }
    }

    @Test func invalidDurationMessageShowsExamples() {
        #expect(ConfigSyntaxError.invalidDuration("tenn", allowsInfinity: true).description
            == "invalid duration 'tenn' (expected e.g. 10, 500ms, 1min 30s, infinity)")
        #expect(ConfigSyntaxError.invalidDuration("tenn", allowsInfinity: false).description
            == "invalid duration 'tenn' (expected e.g. 10, 500ms, 1min 30s)")
    }

    @Test(arguments: [
        (Duration?.none, "infinity"), (.zero, "0"), (.seconds(10), "10s"), (.milliseconds(100), "100ms"),
        (.seconds(90), "1min 30s"), (.seconds(3600 + 1), "1h 1s"), (.milliseconds(1500), "1s 500ms"),
        (.microseconds(2250), "2.25ms"),
    ])
    func formattedDurationsReadBack(duration: Duration?, text: String) throws {
        #expect(ConfigLoader.formatDuration(duration) == text)
        #expect(try parse(text, infinity: true) == duration)
    }
}
