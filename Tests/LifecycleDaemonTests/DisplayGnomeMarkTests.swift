import Testing
@testable import LifecycleDaemon

/// The gnome source's pure part: `user.xdg.inactive-since` as mutter writes it (and as nobody should), and what a
/// window with each mark is at a given time.
@Suite struct DisplayGnomeMarkTests {
    let now = Duration.seconds(1000)

    @Test func minusOneIsFocusedAndATimeIsWhenTheFocusWasLost() {
        #expect(InactiveSince(attribute: "-1", now: now) == .focused)
        #expect(InactiveSince(attribute: "999500000", now: now) == .since(.microseconds(999_500_000)))
        #expect(InactiveSince(attribute: "0", now: now) == .since(.zero))
        #expect(InactiveSince(attribute: " 42\n\0", now: now) == .since(.microseconds(42)), "padding around the number")
    }

    @Test func garbageIsGarbled() {
        for text in ["", "abc", "-2", "1.5", "0x10", "--1", "12abc", "-"] {
            #expect(InactiveSince(attribute: text, now: now) == .garbled, "\(text)")
        }
    }

    @Test func hugeValuesAndTimesAheadOfTheClockAreGarbled() {
        #expect(InactiveSince(attribute: "99999999999999999999999", now: now) == .garbled, "beyond Int64")
        #expect(InactiveSince(attribute: String(Int64.max), now: now) == .garbled, "beyond a Duration in microseconds")
        #expect(InactiveSince(attribute: "1000000001", now: now) == .garbled, "a microsecond ahead of now")
        #expect(InactiveSince(attribute: "1000000000", now: now) == .since(now))
    }

    @Test func theGraceKeepsAWindowVisibleUntilItEnds() {
        let grace = Duration.seconds(10)
        let focused = InactiveSince.focused.visibility(now: now, grace: grace)
        #expect(focused.focused && focused.visible && focused.until == nil)
        let recent = InactiveSince.since(now - .seconds(4)).visibility(now: now, grace: grace)
        #expect(!recent.focused && recent.visible && recent.until == now + .seconds(6))
        let old = InactiveSince.since(now - .seconds(10)).visibility(now: now, grace: grace)
        #expect(!old.focused && !old.visible && old.until == nil, "the grace's end is hidden")
        for mark in [InactiveSince.never, .garbled] {
            let hidden = mark.visibility(now: now, grace: grace)
            #expect(!hidden.focused && !hidden.visible && hidden.until == nil)
        }
    }
}
