import LifecycleModel
@testable import LifecycleProtocol
import Testing

@Suite("NDJSON framing")
struct FramingTests {
    @Test("lines split across reads are joined, several lines in one read are split")
    func splitsAndJoinsLines() throws {
        var framer = LineFramer()
        framer.append(Array("{\"a\":1}\n{\"b\"".utf8))
        #expect(try framer.nextLine() == Array("{\"a\":1}".utf8))
        #expect(try framer.nextLine() == nil)
        framer.append(Array(":2}\n\n".utf8))
        #expect(try framer.nextLine() == Array("{\"b\":2}".utf8))
        #expect(try framer.nextLine() == [])
        #expect(try framer.nextLine() == nil)
        #expect(framer.pendingByteCount == 0)
    }

    @Test("a line of exactly 64 KiB is accepted; one byte more is refused, even before its newline arrives")
    func enforcesTheLineLimit() throws {
        var framer = LineFramer()
        framer.append([UInt8](repeating: UInt8(ascii: "x"), count: maxLineLength) + [UInt8(ascii: "\n")])
        #expect(try framer.nextLine()?.count == maxLineLength)

        var tooLong = LineFramer()
        tooLong.append([UInt8](repeating: UInt8(ascii: "x"), count: maxLineLength + 1))
        #expect(throws: LineFramer.Failure.lineTooLong(limit: maxLineLength)) { try tooLong.nextLine() }
    }
}

@Suite("Wire messages")
struct MessageTests {
    let coder = LineCoder()

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

    func line(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test("the client's hello and ack decode")
    func decodesClientMessages() throws {
        #expect(try coder.decode(ClientMessage.self, from: line("{\"type\":\"hello\",\"protocol\":1}")) == .hello(protocol: 1, observe: nil))
        #expect(try coder.decode(ClientMessage.self, from: line("{\"type\":\"ack\",\"id\":7,\"extra\":true}")) == .ack(id: 7),
                "unknown fields are ignored")
    }

