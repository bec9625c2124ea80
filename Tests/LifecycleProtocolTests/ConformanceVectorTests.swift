import FoundationEssentials
@testable import LifecycleClient
import LifecycleModel
import LifecycleProtocol
import Testing

/// The conformance vectors of docs/protocol-tests, shared with the C library and the Python package, played
/// against the Swift library itself: a `LifecycleApplication` whose `ClientSession` (the owner that turns the
/// daemon's lines into delegate calls and the app's answers into lines) runs with this test as its connection.
/// The daemon's lines go in as the socket would hand them over, the lines the session writes are compared with the
/// vector's, and the reports are what recording delegates, scene delegates, notification observers and
/// expiration handlers received. Only the socket, the main queue and the clock are the test's: a hang-up
/// reconnects at once, and a change of observers is sent when the step is over, as the main queue's next turn would.
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

    @Test("the Swift library's lines and reports match the vector", arguments: files)
    @MainActor
    func vector(_ name: String) throws {
        let text = try String(contentsOfFile: Self.directory.appendingPathComponent(name).path, encoding: .utf8)
        let run = VectorRun()
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = String(line)
            if line.isEmpty || line.hasPrefix("#") { continue }
            try run.play(line, at: "\(name):\(number + 1)")
        }
        #expect(run.output.isEmpty, "\(name): the Swift library sent more: \(run.output)")
        #expect(run.reports.isEmpty, "\(name): the Swift library reported more: \(run.reports)")
        #expect(run.memoryWarnings == 0, "\(name): a memory-warning callback without its notification")
    }
}

/// One vector's run: the connection of the application's session, and what its delegates heard.
@MainActor
private final class VectorRun: ClientSessionDriver {
    /// The run whose scene delegates are being made (a scene delegate type is made with `init()`). Each run's body
    /// is synchronous on the main actor, so no other run's scenes connect meanwhile.
    static var current: VectorRun?

    var application: LifecycleApplication?
    var delegate: RecordingDelegate?
    var output: [JSONValue] = []
    var reports: [JSONValue] = []
    var answer: [String: JSONValue] = [:]
    var deferred: DeferredAcknowledgement?
    var setup: [String: JSONValue] = [:]
    var observations: [LifecycleNotificationCenter.Observation] = []
    var reconnectPending = false
    var observePending = false
    /// applicationDidReceiveMemoryWarning calls since the last didReceiveMemoryWarning notification.
    var memoryWarnings = 0

    // MARK: The connection, as LifecycleApplication would run it

    func write(_ line: [UInt8]) {
        var bytes = line
        if bytes.last == UInt8(ascii: "\n") { bytes.removeLast() }
        output.append((try? LineCoder().decode(JSONValue.self, from: bytes)) ?? .string(String(decoding: bytes, as: UTF8.self)))
    }

    func hangUp(reason: String, retry: Bool, welcomed: Bool) {
        reconnectPending = retry
    }

    func observedNamesChanged() {
        observePending = true
    }

    /// The end of a step: the reconnection the session asked for succeeds (the runner listens on the socket), and
    /// observers changed in the step are sent.
    func settle() {
        guard let session = application?.session else { return }
        if reconnectPending {
            reconnectPending = false
            session.opened()
        }
        if observePending {
            observePending = false
            session.sendObservedNames()
        }
    }

    // MARK: What the app heard

    func report(_ event: String, _ fields: [String: JSONValue] = [:]) {
        reports.append(.object(fields.merging(["event": .string(event)]) { field, _ in field }))
    }

    /// The answer the vector set for a callback of `type`, taken once.
    func answer(for type: String) -> [String: JSONValue] {
        guard answer["on"] == .string(type) else { return [:] }
        defer { answer = [:] }
        return answer
    }

    /// A callback ran: report it, and defer its ack when the vector says so.
    func callback(_ type: String, _ fields: [String: JSONValue] = [:]) {
        report(type, fields)
        if answer(for: type)["defer"] == .bool(true), let application { deferred = application.deferAcknowledgement() }
    }

    // MARK: The vector

