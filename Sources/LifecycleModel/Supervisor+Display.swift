// Focus and visibility from the display server: the states follow what the user sees. An app with a visible window
// is in the foreground (active when one of its windows has the focus), an app whose windows are all hidden goes to
// the background, and the grace time and suspension go on from there as for any app. The facts come per app, so
// the model never knows which display server reported them; apps that never show a window are left to lifectl.

/// What the display server shows, per configured app (windows no configured app owns are not in it).
public struct DisplayFacts: Sendable, Equatable {
    /// Apps with at least one visible window.
    public var visible: Set<String>
    /// Apps with at least one window, visible or hidden.
    public var windowed: Set<String>
    /// The app whose window has the keyboard focus (nil: none of ours).
    public var focused: String?

    public init(visible: Set<String> = [], windowed: Set<String> = [], focused: String? = nil) {
        self.visible = visible
        self.windowed = windowed.union(visible)
        self.focused = focused
        if let focused {
            self.visible.insert(focused)
            self.windowed.insert(focused)
        }
    }
}

/// The display's last facts (about running apps only), and which running apps have shown a window (only those
/// follow the display), each with the launch it showed it in: a relaunched app is inactive until its new process
/// shows a window.
struct DisplayState: Sendable, Equatable {
    var facts = DisplayFacts()
    var shownInLaunch: [String: Int] = [:]

    /// An app that begins or ends a run: what the display said of it belongs to another process, so the next report
    /// that names it is heard as a change.
    mutating func forget(_ name: String) {
        facts.visible.remove(name)
        facts.windowed.remove(name)
        if facts.focused == name { facts.focused = nil }
        shownInLaunch[name] = nil
    }
}

extension Supervisor {
    /// The facts the model last heard from the display server.
    public var displayFacts: DisplayFacts { display.facts }

    /// An app that another takes focus from stays inactive while a window of it is visible (two windows side by
    /// side); otherwise it leaves the foreground.
    func demotionTarget(of name: String) -> AppState {
        display.facts.visible.contains(name) ? .inactive : .background
    }

    /// The display server reports a new picture: apps with a visible window are resumed first (their windows must
    /// redraw), the app losing focus resigns, the one gaining it comes forward, visible apps stand inactive and
    /// apps whose windows are all hidden or closed go to the background.
    mutating func displayChanged(_ reported: DisplayFacts) -> [Effect] {
        func running(_ name: String) -> Bool {
            table.with(name) { $0.state.isRunning && !$0.run.termination.isUnderway } ?? false
        }
        // Only the apps whose facts differ from the last ones are looked at, each without a copy of its record, so
        // that a report costs what changed, not the number of windows.
        var named = reported.visible.symmetricDifference(display.facts.visible)
        named.formUnion(reported.windowed.symmetricDifference(display.facts.windowed))
        for name in [reported.focused, display.facts.focused].compactMap({ $0 }) { named.insert(name) }
        var facts = display.facts
        for name in named {
            let launch = running(name) ? table.with(name, { $0.launches }) : nil
            if launch != nil, reported.visible.contains(name) { facts.visible.insert(name) } else { facts.visible.remove(name) }
            if let launch, reported.windowed.contains(name) {
                facts.windowed.insert(name)
                display.shownInLaunch[name] = launch
            } else {
                facts.windowed.remove(name)
            }
        }
        let focused = reported.focused.flatMap { facts.windowed.contains($0) ? $0 : nil }
        facts.focused = focused
        display.facts = facts
        // An app's entry is dropped when its run begins or ends (`DisplayState.forget`); one whose termination is
        // underway is no longer followed.
        func shown(_ name: String) -> Bool {
            display.shownInLaunch[name] != nil && running(name)
        }

        var moved: [String] = []
        for name in named.filter(facts.visible.contains).sorted() where table.with(name, { $0.projectedState }) == .suspended {
            append(name, .resume)
            moved.append(name)
        }
        if let focused, table.with(focused, { $0.projectedState }) != .active {
            perform(.takeFocus, for: focused, origin: "display")
            moved.append(focused)
        } else if focused == nil, let active = table.firstName(where: { $0.projectedState == .active }),
                  shown(active) {
            // The focus went to a window that is none of ours (or to nothing): the active app resigns.
            move(active, to: demotionTarget(of: active), origin: "display")
            moved.append(active)
        }
        // Only the few that move are sorted, by name, so that the order is the same whatever the set's.
        var changes: [(name: String, to: AppState)] = []
        for name in named where name != focused && shown(name) {
            guard let projected = table.with(name, { $0.projectedState }) else { continue }
            if facts.visible.contains(name), projected == .background {
                changes.append((name, .inactive))
            } else if !facts.visible.contains(name), projected.isForeground {
                changes.append((name, .background))
            }
        }
        for change in changes.sorted(by: { $0.name < $1.name }) {
            move(change.name, to: change.to, origin: "display")
            moved.append(change.name)
        }
        guard let first = moved.first else { return endEvent() }
        // In the order queued: the resumes run before any message is sent.
        for name in moved { advance(name) }
        return finish(first)
    }
}
