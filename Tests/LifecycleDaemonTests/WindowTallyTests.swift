import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// `WindowTally`: a report of changes leaves the same facts as the whole picture it stands for.
@Suite struct WindowTallyTests {
    static var rule: WindowOwnership { WindowOwnership(apps: [
        WindowOwnership.App(name: "mail", appID: "Mail", holds: { _ in false }),
        WindowOwnership.App(name: "notes", appID: "Notes", holds: { _ in false }),
    ]) }

    /// Whole pictures, one after the other, each with what changed since the one before.
    static let steps: [(whole: [DisplayWindow], changed: [DisplayWindow], gone: [Int64])] = {
        let mail1 = DisplayWindow(id: 1, appID: "Mail", visible: true, focused: true)
        let mail2 = DisplayWindow(id: 2, appID: "Mail", visible: false)
        let notes = DisplayWindow(id: 3, appID: "Notes", visible: false)
        let other = DisplayWindow(id: 4, appID: "Other", visible: true)
        var mail1Hidden = mail1
        mail1Hidden.visible = false
        mail1Hidden.focused = false
        var notesFocused = notes
        notesFocused.visible = true
        notesFocused.focused = true
        var mail2Shown = mail2
        mail2Shown.visible = true
        return [
            ([mail1, mail2, notes, other], [mail1, mail2, notes, other], []),
            // Mail keeps a visible window while another of it hides: still visible.
            ([mail1, mail2Shown, notes, other], [mail2Shown], []),
            ([mail1Hidden, mail2Shown, notesFocused, other], [mail1Hidden, notesFocused], []),
            // Mail's last visible window closes; one hidden window of it stays.
            ([mail1Hidden, notesFocused, other], [], [2]),
            ([notesFocused, other], [], [1]),
            ([other], [], [3]),
        ]
    }()

    @Test func changesLeaveTheFactsOfTheWholePicture() {
        var byChanges = WindowTally()
        for (index, step) in Self.steps.enumerated() {
            let picture: WindowPicture = index == 0 ? WindowPicture(windows: step.whole) : .changes(step.changed, gone: step.gone)
            let (changed, gone) = byChanges.take(picture, rule: Self.rule)
            let whole = Self.rule.facts(of: WindowPicture(windows: step.whole))

            #expect(byChanges.facts == whole, "step \(index)")
            #expect(changed.map(\.id) == step.changed.map(\.id) && gone == step.gone, "step \(index): what adoption is shown")
        }
        #expect(byChanges.facts == DisplayFacts())
    }

    @Test func aWholePictureSaysWhichWindowsWentAndAppsLeaveTheFacts() {
        var tally = WindowTally()
        _ = tally.take(WindowPicture(windows: Self.steps[0].whole), rule: Self.rule)
        #expect(tally.facts == DisplayFacts(visible: ["mail"], windowed: ["notes"], focused: "mail"))

        let (_, gone) = tally.take(WindowPicture(windows: [Self.steps[0].whole[2]]), rule: Self.rule)

        #expect(Set(gone) == [1, 2, 4])
        #expect(tally.facts == DisplayFacts(windowed: ["notes"]))
    }

    @Test func aRecountTakesANewRuleForEveryWindow() {
        var tally = WindowTally()
        _ = tally.take(WindowPicture(windows: Self.steps[0].whole), rule: Self.rule)
        let withOther = WindowOwnership(apps: Self.rule.apps + [WindowOwnership.App(name: "other", appID: "Other", holds: { _ in false })])

        let (changed, _) = tally.take(.changes([], gone: []), rule: withOther, recount: true)

        #expect(changed.map(\.id) == [1, 2, 3, 4], "every window, for adoption to look at")
        #expect(tally.facts.visible == ["mail", "other"])
    }
}
