// The hot messages written by hand: the callbacks of an app switch and the acks that answer them, lifectl's
// requests and the daemon's replies without its own block or a post summary (the reply to `focus`, `status` and the
// other verbs about apps). LineCoder's overloads for these types use them; what they decline (returning false or
// throwing) goes to JSONEncoder.
//
// The contract: the bytes JSONEncoder writes with [.sortedKeys, .withoutEscapingSlashes] for the same value (keys
// spelled in their sorted place, a nil optional left out as `encodeIfPresent` leaves it out).
// Tests/LifecycleProtocolTests/MessageJSONTests.swift (and ControlReplyJSONTests.swift for requests) compares them
// with JSONEncoder, and fails when a stored property is added to one of these types without being written here.

import LifecycleModel

extension ClientMessage {
    /// An ack without answers; false, and nothing written, for any other message.
    func writeJSON(into writer: inout JSONWriter) -> Bool {
        guard case .ack(let id, nil, nil, nil) = self else { return false }
        writer.raw(#"{"id":"#)
        writer.integer(Int64(id))
        writer.raw(#","type":"ack"}"#)
        return true
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
    /// Every request, `post`'s payload included; throws for a payload number JSON cannot hold, which is then
    /// JSONEncoder's to judge.
    func writeJSON(into writer: inout JSONWriter) throws(JSONWriter.Unrepresentable) {
        writer.byte(UInt8(ascii: "{"))
        writer.memberThenComma(#""app":"#, app)
        if let background {
            writer.raw(#""background":"#)
            writer.bool(background)
            writer.byte(UInt8(ascii: ","))
        }
        writer.memberThenComma(#""configuration":"#, configuration)
        if let data {
            writer.raw(#""data":"#)
            try writer.value(data)
            writer.byte(UInt8(ascii: ","))
        }
        writer.memberThenComma(#""name":"#, name)
        writer.memberThenComma(#""role":"#, role)
        writer.memberThenComma(#""scene":"#, scene)
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
        writer.memberThenComma(#""error":"#, error)
        writer.raw(#""ok":"#)
        writer.bool(ok)
        writer.member(#","scene":"#, scene)
        writer.byte(UInt8(ascii: "}"))
        return true
    }
}

extension AppStatus {
    func writeJSON(into writer: inout JSONWriter) throws(JSONWriter.Unrepresentable) {
        writer.byte(UInt8(ascii: "{"))
        writer.memberThenComma(#""adopted":"#, adopted)
        writer.memberThenComma(#""awaiting":"#, awaiting)
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
        writer.member(#","cgroup":"#, cgroup)
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
        writer.member(#","pid":"#, pid.map(Int64.init))
        writer.raw(#","protocol":"#)
        writer.string(`protocol`)
        writer.raw(#","queuedNotifications":"#)
        writer.integer(Int64(queuedNotifications))
        writer.raw(#","queuedPosts":"#)
        writer.integer(Int64(queuedPosts))
        if let reclaim {
            writer.raw(#","reclaim":"#)
            try reclaim.writeJSON(into: &writer)
        }
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

extension ReclaimStatus {
    func writeJSON(into writer: inout JSONWriter) throws(JSONWriter.Unrepresentable) {
        writer.byte(UInt8(ascii: "{"))
        if let anonymousAfter {
            writer.raw(#""anonymousAfter":"#)
            writer.unsigned(anonymousAfter)
            writer.byte(UInt8(ascii: ","))
        }
        writer.raw(#""anonymousBefore":"#)
        writer.unsigned(anonymousBefore)
        writer.raw(#","began":"#)
        writer.string(began)
        writer.raw(#","method":"#)
        writer.string(method)
        writer.raw(#","outcome":"#)
        writer.string(outcome)
        writer.member(#","residentAfter":"#, residentAfter)
        writer.raw(#","residentBefore":"#)
        writer.unsigned(residentBefore)
        if let seconds {
            writer.raw(#","seconds":"#)
            try writer.double(seconds)
        }
        writer.raw(#","swap":"#)
        writer.bool(swap)
        writer.member(#","swappedAfter":"#, swappedAfter)
        writer.raw(#","swappedBefore":"#)
        writer.unsigned(swappedBefore)
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
        if let savedStateHidden {
            writer.raw(#","savedStateHidden":"#)
            writer.bool(savedStateHidden)
        }
        writer.raw(#","scene":"#)
        writer.string(scene)
        writer.raw(#","state":"#)
        writer.string(state)
        writer.byte(UInt8(ascii: "}"))
    }
}

extension JSONWriter {
    /// `key` (quotes and colon included), the string and a comma; nothing for nil: a member ahead of others.
    fileprivate mutating func memberThenComma(_ key: StaticString, _ value: String?) {
        guard value != nil else { return }
        member(key, value)
        byte(UInt8(ascii: ","))
    }
}
