import TestSupport
import Foundation
import Glibc
@testable import LifecycleDaemon
@testable import LifecycleModel
import LifecycleProtocol
import Testing

/// The state files' JSON (PersistedApp and AppSnapshot through LineCoder): seeded random apps that set and unset
/// every optional are written as one line each and read back to the same apps, and a file of an earlier daemon is
/// read and written back byte for byte.
@Suite("State files: the JSON")
struct StateFileEncodingTests {
    static let awkwardStrings: [String] = [
        "", "notes", "quote \" backslash \\ slash / done", "tab\tnewline\nreturn\rback\u{8}feed\u{C}",
        "\u{0}\u{1}\u{1F}\u{7F}\u{80}", "é ü 中文 🎉 \u{2028}\u{2029} \u{FEFF}", "e\u{301}", "</script>", "a\u{10FFFF}b",
        "A", "_", "a", "Z9", "~",
    ]

    static let awkwardNumbers: [Double] = [
        0, -0.0, 1, -1, 0.1, 0.25, 1.5, 3.0, 1e-7, 1e21, 1e22, 123456789.123, -9.0e15, 9.0e15, 8.999999999999998e15,
        2e15 + 0.5, 5e-324, .greatestFiniteMagnitude, .leastNormalMagnitude, 633.3174259662628, 1.0 / 3.0, 1e100,
    ]

    /// Which shapes the generator produced, so that a change to it cannot leave a branch of the writer untested.
    struct Coverage {
        var pids = 0, noPids = 0, tokens = 0, suspended = 0, tasks = 0, emptyTasks = 0, noTasks = 0
        var messageIDs = 0, enteredBackground = 0, sessions = 0, savedStates = 0, disconnected = 0
        var droppedPayloads = 0, nullPayloads = 0, nestedObjects = 0
        var told = 0, toldLaunch = 0, toldScenes = 0
        var coalescings: Set<Coalescing> = []
    }

    struct Generator {
        var random: SplitMix64
        var coverage = Coverage()
        /// For files: app names that are file names, and no null payload for a `latest` type nor null saved state
        /// (they encode as `"payload":null` and read back as none, the synthesized `decodeIfPresent`'s way).
        let forFiles: Bool

        /// Seeded from `seed`, or from LIFECYCLE_TEST_SEED when it is set (`SplitMix64.seeded`).
        init(seed: UInt64, forFiles: Bool = false, test: String = #function) {
            random = SplitMix64.seeded(seed, test: test)
            self.forFiles = forFiles
        }

        mutating func next() -> UInt64 { random.next() }

        mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
        mutating func chance(_ percent: Int) -> Bool { below(100) < percent }

        mutating func string() -> String {
            StateFileEncodingTests.awkwardStrings[below(StateFileEncodingTests.awkwardStrings.count)] + (chance(50) ? String(below(97)) : "")
        }

        mutating func integer() -> Int {
            switch below(4) {
            case 0: below(10)
            case 1: Int(Int64(bitPattern: next()))
            case 2: [Int.min, Int.max, -1, 10, 99, 100][below(6)]
            default: below(100_000)
            }
        }

        mutating func number() -> Double {
            switch below(4) {
            case 0: return StateFileEncodingTests.awkwardNumbers[below(StateFileEncodingTests.awkwardNumbers.count)]
            case 1: return Double(Int64(bitPattern: next()) % 100_000)
            case 2: return Double(below(1_000_000)) / 1000
            default:
                let number = Double(bitPattern: next())
                return number.isFinite ? number : 1
            }
        }

        mutating func value(depth: Int = 0) -> JSONValue {
            switch below(depth > 3 ? 4 : 6) {
            case 0: return .null
            case 1: return .bool(chance(50))
            case 2: return .number(number())
            case 3: return .string(string())
            case 4: return .array((0..<below(5)).map { _ in value(depth: depth + 1) })
            default: return object(depth: depth)
            }
        }

