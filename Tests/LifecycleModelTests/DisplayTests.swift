import Testing
@testable import LifecycleModel

extension Harness {
    /// Report what the display server shows; returns the input's own effects.
    @discardableResult
    mutating func display(visible: Set<String> = [], hidden: Set<String> = [], focused: String? = nil) -> [Effect] {
        record(model.displayChanged(DisplayFacts(visible: visible, windowed: hidden, focused: focused), now: now))
    }

    /// The processes continued, in order, from `log` index `start` on.
    func continued(from start: Int = 0) -> [String] {
        log[start...].compactMap { effect in
            if case .continueProcess(let app) = effect { app } else { nil }
        }
    }
}

/// The states follow what the display server shows: focus, visible windows, hidden ones.
@Suite("Focus and visibility from the display server")
struct DisplayTests {
    /// "a" and "b" launched (inactive), each with a visible window, "a" focused and active.
    static func twoWindows() throws -> Harness {
        var h = Harness("a", "b")
        try h.bring("a", to: .inactive)
        try h.bring("b", to: .inactive)
        h.cooperating { h in h.display(visible: ["a", "b"], focused: "a") }
        #expect(h.state("a") == .active && h.state("b") == .inactive)
        return h
    }

    @Test("a launched app stays inactive until its first window appears, and becomes active when that window has the focus")
    func launchedAppWaitsForItsWindow() throws {
        var h = Harness("a")
        try h.bring("a", to: .inactive)
        let start = h.log.count

        h.cooperating { h in h.display(focused: "a") }

        #expect(h.sends(from: start) == [Sent("a", .didBecomeActive)])
        #expect(h.state("a") == .active)
    }

    @Test("focus moving between two visible windows: the old app resigns and stays inactive, the new one becomes active")
    func focusBetweenVisibleWindowsKeepsTheOtherInactive() throws {
        var h = try Self.twoWindows()
        let start = h.log.count

        h.cooperating { h in h.display(visible: ["a", "b"], focused: "b") }

        #expect(h.sends(from: start) == [Sent("a", .willResignActive), Sent("b", .didBecomeActive)])
        #expect(h.state("a") == .inactive && h.state("b") == .active)
        #expect(h.momentsWithSeveralActiveApps().isEmpty)
    }

