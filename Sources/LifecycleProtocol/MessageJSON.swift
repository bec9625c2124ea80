// The messages of an app switch, written by hand (JSONWriter, LifecycleModel/JSONWriter.swift): the four callbacks and
// the reply to `focus` (one app's status), and lifectl's request; and the four acks, read by hand from the parsed line. callgrind put their encoding through the generic Encodable path at a quarter
// of a switch's instructions once the state files no longer went through it (a reply some 60k, a callback some 11k),
// against a few thousand here.
//
// The contract is FastJSONEncoder's: the bytes JSONEncoder writes with [.sortedKeys, .withoutEscapingSlashes] for the
// same value (keys spelled in their sorted place, a nil optional left out as `encodeIfPresent` leaves it out). What is
// not written here returns false and takes the generic path: other messages, a reply carrying the daemon's block or a
// post summary, a callback with launch options, a number JSON cannot hold. Tests/LifecycleProtocolTests/
// MessageJSONTests.swift compares both with JSONEncoder, and fails when a stored property is added to one of these types
// without being written here.

import LifecycleModel

extension FastJSONEncoder {
    /// The hand-written bytes of the value, or nil when it is left to the generic path.
    /// `newline`: the line's newline written too (appended to the exact-size array afterwards, it reallocated it).
    static func handWritten<T: Encodable>(_ value: T, newline: Bool = false) -> [UInt8]? {
        var writer = JSONWriter(capacity: 512)
        // A metatype comparison, then a cast that cannot fail (as for the leaves in EncodedItem.make).
        if T.self == ServerMessage.self {
            guard unsafeBitCast(value, to: ServerMessage.self).writeJSON(into: &writer) else { return nil }
        } else if T.self == ControlReply.self {
            guard (try? unsafeBitCast(value, to: ControlReply.self).writeJSON(into: &writer)) == true else { return nil }
        } else if T.self == ControlRequest.self {
            guard (try? unsafeBitCast(value, to: ControlRequest.self).writeJSON(into: &writer)) != nil else { return nil }
        } else {
            return nil
        }
        if newline { writer.byte(UInt8(ascii: "\n")) }
        return writer.bytes
    }
}

