import TestSupport
import FoundationEssentials
import LifecycleModel
@testable import LifecycleProtocol
import Testing

/// The protocol's one JSON path (JSONReader.swift, JSONWriter.swift, each type's reader and writer): every message
/// type is written in the wire's form and read back to the same value; malformed and hostile lines get the
/// sentence that says what was wrong. JSONEncoder appears only as an independent writer of JSON scalars.
@Suite("JSON coding")
struct JSONCodingTests {
    let coder = LineCoder()

    func text(_ line: [UInt8]) -> String { String(decoding: line, as: UTF8.self) }

    /// `value` written, then read back: the same value, and the same bytes when written again.
    func expectRoundTrip<T: JSONReadable & JSONWritable & Equatable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let line = coder.encode(value)
        #expect(line.last == UInt8(ascii: "\n") && !line.dropLast().contains(UInt8(ascii: "\n")), sourceLocation: sourceLocation)
        let read = try coder.decode(T.self, from: Array(line.dropLast()))
        #expect(read == value, "\(text(line))", sourceLocation: sourceLocation)
        #expect(coder.encode(read) == line, sourceLocation: sourceLocation)
    }

    /// The decode of `line` fails with exactly `message`.
    func expectError<T: JSONReadable>(_ type: T.Type, _ line: String, _ message: String, sourceLocation: SourceLocation = #_sourceLocation) {
        do {
            let value = try coder.decode(type, from: Array(line.utf8))
            Issue.record("\(line) was read as \(value)", sourceLocation: sourceLocation)
        } catch {
            #expect(error.message == message, "\(line)", sourceLocation: sourceLocation)
        }
    }

    static let awkwardStrings: [String] = [
        "", "plain", "quote \" backslash \\ slash / done", "tab\tnewline\nreturn\rback\u{8}feed\u{C}",
        "\u{0}\u{1}\u{1F}\u{7F}\u{80}", "é ü 中文 🎉 \u{2028}\u{2029} \u{FEFF}", "</script>", "a\u{10FFFF}b",
    ]

    static let awkwardNumbers: [Double] = [
        0, -0.0, 1, -1, 0.1, 0.25, 1.5, 3.0, 1e-7, 1e21, 1e22, 123456789.123, -9.0e15, 9.0e15, 2e15 + 0.5,
        5e-324, .greatestFiniteMagnitude, .leastNormalMagnitude, 633.3174259662628, 1.0 / 3.0, 100, 1e100,
    ]

    static func status(_ name: String) -> AppStatus {
        var status = AppStatus(name: name, state: .background, pid: 4242, since: "2026-12-02T14:33:10.125Z", sinceSeconds: 12.625,
                               protocol: "lifecycle", launches: 2, deadlineMisses: 1, awaiting: "didEnterBackground",
                               suspendMethod: "freezer (cgroup2)", cgroup: "/sys/fs/cgroup/unified/lifecycled/app-\(name)")
        status.queuedNotifications = 3
        status.queuedPosts = 70
        status.observing = ["batteryLevelDidChange", "userDefaultsDidChange"]
        status.backgroundTasks = [TaskStatus(task: 1, name: "upload \"photos\"")]
        status.backgroundTimeRemaining = 29.5
        status.backgroundModes = ["audio"]
        status.adopted = "scope app-gnome-\(name)-1234.scope"
        status.scenes = [SceneStatus(scene: "s1", role: "window", configuration: "Main", state: "background",
                                     savedState: ["draft": "x"]),
                         SceneStatus(scene: "s2", role: "window", configuration: "Main", state: "disconnected",
                                     savedState: nil, savedStateHidden: true)]
        return status
    }

    static var daemon: DaemonStatus {
        var daemon = DaemonStatus(pid: 1, version: "0.1.0", configDirectory: "/etc/lifecycled", runtimeDirectory: "/run/lifecycled",
                                  cgroupLayout: "hybrid", mechanisms: ["oom_score_adj: 0 / 500 / 900"], configErrors: ["bad: key"],
                                  uptimeSeconds: 3600.001)
        daemon.sources = ["battery: uevents"]
        daemon.notificationTypes = ["batteryLevelDidChange: latest"]
        daemon.display = "sway at /run/user/1000/sway-ipc.sock, connected"
        daemon.controlProtocol = 1
        return daemon
    }

    static let clientMessages: [ClientMessage] = [
        .hello(protocol: 1, observe: nil), .hello(protocol: 1, observe: ["a", "b"], app: "notes", token: "t0k"),
        .ack(id: 7), .ack(id: -7), .ack(id: 7, configuration: "Default"), .ack(id: 7, state: ["draft": "x"]),
        .ack(id: 8, result: "newData"), .observe([]),
        .post(name: "x", payload: ["k": ["z": 1, "a": 2, "é": 3, "A": 4, "_": 5]], app: "notes"), .post(name: "x", payload: nil, app: nil),
        .beginBackgroundTask(task: 2, name: "upload"), .endBackgroundTask(task: 2),
        .requestSceneActivation(scene: "s1", role: nil, configuration: nil, options: nil),
        .requestSceneActivation(scene: nil, role: "window", configuration: "Editor", options: ["k": [1.5, "two", nil, true]]),
        .requestSceneDestruction(scene: "s2"),
    ]

    static let serverMessages: [ServerMessage] = [
        .welcome(protocol: 1, app: "notes", state: .inactive), .welcome(protocol: 1, app: "notes", state: .background, token: "t0k"),
        .callback(.didFinishLaunching, id: 1, deadlineMs: 20000,
                  launchOptions: LaunchOptions(launchedBy: "lifectl", background: true, terminatedInBackground: true)),
        .callback(.didBecomeActive, id: 12, deadlineMs: 5000, launchOptions: nil),
        .error("message before hello"),
        .notification(NotificationDelivery(name: "batteryLevelDidChange", payload: ["level": 0.25], posts: 3)),
        .notification(NotificationDelivery(name: "log", payloads: ["a", ["nested": ["deep": [1, 2, 3]]]], posts: 70, dropped: 6)),
        .notification(NotificationDelivery(name: "significantTimeChange", posts: 2)),
        .backgroundTaskBegan(task: 1, name: "upload", remainingMs: nil),
        .backgroundTaskBegan(task: 1, name: "upload", remainingMs: 29000),
        .backgroundTimeWillExpire(tasks: [BackgroundTask(id: 1, name: "a"), BackgroundTask(id: 2, name: "b")], remainingMs: 5000),
        .postFailed(name: "x", message: "no such type"),
        .sceneCallback(.sceneWillConnect, id: 4, deadlineMs: 5000, scene: "s1",
                       connection: SceneConnection(role: "window", configuration: "Main", options: ["origin": "lifectl"], savedState: nil)),
        .sceneCallback(.sceneDidEnterBackground, id: 5, deadlineMs: 5000, scene: "s1", connection: nil),
        .configurationForConnecting(id: 3, deadlineMs: 5000, scene: "s1", role: "window", proposed: "Main", options: [:]),
        .didDiscardSceneSessions(id: 9, deadlineMs: 5000, scenes: ["s1", "s2"]),
        .requestFailed(request: "requestSceneDestruction", message: "no"),
        .performFetch(id: 10, deadlineMs: 30000),
    ]

    static let replies: [ControlReply] = [
        ControlReply(ok: true, apps: [status("notes"), AppStatus(name: "bare", state: .notRunning, pid: nil, since: "",
                     sinceSeconds: 0, protocol: "none", launches: 0, deadlineMisses: 0, awaiting: nil, suspendMethod: "signal", cgroup: nil)],
                     daemon: daemon),
        .failure("cannot resume 'notes': it is active (only a suspended app can be resumed)"),
        ControlReply(ok: true, posted: PostSummary(delivered: 2, queued: 98)),
        ControlReply(ok: true, apps: [], scene: "s3"),
    ]

    static let requests: [ControlRequest] = [
        ControlRequest(verb: "focus", app: "notes"), ControlRequest(verb: "list"),
        ControlRequest(verb: "post", app: nil, name: "x", data: ["k": 1, "list": [1.5, "two", nil, true]]),
        ControlRequest(verb: "launch", app: "notes", background: true),
        ControlRequest(verb: "scene-open", app: "notes", scene: "s1", role: "window", configuration: "Editor"),
    ]

    static let watchEvents: [WatchEvent] = [
        WatchEvent(event: "app", app: "notes", state: "active", pid: 42, since: "2026-12-02T14:33:10.125Z"),
        WatchEvent(event: "ready", time: "2026-12-02T14:33:10.125Z", protocol: 1),
        WatchEvent(event: "sceneTransition", app: "notes", scene: "s1", from: "background", to: "disconnected",
                   reason: "closed", time: "2026-12-02T14:33:10.125Z"),
        WatchEvent(event: "dropped", reason: "the client did not keep up", time: "2026-12-02T14:33:10.125Z"),
    ]

    @Test("every message type is written as the wire has it: keys sorted, nil left out")
    func messagesAreWrittenInTheWireForm() {
        let expected = Self.goldenLines
        let written = Self.clientMessages.map { text(coder.encode($0)) } + Self.serverMessages.map { text(coder.encode($0)) }
            + Self.replies.map { text(coder.encode($0)) } + Self.requests.map { text(coder.encode($0)) }
            + Self.watchEvents.map { text(coder.encode($0)) }
        #expect(written.count == expected.count)
        for (line, golden) in zip(written, expected) { #expect(line == golden + "\n") }
    }

    @Test("every message type survives a round trip")
    func messagesRoundTrip() throws {
        for message in Self.clientMessages { try expectRoundTrip(message) }
        for message in Self.serverMessages { try expectRoundTrip(message) }
        for callback in LifecycleCallback.allCases {
            try expectRoundTrip(ServerMessage.callback(callback, id: 3, deadlineMs: 5000, launchOptions: nil))
        }
        for callback in SceneCallback.allCases where callback != .sceneWillConnect {
            try expectRoundTrip(ServerMessage.sceneCallback(callback, id: 3, deadlineMs: 5000, scene: "s1", connection: nil))
        }
        for reply in Self.replies { try expectRoundTrip(reply) }
        for request in Self.requests { try expectRoundTrip(request) }
        for event in Self.watchEvents { try expectRoundTrip(event) }
    }

    @Test("random replies, requests and JSON values survive a round trip (seeded)")
    func randomValuesRoundTrip() throws {
        var generator = SplitMix64.seeded(42)
        for _ in 0..<300 {
            try expectRoundTrip(Self.randomValue(&generator, depth: 0))
            var reply = ControlReply(ok: generator.next() % 2 == 0, apps: (0..<generator.next() % 3).map { _ in Self.randomStatus(&generator) })
            if generator.next() % 2 == 0 { reply.error = Self.randomString(&generator) }
            if generator.next() % 3 == 0 { reply.daemon = Self.daemon }
            try expectRoundTrip(reply)
            try expectRoundTrip(ControlRequest(verb: Self.randomString(&generator), app: Self.randomString(&generator),
                                               background: generator.next() % 2 == 0, data: Self.randomPresentValue(&generator)))
        }
    }

    @Test("JSONWriter escapes strings and prints numbers as JSONEncoder, an independent writer, does")
    func scalarsAreWrittenAsJSONEncoderWritesThem() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        func expectWritten(_ value: some Encodable & JSONWritable, sourceLocation: SourceLocation = #_sourceLocation) throws {
            var writer = JSONWriter(capacity: 16)
            value.writeJSON(into: &writer)
            #expect(text(writer.bytes) == text([UInt8](try encoder.encode(value))), sourceLocation: sourceLocation)
        }
        for string in Self.awkwardStrings {
            try expectWritten(string)
            try expectWritten([string, string])
        }
        for number in Self.awkwardNumbers {
            try expectWritten(number)
            try expectWritten(-number)
        }
        for number in [Int64.min, Int64.max, 0, -1, 7] { try expectWritten(number) }
        try expectWritten(UInt64.max)
        var generator = SplitMix64.seeded(7)
        for _ in 0..<2000 {
            let number = Double(bitPattern: generator.next())
            if number.isFinite { try expectWritten(number) }
        }
        var writer = JSONWriter()
        writer.value(["b": .number(.nan), "a": [1e300, -2, 0.5, .number(.infinity)], "é": "x", "Z": true])
        #expect(text(writer.bytes) == #"{"Z":true,"a":[1e+300,-2,0.5,null],"b":null,"é":"x"}"#)
    }

    @Test("malformed lines get a sentence that says what was wrong",
          arguments: [
            ("this is not json", "not a JSON object: 'this is not json'"),
            ("", "not a JSON object: ''"),
            (#"{"type":"ack","id":7"#, #"not a JSON object: '{"type":"ack","id":7'"#),
            (#"{"type":"ack","id":7}x"#, #"not a JSON object: '{"type":"ack","id":7}x'"#),
            (#"{"type":"ack","id":07}"#, #"not a JSON object: '{"type":"ack","id":07}'"#),
            (#"[1,2]"#, #"not a JSON object: '[1,2]'"#),
            (#""ack""#, #"not a JSON object: '"ack"'"#),
            (#"{"type":"hello"}"#, "missing field 'protocol'"),
            (#"{"id":3}"#, "missing field 'type'"),
            (#"{"type":"dance"}"#, "unknown message type 'dance' (expected one of: hello, ack, observe, post, beginBackgroundTask, endBackgroundTask, requestSceneActivation, requestSceneDestruction)"),
            (#"{"type":"ack","id":"seven"}"#, "bad field 'id': expected an integer, found a string"),
            (#"{"type":"ack","id":null}"#, "bad field 'id': expected an integer, found null"),
            (#"{"type":"ack","id":1.5}"#, "bad field 'id': not an integer between -9223372036854775808 and 9223372036854775807"),
            (#"{"type":"ack","id":99999999999999999999}"#, "bad field 'id': not an integer between -9223372036854775808 and 9223372036854775807"),
            (#"{"type":7}"#, "bad field 'type': expected a string, found a number"),
            (#"{"type":"observe","names":["a",1]}"#, "bad field 'names.1': expected a string, found a number"),
            (#"{"type":"hello","protocol":1,"observe":{}}"#, "bad field 'observe': expected an array, found an object"),
          ])
    func malformedLinesAreExplained(line: String, message: String) {
        expectError(ClientMessage.self, line, message)
    }

    @Test("hostile lines are refused with the same sentences: bad UTF-8, lone surrogates, control characters, deep nesting")
    func hostileLinesAreRefused() {
        let invalidUTF8: [UInt8] = Array(#"{"type":"post","name":""#.utf8) + [0xff, 0xfe] + Array(#""}"#.utf8)
        #expect(throws: ProtocolError.self) { try coder.decode(ClientMessage.self, from: invalidUTF8) }
        #expect(((try? coder.decode(ClientMessage.self, from: invalidUTF8)) == nil))
        do {
            _ = try coder.decode(ClientMessage.self, from: invalidUTF8)
        } catch {
            #expect(error.message.hasPrefix("not a JSON object: "))
        }
        for line in [#"{"type":"post","name":"\ud800"}"#, "{\"type\":\"post\",\"name\":\"a\u{1}b\"}",
                     #"{"type":"post","name":"x","payload":1e400}"#, #"{"type":"post","name":"x",}"#] {
            expectError(ClientMessage.self, line, "not a JSON object: '\(line)'")
        }
        // Nesting within the bound is read; one level deeper is refused, without exhausting the stack.
        let deep = String(repeating: "[", count: JSONParser.maxDepth - 1) + String(repeating: "]", count: JSONParser.maxDepth - 1)
        #expect(throws: Never.self) { try coder.decode(ClientMessage.self, from: Array(#"{"type":"post","name":"x","payload":\#(deep)}"#.utf8)) }
        let tooDeep = String(repeating: "[", count: 100_000)
        #expect(throws: ProtocolError.self) { try coder.decode(JSONValue.self, from: Array(tooDeep.utf8)) }
    }

    @Test("what a later version may add is ignored; of a key given twice the first counts; null is an absent optional")
    func lenientReading() throws {
        let ack = #" { "type" : "ack" , "id" : 7 , "extra" : [1, {"a": null}], "state": null } "#
        #expect(try coder.decode(ClientMessage.self, from: Array(ack.utf8)) == .ack(id: 7))
        #expect(try coder.decode(ClientMessage.self, from: Array(#"{"type":"ack","id":7,"id":8}"#.utf8)) == .ack(id: 7))
        #expect(try coder.decode(ClientMessage.self, from: Array(#"{"id":1e2,"type":"ack"}"#.utf8)) == .ack(id: 100))
        #expect(try coder.decode(ClientMessage.self, from: Array(#"{"type":"beginBackgroundTask","task":3}"#.utf8))
                == .beginBackgroundTask(task: 3, name: ""))
        let post = #"{"type":"post","name":"x","payload":{"k":1.5e3,"s":"\u00e9\ud83c\udf89\n\"\\\/","n":-0,"z":-0.0,"b":false,"k":2}}"#
        #expect(try coder.decode(ClientMessage.self, from: Array(post.utf8))
                == .post(name: "x", payload: ["k": 1500, "s": "é🎉\n\"\\/", "n": 0, "z": 0, "b": false], app: nil))
        #expect(try coder.decode(ControlRequest.self, from: Array(#"{"verb":"focus","app":null,"future":{"x":1}}"#.utf8))
                == ControlRequest(verb: "focus"))
        expectError(ControlRequest.self, #"{"app":"notes"}"#, "missing field 'verb'")
        expectError(ControlReply.self, #"{"ok":true,"apps":[{"name":"a"}]}"#, "missing field 'apps.0.state'")
        expectError(ControlReply.self, #"{"ok":true,"daemon":{"pid":"x"}}"#, "bad field 'daemon.pid': expected an integer, found a string")
        expectError(ServerMessage.self, #"{"type":"hello","protocol":1,"app":"a","state":"asleep"}"#,
                    "bad field 'state': 'asleep' is not one of notRunning, inactive, active, background, suspended, failed")
    }

    /// The keys written for `value`, an object.
    func keys(of value: some JSONWritable) throws -> Set<String> {
        guard case .object(let members) = try JSONParser.parse(Array(coder.encode(value).dropLast())) else { return [] }
        return Set(members.map(\.key))
    }

    func labels(of value: Any) -> Set<String> { Set(Mirror(reflecting: value).children.compactMap(\.label)) }

    /// A stored property added to one of these types without its member in the writer fails here: each value sets
    /// every property (a new optional left nil fails the check too), and must be written in full and read back.
    @Test("every stored property of the control types is written and read")
    func noPropertyIsLeftOut() throws {
        var status = Self.status("a")
        status.scenes = [SceneStatus(scene: "s1", role: "window", configuration: "Default", state: "background", savedState: ["k": 1],
                                     savedStateHidden: true)]
        status.reclaim = ReclaimStatus(method: "process_madvise", outcome: "done", swap: true, began: "2026-12-02T14:33:40.125Z",
                                       residentBefore: 112_394_240, swappedBefore: 0, residentAfter: 9_801_728,
                                       swappedAfter: 102_592_512, anonymousBefore: 105_906_176, anonymousAfter: 1_515_520,
                                       seconds: 0.25)
        let reply = ControlReply(ok: true, error: "e", apps: [status], daemon: Self.daemon, posted: PostSummary(delivered: 1, queued: 2),
                                 scene: "s1")
        let request = ControlRequest(verb: "post", app: "a", background: false, name: "n", data: [1], scene: "s", role: "r",
                                     configuration: "c")
        let event = WatchEvent(event: "app", app: "a", scene: "s1", state: "active", pid: 4, since: "t", from: "f", to: "t",
                               reason: "r", time: "t", protocol: 1)
        #expect(try keys(of: reply) == labels(of: reply))
        #expect(try keys(of: status) == labels(of: status))
        #expect(try keys(of: status.scenes![0]) == labels(of: status.scenes![0]))
        #expect(try keys(of: status.backgroundTasks[0]) == labels(of: status.backgroundTasks[0]))
        #expect(try keys(of: status.reclaim!) == labels(of: status.reclaim!))
        #expect(try keys(of: Self.daemon) == labels(of: Self.daemon))
        #expect(try keys(of: reply.posted!) == labels(of: reply.posted!))
        #expect(try keys(of: request) == labels(of: request))
        #expect(try keys(of: event) == labels(of: event))
        try expectRoundTrip(reply)
        try expectRoundTrip(request)
        try expectRoundTrip(event)
    }

    static func randomString(_ generator: inout SplitMix64) -> String {
        awkwardStrings[Int(generator.next() % UInt64(awkwardStrings.count))] + String(generator.next() % 97)
    }

    static func randomDouble(_ generator: inout SplitMix64) -> Double {
        switch generator.next() % 3 {
        case 0: return awkwardNumbers[Int(generator.next() % UInt64(awkwardNumbers.count))]
        case 1: return Double(generator.next() % 1_000_000) / 1000
        default:
            let number = Double(bitPattern: generator.next())
            return number.isFinite ? number : 0.5
        }
    }

    static func randomInt(_ generator: inout SplitMix64) -> Int {
        generator.next() % 2 == 0 ? Int(generator.next() % 1000) : Int(Int64(bitPattern: generator.next()))
    }

    static func randomStatus(_ generator: inout SplitMix64) -> AppStatus {
        func chance(_ generator: inout SplitMix64) -> Bool { generator.next() % 2 == 0 }
        var status = AppStatus(
            name: randomString(&generator), state: AppState.allCases[Int(generator.next() % UInt64(AppState.allCases.count))],
            pid: chance(&generator) ? Int32(truncatingIfNeeded: Int64(bitPattern: generator.next())) : nil,
            since: randomString(&generator), sinceSeconds: randomDouble(&generator), protocol: randomString(&generator),
            launches: randomInt(&generator), deadlineMisses: randomInt(&generator),
            awaiting: chance(&generator) ? randomString(&generator) : nil, suspendMethod: randomString(&generator),
            cgroup: chance(&generator) ? randomString(&generator) : nil)
        status.queuedNotifications = randomInt(&generator)
        status.queuedPosts = randomInt(&generator)
        status.observing = (0..<generator.next() % 4).map { _ in randomString(&generator) }
        status.backgroundTasks = (0..<generator.next() % 3).map { _ in TaskStatus(task: randomInt(&generator), name: randomString(&generator)) }
        status.backgroundTimeRemaining = chance(&generator) ? randomDouble(&generator) : nil
        status.taskOverruns = randomInt(&generator)
        status.backgroundModes = (0..<generator.next() % 3).map { _ in randomString(&generator) }
        status.memoryTerminations = randomInt(&generator)
        status.terminatedInBackground = chance(&generator)
        if chance(&generator) {
            func bytes(_ generator: inout SplitMix64) -> UInt64 { chance(&generator) ? generator.next() % 1_000_000_000 : generator.next() }
            status.reclaim = ReclaimStatus(
                method: randomString(&generator), outcome: randomString(&generator), swap: chance(&generator),
                began: randomString(&generator), residentBefore: bytes(&generator), swappedBefore: bytes(&generator),
                residentAfter: chance(&generator) ? bytes(&generator) : nil, swappedAfter: chance(&generator) ? bytes(&generator) : nil,
                anonymousBefore: bytes(&generator), anonymousAfter: chance(&generator) ? bytes(&generator) : nil,
                seconds: chance(&generator) ? randomDouble(&generator) : nil)
        }
        if chance(&generator) {
            status.scenes = (0..<generator.next() % 3).map { _ in
                SceneStatus(scene: randomString(&generator), role: randomString(&generator), configuration: randomString(&generator),
                            state: randomString(&generator),
                            savedState: chance(&generator) ? randomPresentValue(&generator) : nil,
                            savedStateHidden: chance(&generator) ? chance(&generator) : nil)
            }
        }
        return status
    }

    /// A random value for an optional member, nil where it came out null: an optional's null is read as its absence.
    static func randomPresentValue(_ generator: inout SplitMix64) -> JSONValue? {
        let value = randomValue(&generator, depth: 0)
        // JSONValue is ExpressibleByNilLiteral: `nil` alone would be JSONValue.null.
        return value == .null ? Optional<JSONValue>.none : value
    }

    static func randomValue(_ generator: inout SplitMix64, depth: Int) -> JSONValue {
        switch generator.next() % (depth > 3 ? 4 : 6) {
        case 0: return .null
        case 1: return .bool(generator.next() % 2 == 0)
        case 2:
            let kind = generator.next() % 3
            if kind == 0 { return .number(Double(Int64(bitPattern: generator.next()) % 100_000)) }
            if kind == 1 { return .number(Double(generator.next() % 1_000_000) / 1000) }
            let number = Double(bitPattern: generator.next())
            return .number(number.isFinite ? number : 1)
        case 3: return .string(randomString(&generator))
        case 4: return .array((0..<generator.next() % 5).map { _ in randomValue(&generator, depth: depth + 1) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<generator.next() % 6 {
                members[awkwardStrings[Int(generator.next() % UInt64(awkwardStrings.count))] + String(generator.next() % 5)]
                    = randomValue(&generator, depth: depth + 1)
            }
            return .object(members)
        }
    }

    /// The lines of `clientMessages`, `serverMessages`, `replies`, `requests` and `watchEvents`, in order, as the
    /// wire has them (docs/PROTOCOL.md, docs/CONTROL.md).
    static let goldenLines: [String] = [
        #"{"protocol":1,"type":"hello"}"#,
        #"{"app":"notes","observe":["a","b"],"protocol":1,"token":"t0k","type":"hello"}"#,
        #"{"id":7,"type":"ack"}"#,
        #"{"id":-7,"type":"ack"}"#,
        #"{"configuration":"Default","id":7,"type":"ack"}"#,
        #"{"id":7,"state":{"draft":"x"},"type":"ack"}"#,
        #"{"id":8,"result":"newData","type":"ack"}"#,
        #"{"names":[],"type":"observe"}"#,
        #"{"app":"notes","name":"x","payload":{"k":{"A":4,"_":5,"a":2,"z":1,"é":3}},"type":"post"}"#,
        #"{"name":"x","type":"post"}"#,
        #"{"name":"upload","task":2,"type":"beginBackgroundTask"}"#,
        #"{"task":2,"type":"endBackgroundTask"}"#,
        #"{"scene":"s1","type":"requestSceneActivation"}"#,
        #"{"configuration":"Editor","options":{"k":[1.5,"two",null,true]},"role":"window","type":"requestSceneActivation"}"#,
        #"{"scene":"s2","type":"requestSceneDestruction"}"#,
        #"{"app":"notes","protocol":1,"state":"inactive","type":"hello"}"#,
        #"{"app":"notes","protocol":1,"state":"background","token":"t0k","type":"hello"}"#,
        #"{"deadlineMs":20000,"id":1,"launchOptions":{"background":true,"launchedBy":"lifectl","terminatedInBackground":true},"type":"didFinishLaunching"}"#,
        #"{"deadlineMs":5000,"id":12,"type":"didBecomeActive"}"#,
        #"{"message":"message before hello","type":"error"}"#,
        #"{"dropped":0,"name":"batteryLevelDidChange","payload":{"level":0.25},"posts":3,"type":"notification"}"#,
        #"{"dropped":6,"name":"log","payloads":["a",{"nested":{"deep":[1,2,3]}}],"posts":70,"type":"notification"}"#,
        #"{"dropped":0,"name":"significantTimeChange","posts":2,"type":"notification"}"#,
        #"{"name":"upload","remainingMs":null,"task":1,"type":"backgroundTaskBegan"}"#,
        #"{"name":"upload","remainingMs":29000,"task":1,"type":"backgroundTaskBegan"}"#,
        #"{"remainingMs":5000,"tasks":[{"name":"a","task":1},{"name":"b","task":2}],"type":"backgroundTimeWillExpire"}"#,
        #"{"message":"no such type","name":"x","type":"postFailed"}"#,
        #"{"configuration":"Main","deadlineMs":5000,"id":4,"options":{"origin":"lifectl"},"role":"window","scene":"s1","state":null,"type":"sceneWillConnect"}"#,
        #"{"deadlineMs":5000,"id":5,"scene":"s1","type":"sceneDidEnterBackground"}"#,
        #"{"configuration":"Main","deadlineMs":5000,"id":3,"options":{},"role":"window","scene":"s1","type":"configurationForConnecting"}"#,
        #"{"deadlineMs":5000,"id":9,"scenes":["s1","s2"],"type":"didDiscardSceneSessions"}"#,
        #"{"message":"no","request":"requestSceneDestruction","type":"requestFailed"}"#,
        #"{"deadlineMs":30000,"id":10,"type":"performFetch"}"#,
        #"{"apps":[{"adopted":"scope app-gnome-notes-1234.scope","awaiting":"didEnterBackground","backgroundModes":["audio"],"backgroundTasks":[{"name":"upload \"photos\"","task":1}],"backgroundTimeRemaining":29.5,"cgroup":"/sys/fs/cgroup/unified/lifecycled/app-notes","deadlineMisses":1,"launches":2,"memoryTerminations":0,"name":"notes","observing":["batteryLevelDidChange","userDefaultsDidChange"],"pid":4242,"protocol":"lifecycle","queuedNotifications":3,"queuedPosts":70,"scenes":[{"configuration":"Main","role":"window","savedState":{"draft":"x"},"scene":"s1","state":"background"},{"configuration":"Main","role":"window","savedStateHidden":true,"scene":"s2","state":"disconnected"}],"since":"2026-12-02T14:33:10.125Z","sinceSeconds":12.625,"state":"background","suspendMethod":"freezer (cgroup2)","taskOverruns":0,"terminatedInBackground":false},{"backgroundModes":[],"backgroundTasks":[],"deadlineMisses":0,"launches":0,"memoryTerminations":0,"name":"bare","observing":[],"protocol":"none","queuedNotifications":0,"queuedPosts":0,"since":"","sinceSeconds":0,"state":"notRunning","suspendMethod":"signal","taskOverruns":0,"terminatedInBackground":false}],"daemon":{"cgroupLayout":"hybrid","configDirectory":"/etc/lifecycled","configErrors":["bad: key"],"controlProtocol":1,"display":"sway at /run/user/1000/sway-ipc.sock, connected","mechanisms":["oom_score_adj: 0 / 500 / 900"],"notificationTypes":["batteryLevelDidChange: latest"],"pid":1,"runtimeDirectory":"/run/lifecycled","sources":["battery: uevents"],"uptimeSeconds":3600.001,"version":"0.1.0"},"ok":true}"#,
        #"{"error":"cannot resume 'notes': it is active (only a suspended app can be resumed)","ok":false}"#,
        #"{"ok":true,"posted":{"delivered":2,"queued":98}}"#,
        #"{"apps":[],"ok":true,"scene":"s3"}"#,
        #"{"app":"notes","verb":"focus"}"#,
        #"{"verb":"list"}"#,
        #"{"data":{"k":1,"list":[1.5,"two",null,true]},"name":"x","verb":"post"}"#,
        #"{"app":"notes","background":true,"verb":"launch"}"#,
        #"{"app":"notes","configuration":"Editor","role":"window","scene":"s1","verb":"scene-open"}"#,
        #"{"app":"notes","event":"app","pid":42,"since":"2026-12-02T14:33:10.125Z","state":"active"}"#,
        #"{"event":"ready","protocol":1,"time":"2026-12-02T14:33:10.125Z"}"#,
        #"{"app":"notes","event":"sceneTransition","from":"background","reason":"closed","scene":"s1","time":"2026-12-02T14:33:10.125Z","to":"disconnected"}"#,
        #"{"event":"dropped","reason":"the client did not keep up","time":"2026-12-02T14:33:10.125Z"}"#,
    ]
}