        mutating func object(depth: Int = 0) -> JSONValue {
            var members: [String: JSONValue] = [:]
            for _ in 0..<below(6) { members[string()] = value(depth: depth + 1) }
            if depth > 0 { coverage.nestedObjects += 1 }
            return .object(members)
        }

        mutating func queue() -> LifecycleModel.NotificationQueue {
            var queue = LifecycleModel.NotificationQueue(limit: 1 + below(6))
            for number in 0..<below(5) {
                // One coalescing per type, as the catalog has it.
                let name = string() + "#\(number)"
                let coalescing = Coalescing.allCases[below(Coalescing.allCases.count)]
                coverage.coalescings.insert(coalescing)
                for _ in 0..<1 + below(coalescing == .none ? 60 : 4) {
                    var payload: JSONValue
                    switch coalescing {
                    case .merge: payload = object()
                    case .latest where !forFiles && chance(10):
                        payload = .null
                        coverage.nullPayloads += 1
                    default: payload = value()
                    }
                    if coalescing == .latest, forFiles, payload == .null { payload = .string("not null") }
                    queue.add(name, payload: payload, coalescing: coalescing)
                }
            }
            for entry in queue.storedEntries where entry.oldest > 0 { coverage.droppedPayloads += 1 }
            return queue
        }

        mutating func session(number: Int) -> SceneSession {
            let state: SceneActivationState? = chance(30) ? nil : SceneActivationState.allCases[below(SceneActivationState.allCases.count)]
            if state == nil { coverage.disconnected += 1 }
            var savedState: JSONValue? = chance(50) ? value() : nil
            // `"savedState":null` reads back as no saved state (decodeIfPresent), as for a payload.
            if forFiles, savedState == .null { savedState = .string("not null") }
            if savedState != nil { coverage.savedStates += 1 }
            coverage.sessions += 1
            return SceneSession(id: "s\(number)", role: chance(80) ? "window" : string(), configuration: string(), state: state,
                                savedState: savedState, connectionOptions: chance(50) ? .object([:]) : object(),
                                lastActivation: below(1000))
        }

        /// What a client heard: its scenes keyed by ids that sort differently by UTF-8 and by String's own order.
        mutating func told() -> Told {
            let scenes = SceneActivationState.allCases
            var told = Told(state: AppState.allCases[below(AppState.allCases.count)])
            for _ in 0..<below(4) { told.scenes[chance(50) ? "s\(below(40))" : string()] = scenes[below(scenes.count)] }
            if chance(50) {
                told.launch = LaunchOptions(launchedBy: string(), background: chance(50), terminatedInBackground: chance(50))
                coverage.toldLaunch += 1
            }
            coverage.told += 1
            if told.scenes.count > 1 { coverage.toldScenes += 1 }
            return told
        }

        mutating func app() -> PersistedApp {
            let sessionCount = chance(50) ? 0 : 1 + below(3)
            let tasks: [BackgroundTask]? = switch below(3) {
            case 0: nil
            case 1: []
            default: (0..<1 + below(3)).map { _ in BackgroundTask(id: integer(), name: string()) }
            }
            switch tasks?.count {
            case nil: coverage.noTasks += 1
            case 0: coverage.emptyTasks += 1
            default: coverage.tasks += 1
            }
            var snapshot = AppSnapshot(
                state: AppState.allCases[below(AppState.allCases.count)], launches: integer(), deadlineMisses: integer(),
                terminatedInBackground: chance(50), memoryTerminations: integer(),
                observing: (0..<below(4)).map { _ in string() }, queue: queue(),
                sessions: (0..<sessionCount).map { session(number: $0 + 1) }, nextSceneNumber: 1 + below(20),
                discardedUntold: (0..<below(3)).map { _ in "s\(below(40))" },
                nextMessageID: chance(70) ? integer() : nil, tasks: tasks,
                enteredBackgroundAtMicroseconds: chance(40) ? Int64(bitPattern: next()) : nil)
            snapshot.told = chance(50) ? nil : told()
            if snapshot.nextMessageID != nil { coverage.messageIDs += 1 }
            if snapshot.enteredBackgroundAtMicroseconds != nil { coverage.enteredBackground += 1 }
            let pid: Int32? = chance(70) ? Int32(truncatingIfNeeded: Int64(bitPattern: next())) : nil
            if pid != nil { coverage.pids += 1 } else { coverage.noPids += 1 }
            let suspendedWith: String? = chance(30) ? (chance(50) ? "signal" : "freezer") : nil
            if suspendedWith != nil { coverage.suspended += 1 }
            let token: String? = chance(60) ? String(next(), radix: 16) + string() : nil
            if token != nil { coverage.tokens += 1 }
            return PersistedApp(name: "app\(below(1000))" + (!forFiles && chance(20) ? string() : ""), pid: pid,
                                startTime: pid == nil ? nil : (chance(10) ? .max : next() % 10_000_000), suspendedWith: suspendedWith,
                                token: token, snapshot: snapshot)
        }
    }

