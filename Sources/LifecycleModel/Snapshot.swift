// What the daemon keeps of an app across its own restart or crash (written to the runtime directory, read
// back at start): the state, the queued notifications, the scene sessions, the open background tasks, the
// counters and what a client that could not hear was last told. Everything else (queued steps, the message in
// flight, timers) belongs to one daemon's life and starts over; the task deadline is armed again from the time
// the app entered the background.

/// One app's lasting state, as the daemon persists it.
public struct AppSnapshot: Sendable, Equatable {
    public var state: AppState
    public var launches: Int
    public var deadlineMisses: Int
    public var terminatedInBackground: Bool
    public var memoryTerminations: Int
    public var observing: [String]
    public var queue: NotificationQueue
    public var sessions: [SceneSession]
    public var nextSceneNumber: Int
    public var discardedUntold: [String]
    /// The next message id: a connection kept through the daemon's restart goes on counting.
    public var nextMessageID: Int?
    /// Open background tasks (absent in files of older daemons: none).
    public var tasks: [BackgroundTask]?
    /// When it entered the background, in CLOCK_MONOTONIC microseconds: one clock for every daemon of one boot,
    /// so the background task time goes on counting from there, not from the restart.
    public var enteredBackgroundAtMicroseconds: Int64?
    /// What its client heard, while the app moves on without it (before its first hello, after a hang-up, during
    /// a catch-up); absent when the client follows the app, and in files of older daemons.
    public var told: Told?

    public init(state: AppState, launches: Int, deadlineMisses: Int, terminatedInBackground: Bool, memoryTerminations: Int,
                observing: [String], queue: NotificationQueue, sessions: [SceneSession], nextSceneNumber: Int,
                discardedUntold: [String], nextMessageID: Int? = nil, tasks: [BackgroundTask]? = nil,
                enteredBackgroundAtMicroseconds: Int64? = nil, told: Told? = nil) {
        self.state = state
        self.launches = launches
        self.deadlineMisses = deadlineMisses
        self.terminatedInBackground = terminatedInBackground
        self.memoryTerminations = memoryTerminations
        self.observing = observing
        self.queue = queue
        self.sessions = sessions
        self.nextSceneNumber = nextSceneNumber
        self.discardedUntold = discardedUntold
        self.nextMessageID = nextMessageID
        self.tasks = tasks
        self.enteredBackgroundAtMicroseconds = enteredBackgroundAtMicroseconds
        self.told = told
    }
}

extension NotificationQueue {
    /// One entry as the state file keeps it (StateFileJSON.swift writes and reads these).
    public struct StoredEntry: Sendable, Equatable {
        public var name: String
        public var coalescing: Coalescing
        public var payload: JSONValue?
        /// Oldest first (the ring unrolled).
        public var payloads: [JSONValue]
        public var posts: Int
        public var dropped: Int

        public init(name: String, coalescing: Coalescing, payload: JSONValue?, payloads: [JSONValue], posts: Int, dropped: Int) {
            self.name = name
            self.coalescing = coalescing
            self.payload = payload
            self.payloads = payloads
            self.posts = posts
            self.dropped = dropped
        }
    }

    /// A queue as the state file kept it: each entry keeps at most `limit` of its newest payloads.
    public init(limit: Int, stored: [StoredEntry]) {
        self.init(limit: limit)
        for entry in stored {
            restore(Entry(name: entry.name, coalescing: entry.coalescing, payload: entry.payload,
                          payloads: Array(entry.payloads.suffix(self.limit)), posts: entry.posts, dropped: entry.dropped))
        }
    }

    /// The entries in first-post order, as the state file keeps them.
    public var stored: [StoredEntry] {
        storedEntries.map {
            StoredEntry(name: $0.name, coalescing: $0.coalescing, payload: $0.payload,
                        payloads: $0.keptPayloads, posts: $0.posts, dropped: $0.dropped)
        }
    }
}

extension Supervisor {
    /// What to persist of `name` now.
    public func snapshot(of name: String) -> AppSnapshot? {
        withApp(name) { app in Self.snapshot(of: app) }
    }

