import LifecycleModel
import LifecycleProtocol

// lifectl's command line as a value: what `parse` makes of the words, with no I/O, so that every verb, option and
// usage error is a unit test; lifectl's main performs it.

/// The options that hold for every verb.
public struct Invocation: Equatable, Sendable {
    /// The directory `--runtime-dir` names; nil when the environment decides (`runtimeDirectories`).
    public var runtimeDirectory: String?
    /// How long to wait for the daemon's answer.
    public var timeoutSeconds: Double
    public var json: Bool
    public var quiet: Bool
    /// systemctl's habit; lifectl never pages, and `logs` hands it on to journalctl.
    public var noPager: Bool

    public init(runtimeDirectory: String? = nil, timeoutSeconds: Double = 120.0, json: Bool = false, quiet: Bool = false,
                noPager: Bool = false) {
        self.runtimeDirectory = runtimeDirectory
        self.timeoutSeconds = timeoutSeconds
        self.json = json
        self.quiet = quiet
        self.noPager = noPager
    }

    /// Where to look for the daemon's control.sock, in order: `--runtime-dir` alone when given, otherwise the
    /// candidates of the environment's variables.
    public func runtimeDirectories(lifecycledRuntimeDir: String?, xdgRuntimeDir: String?, uid: UInt32) -> [String] {
        runtimeDirectory.map { [$0] }
            ?? RuntimeDirectory.candidates(lifecycledRuntimeDir: lifecycledRuntimeDir, xdgRuntimeDir: xdgRuntimeDir, uid: uid)
    }
}

/// The lifecycle verbs that take one app: `lifectl VERB APP`, and the same verb on the wire.
public enum LifecycleVerb: String, CaseIterable, Sendable {
    case launch, focus, deactivate, background, suspend, resume, terminate
}

/// `lifectl scene SUBVERB APP [SCENE]`.
public enum SceneCommand: Equatable, Sendable {
    public enum Verb: String, CaseIterable, Sendable {
        case focus, background, close, discard
    }

    /// A new session of `app`.
    case open(app: String, role: String?, configuration: String?)
    /// A change to one existing session.
    case change(Verb, app: String, scene: String)
}

/// What lifectl was asked to do, with the arguments of that verb.
public enum Command: Equatable, Sendable {
    case help
    case list
    case status(app: String?)
    case scenes(app: String?)
    case watch(app: String?)
    case lifecycle(LifecycleVerb, app: String, background: Bool)
    case resumeAll
    case post(type: String, app: String?, data: JSONValue?)
    case simulateMemoryPressure
    case reload
    case scene(SceneCommand)
    case logs(app: String?, follow: Bool)

    /// The request to send the daemon; nil for what lifectl does alone (help, logs).
    public var request: ControlRequest? {
        switch self {
        case .help, .logs: nil
        case .list: ControlRequest(verb: "list")
        case .status(let app): ControlRequest(verb: "status", app: app)
        case .scenes(let app): ControlRequest(verb: "scenes", app: app)
        case .watch(let app): ControlRequest(verb: "watch", app: app)
        case .lifecycle(let verb, let app, let background):
            ControlRequest(verb: verb.rawValue, app: app, background: background ? true : nil)
        case .resumeAll: ControlRequest(verb: "resume-all")
        case .post(let type, let app, let data): ControlRequest(verb: "post", app: app, name: type, data: data)
        case .simulateMemoryPressure: ControlRequest(verb: "simulate-memory-pressure")
        case .reload: ControlRequest(verb: "reload")
        case .scene(.open(let app, let role, let configuration)):
            ControlRequest(verb: "scene-open", app: app, role: role, configuration: configuration)
        case .scene(.change(let verb, let app, let scene)): ControlRequest(verb: "scene-\(verb.rawValue)", app: app, scene: scene)
        }
    }
}

/// A command line lifectl cannot run; lifectl prints `message` after "lifectl: " and exits with `status`.
public struct UsageError: Error, Equatable {
    public var message: String
    public var status: Int32 { ExitStatus.usage }

    public init(_ message: String) {
        self.message = message
    }
}

