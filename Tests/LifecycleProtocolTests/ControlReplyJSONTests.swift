import TestSupport
import FoundationEssentials
import LifecycleModel
@testable import LifecycleProtocol
import Testing

/// lifectl's side of the control protocol by hand (MessageReaders.swift, MessageWriters.swift): the reply read to
/// JSONDecoder's value, whatever the key order or whitespace, and every other form left to JSONDecoder with its value
/// or its error; the request written to JSONEncoder's bytes; and no stored property of those types left out.
@Suite("Hand-read control replies")
struct ControlReplyJSONTests {
    /// The hand reader's value, or nil where it leaves the line to JSONDecoder.
    static func handRead(_ line: [UInt8]) -> ControlReply? {
        JSONParser.parse(line).flatMap(ControlReply.init(parsed:))
    }

    /// LineCoder reads the line as JSONDecoder does: the same value, or an error that says the same.
    func expectLineCoderAsJSONDecoder(_ line: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        let mine = Result { try LineCoder().decode(ControlReply.self, from: line) }
        let theirs = Result { try JSONDecoder().decode(ControlReply.self, from: Data(line)) }
        let text = String(decoding: line, as: UTF8.self)
        switch (mine, theirs) {
        case (.success(let a), .success(let b)): #expect(a == b, "\(text)", sourceLocation: sourceLocation)
        case (.failure(let a), .failure(let b)):
            #expect(ProtocolError(decoding: a, line: line) == ProtocolError(decoding: b, line: line), "\(text)",
                    sourceLocation: sourceLocation)
        default: Issue.record("\(text): \(mine) against JSONDecoder's \(theirs)", sourceLocation: sourceLocation)
        }
    }

    /// The line is read by hand, to JSONDecoder's value.
    func expectHandReadAsJSONDecoder(_ line: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let text = String(decoding: line, as: UTF8.self)
        let reference = try JSONDecoder().decode(ControlReply.self, from: Data(line))
        let read = try #require(Self.handRead(line), "not read by hand: \(text)", sourceLocation: sourceLocation)
        #expect(read == reference, "\(text)", sourceLocation: sourceLocation)
        expectLineCoderAsJSONDecoder(line, sourceLocation: sourceLocation)
    }

    static func randomDaemon(_ generator: inout SplitMix64) -> DaemonStatus {
        var daemon = DaemonStatus(
            pid: Int32(truncatingIfNeeded: Int64(bitPattern: generator.next())), version: MessageJSONTests.randomString(&generator),
            configDirectory: MessageJSONTests.randomString(&generator), runtimeDirectory: MessageJSONTests.randomString(&generator),
            cgroupLayout: MessageJSONTests.randomString(&generator),
            mechanisms: (0..<generator.next() % 3).map { _ in MessageJSONTests.randomString(&generator) },
            configErrors: (0..<generator.next() % 3).map { _ in MessageJSONTests.randomString(&generator) },
            uptimeSeconds: MessageJSONTests.randomDouble(&generator))
        daemon.sources = (0..<generator.next() % 3).map { _ in MessageJSONTests.randomString(&generator) }
        daemon.notificationTypes = (0..<generator.next() % 3).map { _ in MessageJSONTests.randomString(&generator) }
        return daemon
    }

    static func randomReply(_ generator: inout SplitMix64) -> ControlReply {
        let apps: [AppStatus]? = generator.next() % 4 == 0 ? nil : (0..<generator.next() % 3).map { _ in MessageJSONTests.randomStatus(&generator) }
        return ControlReply(
            ok: generator.next() % 2 == 0, error: generator.next() % 3 == 0 ? MessageJSONTests.randomString(&generator) : nil,
            apps: apps, daemon: generator.next() % 3 == 0 ? randomDaemon(&generator) : nil,
            posted: generator.next() % 4 == 0 ? PostSummary(delivered: MessageJSONTests.randomInt(&generator), queued: MessageJSONTests.randomInt(&generator)) : nil,
            scene: generator.next() % 3 == 0 ? MessageJSONTests.randomString(&generator) : nil)
    }

    /// The reply with its integers cut to what a daemon sends (the hand reader leaves integers of more than 18
    /// characters to JSONDecoder).
    static func daemonSized(_ reply: ControlReply) -> ControlReply {
        var reply = reply
        func cut(_ number: Int) -> Int { number % 1_000_000 }
        reply.apps = reply.apps?.map { app in
            var app = app
            app.launches = cut(app.launches)
            app.deadlineMisses = cut(app.deadlineMisses)
            app.queuedNotifications = cut(app.queuedNotifications)
            app.queuedPosts = cut(app.queuedPosts)
            app.taskOverruns = cut(app.taskOverruns)
            app.memoryTerminations = cut(app.memoryTerminations)
            app.backgroundTasks = app.backgroundTasks.map { TaskStatus(task: cut($0.task), name: $0.name) }
            if var reclaim = app.reclaim {
                func cut(_ bytes: UInt64) -> UInt64 { bytes % 1_000_000_000_000 }
                reclaim.residentBefore = cut(reclaim.residentBefore)
                reclaim.swappedBefore = cut(reclaim.swappedBefore)
                reclaim.anonymousBefore = cut(reclaim.anonymousBefore)
                reclaim.residentAfter = reclaim.residentAfter.map(cut)
                reclaim.swappedAfter = reclaim.swappedAfter.map(cut)
                reclaim.anonymousAfter = reclaim.anonymousAfter.map(cut)
                app.reclaim = reclaim
            }
            return app
        }
        reply.posted = reply.posted.map { PostSummary(delivered: cut($0.delivered), queued: cut($0.queued)) }
        return reply
    }

    @Test("replies are read by hand to JSONDecoder's value, as the daemon, JSONEncoder sorted, unsorted or pretty write them")
    func randomRepliesMatch() throws {
        var generator = SplitMix64.seeded(0x5EAD)
        let sorted = JSONEncoder()
        sorted.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let unsorted = JSONEncoder()
        let pretty = JSONEncoder()
        pretty.outputFormatting = [.prettyPrinted]
        var handWritten = 0, daemons = 0, posts = 0, leftToDecodable = 0
        for _ in 0..<400 {
            let wild = Self.randomReply(&generator)
            // Any integer: read by hand or left to JSONDecoder, the same value either way.
            let wildLine = [UInt8](try sorted.encode(wild))
            if let read = Self.handRead(wildLine) {
                #expect(read == (try JSONDecoder().decode(ControlReply.self, from: Data(wildLine))))
            } else {
                leftToDecodable += 1
            }
            expectLineCoderAsJSONDecoder(wildLine)

            let reply = Self.daemonSized(wild)
            for encoder in [sorted, unsorted, pretty] {
                try expectHandReadAsJSONDecoder([UInt8](try encoder.encode(reply)))
            }
            if let bytes = MessageJSONTests.handWritten(reply) {
                handWritten += 1
                try expectHandReadAsJSONDecoder(bytes)
            }
            try expectHandReadAsJSONDecoder(Array(LineCoder().encode(reply).dropLast()))
            if reply.daemon != nil { daemons += 1 }
            if reply.posted != nil { posts += 1 }
        }
        #expect(handWritten > 50 && daemons > 50 && posts > 50 && leftToDecodable > 50)
    }

    @Test("other forms are left to JSONDecoder, which reads them or fails")
    func otherFormsFallBack() throws {
        let app = #""name":"a","state":"background","since":"2026-12-02T14:33:10.125Z","sinceSeconds":12.5,"protocol":"none","launches":1,"deadlineMisses":0,"suspendMethod":"signal","queuedNotifications":0,"queuedPosts":0,"observing":[],"backgroundTasks":[],"taskOverruns":0,"backgroundModes":[],"memoryTerminations":0,"terminatedInBackground":false"#
        let daemon = #""pid":1,"version":"0.1.0","configDirectory":"/c","runtimeDirectory":"/r","cgroupLayout":"none","mechanisms":[],"configErrors":[],"uptimeSeconds":3,"sources":[],"notificationTypes":[]"#
        let handRead = [
            #"{"ok":true}"#, #"{"ok":false,"error":"no such app 'x'"}"#, #" { "ok" : true , "apps" : [ ] } "#,
            #"{"ok":true,"error":null,"apps":null,"daemon":null,"posted":null,"scene":null}"#,
            "{\"ok\":true,\"apps\":[{\(app)}]}",
            "{\"apps\":[{\(app),\"pid\":null,\"awaiting\":null,\"cgroup\":null,\"backgroundTimeRemaining\":null,\"scenes\":null}],\"ok\":true}",
            "{\"ok\":true,\"apps\":[{\(app),\"pid\":2147483647,\"backgroundTimeRemaining\":5,\"scenes\":[]}]}",
            "{\"ok\":true,\"apps\":[{\(app),\"scenes\":[{\"scene\":\"s1\",\"role\":\"r\",\"configuration\":\"c\",\"state\":\"background\",\"savedState\":null}]}]}",
            "{\"ok\":true,\"apps\":[{\(app),\"scenes\":[{\"scene\":\"s1\",\"role\":\"r\",\"configuration\":\"c\",\"state\":\"x\",\"savedState\":{\"a\":[null,1,1.5,-0,\"t\",true,{}]}}]}]}",
            "{\"ok\":true,\"apps\":[{\(app.replacing(#""backgroundTasks":[]"#, with: #""backgroundTasks":[{"task":1,"name":"upload"}]"#))}]}",
            "{\"ok\":true,\"daemon\":{\(daemon)},\"apps\":[]}", #"{"ok":true,"posted":{"delivered":1,"queued":-2}}"#,
            #"{"ok":true,"sc\u0065ne":"s\u00e9"}"#,
        ]
        let leftToDecodable = [
            // Keys this lifectl does not know (a newer daemon's), at every level.
            #"{"ok":true,"extra":1}"#, "{\"ok\":true,\"apps\":[{\(app),\"extra\":null}]}",
            "{\"ok\":true,\"daemon\":{\(daemon),\"extra\":[]}}", #"{"ok":true,"posted":{"delivered":1,"queued":2,"x":0}}"#,
            "{\"ok\":true,\"apps\":[{\(app.replacing(#""backgroundTasks":[]"#, with: #""backgroundTasks":[{"task":1,"name":"u","x":1}]"#))}]}",
            "{\"ok\":true,\"apps\":[{\(app),\"scenes\":[{\"scene\":\"s1\",\"role\":\"r\",\"configuration\":\"c\",\"state\":\"b\",\"x\":1}]}]}",
            // Missing, null or mistyped required fields; mistyped optionals; numbers not read as integers.
            #"{}"#, #"{"ok":null}"#, #"{"ok":"true"}"#, #"{"ok":1}"#, #"{"ok":true,"error":7}"#, #"{"ok":true,"apps":{}}"#,
            #"{"ok":true,"apps":[null]}"#, #"{"ok":true,"apps":[{}]}"#, #"{"ok":true,"scene":false}"#,
            "{\"ok\":true,\"apps\":[{\(app.replacing(#","launches":1"#, with: ""))}]}",
            "{\"ok\":true,\"apps\":[{\(app.replacing(#""observing":[]"#, with: #""observing":null"#))}]}",
            "{\"ok\":true,\"apps\":[{\(app.replacing(#""observing":[]"#, with: #""observing":[1]"#))}]}",
            "{\"ok\":true,\"apps\":[{\(app.replacing(#""launches":1"#, with: #""launches":1.0"#))}]}",
            "{\"ok\":true,\"apps\":[{\(app.replacing(#""launches":1"#, with: #""launches":1e2"#))}]}",
            "{\"ok\":true,\"apps\":[{\(app.replacing(#""launches":1"#, with: #""launches":"1""#))}]}",
            "{\"ok\":true,\"apps\":[{\(app.replacing(#""state":"background""#, with: #""state":"sleeping""#))}]}",
            "{\"ok\":true,\"apps\":[{\(app.replacing(#""sinceSeconds":12.5"#, with: #""sinceSeconds":"12.5""#))}]}",
            "{\"ok\":true,\"apps\":[{\(app),\"pid\":2147483648}]}", "{\"ok\":true,\"apps\":[{\(app),\"pid\":\"1\"}]}",
            "{\"ok\":true,\"apps\":[{\(app),\"cgroup\":1}]}", "{\"ok\":true,\"apps\":[{\(app),\"scenes\":{}}]}",
            "{\"ok\":true,\"apps\":[{\(app.replacing(#""backgroundTasks":[]"#, with: #""backgroundTasks":[{"task":1}]"#))}]}",
            "{\"ok\":true,\"apps\":[{\(app.replacing(#""backgroundTasks":[]"#, with: #""backgroundTasks":[{"task":1.5,"name":"u"}]"#))}]}",
            "{\"ok\":true,\"daemon\":{\(daemon.replacing(#","sources":[]"#, with: ""))}}",
            #"{"ok":true,"posted":{"delivered":1}}"#, #"{"ok":true,"posted":{"delivered":1,"queued":99999999999999999999}}"#,
            // Not JSON the parser takes: duplicate keys, trailing text, not an object.
            #"{"ok":true,"ok":false}"#, "{\"ok\":true,\"apps\":[{\(app),\"backgroundTasks\":[{\"task\":1,\"name\":\"upload\"}]}]}", #"{"ok":true}x"#, #"[{"ok":true}]"#, #""ok""#, "",
        ]
        for text in handRead {
            try expectHandReadAsJSONDecoder(Array(text.utf8))
        }
        for text in leftToDecodable {
            let line = Array(text.utf8)
            #expect(Self.handRead(line) == nil, "\(text)")
            expectLineCoderAsJSONDecoder(line)
        }
    }

    /// The keys of one JSON object.
    static func keys(of value: some Encodable) throws -> Set<String> {
        guard case .object(let members) = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(value)) else { return [] }
        return Set(members.keys)
    }

    static func labels(of value: Any) -> Set<String> { Set(Mirror(reflecting: value).children.compactMap(\.label)) }

    /// A property added to one of these types without its case in MessageReaders.swift fails here: the value sets every
    /// stored property (Mirror; a new optional left nil fails the first checks), and the hand reader must read it all
    /// back to an equal value (a key it does not know leaves the line to JSONDecoder).
    @Test("every stored property of a reply is read by hand")
    func noPropertyIsLeftOut() throws {
        var status = LineCoderTests.status("a")
        status.backgroundTimeRemaining = 4.5
        status.backgroundTasks = [TaskStatus(task: 3, name: "upload")]
        status.scenes = [SceneStatus(scene: "s1", role: "window", configuration: "Default", state: "background", savedState: ["k": 1],
                                     savedStateHidden: true)]
        var daemon = DaemonStatus(pid: 1, version: "0.1.0", configDirectory: "/etc/lifecycled", runtimeDirectory: "/run/lifecycled",
                                  cgroupLayout: "hybrid", mechanisms: ["m"], configErrors: ["e"], uptimeSeconds: 1)
        daemon.sources = ["s"]
        daemon.notificationTypes = ["t"]
        daemon.display = "sway at /run/user/1000/sway-ipc.sock, connected"
        daemon.controlProtocol = 1
        let reply = ControlReply(ok: true, error: "e", apps: [status], daemon: daemon, posted: PostSummary(delivered: 1, queued: 2), scene: "s1")

        #expect(try Self.keys(of: reply) == Self.labels(of: reply))
        #expect(try Self.keys(of: status) == Self.labels(of: status))
        #expect(try Self.keys(of: status.scenes![0]) == Self.labels(of: status.scenes![0]))
        #expect(try Self.keys(of: status.backgroundTasks[0]) == Self.labels(of: status.backgroundTasks[0]))
        #expect(try Self.keys(of: status.reclaim!) == Self.labels(of: status.reclaim!))
        #expect(try Self.keys(of: daemon) == Self.labels(of: daemon))
        #expect(try Self.keys(of: reply.posted!) == Self.labels(of: reply.posted!))
        try expectHandReadAsJSONDecoder(Array(LineCoder().encode(reply).dropLast()))
        #expect(Self.handRead(Array(LineCoder().encode(reply).dropLast())) == reply)
    }

    @Test("requests are written by hand, to JSONEncoder's bytes; every stored property is written")
    func requestsMatch() throws {
        let reference = JSONEncoder()
        reference.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        var generator = SplitMix64.seeded(0x2E0)
        func maybe(_ generator: inout SplitMix64) -> String? {
            generator.next() % 2 == 0 ? MessageJSONTests.randomString(&generator) : nil
        }
        var requests = [ControlRequest(verb: "status"), ControlRequest(verb: "status", app: "app1"),
                        ControlRequest(verb: "launch", app: "a", background: true)]
        for _ in 0..<300 {
            requests.append(ControlRequest(
                verb: MessageJSONTests.randomString(&generator), app: maybe(&generator),
                background: generator.next() % 3 == 0 ? generator.next() % 2 == 0 : nil, name: maybe(&generator),
                data: generator.next() % 2 == 0 ? LineCoderTests.randomValue(&generator, depth: 0) : nil,
                scene: maybe(&generator), role: maybe(&generator), configuration: maybe(&generator)))
        }
        for request in requests {
            let handWritten = try #require(MessageJSONTests.handWritten(request))
            let expected = [UInt8](try reference.encode(request))
            #expect(String(decoding: handWritten, as: UTF8.self) == String(decoding: expected, as: UTF8.self))
            #expect(LineCoder().encode(request) == expected + [UInt8(ascii: "\n")])
        }
        let full = ControlRequest(verb: "post", app: "a", background: false, name: "n", data: [1], scene: "s", role: "r", configuration: "c")
        #expect(try Self.keys(of: full) == Self.labels(of: full))
        let written = try #require(MessageJSONTests.handWritten(full))
        guard case .object(let members) = try JSONDecoder().decode(JSONValue.self, from: Data(written)) else {
            Issue.record("not an object")
            return
        }
        #expect(Set(members.keys) == Self.labels(of: full))
        // A payload number JSON cannot hold: JSONEncoder's verdict.
        #expect(MessageJSONTests.handWritten(ControlRequest(verb: "post", name: "n", data: .number(.nan))) == nil)
    }
}