    static func object(_ text: Substring) throws -> [String: JSONValue] {
        guard case .object(let members) = try LineCoder().decode(JSONValue.self, from: Array(text.utf8)) else {
            throw VectorError("not an object: \(text)")
        }
        return members
    }

    func start() {
        let standalone = setup["standalone"] == .bool(true)
        var token: String?
        if case .string(let given)? = setup["token"] { token = given }
        let delegate = RecordingDelegate(run: self)
        self.delegate = delegate
        let application = LifecycleApplication(fd: nil, name: standalone ? nil : "notes",
                                               socketPath: standalone ? nil : "app.sock", token: token, delegate: delegate)
        self.application = application
        application.session.driver = self
        application.register(RecordingScene.self)
        let center = application.notificationCenter
        // Every notification the app gets is reported; the setup's names are what it observes.
        center.addObserver(forName: nil) { [unowned self] notification in
            guard LifecycleCallback(rawValue: notification.name.rawValue) == nil else { return }
            if notification.name == .didReceiveMemoryWarning {
                #expect(self.memoryWarnings == 1, "the memory-warning callback runs once, before the notification")
                self.memoryWarnings = 0
            }
            var fields: [String: JSONValue] = ["name": .string(notification.name.rawValue),
                                               "posts": .number(Double(notification.posts)),
                                               "dropped": .number(Double(notification.dropped))]
            if let payload = notification.payload { fields["payload"] = payload }
            if let payloads = notification.payloads { fields["payloads"] = .array(payloads) }
            self.report("notification", fields)
        }
        if case .array(let names)? = setup["observe"] { observe(names) }
        observePending = false
        Self.current = self
        if standalone { application.session.runStandalone() } else { application.session.opened() }
    }

    func observe(_ names: [JSONValue]) {
        guard let center = application?.notificationCenter else { return }
        observations.forEach { $0.remove() }
        observations = names.compactMap { if case .string(let s) = $0 { s } else { nil } }
            .map { center.addObserver(forName: LifecycleNotification.Name($0)) { _ in } }
    }

    func play(_ line: String, at place: String) throws {
        if line.hasPrefix("setup ") {
            setup = try Self.object(line.dropFirst(6))
            return
        }
        if application == nil { start() }
        Self.current = self
        let kind = line.first!, body = line.dropFirst(2)
        switch kind {
        case "<":
            application?.session.received(ArraySlice(Array(body.utf8) + [UInt8(ascii: "\n")]))
            // As the daemon does after an error: the connection is over (the vectors' README).
            if case .object(let message)? = try? LineCoder().decode(JSONValue.self, from: Array(body.utf8)),
               message["type"] == .string("error") {
                application?.session.connectionLost("the runner closed the connection after its error")
            }
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
        settle()
    }

    func act(_ action: [String: JSONValue]) throws {
        guard let application else { return }
        func string(_ key: String) -> String? { if case .string(let s)? = action[key] { s } else { nil } }
        func int(_ key: String) -> Int { if case .number(let n)? = action[key] { Int(n) } else { 0 } }
        switch string("do") {
        case "state": report("state", ["state": .string(application.applicationState.rawValue)])
        case "ackDeferred":
            deferred?.acknowledge()
            deferred = nil
        case "post": application.post(LifecycleNotification.Name(string("name") ?? ""), payload: action["payload"], to: string("app"))
        case "beginBackgroundTask":
            final class Box { var id = 0 }
            let box = Box()
            box.id = application.beginBackgroundTask(withName: string("name") ?? "") { [unowned self] in
                self.report("expire", ["task": .number(Double(box.id))])
            }.rawValue
        case "endBackgroundTask": application.endBackgroundTask(BackgroundTaskIdentifier(rawValue: int("task")))
        case "observe":
            if case .array(let names)? = action["names"] { observe(names) }
        case "requestSceneActivation":
            application.requestSceneSessionActivation(string("scene"), role: string("role"), configuration: string("configuration"),
                                                      options: action["options"])
        case "requestSceneDestruction": application.requestSceneSessionDestruction(string("scene") ?? "")
        case "hangup": application.session.connectionLost("the runner hung up")
        case "sendRaw":
            application.session.received(ArraySlice(repeating: UInt8(ascii: "a"), count: int("bytes")))
        default: throw VectorError("unknown action \(action)")
        }
    }
}

/// The application delegate of a run: each callback is reported as the vectors' README says.
@MainActor
private final class RecordingDelegate: ApplicationDelegate {
    unowned let run: VectorRun
    init(run: VectorRun) { self.run = run }

