// The one focus domain: an app that takes focus joins the focus queue, and every other app in the foreground
// leaves it first, so that the previous holder has resigned before the next one becomes active. The order of
// the callbacks themselves comes from LifecycleRules (Rules.swift).

extension Supervisor {
    /// Every other app in (or on its way to) the foreground leaves it: an active one resigns, then
    /// enters the background; an inactive one enters the background. One with a window the display server shows
    /// stays inactive (Supervisor+Display.swift).
    mutating func demoteOthers(than name: String) {
        for other in Set(focusQueue).union(foregroundApps).sorted() where other != name {
            if demotionTarget(of: other) == .inactive {
                move(other, to: .inactive, origin: "display")
                advance(other)
                continue
            }
            if table[other].usesScenes {
                sendScenesToBackground(other)
                advance(other)
                continue
            }
            let callbacks = LifecycleRules.callbacks(from: table[other].projectedState, to: .background)
            guard !callbacks.isEmpty else { continue }
            for callback in callbacks { append(other, .deliver(callback, nil)) }
            advance(other)
        }
    }

    /// The app joins the focus queue. It comes to the foreground only once the previous holder has
    /// resigned (so the daemon sends: A willResignActive, A didEnterBackground, B willEnterForeground,
    /// B didBecomeActive), and leaves the queue when didBecomeActive is sent.
    mutating func enqueueFocus(_ name: String, from state: AppState) {
        focusQueue.append(name)
        append(name, .awaitFocus)
        if table[name].usesScenes {
            // The app comes forward with its scene; its own callbacks follow the scene's.
            bringSceneForward(name, preferredScene(name) ?? newSession(name, role: nil, configuration: nil, origin: "restart"),
                              activate: true, origin: "restart")
            append(name, .endFocusClaim)
            return
        }
        // A launching app is inactive already; a suspended one is continued into the background first.
        for callback in LifecycleRules.callbacks(from: state == .inactive ? .inactive : .background, to: .active) {
            append(name, .deliver(callback, nil))
        }
        append(name, .endFocusClaim)
    }
}