extension FastJSONDecoder {
    /// The id of an ack of exactly two members, `"type":"ack"` and `"id":N`, in either order, JSON whitespace allowed
    /// between tokens, no escapes, N an integer of at most 18 characters (sign included, no leading zero, not -0: the
    /// integers JSONParser reads as such): the forms the Swift library, the Python example and the bench's client send.
    /// nil for any other line, which is parsed (and may still be an ack: `handRead`). Each such line is valid JSON that
    /// JSONDecoder reads as `.ack(id: N)`; reading it here spares the parse, half of an ack's remaining cost.
    static func plainAck(_ line: UnsafeBufferPointer<UInt8>) -> Int? {
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

    /// A client's plain ack (`{"type":"ack","id":N}`, in any order, unknown keys ignored as the Decodable path ignores
    /// them), read from the parsed line without the Decodable machinery (some 4k instructions of each of the four acks
    /// of a switch); nil for anything else, which the Decodable path reads: other messages, an ack carrying a
    /// configuration or a state, an id that is not an integer in Int's range.
    static func handRead<T: Decodable>(_ type: T.Type, from value: ParsedValue) -> T? {
        // lifectl's reply (ControlReplyJSON.swift).
        if T.self == ControlReply.self { return ControlReply(parsed: value).map { unsafeBitCast($0, to: T.self) } }
        // lifectl's requests, as the daemon reads them.
        if T.self == ControlRequest.self { return ControlRequest(handRead: value).map { unsafeBitCast($0, to: T.self) } }
        guard T.self == ClientMessage.self, case .object(let keys, let values) = value else { return nil }
        var type: String?, id: Int?
        for (key, value) in zip(keys, values) {
            switch key {
            case "type":
                guard case .string(let text) = value else { return nil }
                type = text
            case "id":
                guard case .integer(let number) = value, let exact = Int(exactly: number) else { return nil }
                id = exact
            case "configuration", "state": return nil
            default: continue
            }
        }
        guard type == "ack", let id else { return nil }
        return unsafeBitCast(ClientMessage.ack(id: id), to: T.self)
    }
}

extension ServerMessage {
    /// A lifecycle callback without launch options (every callback but a launch's didFinishLaunching); false, and
    /// nothing written, for any other message.
    func writeJSON(into writer: inout JSONWriter) -> Bool {
        guard case .callback(let callback, let id, let deadlineMs, nil) = self else { return false }
        writer.raw(#"{"deadlineMs":"#)
        writer.integer(Int64(deadlineMs))
        writer.raw(#","id":"#)
        writer.integer(Int64(id))
        writer.raw(#","type":"#)
        writer.string(callback.rawValue)
        writer.byte(UInt8(ascii: "}"))
        return true
    }
}

extension ControlRequest {
    /// lifectl's request (a generic encoding of it was a twentieth of `lifectl status`'s time, perf record): every
    /// request, `post`'s payload included; throws, and the generic path decides, for a payload number JSON cannot hold.
    func writeJSON(into writer: inout JSONWriter) throws(JSONWriter.Unrepresentable) {
        writer.byte(UInt8(ascii: "{"))
        if let app {
            writer.raw(#""app":"#)
            writer.string(app)
            writer.byte(UInt8(ascii: ","))
        }
        if let background {
            writer.raw(#""background":"#)
            writer.bool(background)
            writer.byte(UInt8(ascii: ","))
        }
        if let configuration {
            writer.raw(#""configuration":"#)
            writer.string(configuration)
            writer.byte(UInt8(ascii: ","))
        }
        if let data {
            writer.raw(#""data":"#)
            try writer.value(data)
            writer.byte(UInt8(ascii: ","))
        }
        if let name {
            writer.raw(#""name":"#)
            writer.string(name)
            writer.byte(UInt8(ascii: ","))
        }
        if let role {
            writer.raw(#""role":"#)
            writer.string(role)
            writer.byte(UInt8(ascii: ","))
        }
        if let scene {
            writer.raw(#""scene":"#)
            writer.string(scene)
            writer.byte(UInt8(ascii: ","))
        }
        writer.raw(#""verb":"#)
        writer.string(verb)
        writer.byte(UInt8(ascii: "}"))
    }
}

extension ControlReply {
    /// A reply without the daemon's block and without a post summary; false, and nothing written, for the others.
    func writeJSON(into writer: inout JSONWriter) throws(JSONWriter.Unrepresentable) -> Bool {
        guard daemon == nil, posted == nil else { return false }
        writer.byte(UInt8(ascii: "{"))
        if let apps {
            writer.raw(#""apps":"#)
            try writer.array(apps) { (writer, app) throws(JSONWriter.Unrepresentable) in try app.writeJSON(into: &writer) }
            writer.byte(UInt8(ascii: ","))
        }
        if let error {
            writer.raw(#""error":"#)
            writer.string(error)
            writer.byte(UInt8(ascii: ","))
        }
        writer.raw(#""ok":"#)
        writer.bool(ok)
        if let scene {
            writer.raw(#","scene":"#)
            writer.string(scene)
        }
        writer.byte(UInt8(ascii: "}"))
        return true
    }
}

extension AppStatus {
    func writeJSON(into writer: inout JSONWriter) throws(JSONWriter.Unrepresentable) {
        writer.byte(UInt8(ascii: "{"))
        if let awaiting {
            writer.raw(#""awaiting":"#)
            writer.string(awaiting)
            writer.byte(UInt8(ascii: ","))
        }
        writer.raw(#""backgroundModes":"#)
        writer.strings(backgroundModes)
        writer.raw(#","backgroundTasks":"#)
        writer.array(backgroundTasks) { writer, task in
            writer.raw(#"{"name":"#)
            writer.string(task.name)
            writer.raw(#","task":"#)
            writer.integer(Int64(task.task))
            writer.byte(UInt8(ascii: "}"))
        }
        if let backgroundTimeRemaining {
            writer.raw(#","backgroundTimeRemaining":"#)
            try writer.double(backgroundTimeRemaining)
        }
        if let cgroup {
            writer.raw(#","cgroup":"#)
            writer.string(cgroup)
        }
        writer.raw(#","deadlineMisses":"#)
        writer.integer(Int64(deadlineMisses))
        writer.raw(#","launches":"#)
        writer.integer(Int64(launches))
        writer.raw(#","memoryTerminations":"#)
        writer.integer(Int64(memoryTerminations))
        writer.raw(#","name":"#)
        writer.string(name)
        writer.raw(#","observing":"#)
        writer.strings(observing)
        if let pid {
            writer.raw(#","pid":"#)
            writer.integer(Int64(pid))
        }
        writer.raw(#","protocol":"#)
        writer.string(`protocol`)
        writer.raw(#","queuedNotifications":"#)
        writer.integer(Int64(queuedNotifications))
        writer.raw(#","queuedPosts":"#)
        writer.integer(Int64(queuedPosts))
        if let scenes {
            writer.raw(#","scenes":"#)
            try writer.array(scenes) { (writer, scene) throws(JSONWriter.Unrepresentable) in try scene.writeJSON(into: &writer) }
        }
        writer.raw(#","since":"#)
        writer.string(since)
        writer.raw(#","sinceSeconds":"#)
        try writer.double(sinceSeconds)
        writer.raw(#","state":"#)
        writer.string(state.rawValue)
        writer.raw(#","suspendMethod":"#)
        writer.string(suspendMethod)
        writer.raw(#","taskOverruns":"#)
        writer.integer(Int64(taskOverruns))
        writer.raw(#","terminatedInBackground":"#)
        writer.bool(terminatedInBackground)
        writer.byte(UInt8(ascii: "}"))
    }
}

extension SceneStatus {
    func writeJSON(into writer: inout JSONWriter) throws(JSONWriter.Unrepresentable) {
        writer.raw(#"{"configuration":"#)
        writer.string(configuration)
        writer.raw(#","role":"#)
        writer.string(role)
        if let savedState {
            writer.raw(#","savedState":"#)
            try writer.value(savedState)
        }
        writer.raw(#","scene":"#)
        writer.string(scene)
        writer.raw(#","state":"#)
        writer.string(state)
        writer.byte(UInt8(ascii: "}"))
    }
}

extension ControlRequest {
    /// A request of strings and a bool (every request but a `post` with data), read from the parsed value without
    /// the Decodable machinery, which was 6k of an app switch's 233k instructions in the daemon. nil leaves the value
    /// to that machinery, which decides (and words the error): `data`, a field of another type, a key twice, no verb.
    /// Unknown keys are ignored and null is an absent field, as Decodable does.
    init?(handRead value: ParsedValue) {
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
