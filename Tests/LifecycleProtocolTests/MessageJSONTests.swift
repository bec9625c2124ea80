import TestSupport
import FoundationEssentials
import LifecycleModel
@testable import LifecycleProtocol
import Testing

/// The hand-written hot messages (MessageWriters.swift, MessageReaders.swift) against JSONEncoder and JSONDecoder: the
/// same bytes, on seeded random replies and every callback; the same values read, or the line left to JSONDecoder with
/// its own error; and no stored property of those types left unwritten.
@Suite("Hand-written hot messages")
struct MessageJSONTests {
    let foundationEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// The hand-written bytes, nil where the writer declines the value.
    static func handWritten(_ message: ServerMessage) -> [UInt8]? {
        var writer = JSONWriter()
        return message.writeJSON(into: &writer) ? writer.bytes : nil
    }

    static func handWritten(_ message: ClientMessage) -> [UInt8]? {
        var writer = JSONWriter()
        return message.writeJSON(into: &writer) ? writer.bytes : nil
    }

    static func handWritten(_ reply: ControlReply) -> [UInt8]? {
        var writer = JSONWriter()
        return (try? reply.writeJSON(into: &writer)) == true ? writer.bytes : nil
    }

    static func handWritten(_ request: ControlRequest) -> [UInt8]? {
        var writer = JSONWriter()
        return (try? request.writeJSON(into: &writer)) != nil ? writer.bytes : nil
    }

    /// The hand-written bytes, which must exist, against JSONEncoder's; and LineCoder's line is the same.
    func expectHandWrittenAsCodable<T: Encodable>(_ value: T, handWritten: [UInt8]?, line: [UInt8],
                                                  sourceLocation: SourceLocation = #_sourceLocation) throws {
        let handWritten = try #require(handWritten, sourceLocation: sourceLocation)
        let reference = [UInt8](try foundationEncoder.encode(value))
        #expect(String(decoding: handWritten, as: UTF8.self) == String(decoding: reference, as: UTF8.self), sourceLocation: sourceLocation)
        #expect(line == reference + [UInt8(ascii: "\n")], sourceLocation: sourceLocation)
    }

    func expectHandWrittenAsCodable(_ reply: ControlReply, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try expectHandWrittenAsCodable(reply, handWritten: Self.handWritten(reply), line: LineCoder().encode(reply), sourceLocation: sourceLocation)
    }

    func expectHandWrittenAsCodable(_ message: ServerMessage, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try expectHandWrittenAsCodable(message, handWritten: Self.handWritten(message), line: LineCoder().encode(message),
                                       sourceLocation: sourceLocation)
    }

    func expectHandWrittenAsCodable(_ message: ClientMessage, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try expectHandWrittenAsCodable(message, handWritten: Self.handWritten(message), line: LineCoder().encode(message),
                                       sourceLocation: sourceLocation)
    }

    static func randomString(_ generator: inout SplitMix64) -> String {
        LineCoderTests.awkwardStrings[Int(generator.next() % UInt64(LineCoderTests.awkwardStrings.count))] + String(generator.next() % 97)
    }

