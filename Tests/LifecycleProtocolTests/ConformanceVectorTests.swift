import FoundationEssentials
import LifecycleModel
import LifecycleProtocol
import Testing

/// The conformance vectors of docs/protocol-tests, shared with the C library and the Python package, played
/// against the Swift library's wire layer: each daemon line decoded as LifecycleClient decodes it, and each
/// client line the vector expects compared (as JSON) with what LifecycleClient's messages encode to, acks with
/// their answers, deferred acks, requests and the reconnecting hello included. The callbacks the vectors list
/// (`=` lines) are the C and Python runners' to check: LifecycleApplication runs them on the main queue.
@Suite("Conformance vectors (docs/protocol-tests)")
struct ConformanceVectorTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/protocol-tests")
    static let files: [String] = ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? [])
        .filter { $0.hasSuffix(".txt") }.sorted()

    @Test("the vectors are there")
    func vectorsExist() {
        #expect(Self.files.count >= 10, "\(Self.directory.path)")
    }

    @Test("the Swift library's lines match the vector", arguments: files)
    func vector(_ name: String) throws {
        let text = try String(contentsOfFile: Self.directory.appendingPathComponent(name).path, encoding: .utf8)
        var player = Player()
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(line)
            if line.isEmpty || line.hasPrefix("#") { continue }
            try player.play(line, at: "\(name):\(number + 1)")
        }
        #expect(player.output.isEmpty, "\(name): the Swift library would send more: \(player.output)")
    }
}

/// What LifecycleApplication sends, driven by one vector.
private struct Player {
    let coder = LineCoder()
    var output: [JSONValue] = []
    var observe: [String] = []
    var started = false, welcomed = false, reconnecting = false, dead = false, standalone = false
    var token: String?
    var answer: [String: JSONValue] = [:]
    var deferred: (ack: ClientMessage, generation: Int)?
    var generation = 0
    var nextTask = 1

    mutating func send(_ message: ClientMessage) throws {
        var bytes = coder.encode(message)
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        output.append(try coder.decode(JSONValue.self, from: bytes))
    }

    mutating func hello() throws {
        try send(.hello(protocol: 1, observe: observe.isEmpty ? nil : observe, app: token == nil ? nil : "notes", token: token))
    }

    static func object(_ text: Substring) throws -> [String: JSONValue] {
        guard case .object(let members) = try LineCoder().decode(JSONValue.self, from: Array(text.utf8)) else {
            throw VectorError("not an object: \(text)")
        }
        return members
    }

    mutating func play(_ line: String, at place: String) throws {
        if line.hasPrefix("setup ") {
            let setup = try Self.object(line.dropFirst(6))
            if case .array(let names)? = setup["observe"] { observe = names.compactMap { if case .string(let s) = $0 { s } else { nil } } }
            standalone = setup["standalone"] == .bool(true)
            return
        }
        if !started {
            started = true
            if !standalone { try hello() }
        }
        let kind = line.first!, body = line.dropFirst(2)
        switch kind {
        case "<": try receive(Array(body.utf8))
        case ">":
            let expected = try LineCoder().decode(JSONValue.self, from: Array(body.utf8))
            #expect(!output.isEmpty && output.removeFirst() == expected, "\(place): expected \(expected), output \(output)")
        case "@": answer = try Self.object(body)
        case "!": try act(Self.object(body))
        case "=": break
        default: throw VectorError("\(place): unknown line")
        }
    }

    mutating func acknowledge(_ type: String, id: Int) throws {
        let matches = answer["on"] == .string(type)
        var configuration: String?
        if matches, case .string(let name)? = answer["configuration"] { configuration = name }
        // performFetch is always answered: the app's result, or noData when it says nothing.
        var result: String?
        if type == "performFetch" {
            result = "noData"
            if matches, case .string(let answered)? = answer["result"] { result = answered }
        }
        let ack = ClientMessage.ack(id: id, configuration: configuration, state: matches ? answer["state"] : nil, result: result)
        let deferIt = matches && answer["defer"] == .bool(true)
        if matches { answer = [:] }
        if deferIt {
            deferred = (ack, generation)
            return
        }
        try send(ack)
    }

    mutating func receive(_ bytes: [UInt8]) throws {
        guard !dead else { return }
        // LifecycleClient skips a line it cannot decode: a later version's message, or one it cannot use.
        guard let message = try? coder.decode(ServerMessage.self, from: bytes) else { return }
        switch message {
        case .welcome(_, _, _, let newToken):
            token = newToken ?? token
            welcomed = true
            reconnecting = false
        case .error:
            if reconnecting && !welcomed { try hello() } else { dead = true }
        case .callback(let callback, let id, _, _): try acknowledge(callback.rawValue, id: id)
        case .sceneCallback(let callback, let id, _, _, _): try acknowledge(callback.rawValue, id: id)
        case .configurationForConnecting(let id, _, _, _, _, _): try acknowledge("configurationForConnecting", id: id)
        case .didDiscardSceneSessions(let id, _, _): try acknowledge("didDiscardSceneSessions", id: id)
        case .performFetch(let id, _): try acknowledge("performFetch", id: id)
        default: break
        }
    }

    mutating func act(_ action: [String: JSONValue]) throws {
        func string(_ key: String) -> String? { if case .string(let s)? = action[key] { s } else { nil } }
        func int(_ key: String) -> Int { if case .number(let n)? = action[key] { Int(n) } else { 0 } }
        if standalone || dead { return }
        switch string("do") {
        case "ackDeferred":
            if let deferred, deferred.generation == generation { try send(deferred.ack) }
            deferred = nil
        case "post": try send(.post(name: string("name") ?? "", payload: action["payload"], app: string("app")))
        case "beginBackgroundTask":
            try send(.beginBackgroundTask(task: nextTask, name: string("name") ?? ""))
            nextTask += 1
        case "endBackgroundTask": try send(.endBackgroundTask(task: int("task")))
        case "observe":
            if case .array(let names)? = action["names"] { try send(.observe(names.compactMap { if case .string(let s) = $0 { s } else { nil } })) }
        case "requestSceneActivation":
            try send(.requestSceneActivation(scene: string("scene"), role: string("role"), configuration: string("configuration"),
                                             options: action["options"]))
        case "requestSceneDestruction": try send(.requestSceneDestruction(scene: string("scene") ?? ""))
        case "hangup":
            guard token != nil else { dead = true; return }
            generation += 1
            reconnecting = true
            welcomed = false
            try hello()
        case "sendRaw": dead = true
        default: break
        }
    }
}

private struct VectorError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