/// lifectl's arguments (without the program's name) as the options for every verb and the command.
///
/// Options may come anywhere; an option's value is the next word whatever it looks like. `-h`/`--help` ends the
/// parse where it stands: an error before it is still reported, anything after it is not looked at.
public func parse(_ arguments: [String]) throws(UsageError) -> (Invocation, Command) {
    var invocation = Invocation()
    var follow = false
    var background = false
    var all = false
    var targetApp: String?
    var data: String?
    var sceneRole: String?
    var sceneConfiguration: String?
    var positional: [String] = []
    var remaining = arguments[...]
    /// The value that follows an option; a usage error, saying what `option` needs, when there is none.
    func value(of option: String, needs what: String) throws(UsageError) -> String {
        guard let value = remaining.popFirst() else { throw UsageError("\(option) needs \(what)") }
        return value
    }
    while let argument = remaining.popFirst() {
        switch argument {
        case "--json": invocation.json = true
        case "-q", "--quiet": invocation.quiet = true
        case "--no-pager": invocation.noPager = true
        case "-f", "--follow": follow = true
        case "--background": background = true
        case "--all": all = true
        case "--app": targetApp = try value(of: argument, needs: "an app name")
        case "--data": data = try value(of: argument, needs: "a JSON value")
        case "--role": sceneRole = try value(of: argument, needs: "a scene role")
        case "--config": sceneConfiguration = try value(of: argument, needs: "a scene configuration name")
        case "--runtime-dir": invocation.runtimeDirectory = try value(of: argument, needs: "a directory")
        case "--timeout":
            guard let value = remaining.popFirst(), let seconds = Double(value), seconds > 0 else {
                throw UsageError("--timeout needs a number of seconds")
            }
            invocation.timeoutSeconds = seconds
        case "-h", "--help":
            return (invocation, .help)
        default:
            if argument.hasPrefix("-") { throw UsageError("unknown option '\(argument)'\n\n\(usage)") }
            positional.append(argument)
        }
    }
    guard let verb = positional.first else { throw UsageError("no verb given\n\n\(usage)") }
    let app = positional.dropFirst().first
    guard positional.count <= 2 || verb == "scene" else {
        throw UsageError("too many arguments: \(positional.dropFirst(2).joined(separator: " "))")
    }
    guard !follow || verb == "logs" else { throw UsageError("--follow goes with logs only") }

    // Options a verb does not use are ignored, except where they would say something the verb cannot do.
    let command: Command
    switch verb {
    case "logs":
        guard !background, targetApp == nil, data == nil else { throw UsageError("logs takes only an app and -f") }
        command = .logs(app: app, follow: follow)
    case "list":
        guard app == nil else { throw UsageError("list takes no app") }
        command = .list
    case "status":
        command = .status(app: app)
    case "scenes":
        command = .scenes(app: app)
    case "watch":
        command = .watch(app: app)
    case "scene":
        command = .scene(try parseScene(Array(positional.dropFirst()), role: sceneRole, configuration: sceneConfiguration))
    case "post":
        guard let type = app else { throw UsageError("post needs a notification type") }
        var payload: JSONValue?
        if let data {
            do {
                payload = try LineCoder().decode(JSONValue.self, from: Array(data.utf8))
            } catch {
                throw UsageError("--data is not valid JSON: \(data)")
            }
        }
        command = .post(type: type, app: targetApp, data: payload)
    case "simulate-memory-pressure", "reload":
        guard app == nil else { throw UsageError("\(verb) takes no app") }
        command = verb == "reload" ? .reload : .simulateMemoryPressure
    case "resume" where all:
        guard app == nil else { throw UsageError("resume --all takes no app") }
        command = .resumeAll
    default:
        guard let lifecycleVerb = LifecycleVerb(rawValue: verb) else { throw UsageError("unknown verb '\(verb)'\n\n\(usage)") }
        guard !all else { throw UsageError("--all goes with resume only") }
        guard let app else { throw UsageError("\(verb) needs an app name") }
        guard !background || lifecycleVerb == .launch else { throw UsageError("--background goes with launch only") }
        command = .lifecycle(lifecycleVerb, app: app, background: background)
    }
    return (invocation, command)
}

/// `scene SUBVERB APP [SCENE]` (the words after `scene`).
func parseScene(_ words: [String], role: String?, configuration: String?) throws(UsageError) -> SceneCommand {
    let subverbs = ["open"] + SceneCommand.Verb.allCases.map(\.rawValue)
    guard let subverb = words.first else {
        throw UsageError("scene needs a subverb: \(subverbs.joined(separator: ", "))\n\n\(sceneUsage)")
    }
    guard subverbs.contains(subverb) else {
        throw UsageError("unknown scene subverb '\(subverb)' (expected one of: \(subverbs.joined(separator: ", ")))")
    }
    guard words.count >= 2 else { throw UsageError("scene \(subverb) needs an app name") }
    let app = words[1]
    guard let verb = SceneCommand.Verb(rawValue: subverb) else {
        guard words.count == 2 else { throw UsageError("scene open takes an app, not a scene (it makes a new one)") }
        return .open(app: app, role: role, configuration: configuration)
    }
    guard role == nil, configuration == nil else { throw UsageError("--role and --config go with scene open only") }
    guard words.count == 3 else {
        throw UsageError(words.count < 3 ? "scene \(subverb) needs an app and a scene (lifectl scenes \(app) lists them)"
                         : "too many arguments: \(words.dropFirst(3).joined(separator: " "))")
    }
    return .change(verb, app: app, scene: words[2])
}