    /// Every field of the generated apps, and each of their shapes, was produced.
    func expectFullCoverage(_ coverage: Coverage) {
        #expect(coverage.pids > 0 && coverage.noPids > 0 && coverage.tokens > 0 && coverage.suspended > 0)
        #expect(coverage.tasks > 0 && coverage.emptyTasks > 0 && coverage.noTasks > 0)
        #expect(coverage.messageIDs > 0 && coverage.enteredBackground > 0)
        #expect(coverage.sessions > 0 && coverage.savedStates > 0 && coverage.disconnected > 0)
        #expect(coverage.droppedPayloads > 0, "a `none` type that kept fewer payloads than it was posted")
        #expect(coverage.nestedObjects > 0)
        #expect(coverage.told > 0 && coverage.toldLaunch > 0 && coverage.toldScenes > 0)
        #expect(coverage.coalescings == Set(Coalescing.allCases))
    }

    func makeStore() throws -> (StateStore, String) {
        let directory = NSTemporaryDirectory() + "state-file-encoding-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = StateStore(runtimeDirectory: directory)
        try store.prepare()
        return (store, directory)
    }

    @Test("each app is one line that reads back to the app and is written again to the same bytes")
    func appsRoundTrip() throws {
        let coder = LineCoder()
        var generator = Generator(seed: 0x5EED)
        for _ in 0..<500 {
            let app = generator.app()
            let written = coder.encode(app)
            #expect(written.last == UInt8(ascii: "\n") && !written.dropLast().contains(UInt8(ascii: "\n")))
            var read = try coder.decode(PersistedApp.self, from: Array(written.dropLast()))
            // A `latest` type's null payload is written as null and read as none, as an absent optional is.
            #expect(read.name == app.name && read.pid == app.pid && read.token == app.token && read.snapshot.told == app.snapshot.told)
            #expect(read.snapshot.sessions.map(\.id) == app.snapshot.sessions.map(\.id))
            read = try coder.decode(PersistedApp.self, from: Array(coder.encode(read).dropLast()))
            #expect(coder.encode(read) == coder.encode(try coder.decode(PersistedApp.self, from: Array(written.dropLast()))))
        }
        #expect(generator.coverage.nullPayloads > 0)
        expectFullCoverage(generator.coverage)
    }

    @Test("saved files load back to the same apps")
    func savedFilesLoadBack() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var generator = Generator(seed: 0xF11E, forFiles: true)
        var saved: [String: PersistedApp] = [:]
        for _ in 0..<200 {
            let app = generator.app()
            try store.save(app)
            saved[app.name] = app
        }
        expectFullCoverage(generator.coverage)

