// lifectl's reply, read by hand from the parsed line (FastJSONDecoder.handRead).
//
// Why: perf record of `lifectl status APP` put the Decodable path of the reply (ControlReply, AppStatus and their
// arrays through ParsedDecoder) at about a tenth of the command's time, most of it generic metadata made at run time
// and protocol conformance scans, work a short-lived process pays in full each time.
//
// The contract is FastJSONDecoder's: a value read here is the value JSONDecoder (and the Decodable path) gives for the
// same line. Only the forms that path is known to read the same way are taken: each key one of the type's own, each
// value of its property's JSON kind (an optional's `null` as nil, as `decodeIfPresent` reads it), integers written as
// integers and in range, states among AppState's raw values. Anything else (a key this lifectl does not know, as from a
// newer daemon, a missing or mistyped field, a `null` where a value is required) returns nil, and the line takes the
// Decodable path, which reads it or throws the error it threw before. Tests/LifecycleProtocolTests/
// ControlReplyJSONTests.swift compares both with JSONDecoder, and fails when a stored property is added to one of
// these types without being read here.

import LifecycleModel

extension ParsedValue {
    var isNull: Bool { if case .null = self { true } else { false } }

    /// The scalars as the Decodable path reads them (ParsedValue.bool(), string(), integer(), double()); nil where it
    /// would throw.
    var plainBool: Bool? { if case .bool(let value) = self { value } else { nil } }
    var plainString: String? { if case .string(let value) = self { value } else { nil } }
    var plainInt: Int? { if case .integer(let value) = self { Int(exactly: value) } else { nil } }
    var plainInt32: Int32? { if case .integer(let value) = self { Int32(exactly: value) } else { nil } }
    var plainDouble: Double? {
        switch self {
        case .integer(let value): Double(value)
        case .number(let value): value
        default: nil
        }
    }

    var plainStrings: [String]? {
        guard case .array(let items) = self else { return nil }
        var strings: [String] = []
        strings.reserveCapacity(items.count)
        for item in items {
            guard case .string(let text) = item else { return nil }
            strings.append(text)
        }
        return strings
    }

    /// JSONValue's `init(from:)` on this value: null, then Bool, Double, String, an array, an object (the parser has
    /// already refused duplicate keys).
    var jsonValue: JSONValue {
        switch self {
        case .null: .null
        case .bool(let value): .bool(value)
        case .integer(let value): .number(Double(value))
        case .number(let value): .number(value)
        case .string(let value): .string(value)
        case .array(let items): .array(items.map(\.jsonValue))
        case .object(let keys, let values):
            .object(Dictionary(uniqueKeysWithValues: zip(keys, values.lazy.map(\.jsonValue))))
        }
    }

    /// The elements of an array, each read by `read`; nil if this is not an array or one element is not read.
    func elements<Element>(_ read: (ParsedValue) -> Element?) -> [Element]? {
        guard case .array(let items) = self else { return nil }
        var elements: [Element] = []
        elements.reserveCapacity(items.count)
        for item in items {
            guard let element = read(item) else { return nil }
            elements.append(element)
        }
        return elements
    }
}

extension ControlReply {
    /// The reply in `value`, or nil when it is left to the Decodable path.
    init?(parsed value: ParsedValue) {
        guard case .object(let keys, let values) = value else { return nil }
        var ok: Bool?
        var reply = ControlReply(ok: false)
        for (key, value) in zip(keys, values) {
            switch key {
            case "ok":
                guard let flag = value.plainBool else { return nil }
                ok = flag
            case "error":
                guard !value.isNull else { continue }
                guard let text = value.plainString else { return nil }
                reply.error = text
            case "apps":
                guard !value.isNull else { continue }
                guard let apps = value.elements(AppStatus.init(parsed:)) else { return nil }
                reply.apps = apps
            case "daemon":
                guard !value.isNull else { continue }
                guard let daemon = DaemonStatus(parsed: value) else { return nil }
                reply.daemon = daemon
            case "posted":
                guard !value.isNull else { continue }
                guard let posted = PostSummary(parsed: value) else { return nil }
                reply.posted = posted
            case "scene":
                guard !value.isNull else { continue }
                guard let text = value.plainString else { return nil }
                reply.scene = text
            default: return nil
            }
        }
        guard let ok else { return nil }
        reply.ok = ok
        self = reply
    }
}

