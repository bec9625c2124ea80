// The hot messages read by hand from a parsed line: the acks of an app switch (the daemon), lifectl's requests (the
// daemon) and the daemon's replies (lifectl). LineCoder's overloads for these types use them.
//
// The contract: a value read here is the value JSONDecoder gives for the same line. Only the forms JSONDecoder is
// known to read the same way are taken: each key one of the type's own (or, where the synthesized `init(from:)`
// ignores unknown keys, any), each value of its property's JSON kind (an optional's `null` as nil, as
// `decodeIfPresent` reads it), integers written as integers and in range, states among AppState's raw values.
// Anything else returns nil, and the line goes to JSONDecoder, which reads it or throws its own error.
// Tests/LifecycleProtocolTests/MessageJSONTests.swift (acks, requests) and ControlReplyJSONTests.swift (replies)
// compare both with JSONDecoder, and fail when a stored property is added to a reply without being read here.

import LifecycleModel

extension ClientMessage {
    /// The id of an ack of exactly two members, `"type":"ack"` and `"id":N`, in either order, JSON whitespace allowed
    /// between tokens, no escapes, N an integer of at most 18 characters (sign included, no leading zero, not -0: the
    /// integers JSONParser reads as such): the forms the Swift library, the Python example and the bench's client
    /// send, read without a parse. nil for any other line, which is parsed (and may still be an ack:
    /// `init(parsedAck:)`). Each such line is valid JSON that JSONDecoder reads as `.ack(id: N)`.
    static func plainAckID(_ line: UnsafeBufferPointer<UInt8>) -> Int? {
        var position = 0
        func skipWhitespace() {
            while position < line.count, line[position] == 0x20 || line[position] == 0x09 || line[position] == 0x0A || line[position] == 0x0D {
                position += 1
            }
        }
        func take(_ text: StaticString) -> Bool {
            let count = text.utf8CodeUnitCount
            guard position + count <= line.count else { return false }
            for index in 0..<count where line[position + index] != text.utf8Start[index] { return false }
            position += count
            skipWhitespace()
            return true
        }
        func integer() -> Int? {
            let start = position
            let negative = position < line.count && line[position] == UInt8(ascii: "-")
            if negative { position += 1 }
            var value = 0
            let digits = position
            while position < line.count, line[position] >= UInt8(ascii: "0"), line[position] <= UInt8(ascii: "9") {
                // Checked before the digit is added: 18 characters cannot overflow.
                guard position - start < 18 else { return nil }
                value = value * 10 + Int(line[position] - UInt8(ascii: "0"))
                position += 1
            }
            let count = position - digits
            guard count > 0, count == 1 || line[digits] != UInt8(ascii: "0"), !(negative && value == 0) else { return nil }
            skipWhitespace()
            return negative ? -value : value
        }
        skipWhitespace()
        guard take("{") else { return nil }
        var id: Int?, type = false
        for member in 0..<2 {
            if member == 1 { guard take(",") else { return nil } }
            if !type, take(#""type""#) {
                guard take(":"), take(#""ack""#) else { return nil }
                type = true
            } else if id == nil, take(#""id""#) {
                guard take(":"), let number = integer() else { return nil }
                id = number
            } else {
                return nil
            }
        }
        guard take("}"), position == line.count else { return nil }
        return id
    }

    /// An ack without answers (`{"type":"ack","id":N}`, in any order, unknown keys ignored as `init(from:)` ignores
    /// them); nil for anything else: other messages, an ack carrying a configuration, a state or a result, an id that is not
    /// an integer in Int's range.
    init?(parsedAck value: ParsedValue) {
        guard case .object(let keys, let values) = value else { return nil }
        var type: String?, id: Int?
        for (key, value) in zip(keys, values) {
            switch key {
            case "type":
                guard case .string(let text) = value else { return nil }
                type = text
            case "id":
                guard case .integer(let number) = value, let exact = Int(exactly: number) else { return nil }
                id = exact
            case "configuration", "state", "result": return nil
            default: continue
            }
        }
        guard type == "ack", let id else { return nil }
        self = .ack(id: id)
    }
}

extension ControlRequest {
    /// A request of strings and a bool (every request but a `post` with data), as JSONDecoder reads it; nil leaves
    /// the line to JSONDecoder, which decides (and words the error): `data`, a field of another type, no verb.
    /// Unknown keys are ignored and null is an absent field, as the synthesized `init(from:)` does.
    init?(parsed value: ParsedValue) {
        guard case .object(let keys, let values) = value else { return nil }
        self.init(verb: "")
        var hasVerb = false
        var seen = 0
        for (key, value) in zip(keys, values) {
            let bit: Int
            switch key {
            case "verb": bit = 1
            case "app": bit = 2
            case "background": bit = 4
            case "name": bit = 8
            case "scene": bit = 16
            case "role": bit = 32
            case "configuration": bit = 64
            case "data": return nil
            default: continue
            }
            guard seen & bit == 0 else { return nil }
            seen |= bit
            if bit == 4 {
                switch value {
                case .bool(let flag): background = flag
                case .null: background = nil
                default: return nil
                }
                continue
            }
            let text: String?
            switch value {
            case .string(let string): text = string
            case .null where bit != 1: text = nil
            default: return nil
            }
            switch bit {
            case 1: verb = text ?? ""; hasVerb = true
            case 2: app = text
            case 8: name = text
            case 16: scene = text
            case 32: role = text
            default: configuration = text
            }
        }
        guard hasVerb else { return nil }
    }
}

extension ControlReply {
    /// The reply in `value`, or nil when it is left to JSONDecoder.
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
        var pid: Int32?, adopted: String?, awaiting: String?, cgroup: String?, backgroundTimeRemaining: Double?, scenes: [SceneStatus]?
        var reclaim: ReclaimStatus?
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
            case "adopted":
                guard !value.isNull else { continue }
                guard let text = value.plainString else { return nil }
                adopted = text
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
            case "reclaim":
                guard !value.isNull else { continue }
                guard let status = ReclaimStatus(parsed: value) else { return nil }
                reclaim = status
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
        self.adopted = adopted
        self.reclaim = reclaim
    }
}