        let (loaded, problems) = StateStore(runtimeDirectory: directory).loadAll()
        #expect(problems == [])
        #expect(loaded.map(\.name) == saved.keys.sorted())
        for var app in loaded {
            guard var original = saved[app.name] else { continue }
            let file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(directory)/state/\(app.name).json")))
            #expect(String(decoding: store.encode(app), as: UTF8.self) == String(decoding: file, as: UTF8.self),
                    "\(app.name): the loaded app writes the file it came from")
            // The queue keeps its kept payloads behind an offset that is not persisted: compared by what it delivers.
            #expect(app.snapshot.queue.limit == original.snapshot.queue.limit)
            #expect(app.snapshot.queue.drain() == original.snapshot.queue.drain())
            app.snapshot.queue = LifecycleModel.NotificationQueue()
            original.snapshot.queue = LifecycleModel.NotificationQueue()
            #expect(app == original)
        }
    }

    @Test("a save that fails names the directory, and the next save of the same app writes it")
    func failedSaveIsRetried() throws {
        let directory = NSTemporaryDirectory() + "state-file-failure-\(getpid())-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = StateStore(runtimeDirectory: directory)
        var generator = Generator(seed: 7, forFiles: true)
        let app = generator.app()
        // No state directory yet: the save names the directory it cannot open.
        #expect(throws: SystemError(operation: "open \(directory)/state", errno: ENOENT)) { try store.save(app) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try store.prepare()
        try store.save(app)
        #expect(store.loadAll().apps.map(\.name) == [app.name])
        #expect(store.savedStartTime(of: app.name, pid: app.pid ?? 0) == app.startTime)
    }

    @Test("a file of an earlier daemon (no tasks, no message id) loads, and is written back byte for byte")
    func earlierFileLoads() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let text = #"{"name":"notes","pid":4242,"snapshot":{"deadlineMisses":1,"discardedUntold":["s3"],"launches":2,"#
            + #""memoryTerminations":0,"nextSceneNumber":3,"observing":["batteryLevelDidChange"],"queue":{"entries":["#
            + #"{"coalescing":"latest","dropped":0,"name":"batteryLevelDidChange","payload":{"level":0.25},"payloads":[],"posts":3},"#
            + #"{"coalescing":"none","dropped":2,"name":"log","payloads":["b","c"],"posts":4}],"limit":2},"#
            + #""sessions":[{"configuration":"Default","connectionOptions":{},"id":"s1","lastActivation":4,"role":"window","#
            + #""savedState":{"draft":"é \"quoted\""},"state":"background"}],"state":"suspended","terminatedInBackground":false},"#
            + #""startTime":123456,"suspendedWith":"freezer","token":"5f0c2e9a"}"# + "\n"
        let fd = open("\(directory)/state/notes.json", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(fd >= 0)
        _ = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
        close(fd)

        let (loaded, problems) = store.loadAll()
        #expect(problems == [])
        let app = try #require(loaded.first)
        #expect(app.pid == 4242 && app.startTime == 123456 && app.suspendedWith == "freezer" && app.token == "5f0c2e9a")
        #expect(app.snapshot.state == .suspended && app.snapshot.tasks == nil && app.snapshot.nextMessageID == nil)
        #expect(app.snapshot.sessions.first?.savedState == ["draft": "é \"quoted\""])
        var queue = app.snapshot.queue
        #expect(queue.drain() == [NotificationDelivery(name: "batteryLevelDidChange", payload: ["level": 0.25], posts: 3),
                                  NotificationDelivery(name: "log", payloads: ["b", "c"], posts: 4, dropped: 2)])
        #expect(String(decoding: store.encode(app), as: UTF8.self) == text)
    }

    @Test("a payload number JSON cannot hold is written as null: the file stays JSON")
    func unrepresentableNumberIsNull() throws {
        var queue = LifecycleModel.NotificationQueue()
        queue.add("x", payload: .number(.nan), coalescing: .latest)
        let app = PersistedApp(name: "a", pid: nil, startTime: nil, suspendedWith: nil, token: nil,
                               snapshot: AppSnapshot(state: .background, launches: 1, deadlineMisses: 0, terminatedInBackground: false,
                                                     memoryTerminations: 0, observing: [], queue: queue, sessions: [],
                                                     nextSceneNumber: 1, discardedUntold: []))
        let line = StateStore(runtimeDirectory: "/nonexistent").encode(app)
        #expect(String(decoding: line, as: UTF8.self).contains(#""name":"x","payload":null,"#))
        #expect(try LineCoder().decode(PersistedApp.self, from: Array(line.dropLast())).snapshot.queue.count == 1)
    }
}