extension AppStatus {
    init?(parsed value: ParsedValue) {
        guard case .object(let keys, let values) = value else { return nil }
        var name: String?, state: AppState?, since: String?, sinceSeconds: Double?, `protocol`: String?
        var launches: Int?, deadlineMisses: Int?, suspendMethod: String?, queuedNotifications: Int?, queuedPosts: Int?
        var observing: [String]?, backgroundTasks: [TaskStatus]?, taskOverruns: Int?, backgroundModes: [String]?
        var memoryTerminations: Int?, terminatedInBackground: Bool?
        var pid: Int32?, awaiting: String?, cgroup: String?, backgroundTimeRemaining: Double?, scenes: [SceneStatus]?
        for (key, value) in zip(keys, values) {
            switch key {
            case "name": name = value.plainString
            case "state": state = value.plainString.flatMap(AppState.init(rawValue:))
            case "since": since = value.plainString
            case "sinceSeconds": sinceSeconds = value.plainDouble
            case "protocol": `protocol` = value.plainString
            case "launches": launches = value.plainInt
            case "deadlineMisses": deadlineMisses = value.plainInt
            case "suspendMethod": suspendMethod = value.plainString
            case "queuedNotifications": queuedNotifications = value.plainInt
            case "queuedPosts": queuedPosts = value.plainInt
            case "observing": observing = value.plainStrings
            case "backgroundTasks": backgroundTasks = value.elements(TaskStatus.init(parsed:))
            case "taskOverruns": taskOverruns = value.plainInt
            case "backgroundModes": backgroundModes = value.plainStrings
            case "memoryTerminations": memoryTerminations = value.plainInt
            case "terminatedInBackground": terminatedInBackground = value.plainBool
            // The optionals: null is nil; any other value must be read.
            case "pid":
                guard !value.isNull else { continue }
                guard let number = value.plainInt32 else { return nil }
                pid = number
            case "awaiting":
                guard !value.isNull else { continue }
                guard let text = value.plainString else { return nil }
                awaiting = text
            case "cgroup":
                guard !value.isNull else { continue }
                guard let text = value.plainString else { return nil }
                cgroup = text
            case "backgroundTimeRemaining":
                guard !value.isNull else { continue }
                guard let seconds = value.plainDouble else { return nil }
                backgroundTimeRemaining = seconds
            case "scenes":
                guard !value.isNull else { continue }
                guard let sessions = value.elements(SceneStatus.init(parsed:)) else { return nil }
                scenes = sessions
            default: return nil
            }
        }
        // Every property without `?` is required by the synthesized init(from:), default value or not.
        guard let name, let state, let since, let sinceSeconds, let `protocol`, let launches, let deadlineMisses,
              let suspendMethod, let queuedNotifications, let queuedPosts, let observing, let backgroundTasks,
              let taskOverruns, let backgroundModes, let memoryTerminations, let terminatedInBackground
        else { return nil }
        self.init(name: name, state: state, pid: pid, since: since, sinceSeconds: sinceSeconds, protocol: `protocol`,
                  launches: launches, deadlineMisses: deadlineMisses, awaiting: awaiting, suspendMethod: suspendMethod,
                  cgroup: cgroup)
        self.queuedNotifications = queuedNotifications
        self.queuedPosts = queuedPosts
        self.observing = observing
        self.backgroundTasks = backgroundTasks
        self.backgroundTimeRemaining = backgroundTimeRemaining
        self.taskOverruns = taskOverruns
        self.backgroundModes = backgroundModes
        self.memoryTerminations = memoryTerminations
        self.terminatedInBackground = terminatedInBackground
        self.scenes = scenes
    }
}

extension SceneStatus {
    init?(parsed value: ParsedValue) {
        guard case .object(let keys, let values) = value else { return nil }
        var scene: String?, role: String?, configuration: String?, state: String?, savedState: JSONValue?
        for (key, value) in zip(keys, values) {
            switch key {
            case "scene": scene = value.plainString
            case "role": role = value.plainString
            case "configuration": configuration = value.plainString
            case "state": state = value.plainString
            // `decodeIfPresent` reads null as nil, not as JSONValue.null (which `nil` would be, spelt as a JSONValue).
            case "savedState":
                guard !value.isNull else { continue }
                savedState = value.jsonValue
            default: return nil
            }
        }
        guard let scene, let role, let configuration, let state else { return nil }
        self.init(scene: scene, role: role, configuration: configuration, state: state, savedState: savedState)
    }
}

extension TaskStatus {
    init?(parsed value: ParsedValue) {
        guard case .object(let keys, let values) = value else { return nil }
        var task: Int?, name: String?
        for (key, value) in zip(keys, values) {
            switch key {
            case "task": task = value.plainInt
            case "name": name = value.plainString
            default: return nil
            }
        }
        guard let task, let name else { return nil }
        self.init(task: task, name: name)
    }
}

extension PostSummary {
    init?(parsed value: ParsedValue) {
        guard case .object(let keys, let values) = value else { return nil }
        var delivered: Int?, queued: Int?
        for (key, value) in zip(keys, values) {
            switch key {
            case "delivered": delivered = value.plainInt
            case "queued": queued = value.plainInt
            default: return nil
            }
        }
        guard let delivered, let queued else { return nil }
        self.init(delivered: delivered, queued: queued)
    }
}

extension DaemonStatus {
    init?(parsed value: ParsedValue) {
        guard case .object(let keys, let values) = value else { return nil }
        var pid: Int32?, version: String?, configDirectory: String?, runtimeDirectory: String?, cgroupLayout: String?
        var mechanisms: [String]?, configErrors: [String]?, uptimeSeconds: Double?, sources: [String]?
        var notificationTypes: [String]?
        for (key, value) in zip(keys, values) {
            switch key {
            case "pid": pid = value.plainInt32
            case "version": version = value.plainString
            case "configDirectory": configDirectory = value.plainString
            case "runtimeDirectory": runtimeDirectory = value.plainString
            case "cgroupLayout": cgroupLayout = value.plainString
            case "mechanisms": mechanisms = value.plainStrings
            case "configErrors": configErrors = value.plainStrings
            case "uptimeSeconds": uptimeSeconds = value.plainDouble
            case "sources": sources = value.plainStrings
            case "notificationTypes": notificationTypes = value.plainStrings
            default: return nil
            }
        }
        guard let pid, let version, let configDirectory, let runtimeDirectory, let cgroupLayout, let mechanisms,
              let configErrors, let uptimeSeconds, let sources, let notificationTypes
        else { return nil }
        self.init(pid: pid, version: version, configDirectory: configDirectory, runtimeDirectory: runtimeDirectory,
                  cgroupLayout: cgroupLayout, mechanisms: mechanisms, configErrors: configErrors, uptimeSeconds: uptimeSeconds)
        self.sources = sources
        self.notificationTypes = notificationTypes
    }
}