    @Test("focus moving to an app on another workspace: the old app resigns and enters the background, the new one comes forward")
    func workspaceSwitchSendsTheOldAppToTheBackground() throws {
        var h = try Self.twoWindows()
        h.cooperating { h in h.display(visible: ["a"], hidden: ["b"], focused: "a") }
        #expect(h.state("b") == .background)
        let start = h.log.count

        h.cooperating { h in h.display(visible: ["b"], hidden: ["a"], focused: "b") }

        #expect(h.sends(from: start) == [Sent("a", .willResignActive), Sent("a", .didEnterBackground),
                                         Sent("b", .willEnterForeground), Sent("b", .didBecomeActive)])
        #expect(h.state("a") == .background && h.state("b") == .active)
    }

    @Test("an app whose windows are all hidden goes to the background and is suspended after its grace time")
    func hiddenAppIsSuspendedAfterItsGrace() throws {
        var h = try Self.twoWindows()

        let effects = h.cooperating { h in h.display(visible: ["a"], hidden: ["b"], focused: "a") }

        #expect(h.state("b") == .background)
        #expect(effects.contains(.armTimer(app: "b", .grace, after: .seconds(10))) || h.log.contains(.armTimer(app: "b", .grace, after: .seconds(10))))
        h.cooperating { h in h.advance(by: .seconds(10)); h.fire(.grace, "b") }
        #expect(h.state("b") == .suspended)
    }

    @Test("a window of a suspended app that becomes visible resumes the app before any message is sent")
    func visibleWindowResumesAtOnce() throws {
        var h = try Self.twoWindows()
        h.cooperating { h in h.display(visible: ["a"], hidden: ["b"], focused: "a") }
        h.cooperating { h in h.advance(by: .seconds(10)); h.fire(.grace, "b") }
        try #require(h.state("b") == .suspended)
        let start = h.log.count

        let effects = h.display(visible: ["a", "b"], focused: "a")

        #expect(effects.first(where: {
            if case .continueProcess = $0 { true } else if case .send = $0 { true } else { false }
        }) == .continueProcess(app: "b"))
        h.cooperate(after: effects)
        #expect(h.continued(from: start) == ["b"])
        #expect(h.sends(from: start) == [Sent("b", .willEnterForeground)])
        #expect(h.state("b") == .inactive && h.state("a") == .active)
    }

    @Test("focus on a suspended app's window: it is resumed first, then enters the foreground and becomes active")
    func focusOnSuspendedAppResumesFirst() throws {
        var h = try Self.twoWindows()
        h.cooperating { h in h.display(visible: ["a"], hidden: ["b"], focused: "a") }
        h.cooperating { h in h.advance(by: .seconds(10)); h.fire(.grace, "b") }
        try #require(h.state("b") == .suspended)
        let start = h.log.count

        h.cooperating { h in h.display(visible: ["b"], hidden: ["a"], focused: "b") }

        #expect(h.continued(from: start) == ["b"])
        #expect(h.sends(from: start) == [Sent("a", .willResignActive), Sent("a", .didEnterBackground),
                                         Sent("b", .willEnterForeground), Sent("b", .didBecomeActive)])
        #expect(h.state("b") == .active && h.state("a") == .background)
    }

    @Test("the last window closed while the process runs: the app goes to the background")
    func closingTheLastWindowBackgroundsTheApp() throws {
        var h = try Self.twoWindows()
        let start = h.log.count

        h.cooperating { h in h.display(visible: ["a"], focused: "a") }

        #expect(h.sends(from: start) == [Sent("b", .didEnterBackground)])
        #expect(h.state("b") == .background && h.state("a") == .active)
    }

    @Test("focus going to a window none of ours owns: the active app resigns and stays inactive while its window shows")
    func focusToAForeignWindowResigns() throws {
        var h = try Self.twoWindows()
        let start = h.log.count

        h.cooperating { h in h.display(visible: ["a", "b"], focused: nil) }

        #expect(h.sends(from: start) == [Sent("a", .willResignActive)])
        #expect(h.state("a") == .inactive && h.state("b") == .inactive)
        #expect(h.model.activeApp == nil)
    }

    @Test("an app that never shows a window keeps lifectl's control: the display's reports leave it alone")
    func appWithoutWindowsIsLeftToLifectl() throws {
        var h = Harness("a", "daemonish")
        try h.bring("daemonish", to: .active)
        try h.bring("a", to: .inactive)
        let start = h.log.count

        h.cooperating { h in h.display(visible: ["a"]) }
        h.cooperating { h in h.display(hidden: ["a"]) }

        #expect(h.sends(from: start).allSatisfy { $0.app == "a" })
        #expect(h.state("daemonish") == .active)
        #expect(h.state("a") == .background)
    }

    @Test("lifectl focus with a display source keeps another app whose window shows inactive")
    func manualFocusKeepsVisibleAppsInactive() throws {
        var h = try Self.twoWindows()
        let start = h.log.count

        try h.cooperating { h throws in try h.request(.focus, "b") }

        #expect(h.sends(from: start) == [Sent("a", .willResignActive), Sent("b", .didBecomeActive)])
        #expect(h.state("a") == .inactive && h.state("b") == .active)
    }

    @Test("the display source forgotten (a reload to another source): no app moves, and lifectl focus demotes as without a display")
    func forgottenDisplayMovesNothingAndDropsItsFacts() throws {
        var h = try Self.twoWindows()
        let start = h.log.count

        h.model.displayForgotten()

        #expect(h.log.count == start)
        #expect(h.model.displayFacts == DisplayFacts())
        try h.cooperating { h throws in try h.request(.focus, "b") }
        #expect(h.state("a") == .background, "no window is known to show any more")
        #expect(h.state("b") == .active)
    }

    @Test("a report about an app that is not running changes nothing")
    func reportAboutAStoppedAppIsIgnored() throws {
        var h = Harness("a")

        let effects = h.display(visible: ["a"], focused: "a")

        #expect(effects.isEmpty)
        #expect(h.state("a") == .notRunning)
    }
}

extension DisplayTests {
    @Test("a relaunched app is inactive until its new process shows a window, even if the old one's window was seen last")
    func relaunchedAppWaitsForItsNewWindow() throws {
        var h = try Self.twoWindows()
        h.cooperating { h in
            h.exit("b")
            _ = try? h.request(.launch(background: false), "b")
        }
        try #require(h.state("b") == .inactive)

        h.cooperating { h in h.display(visible: ["a"], focused: "a") }

        #expect(h.state("b") == .inactive)
    }

    @Test("a relaunched app whose window comes back in the same report as before is heard as shown in its new launch")
    func relaunchedAppWithTheSameFactsFollowsTheDisplay() throws {
        var h = try Self.twoWindows()
        h.cooperating { h in h.display(visible: ["a"], hidden: ["b"], focused: "a") }
        try #require(h.state("b") == .background)
        h.cooperating { h in
            h.exit("b")
            _ = try? h.request(.launch(background: false), "b")
        }
        try #require(h.state("b") == .inactive)

        // The old process's window was never reported gone: the report reads as the last one did.
        h.cooperating { h in h.display(visible: ["a"], hidden: ["b"], focused: "a") }

        #expect(h.state("b") == .background, "the new launch's window is hidden, so the app follows it")
    }

    @Test("a report is read as a change: an app whose facts did not change is not moved back by another app's window")
    func unchangedAppIsLeftWhereLifectlPutIt() throws {
        var h = try Self.twoWindows()
        h.cooperating { h in _ = try? h.request(.suspend, "b") }
        try #require(h.state("b") == .suspended)

        h.cooperating { h in h.display(visible: ["a", "b"], focused: "a") }
        #expect(h.state("b") == .suspended, "b's window showed before and shows now: nothing about b changed")

        h.cooperating { h in h.display(visible: ["a"], hidden: ["b"], focused: "a") }
        h.cooperating { h in h.display(visible: ["a", "b"], focused: "a") }
        #expect(h.state("b") == .inactive, "b's window shown again resumes it")
    }
}
