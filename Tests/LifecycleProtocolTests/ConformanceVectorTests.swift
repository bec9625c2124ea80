import FoundationEssentials
import LifecycleModel
import LifecycleProtocol
import Testing

/// The conformance vectors of docs/protocol-tests, shared with the C library and the Python package, played
/// against the Swift library's wire layer: each daemon line decoded as LifecycleClient decodes it, and each
/// client line the vector expects compared (as JSON) with what LifecycleClient's messages encode to, acks with
/// their answers, deferred acks, requests and the reconnecting hello included. The reports (`=` lines) are checked
/// too, each against what LifecycleApplication hands its delegates, scene delegates and notification observers for
/// the decoded message (launch options, a scene's connection and saved state, a notification's payloads, a task's
/// expiry), with the app state it keeps and its connection's turns. LifecycleApplication itself runs on the main
/// queue of a process of its own (`main` never returns), so the player follows its dispatch rule for rule.
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
        #expect(player.reports.isEmpty, "\(name): the Swift library would report more: \(player.reports)")
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
    var deferred: (ack: ClientMessage, generation: Int, next: AppState?)?
    var generation = 0
    var nextTask = 1
    /// What the library reported to the app and the vector has not checked yet, oldest first.
    var reports: [JSONValue] = []
    /// LifecycleApplication.applicationState: "did" callbacks move it before the delegate runs, "will" ones after.
    var state: AppState = .inactive
    /// The scenes LifecycleApplication holds (connectedScenes): a scene callback for another one reaches no delegate.
    var scenes: Set<String> = []
    /// Open background tasks: an expiry warning runs the handlers of these.
    var tasks: Set<Int> = []

    mutating func report(_ event: String, _ fields: [String: JSONValue] = [:]) {
        reports.append(.object(fields.merging(["event": .string(event)]) { field, _ in field }))
    }

    mutating func connection(_ turn: String) { report("connection", ["connection": .string(turn), "state": .string(state.rawValue)]) }

    /// A callback as LifecycleApplication.deliver runs it: the state, the delegate (with the launch options), the ack.
    mutating func callback(_ callback: LifecycleCallback, options: LaunchOptions?) {
        if callback.changesStateOnSend, let next = callback.resultingState { state = next }
        var fields: [String: JSONValue] = [:]
        if callback == .didFinishLaunching {
            let options = options ?? LaunchOptions(launchedBy: "unknown")
            fields = ["launchedBy": .string(options.launchedBy), "background": .bool(options.background),
                      "terminatedInBackground": .bool(options.terminatedInBackground)]
        }
        report(callback.rawValue, fields)
    }

    /// A scene callback as LifecycleApplication.deliver runs it: sceneWillConnect makes the scene, with its
    /// connection; the others reach the scene's delegate while the scene is connected.
    mutating func sceneCallback(_ callback: SceneCallback, scene: String, connection: SceneConnection?) {
        if callback == .sceneWillConnect {
            guard let connection else { return }
            scenes.insert(scene)
            report(callback.rawValue, ["scene": .string(scene), "role": .string(connection.role),
                                       "configuration": .string(connection.configuration), "options": connection.options,
                                       "state": connection.savedState ?? .null])
            return
        }
        guard scenes.contains(scene) else { return }
        report(callback.rawValue, ["scene": .string(scene)])
        if callback == .sceneDidDisconnect { scenes.remove(scene) }
    }

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
            if standalone {
                // Standalone: a freshly launched, focused app (LifecycleApplication.start without LIFECYCLE_FD).
                callback(.didFinishLaunching, options: LaunchOptions(launchedBy: "standalone"))
                callback(.didBecomeActive, options: nil)
            } else {
                try hello()
            }
        }
        let kind = line.first!, body = line.dropFirst(2)
        switch kind {
        case "<": try receive(Array(body.utf8))
        case ">":
            let expected = try LineCoder().decode(JSONValue.self, from: Array(body.utf8))
            #expect(!output.isEmpty && output.removeFirst() == expected, "\(place): expected \(expected), output \(output)")
        case "@": answer = try Self.object(body)
        case "!": try act(Self.object(body))
        case "=":
            let expected = try LineCoder().decode(JSONValue.self, from: Array(body.utf8))
            #expect(!reports.isEmpty && reports.removeFirst() == expected, "\(place): expected the report \(expected), reports \(reports)")
        default: throw VectorError("\(place): unknown line")
        }
    }

    mutating func acknowledge(_ type: String, id: Int, then next: AppState? = nil) throws {
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
            deferred = (ack, generation, next)
            return
        }
        if let next { state = next }
        try send(ack)
    }

    mutating func receive(_ bytes: [UInt8]) throws {
        guard !dead else { return }
        // LifecycleClient skips a line it cannot decode: a later version's message, or one it cannot use.
        guard let message = try? coder.decode(ServerMessage.self, from: bytes) else { return }
        switch message {
        case .welcome(_, _, let welcomeState, let newToken):
            token = newToken ?? token
            welcomed = true
            reconnecting = false
            state = welcomeState
            connection("connected")
        case .error:
            if reconnecting && !welcomed {
                try hello()
            } else {
                dead = true
                connection("disconnected")
            }
        case .callback(let callback, let id, _, let options):
            self.callback(callback, options: options)
            // A "will" callback moves the state once its handler is done: at its ack, deferred or not.
            try acknowledge(callback.rawValue, id: id, then: callback.changesStateOnSend ? nil : callback.resultingState)
        case .sceneCallback(let callback, let id, _, let scene, let connection):
            sceneCallback(callback, scene: scene, connection: connection)
            try acknowledge(callback.rawValue, id: id)
        case .configurationForConnecting(let id, _, let scene, let role, let proposed, let options):
            report("configurationForConnecting", ["scene": .string(scene), "role": .string(role),
                                                  "configuration": .string(proposed), "options": options, "state": .null])
            try acknowledge("configurationForConnecting", id: id)
        case .didDiscardSceneSessions(let id, _, let discarded):
            report("didDiscardSceneSessions", ["scenes": .array(discarded.map { .string($0) })])
            try acknowledge("didDiscardSceneSessions", id: id)
        case .notification(let delivery):
            var fields: [String: JSONValue] = ["name": .string(delivery.name), "posts": .number(Double(delivery.posts)),
                                               "dropped": .number(Double(delivery.dropped))]
            if let payload = delivery.payload { fields["payload"] = payload }
            if let payloads = delivery.payloads { fields["payloads"] = .array(payloads) }
            report("notification", fields)
        case .backgroundTimeWillExpire(let expiring, _):
            for task in expiring where tasks.contains(task.id) { report("expire", ["task": .number(Double(task.id))]) }
        case .postFailed(_, let message):
            report("requestFailed", ["request": .string("post"), "message": .string(message)])
        case .requestFailed(let request, let message):
            report("requestFailed", ["request": .string(request), "message": .string(message)])
        case .performFetch(let id, _):
            report("performFetch")
            try acknowledge("performFetch", id: id)
        case .backgroundTaskBegan:
            break
        }
    }

    mutating func act(_ action: [String: JSONValue]) throws {
        func string(_ key: String) -> String? { if case .string(let s)? = action[key] { s } else { nil } }
        func int(_ key: String) -> Int { if case .number(let n)? = action[key] { Int(n) } else { 0 } }
        if string("do") == "state" { return report("state", ["state": .string(state.rawValue)]) }
        if standalone || dead { return }
        switch string("do") {
        case "ackDeferred":
            if let deferred, deferred.generation == generation {
                if let next = deferred.next { state = next }
                try send(deferred.ack)
            }
            deferred = nil
        case "post": try send(.post(name: string("name") ?? "", payload: action["payload"], app: string("app")))
        case "beginBackgroundTask":
            try send(.beginBackgroundTask(task: nextTask, name: string("name") ?? ""))
            tasks.insert(nextTask)
            nextTask += 1
        case "endBackgroundTask":
            // LifecycleApplication.endBackgroundTask sends nothing for a task it does not hold.
            guard tasks.remove(int("task")) != nil else { return }
            try send(.endBackgroundTask(task: int("task")))
        case "observe":
            if case .array(let names)? = action["names"] { try send(.observe(names.compactMap { if case .string(let s) = $0 { s } else { nil } })) }
        case "requestSceneActivation":
            try send(.requestSceneActivation(scene: string("scene"), role: string("role"), configuration: string("configuration"),
                                             options: action["options"]))
        case "requestSceneDestruction": try send(.requestSceneDestruction(scene: string("scene") ?? ""))
        case "hangup":
            guard token != nil else {
                dead = true
                return connection("disconnected")
            }
            generation += 1
            // A refused or reset reconnection is retried without a word; a welcomed connection that ends is reported.
            if welcomed { connection("reconnecting") }
            reconnecting = true
            welcomed = false
            try hello()
        case "sendRaw":
            // A line over the limit breaks the framing: the connection ends for good.
            dead = true
            connection("disconnected")
        default: break
        }
    }
}

private struct VectorError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