    private static func snapshot(of app: borrowing AppRecord) -> AppSnapshot {
        AppSnapshot(state: app.state, launches: app.launches, deadlineMisses: app.deadlineMisses,
                           terminatedInBackground: app.terminatedInBackground, memoryTerminations: app.memoryTerminations,
                           observing: app.observing.sorted(), queue: app.queue, sessions: app.sessions,
                           nextSceneNumber: app.nextSceneNumber, discardedUntold: app.discardedUntold,
                           nextMessageID: app.messageIDBound, tasks: app.tasks.isEmpty ? nil : app.tasks,
                           enteredBackgroundAtMicroseconds: app.enteredBackgroundAt.map { Int64($0 / .microseconds(1)) },
                           told: app.run.told)
    }

    /// The reason of the transition a re-adoption emits: not a move from notRunning, so the daemon journals it as
    /// the re-adoption it is (`Note.readopted`), not as a transition.
    public static let readoptionReason = "re-adopted from the previous daemon"

    /// Take back an app from a previous daemon's life. With `running` (its process is still there, the same
    /// one), the app resumes the state it had, its queue and its scenes, waiting for its client to reconnect
    /// (or the launch timeout, after which it is managed without messages); work that was in flight is not
    /// replayed. Without, only what outlives a process is kept: sessions, counters, how the last run ended.
    ///
    /// `processesStopped`: what the daemon found its processes to be (stopped or frozen, or not), nil when it did not
    /// look. The file is saved once per loop iteration, so a crash between a stop (or a continue) and that save
    /// leaves the kernel ahead of the file. The kernel wins: a process is never left stopped unknowingly.
    mutating func adopt(_ name: String, _ saved: AppSnapshot, running: Bool, processesStopped: Bool?) -> [Effect] {
        guard table.contains(name) else { return [] }
        var snapshot = saved
        if running, let stopped = processesStopped {
            if snapshot.state == .suspended && !stopped {
                emit(.note(app: name, .adoptedRunning))
                snapshot.state = .background
            } else if snapshot.state != .suspended && stopped {
                emit(.note(app: name, .adoptedStopped(saved: snapshot.state)))
                emit(.continueProcess(app: name))
            }
            emit(.note(app: name, .readopted(state: snapshot.state)))
        }
        table[name].launches = snapshot.launches
        table[name].deadlineMisses = snapshot.deadlineMisses
        table[name].memoryTerminations = snapshot.memoryTerminations
        table[name].nextSceneNumber = max(table[name].nextSceneNumber, snapshot.nextSceneNumber)
        table[name].discardedUntold = snapshot.discardedUntold
        table[name].sessions = snapshot.sessions
        guard running, snapshot.state.isRunning else {
            // The process is gone: its scenes went with it, and so did its notifications.
            for index in table[name].sessions.indices { table[name].sessions[index].state = nil }
            table[name].terminatedInBackground = snapshot.terminatedInBackground
                || snapshot.state == .background || snapshot.state == .suspended
            if snapshot.state == .failed { table[name].state = .failed }
            changedSavedState(name)
            return endEvent()
        }
        var state = snapshot.state
        // A scene halfway through connecting is placed in the background; focus is never held twice.
        for index in table[name].sessions.indices where table[name].sessions[index].state == .unattached {
            table[name].sessions[index].state = .background
        }
        if state == .active, activeApp != nil { state = .inactive }
        table[name].terminatedInBackground = snapshot.terminatedInBackground
        table[name].queue = snapshot.queue
        table[name].observing = Set(snapshot.observing)
        table[name].run.link = .awaitingHello
        // A client that followed the app heard everything up to the saved state; one that could not hear goes on
        // from what the file says it heard.
        table[name].run.told = snapshot.told ?? Told(state: snapshot.state, sessions: snapshot.sessions)
        // Every id the previous daemon sent is below the bound it saved; the ids go on well past it, so that a late
        // ack for one of its messages (read from a connection kept in the service manager's store) never matches a
        // new one.
        table[name].nextMessageID = (snapshot.nextMessageID ?? 1) + 1000
        table[name].messageIDBound = table[name].nextMessageID
        setState(name, state, reason: Self.readoptionReason)
        // Its background tasks stay open; their deadline counts from when it entered the background, and a task
        // time that ran out while no daemon watched expires now.
        table[name].tasks = state == .suspended ? [] : snapshot.tasks ?? []
        if let entered = snapshot.enteredBackgroundAtMicroseconds, state == .background || state == .suspended {
            table[name].enteredBackgroundAt = .microseconds(entered)
        }
        if state == .background { armTaskTimers(name) }
        if table[name].policy.speaksProtocol {
            emit(.armTimer(app: name, .hello, after: table[name].policy.launchTimeout))
        }
        return finish(name)
    }
}
