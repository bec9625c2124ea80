// Memory pressure, in the manner of iOS's jetsam: the first reading of an episode warns every running app with
// didReceiveMemoryWarning; pressure that persists past the warning grace kills suspended apps one per reading,
// least recently used first. The daemon feeds the readings; this file decides who is warned and who dies.

extension Supervisor {
    /// The first pressure event of an episode warns the running apps; pressure that is still there
    /// `memoryWarningGrace` later terminates one suspended app per event, least recently used first
    /// (ties: the largest resident memory), without waking it. The active app is never a candidate.
    mutating func memoryPressure(residentBytes: [String: UInt64], reading: JSONValue) -> [Effect] {
        defer { lastPressure = now }
        if lastPressure == nil || now - lastPressure! > memoryEpisodeGap {
            episodeWarnedAt = now
            var warned = 0
            for name in table.names.sorted() {
                if offer(memoryWarningType, payload: reading, size: reading.encodedSizeBound,
                         coalescing: catalog.coalescing(of: memoryWarningType) ?? .latest, to: table.slot(name)) != .dropped { warned += 1 }
            }
            emit(.note(app: "", .memoryWarning(apps: warned)))
            return endEvent()
        }
        guard now - episodeWarnedAt >= memoryWarningGrace else { return endEvent() }
        let victims = Self.jetsamOrder(table.records.filter { $0.state == .suspended && !$0.isTerminating },
                                       residentBytes: residentBytes)
        guard let victim = victims.first else {
            emit(.note(app: "", .nothingToTerminate))
            return endEvent()
        }
        // Like the launch watchdog's kill: nothing more runs for it, and requests wait for the exit.
        table[victim].run.termination = .killed(requested: true)
        table[victim].memoryTerminations += 1
        emit(.note(app: victim, .terminatedForMemory(residentBytes: residentBytes[victim])))
        emit(.signal(app: victim, .kill))
        return endEvent()
    }

    /// Suspended apps in the order jetsam terminates them: least recently in the foreground first,
    /// then the largest resident memory, then by name (so that the order is stable).
    public static func jetsamOrder(_ candidates: [AppRecord], residentBytes: [String: UInt64]) -> [String] {
        candidates.sorted { a, b in
            if a.lastForeground != b.lastForeground { return a.lastForeground < b.lastForeground }
            let (ra, rb) = (residentBytes[a.name] ?? 0, residentBytes[b.name] ?? 0)
            if ra != rb { return ra > rb }
            return a.name < b.name
        }.map(\.name)
    }
}
