import Testing
@testable import LifecycleDaemon

@Suite struct LogTests {
    /// A line below the threshold costs nothing: its message (an autoclosure) is not even built.
    @Test func aMessageBelowTheThresholdIsNotBuilt() {
        let saved = Log.threshold
        defer { Log.threshold = saved }
        var built: [String] = []
        func message(_ name: String) -> String {
            built.append(name)
            return "LogTests: \(name)"
        }

        Log.threshold = .warning
        Log.debug(message("debug"))
        Log.info(message("info"))
        Log.notice(message("notice"))
        #expect(built.isEmpty)
        Log.warning(message("warning"))
        Log.error(message("error"))
        #expect(built == ["warning", "error"])

        Log.threshold = .debug
        Log.debug(message("debug"))
        #expect(built == ["warning", "error", "debug"])
    }
}