    @Test("the notification and background-task messages of both sides survive a round trip")
    func roundTripsNotificationMessages() throws {
        let client: [ClientMessage] = [
            .hello(protocol: 1, observe: ["batteryLevelDidChange"]), .observe(["a", "b"]),
            .post(name: "x", payload: ["k": 1], app: nil), .post(name: "x", payload: nil, app: "notes"),
            .beginBackgroundTask(task: 2, name: "upload"), .endBackgroundTask(task: 2),
        ]
        for message in client {
            var encoded = coder.encode(message)
            encoded.removeLast()
            #expect(try coder.decode(ClientMessage.self, from: encoded) == message)
        }
        let server: [ServerMessage] = [
            .notification(NotificationDelivery(name: "batteryLevelDidChange", payload: ["level": 0.25], posts: 3)),
            .notification(NotificationDelivery(name: "log", payloads: ["a", "b"], posts: 70, dropped: 6)),
            .backgroundTaskBegan(task: 1, name: "upload", remainingMs: 29_000),
            .backgroundTaskBegan(task: 1, name: "upload", remainingMs: nil),
            .backgroundTimeWillExpire(tasks: [BackgroundTask(id: 1, name: "upload")], remainingMs: 5000),
            .postFailed(name: "x", message: "no such notification type"),
        ]
        for message in server {
            var encoded = coder.encode(message)
            encoded.removeLast()
            #expect(try coder.decode(ServerMessage.self, from: encoded) == message)
        }
        #expect(String(decoding: coder.encode(ServerMessage.notification(NotificationDelivery(name: "n", payload: ["level": 1], posts: 2))), as: UTF8.self)
                == "{\"dropped\":0,\"name\":\"n\",\"payload\":{\"level\":1},\"posts\":2,\"type\":\"notification\"}\n")
    }

    @Test("a lifecycle message is one sorted-key JSON line")
    func encodesCallbacks() {
        let options = LaunchOptions(launchedBy: "lifectl", background: false, terminatedInBackground: true)
        let bytes = coder.encode(ServerMessage.callback(.didFinishLaunching, id: 1, deadlineMs: 20000, launchOptions: options))
        #expect(String(decoding: bytes, as: UTF8.self) ==
                "{\"deadlineMs\":20000,\"id\":1,\"launchOptions\":{\"background\":false,\"launchedBy\":\"lifectl\",\"terminatedInBackground\":true},\"type\":\"didFinishLaunching\"}\n")
        let plain = coder.encode(ServerMessage.callback(.didEnterBackground, id: 7, deadlineMs: 5000, launchOptions: nil))
        #expect(String(decoding: plain, as: UTF8.self) == "{\"deadlineMs\":5000,\"id\":7,\"type\":\"didEnterBackground\"}\n")
    }

    @Test("every daemon message survives a round trip")
    func roundTripsServerMessages() throws {
        var messages: [ServerMessage] = [.welcome(protocol: 1, app: "notes", state: .inactive), .error("second hello")]
        for callback in LifecycleCallback.allCases {
            messages.append(.callback(callback, id: 3, deadlineMs: 5000, launchOptions: nil))
        }
        for message in messages {
            var encoded = coder.encode(message)
            encoded.removeLast()
            #expect(try coder.decode(ServerMessage.self, from: encoded) == message)
        }
    }

    @Test("control verbs map onto model requests; queries map onto none")
    func mapsControlVerbs() {
        #expect(ControlRequest(verb: "launch", app: "a", background: true).lifecycleRequest == .launch(background: true))
        #expect(ControlRequest(verb: "launch", app: "a").lifecycleRequest == .launch(background: false))
        #expect(ControlRequest(verb: "focus", app: "a").lifecycleRequest == .focus)
        #expect(ControlRequest(verb: "terminate", app: "a").lifecycleRequest == .terminate)
        #expect(ControlRequest(verb: "list").lifecycleRequest == nil)
        #expect(ControlRequest(verb: "bogus").lifecycleRequest == nil)
        let requests = ControlRequest.lifecycleVerbs.compactMap { ControlRequest(verb: $0, scene: "s1").lifecycleRequest }
        #expect(requests.map(\.description) == ["launch", "focus", "deactivate", "background", "suspend", "resume", "terminate",
                                                "open a scene of", "focus scene s1 of", "move scene s1 to the background in",
                                                "close scene s1 of", "discard scene s1 of"])
        #expect(ControlRequest(verb: "scene-focus", app: "a").lifecycleRequest == nil, "a scene verb without a scene maps onto nothing")
        #expect(ControlRequest(verb: "scene-open", app: "a", role: "externalDisplay", configuration: "Slides").lifecycleRequest
                == .openScene(role: "externalDisplay", configuration: "Slides", options: ["origin": "lifectl"]))
    }

    @Test("scene messages and the acks that answer them round-trip, with the documented field names")
    func sceneMessagesRoundTrip() throws {
        let coder = LineCoder()
        let connect = ServerMessage.sceneCallback(.sceneWillConnect, id: 4, deadlineMs: 5000, scene: "s1",
                                                  connection: SceneConnection(role: "window", configuration: "Main",
                                                                              options: ["origin": "lifectl"], savedState: ["draft": "hi"]))
        var line = coder.encode(connect)
        #expect(String(decoding: line, as: UTF8.self) == #"{"configuration":"Main","deadlineMs":5000,"id":4,"options":{"origin":"lifectl"},"role":"window","scene":"s1","state":{"draft":"hi"},"type":"sceneWillConnect"}"# + "\n")
        line.removeLast()
        #expect(try coder.decode(ServerMessage.self, from: line) == connect)
        let messages: [ServerMessage] = [
            .sceneCallback(.sceneDidBecomeActive, id: 5, deadlineMs: 5000, scene: "s2", connection: nil),
            .configurationForConnecting(id: 3, deadlineMs: 5000, scene: "s1", role: "window", proposed: "Main", options: ["origin": "lifectl"]),
            .didDiscardSceneSessions(id: 9, deadlineMs: 5000, scenes: ["s1", "s2"]),
            .requestFailed(request: "requestSceneDestruction", message: "no"),
        ]
        for message in messages {
            var encoded = coder.encode(message)
            encoded.removeLast()
            #expect(try coder.decode(ServerMessage.self, from: encoded) == message)
        }
        let ack = Array(#"{"type":"ack","id":7,"configuration":"Editor","state":{"page":2}}"#.utf8)
        #expect(try coder.decode(ClientMessage.self, from: ack) == .ack(id: 7, configuration: "Editor", state: ["page": 2]))
        let open = Array(#"{"type":"requestSceneActivation","role":"window","configuration":"Editor"}"#.utf8)
        #expect(try coder.decode(ClientMessage.self, from: open)
                == .requestSceneActivation(scene: nil, role: "window", configuration: "Editor", options: nil))
        let destroy = Array(#"{"type":"requestSceneDestruction","scene":"s2"}"#.utf8)
        #expect(try coder.decode(ClientMessage.self, from: destroy) == .requestSceneDestruction(scene: "s2"))
    }
}

@Suite("Runtime directory")
struct RuntimeDirectoryTests {
    @Test("LIFECYCLED_RUNTIME_DIR wins; root uses /run; others XDG_RUNTIME_DIR, else /tmp")
    func resolvesTheRuntimeDirectory() {
        #expect(RuntimeDirectory.path(environment: ["LIFECYCLED_RUNTIME_DIR": "/x", "XDG_RUNTIME_DIR": "/y"], uid: 0) == "/x")
        #expect(RuntimeDirectory.path(environment: [:], uid: 0) == "/run/lifecycled")
        #expect(RuntimeDirectory.path(environment: ["XDG_RUNTIME_DIR": "/run/user/1000"], uid: 1000) == "/run/user/1000/lifecycled")
        #expect(RuntimeDirectory.path(environment: [:], uid: 1000) == "/tmp/lifecycled-1000")
        #expect(RuntimeDirectory.controlSocket(in: "/x") == "/x/control.sock")
    }

    @Test("lifectl of a user who names no directory tries its own, then the system daemon's; a named one alone")
    func candidatesFallBackToTheSystemDaemon() {
        #expect(RuntimeDirectory.candidates(lifecycledRuntimeDir: nil, xdgRuntimeDir: "/run/user/1000", uid: 1000)
                == ["/run/user/1000/lifecycled", "/run/lifecycled"])
        #expect(RuntimeDirectory.candidates(lifecycledRuntimeDir: "", xdgRuntimeDir: nil, uid: 1000)
                == ["/tmp/lifecycled-1000", "/run/lifecycled"])
        #expect(RuntimeDirectory.candidates(lifecycledRuntimeDir: "/x", xdgRuntimeDir: "/run/user/1000", uid: 1000) == ["/x"])
        #expect(RuntimeDirectory.candidates(lifecycledRuntimeDir: nil, xdgRuntimeDir: "/run/user/0", uid: 0) == ["/run/lifecycled"])
    }
}