    func application(_ application: LifecycleApplication, didFinishLaunchingWithOptions options: LaunchOptions) {
        run.callback("didFinishLaunching", ["launchedBy": .string(options.launchedBy), "background": .bool(options.background),
                                            "terminatedInBackground": .bool(options.terminatedInBackground)])
    }
    func applicationDidBecomeActive(_ application: LifecycleApplication) { run.callback("didBecomeActive") }
    func applicationWillResignActive(_ application: LifecycleApplication) { run.callback("willResignActive") }
    func applicationDidEnterBackground(_ application: LifecycleApplication) { run.callback("didEnterBackground") }
    func applicationWillEnterForeground(_ application: LifecycleApplication) { run.callback("willEnterForeground") }
    func applicationWillTerminate(_ application: LifecycleApplication) { run.callback("willTerminate") }
    func applicationDidReceiveMemoryWarning(_ application: LifecycleApplication) { run.memoryWarnings += 1 }
    func application(_ application: LifecycleApplication, configurationForConnecting session: LifecycleClient.SceneSession,
                     options: JSONValue) -> String? {
        run.report("configurationForConnecting", ["scene": .string(session.persistentIdentifier), "role": .string(session.role),
                                                  "configuration": .string(session.configuration), "options": options,
                                                  "state": .null])
        if case .string(let chosen)? = run.answer(for: "configurationForConnecting")["configuration"] { return chosen }
        return nil
    }
    func application(_ application: LifecycleApplication, didDiscardSceneSessions sessions: [String]) {
        run.callback("didDiscardSceneSessions", ["scenes": .array(sessions.map { .string($0) })])
    }
    func applicationPerformFetch(_ application: LifecycleApplication) -> FetchResult {
        run.report("performFetch")
        if case .string(let result)? = run.answer(for: "performFetch")["result"] { return FetchResult(rawValue: result) ?? .noData }
        return .noData
    }
    func application(_ application: LifecycleApplication, requestFailed request: String, message: String) {
        run.report("requestFailed", ["request": .string(request), "message": .string(message)])
    }
    func application(_ application: LifecycleApplication, connectionDidChange event: ConnectionEvent) {
        run.report("connection", ["connection": .string(event.rawValue), "state": .string(application.applicationState.rawValue)])
    }
}

/// The scene delegate of a run, for every configuration.
@MainActor
private final class RecordingScene: SceneDelegate {
    let run = VectorRun.current!
    var saved: JSONValue?

    init() {}

    func scene(_ scene: Scene, willConnectTo session: LifecycleClient.SceneSession, options: JSONValue) {
        run.callback("sceneWillConnect", ["scene": .string(session.persistentIdentifier), "role": .string(session.role),
                                          "configuration": .string(session.configuration), "options": options,
                                          "state": scene.restoredState ?? .null])
    }
    func sceneWillEnterForeground(_ scene: Scene) { record("sceneWillEnterForeground", scene) }
    func sceneDidBecomeActive(_ scene: Scene) { record("sceneDidBecomeActive", scene) }
    func sceneWillResignActive(_ scene: Scene) { record("sceneWillResignActive", scene) }
    func sceneDidDisconnect(_ scene: Scene) { record("sceneDidDisconnect", scene) }
    func sceneDidEnterBackground(_ scene: Scene) {
        // The saved state the vector gives is asked for right after, by stateRestorationActivity(for:).
        saved = run.answer["on"] == .string("sceneDidEnterBackground") ? run.answer["state"] : nil
        record("sceneDidEnterBackground", scene)
    }
    func stateRestorationActivity(for scene: Scene) -> JSONValue? {
        defer { saved = nil }
        return saved
    }

    private func record(_ type: String, _ scene: Scene) {
        run.callback(type, ["scene": .string(scene.session.persistentIdentifier)])
    }
}

private struct VectorError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
