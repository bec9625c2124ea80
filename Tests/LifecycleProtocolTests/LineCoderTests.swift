import TestSupport
import FoundationEssentials
import LifecycleModel
@testable import LifecycleProtocol
import Testing

/// LineCoder and JSONWriter against Foundation's coders: the same bytes out, the same values (or the same errors) in.
@Suite("LineCoder and JSONWriter")
struct LineCoderTests {
    let foundationEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    func foundationBytes(_ value: some Encodable) throws -> [UInt8] { [UInt8](try foundationEncoder.encode(value)) }

    /// LineCoder's line (through the overload the caller chose) is JSONEncoder's bytes and a newline.
    func expectLine(_ line: [UInt8], of value: some Encodable, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let reference = try foundationBytes(value) + [UInt8(ascii: "\n")]
        #expect(String(decoding: line, as: UTF8.self) == String(decoding: reference, as: UTF8.self), sourceLocation: sourceLocation)
    }

    /// What `write` puts in a JSONWriter is JSONEncoder's bytes for `value`.
    func expectWritten<T: Encodable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation,
                                     _ write: (inout JSONWriter, T) throws -> Void) throws {
        var writer = JSONWriter(capacity: 16)
        try write(&writer, value)
        let reference = try foundationBytes(value)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == String(decoding: reference, as: UTF8.self), sourceLocation: sourceLocation)
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
        status.reclaim = ReclaimStatus(method: "process_madvise", outcome: "done", swap: true, began: "2026-12-02T14:33:40.125Z",
                                       residentBefore: 112_394_240, swappedBefore: 0, residentAfter: 9_801_728,
                                       swappedAfter: 102_592_512, anonymousBefore: 105_906_176, anonymousAfter: 1_515_520,
                                       seconds: 0.25)
        return status
    }

    @Test("every message type encodes to JSONEncoder's bytes, through its own overload")
    func messagesEncodeAsJSONEncoderDoes() throws {
        let coder = LineCoder()
        var daemon = DaemonStatus(pid: 1, version: "0.1.0", configDirectory: "/etc/lifecycled", runtimeDirectory: "/run/lifecycled",
                                  cgroupLayout: "hybrid", mechanisms: ["oom_score_adj: 0 / 500 / 900"], configErrors: [],
                                  uptimeSeconds: 3600.001)
        daemon.sources = ["battery: uevents"]
        daemon.notificationTypes = ["batteryLevelDidChange: latest"]
        let replies: [ControlReply] = [
            ControlReply(ok: true, apps: [Self.status("notes"), AppStatus(name: "bare", state: .notRunning, pid: nil, since: "",
                         sinceSeconds: 0, protocol: "none", launches: 0, deadlineMisses: 0, awaiting: nil, suspendMethod: "signal", cgroup: nil)],
                         daemon: daemon),
            .failure("cannot resume 'notes': it is active (only a suspended app can be resumed)"),
            ControlReply(ok: true, posted: PostSummary(delivered: 2, queued: 98)),
            ControlReply(ok: true, apps: []),
        ]
        for reply in replies { try expectLine(coder.encode(reply), of: reply) }
        let statuses = [Self.status("a"), Self.status("b")]
        try expectLine(coder.encode(statuses), of: statuses)
        for request in [ControlRequest(verb: "post", app: nil, name: "x", data: ["k": 1, "list": [1.5, "two", nil, true]]),
                        ControlRequest(verb: "launch", app: "notes", background: true)] {
            try expectLine(coder.encode(request), of: request)
        }

        let server: [ServerMessage] = [
            .welcome(protocol: 1, app: "notes", state: .inactive),
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
        ]
        for message in server { try expectLine(coder.encode(message), of: message) }
        let client: [ClientMessage] = [
            .hello(protocol: 1, observe: nil), .hello(protocol: 1, observe: ["a", "b"]), .ack(id: 7), .ack(id: -7),
            .ack(id: 7, configuration: "Default"), .ack(id: 7, state: ["draft": "x"]), .observe([]),
            .post(name: "x", payload: ["k": ["z": 1, "a": 2, "é": 3, "A": 4, "_": 5]], app: "notes"), .post(name: "x", payload: nil, app: nil),
            .beginBackgroundTask(task: 2, name: "upload"), .endBackgroundTask(task: 2),
        ]
        for message in client { try expectLine(coder.encode(message), of: message) }
    }

    @Test("JSONWriter escapes strings and prints numbers as JSONEncoder does")
    func writerMatchesJSONEncoder() throws {
        for text in Self.awkwardStrings {
            try expectWritten(text) { writer, text in writer.string(text) }
            try expectWritten([text, text]) { writer, texts in writer.strings(texts) }
            try expectWritten(JSONValue.object([text: .string(text), "k" + text: .null])) { writer, value in try writer.value(value) }
        }
        for number in Self.awkwardNumbers {
            try expectWritten(number) { writer, number in try writer.double(number) }
            try expectWritten(JSONValue.number(number)) { writer, value in try writer.value(value) }
            try expectWritten(JSONValue.number(-number)) { writer, value in try writer.value(value) }
        }
        for number in [Int64.min, Int64.max, 0, -1, 7] {
            try expectWritten(number) { writer, number in writer.integer(number) }
        }
        try expectWritten(UInt64.max) { writer, number in writer.unsigned(number) }
        var generator = SplitMix64.seeded(7)
        for _ in 0..<2000 {
            let number = Double(bitPattern: generator.next())
            guard number.isFinite else { continue }
            try expectWritten(number) { writer, number in try writer.double(number) }
        }
        var writer = JSONWriter()
        #expect(throws: JSONWriter.Unrepresentable.self) { try writer.double(.nan) }
        #expect(throws: JSONWriter.Unrepresentable.self) { try writer.value(["k": .number(.infinity)]) }
    }

    @Test("random JSON values are written as JSONEncoder writes them")
    func randomValuesMatch() throws {
        var generator = SplitMix64.seeded(42)
        for _ in 0..<500 {
            let value = Self.randomValue(&generator, depth: 0)
            try expectWritten(value) { writer, value in try writer.value(value) }
        }
    }

    @Test("what the hand readers take, they read as JSONDecoder does; the rest gets JSONDecoder's own errors")
    func decodingMatchesJSONDecoder() throws {
        let lines = [
            #"{"type":"ack","id":7}"#, #" { "type" : "ack" , "id" : 7 , "extra" : [1, {"a": null}] } "#,
            #"{"type":"hello","protocol":1,"observe":["a","b"]}"#, #"{"type":"hello","protocol":1,"observe":null}"#,
            #"{"type":"post","name":"x","payload":{"k":1.5e3,"s":"\u00e9\ud83c\udf89\n\"\\\/","n":-0,"z":-0.0,"b":false}}"#,
            #"{"type":"ack","id":1.0}"#, #"{"type":"ack","id":1e2}"#, #"{"type":"ack","id":99999999999999999999}"#,
            #"{"type":"ack","id":"7"}"#, #"{"type":"ack"}"#, #"{"type":"nope"}"#, #"{"type":"ack","id":7,"id":8}"#,
            #"{"type":"ack","id":07}"#, #"{"type":"ack","id":7}x"#, #"[1,2]"#, "", "not json", #"{"type":"ack","id":7"#,
            #"{"type":"post","name":"\ud800"}"#, "{\"type\":\"post\",\"name\":\"a\u{1}b\"}", #"{"type":"beginBackgroundTask","task":3}"#,
            #"{"type":"post","name":"x","payload":1e400}"#, #"{"type":"observe","names":["a",1]}"#,
        ]
        let coder = LineCoder()
        let reference = JSONDecoder()
        for text in lines {
            let line = Array(text.utf8)
            let mine = Result { try coder.decode(ClientMessage.self, from: line) }
            let theirs = Result { try reference.decode(ClientMessage.self, from: Data(line)) }
            switch (mine, theirs) {
            case (.success(let a), .success(let b)): #expect(a == b, "\(text)")
            case (.failure(let a), .failure(let b)):
                #expect(ProtocolError(decoding: a, line: line) == ProtocolError(decoding: b, line: line), "\(text)")
            default: Issue.record("\(text): \(mine) against JSONDecoder's \(theirs)")
            }
        }
        let request = #"{"verb":"post","name":"x","data":{"a":[true,null,"s",2.5]},"background":false}"#
        #expect(try coder.decode(ControlRequest.self, from: Array(request.utf8))
                == reference.decode(ControlRequest.self, from: Data(request.utf8)))
        let reply = coder.encode(ControlReply(ok: true, apps: [Self.status("a")]))
        #expect(try coder.decode(ControlReply.self, from: Array(reply.dropLast())).apps == [Self.status("a")])
    }

    @Test("a read full of short lines is split in order, and the framer's buffer does not keep consumed bytes")
    func framerConsumesManyLines() throws {
        var framer = LineFramer()
        var expected: [[UInt8]] = []
        var chunk: [UInt8] = []
        for index in 0..<5000 {
            let line = Array("{\"type\":\"ack\",\"id\":\(index)}".utf8)
            expected.append(line)
            chunk += line + [UInt8(ascii: "\n")]
        }
        var received: [[UInt8]] = []
        for piece in stride(from: 0, to: chunk.count, by: 16 * 1024) {
            framer.append(chunk[piece..<min(chunk.count, piece + 16 * 1024)])
            while let line = try framer.nextLine() { received.append(line) }
        }
        #expect(received == expected)
        #expect(framer.pendingByteCount == 0)
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
        case 3: return .string(awkwardStrings[Int(generator.next() % UInt64(awkwardStrings.count))] + String(generator.next() % 97))
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
}

