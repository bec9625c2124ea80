// The budget of a listening socket: the control socket and the app socket each take at most `perWakeup` connections
// when they wake, so that a burst of connects is served between the loop's other sources instead of before them
// (the listening socket stays readable while more wait, and sd-event serves the sources that waited longer first).

/// How many connections a listening socket takes per wakeup, and the debug record of each burst.
enum AcceptBudget {
    static let perWakeup = 64

    /// One wakeup of the socket `what` took `count` connections: a burst is logged at debug level with its count, so
    /// that the budget can be seen at work.
    static func took(_ count: Int, on what: String) {
        guard count > 1 else { return }
        Log.debug("\(what): took \(count) connections in one wakeup"
                  + (count >= perWakeup ? " (its budget); the rest wait for the next" : ""))
    }
}