    static func randomDouble(_ generator: inout SplitMix64) -> Double {
        switch generator.next() % 3 {
        case 0: return LineCoderTests.awkwardNumbers[Int(generator.next() % UInt64(LineCoderTests.awkwardNumbers.count))]
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
                            savedState: chance(&generator) ? LineCoderTests.randomValue(&generator, depth: 0) : nil,
                            savedStateHidden: chance(&generator) ? chance(&generator) : nil)
            }
        }
        return status
    }

    @Test("replies without the daemon's block are written by hand, to JSONEncoder's bytes")
    func repliesMatch() throws {
        var generator = SplitMix64.seeded(0xF0C5)
        var scenes = 0, savedStates = 0, optionalsSet = 0, optionalsUnset = 0
        for _ in 0..<400 {
            let apps: [AppStatus]? = generator.next() % 4 == 0 ? nil : (0..<generator.next() % 3).map { _ in Self.randomStatus(&generator) }
            let reply = ControlReply(ok: generator.next() % 2 == 0, error: generator.next() % 3 == 0 ? Self.randomString(&generator) : nil,
                                     apps: apps, scene: generator.next() % 3 == 0 ? Self.randomString(&generator) : nil)
            try expectHandWrittenAsCodable(reply)
            for app in apps ?? [] {
                scenes += app.scenes?.count ?? 0
                savedStates += app.scenes?.filter { $0.savedState != nil }.count ?? 0
                if app.pid != nil, app.awaiting != nil, app.cgroup != nil, app.backgroundTimeRemaining != nil { optionalsSet += 1 }
                if app.pid == nil, app.awaiting == nil, app.cgroup == nil, app.backgroundTimeRemaining == nil { optionalsUnset += 1 }
            }
        }
        #expect(scenes > 0 && savedStates > 0 && optionalsSet > 0 && optionalsUnset > 0)
        try expectHandWrittenAsCodable(ControlReply(ok: true, apps: [LineCoderTests.status("notes")]))
        try expectHandWrittenAsCodable(ControlReply.failure("cannot resume 'notes': it is active"))
    }

    @Test("every callback without launch options is written by hand, to JSONEncoder's bytes")
    func callbacksMatch() throws {
        var generator = SplitMix64.seeded(0xCA11)
        for callback in LifecycleCallback.allCases {
            for _ in 0..<20 {
                try expectHandWrittenAsCodable(ServerMessage.callback(callback, id: Self.randomInt(&generator),
                                                                      deadlineMs: Self.randomInt(&generator), launchOptions: nil))
            }
        }
    }

    @Test("acks without answers are written by hand, to JSONEncoder's bytes")
    func acksMatch() throws {
        var generator = SplitMix64.seeded(0xAC)
        for id in [0, 1, -1, Int.min, Int.max] { try expectHandWrittenAsCodable(ClientMessage.ack(id: id)) }
        for _ in 0..<200 { try expectHandWrittenAsCodable(ClientMessage.ack(id: Self.randomInt(&generator))) }
    }

    @Test("the other messages and replies are left to JSONEncoder")
    func othersAreLeftToJSONEncoder() throws {
        let daemon = DaemonStatus(pid: 1, version: "0.1.0", configDirectory: "/etc/lifecycled", runtimeDirectory: "/run/lifecycled",
                                  cgroupLayout: "hybrid", mechanisms: [], configErrors: [], uptimeSeconds: 1)
        let coder = LineCoder()
        let replies = [ControlReply(ok: true, apps: [], daemon: daemon), ControlReply(ok: true, posted: PostSummary(delivered: 1, queued: 2))]
        for reply in replies {
            #expect(Self.handWritten(reply) == nil)
            #expect(coder.encode(reply) == [UInt8](try foundationEncoder.encode(reply)) + [UInt8(ascii: "\n")])
        }
        let server = [ServerMessage.callback(.didFinishLaunching, id: 1, deadlineMs: 20000, launchOptions: LaunchOptions(launchedBy: "lifectl")),
                      .error("no")]
        for message in server {
            #expect(Self.handWritten(message) == nil)
            #expect(coder.encode(message) == [UInt8](try foundationEncoder.encode(message)) + [UInt8(ascii: "\n")])
        }
        for message in [ClientMessage.ack(id: 1, configuration: "Default"), .ack(id: 1, state: ["k": 1]), .observe(["a"])] {
            #expect(Self.handWritten(message) == nil)
            #expect(coder.encode(message) == [UInt8](try foundationEncoder.encode(message)) + [UInt8(ascii: "\n")])
        }
        var status = LineCoderTests.status("a")
        status.sinceSeconds = .nan
        #expect(Self.handWritten(ControlReply(ok: true, apps: [status])) == nil, "a number JSON cannot hold")
    }

    @Test("plain acks are read by hand, as JSONDecoder reads them; other acks and messages are left to it")
    func acksAreReadAsJSONDecoderReadsThem() throws {
        let handRead = [
            #"{"type":"ack","id":7}"#, #"{"id":7,"type":"ack"}"#, #" { "type" : "ack" , "id" : -3 } "#,
            #"{"type":"ack","id":999999999999999999,"extra":[1,{"state":2}]}"#, #"{"typ\u0065":"ack","id":0}"#,
            #"{"type":"ack","id":-99999999999999999}"#,
        ]
        // (Integers of more than 18 characters are the parser's to leave to JSONDecoder, JSONParser.parseNumber.)
        let leftToDecodable = [
            #"{"type":"ack","id":7,"configuration":"Default"}"#, #"{"type":"ack","id":7,"state":{"draft":"x"}}"#,
            #"{"type":"ack","id":7,"state":null}"#, #"{"type":"ack","id":7,"configuration":null}"#,
            #"{"type":"ack","id":7.0}"#, #"{"type":"ack","id":1e2}"#, #"{"type":"ack","id":"7"}"#, #"{"type":"ack"}"#,
            #"{"type":"ack","id":99999999999999999999}"#, #"{"type":"ack","id":9223372036854775807}"#, #"{"type":"Ack","id":7}"#, #"{"type":7,"id":7}"#,
            #"{"type":"hello","protocol":1,"id":7}"#, #"{"id":7}"#, #"[{"type":"ack","id":7}]"#,
        ]
        for text in handRead + leftToDecodable {
            let line = Array(text.utf8)
            let (read, mine, theirs) = readings(ClientMessage.self, line)
            #expect((read != nil) == handRead.contains(text), "\(text)")
            switch (mine, theirs) {
            case (.success(let a), .success(let b)):
                #expect(a == b, "\(text)")
                if let read { #expect(read == b, "\(text)") }
            case (.failure(let a), .failure(let b)):
                #expect(ProtocolError(decoding: a, line: line) == ProtocolError(decoding: b, line: line), "\(text)")
            default: Issue.record("\(text): \(mine) against JSONDecoder's \(theirs)")
            }
        }
        #expect(ControlRequest(parsed: .object(keys: ["type", "id"], values: [.string("ack"), .integer(1)])) == nil)
    }

    /// One line read three ways: by the hand reader from the parsed value (nil where it leaves the line to
    /// JSONDecoder), by LineCoder's overload for the type, and by JSONDecoder.
    private func readings<T: Decodable>(_ line: [UInt8], handRead: (ParsedValue) -> T?, lineCoder: ([UInt8]) throws -> T)
        -> (handRead: T?, mine: Result<T, any Error>, theirs: Result<T, any Error>) {
        (JSONParser.parse(line).flatMap(handRead), Result { try lineCoder(line) }, Result { try JSONDecoder().decode(T.self, from: Data(line)) })
    }

    private func readings(_ type: ClientMessage.Type, _ line: [UInt8]) -> (handRead: ClientMessage?, mine: Result<ClientMessage, any Error>,
                                                                           theirs: Result<ClientMessage, any Error>) {
        readings(line, handRead: ClientMessage.init(parsedAck:), lineCoder: { try LineCoder().decode(ClientMessage.self, from: $0) })
    }

    private func readings(_ type: ControlRequest.Type, _ line: [UInt8]) -> (handRead: ControlRequest?, mine: Result<ControlRequest, any Error>,
                                                                            theirs: Result<ControlRequest, any Error>) {
        readings(line, handRead: ControlRequest.init(parsed:), lineCoder: { try LineCoder().decode(ControlRequest.self, from: $0) })
    }

    @Test("control requests are read by hand to JSONDecoder's value, or left to JSONDecoder")
    func controlRequestsAreReadAsJSONDecoderReadsThem() throws {
        var generator = SplitMix64.seeded(0xC0DE)
        let keys = ["verb", "app", "background", "name", "scene", "role", "configuration", "data", "extra", "Verb"]
        let values = [#""focus""#, #""app1""#, #""é \"q\"""#, "null", "true", "false", "7", "1.5", "[1]", #"{"a":1}"#, #""""#]
        var lines = [#"{"verb":"focus","app":"app1"}"#, #"{"app":"app1","verb":"status"}"#, #"{"verb":"launch","app":"a","background":true}"#,
                     #"{"verb":"list"}"#, #"{"verb":null}"#, #"{}"#, #"[]"#, #"{"verb":"post","name":"n","data":{"x":1}}"#]
        for _ in 0..<3000 {
            let chosen = keys.shuffled(using: &generator).prefix(Int.random(in: 0...5, using: &generator))
            let fields = chosen.map { key in
                // Mostly the right kind for the key, so that the hand path is exercised, and now and then any.
                let value = Int.random(in: 0..<4, using: &generator) == 0 ? values.randomElement(using: &generator)!
                    : key == "background" ? ["true", "false", "null"].randomElement(using: &generator)!
                    : [#""focus""#, #""app1""#, #""é \"q\"""#, "null", #""""#].randomElement(using: &generator)!
                return "\"\(key)\":\(value)"
            }
            lines.append("{" + fields.joined(separator: ",") + "}")
        }
        var handled = 0
        for text in lines {
            let (read, mine, theirs) = readings(ControlRequest.self, Array(text.utf8))
            if read != nil { handled += 1 }
            switch (mine, theirs) {
            case (.success(let a), .success(let b)):
                #expect(a == b, "\(text)")
                if let read { #expect(read == b, "\(text)") }
            case (.failure, .failure):
                #expect(read == nil, "\(text): read by hand, where JSONDecoder fails")
            default: Issue.record("\(text): \(mine) against JSONDecoder's \(theirs)")
            }
        }
        #expect(handled > 150, "the hand path was exercised: \(handled) of \(lines.count)")
    }

    @Test("acks in the forms clients send are read without a parse, to JSONDecoder's value; near misses are parsed")
    func plainAcksAreReadAsJSONDecoderReadsThem() throws {
        let plain: [(String, Int)] = [
            (#"{"type":"ack","id":7}"#, 7), (#"{"id":12,"type":"ack"}"#, 12), (#"{"type": "ack", "id": 3}"#, 3),
            (" \t{ \"id\" :\r\n0 , \"type\" : \"ack\" }\n ", 0), (#"{"type":"ack","id":-42}"#, -42),
            (#"{"type":"ack","id":999999999999999999}"#, 999_999_999_999_999_999), (#"{"type":"ack","id":-99999999999999999}"#, -99_999_999_999_999_999),
        ]
        let nearMisses = [
            #"{"type":"ack","id":-0}"#, #"{"type":"ack","id":07}"#, #"{"type":"ack","id":7.5}"#, #"{"type":"ack","id":7e0}"#,
            #"{"type":"ack","id":-}"#, #"{"type":"ack","id":}"#, #"{"type":"ack","id":1234567890123456789}"#,
            #"{"type":"ack","id":-123456789012345678}"#, #"{"type":"ack","id":7,}"#, #"{"type":"ack","id":7}x"#,
            #"{"type":"ack","id":7"#, #"{"type":"ack" "id":7}"#, #"{"type""ack","id":7}"#, #"{"type":"ack","type":"ack"}"#,
            #"{"id":1,"id":2}"#, #"{"type":"ack"}"#, #"{"id":7}"#, #"{"type":"ack","id":7,"state":null}"#,
            #"{"type":"Ack","id":7}"#, #"{"typ\u0065":"ack","id":7}"#, #"{"type":"ac\u006b","id":7}"#, #"{"type":"ack","id":"7"}"#,
            #"[{"type":"ack","id":7}]"#, "", "{", #"{"type":"ack","id":7}}"#, #"{"id":7,"type":"ack","x":1}"#,
        ]
        let coder = LineCoder()
        for (text, id) in plain {
            let line = Array(text.utf8)
            #expect(line.withUnsafeBufferPointer(ClientMessage.plainAckID) == id, "\(text)")
            #expect(try JSONDecoder().decode(ClientMessage.self, from: Data(line)) == .ack(id: id), "\(text)")
            #expect(try coder.decode(ClientMessage.self, from: line) == .ack(id: id), "\(text)")
        }
        // Seeded mutations of the plain forms (bytes replaced, inserted or removed, from JSON's punctuation, digits and
        // whitespace): whatever the scanner takes, JSONDecoder reads the same; whatever it leaves, the parse does.
        var generator = SplitMix64.seeded(0xAC4)
        let alphabet = Array(#"0123456789-+.eE ,:{}"\ta"#.utf8) + [0x0A, 0x0D]
        var mutations: [String] = []
        for _ in 0..<3000 {
            var bytes = Array(plain[Int(generator.next() % UInt64(plain.count))].0.utf8)
            for _ in 0...generator.next() % 3 {
                let index = Int(generator.next() % UInt64(bytes.count + 1))
                let byte = alphabet[Int(generator.next() % UInt64(alphabet.count))]
                switch generator.next() % 3 {
                case 0 where index < bytes.count: bytes[index] = byte
                case 1 where index < bytes.count: bytes.remove(at: index)
                default: bytes.insert(byte, at: index)
                }
            }
            mutations.append(String(decoding: bytes, as: UTF8.self))
        }
        var taken = 0
        for text in nearMisses + mutations {
            let line = Array(text.utf8)
            let id = line.withUnsafeBufferPointer(ClientMessage.plainAckID)
            if nearMisses.contains(text) { #expect(id == nil, "\(text)") }
            if let id {
                taken += 1
                #expect(try JSONDecoder().decode(ClientMessage.self, from: Data(line)) == .ack(id: id), "\(text)")
            }
            let mine = Result { try coder.decode(ClientMessage.self, from: line) }
            let theirs = Result { try JSONDecoder().decode(ClientMessage.self, from: Data(line)) }
            switch (mine, theirs) {
            case (.success(let a), .success(let b)): #expect(a == b, "\(text)")
            case (.failure(let a), .failure(let b)):
                #expect(ProtocolError(decoding: a, line: line) == ProtocolError(decoding: b, line: line), "\(text)")
            default: Issue.record("\(text): \(mine) against JSONDecoder's \(theirs)")
            }
        }
        #expect(taken > 100 && taken < 3000, "the mutations include plain acks and others (\(taken) taken)")
    }

    /// The keys of one JSON object.
    func keys(of bytes: [UInt8]) throws -> Set<String> {
        guard case .object(let members) = try JSONDecoder().decode(JSONValue.self, from: Data(bytes)) else { return [] }
        return Set(members.keys)
    }

    /// A property added to one of these types without its line in MessageWriters.swift fails here: every stored property
    /// (Mirror) is a key of the hand-written JSON of a value that sets them all.
    @Test("every stored property of a hand-written type is written")
    func noPropertyIsLeftOut() throws {
        var status = LineCoderTests.status("a")
        status.scenes = [SceneStatus(scene: "s1", role: "window", configuration: "Default", state: "background", savedState: ["k": 1],
                                     savedStateHidden: true)]
        let statusBytes = try #require(Self.handWritten(ControlReply(ok: true, apps: [status])))
        guard case .object(let reply) = try JSONDecoder().decode(JSONValue.self, from: Data(statusBytes)),
              case .array(let apps) = reply["apps"], case .object(let app) = apps.first,
              case .array(let scenes) = app["scenes"], case .object(let scene) = scenes.first,
              case .array(let tasks) = app["backgroundTasks"], case .object(let task) = tasks.first,
              case .object(let reclaim) = app["reclaim"]
        else {
            Issue.record("not the expected shape: \(String(decoding: statusBytes, as: UTF8.self))")
            return
        }
        #expect(Set(app.keys) == Set(Mirror(reflecting: status).children.compactMap(\.label)))
        #expect(Set(scene.keys) == Set(Mirror(reflecting: status.scenes![0]).children.compactMap(\.label)))
        #expect(Set(task.keys) == Set(Mirror(reflecting: status.backgroundTasks[0]).children.compactMap(\.label)))
        #expect(Set(reclaim.keys) == Set(Mirror(reflecting: status.reclaim!).children.compactMap(\.label)))

        let full = ControlReply(ok: false, error: "e", apps: [], scene: "s1")
        let handWrittenKeys = try keys(of: try #require(Self.handWritten(full)))
        // `daemon` and `posted` are JSONEncoder's: a reply that has either is not written by hand.
        #expect(handWrittenKeys.union(["daemon", "posted"]) == Set(Mirror(reflecting: full).children.compactMap(\.label)))
    }
}