extension ReclaimStatus {
    init?(parsed value: ParsedValue) {
        guard case .object(let keys, let values) = value else { return nil }
        var method: String?, outcome: String?, swap: Bool?, began: String?
        var residentBefore: UInt64?, swappedBefore: UInt64?, anonymousBefore: UInt64?
        var residentAfter: UInt64?, swappedAfter: UInt64?, anonymousAfter: UInt64?, seconds: Double?
        func bytes(_ value: ParsedValue) -> UInt64?? {
            if value.isNull { return .some(nil) }
            guard let number = value.plainInt, number >= 0 else { return nil }
            return .some(UInt64(number))
        }
        for (key, value) in zip(keys, values) {
            switch key {
            case "method": method = value.plainString
            case "outcome": outcome = value.plainString
            case "swap": swap = value.plainBool
            case "began": began = value.plainString
            case "residentBefore": guard let read = bytes(value) else { return nil }; residentBefore = read
            case "swappedBefore": guard let read = bytes(value) else { return nil }; swappedBefore = read
            case "anonymousBefore": guard let read = bytes(value) else { return nil }; anonymousBefore = read
            case "residentAfter": guard let read = bytes(value) else { return nil }; residentAfter = read
            case "swappedAfter": guard let read = bytes(value) else { return nil }; swappedAfter = read
            case "anonymousAfter": guard let read = bytes(value) else { return nil }; anonymousAfter = read
            case "seconds":
                guard !value.isNull else { continue }
                guard let number = value.plainDouble else { return nil }
                seconds = number
            default: return nil
            }
        }
        guard let method, let outcome, let swap, let began, let residentBefore, let swappedBefore, let anonymousBefore
        else { return nil }
        self.init(method: method, outcome: outcome, swap: swap, began: began, residentBefore: residentBefore,
                  swappedBefore: swappedBefore, residentAfter: residentAfter, swappedAfter: swappedAfter,
                  anonymousBefore: anonymousBefore, anonymousAfter: anonymousAfter, seconds: seconds)
    }
}

extension SceneStatus {
    init?(parsed value: ParsedValue) {
        guard case .object(let keys, let values) = value else { return nil }
        var scene: String?, role: String?, configuration: String?, state: String?, savedState: JSONValue?
        var savedStateHidden: Bool?
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
            case "savedStateHidden":
                guard case .bool(let hidden) = value else { return nil }
                savedStateHidden = hidden
            default: return nil
            }
        }
        guard let scene, let role, let configuration, let state else { return nil }
        self.init(scene: scene, role: role, configuration: configuration, state: state, savedState: savedState,
                  savedStateHidden: savedStateHidden)
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
        var notificationTypes: [String]?, display: String?, controlProtocol: Int?
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
            case "display":
                guard let text = value.plainString else { return nil }
                display = text
            case "controlProtocol":
                guard let number = value.plainInt else { return nil }
                controlProtocol = number
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
        self.display = display
        self.controlProtocol = controlProtocol
    }
}
