// The state file's JSON (docs/PROTOCOL.md, the state files), written by hand because the daemon saves an app at
// each of its transitions: the same bytes as the Codable conformances of AppSnapshot, NotificationQueue,
// SceneSession and BackgroundTask give through JSONEncoder with [.sortedKeys, .withoutEscapingSlashes]. Keys are
// spelled in their sorted (UTF-8) order; an optional that is nil is left out, as `encodeIfPresent` leaves it out. A
// key added to one of these types goes in both places (Tests/LifecycleDaemonTests/StateFileEncodingTests.swift
// compares the two on random snapshots with every optional set and unset).

import LifecycleModel

extension AppSnapshot {
    public func writeJSON(into writer: inout JSONWriter) throws(JSONWriter.Unrepresentable) {
        writer.raw(#"{"deadlineMisses":"#)
        writer.integer(Int64(deadlineMisses))
        writer.raw(#","discardedUntold":"#)
        writer.strings(discardedUntold)
        writer.member(#","enteredBackgroundAtMicroseconds":"#, enteredBackgroundAtMicroseconds)
        writer.raw(#","launches":"#)
        writer.integer(Int64(launches))
        writer.raw(#","memoryTerminations":"#)
        writer.integer(Int64(memoryTerminations))
        writer.member(#","nextMessageID":"#, nextMessageID.map(Int64.init))
        writer.raw(#","nextSceneNumber":"#)
        writer.integer(Int64(nextSceneNumber))
        writer.raw(#","observing":"#)
        writer.strings(observing)
        writer.raw(#","queue":"#)
        try queue.writeJSON(into: &writer)
        writer.raw(#","sessions":"#)
        try writer.array(sessions) { (writer, session) throws(JSONWriter.Unrepresentable) in try session.writeJSON(into: &writer) }
        writer.raw(#","state":"#)
        writer.string(state.rawValue)
        if let tasks {
            writer.raw(#","tasks":"#)
            writer.array(tasks) { writer, task in task.writeJSON(into: &writer) }
        }
        writer.raw(#","terminatedInBackground":"#)
        writer.bool(terminatedInBackground)
        if let told {
            writer.raw(#","told":"#)
            told.writeJSON(into: &writer)
        }
        writer.byte(UInt8(ascii: "}"))
    }
}

extension Told {
    /// As its synthesized `encode(to:)`: the scenes an object keyed by session id, in the UTF-8 order of the ids.
    public func writeJSON(into writer: inout JSONWriter) {
        writer.byte(UInt8(ascii: "{"))
        if let launch {
            writer.raw(#""launch":{"background":"#)
            writer.bool(launch.background)
            writer.raw(#","launchedBy":"#)
            writer.string(launch.launchedBy)
            writer.raw(#","terminatedInBackground":"#)
            writer.bool(launch.terminatedInBackground)
            writer.raw(#"},"#)
        }
        writer.raw(#""scenes":{"#)
        for (position, scene) in scenes.sorted(by: { JSONWriter.precedesInUTF8($0.key, $1.key) }).enumerated() {
            if position > 0 { writer.byte(UInt8(ascii: ",")) }
            writer.string(scene.key)
            writer.byte(UInt8(ascii: ":"))
            writer.string(scene.value.rawValue)
        }
        writer.raw(#"},"state":"#)
        writer.string(state.rawValue)
        writer.byte(UInt8(ascii: "}"))
    }
}

extension NotificationQueue {
    /// As `encode(to:)`: the entries in first-post order, each with its kept payloads oldest first, then the limit.
    public func writeJSON(into writer: inout JSONWriter) throws(JSONWriter.Unrepresentable) {
        writer.raw(#"{"entries":"#)
        try writer.array(stored) { (writer, entry) throws(JSONWriter.Unrepresentable) in
            writer.raw(#"{"coalescing":"#)
            writer.string(entry.coalescing.rawValue)
            writer.raw(#","dropped":"#)
            writer.integer(Int64(entry.dropped))
            writer.raw(#","name":"#)
            writer.string(entry.name)
            if let payload = entry.payload {
                writer.raw(#","payload":"#)
                try writer.value(payload)
            }
            writer.raw(#","payloads":"#)
            try writer.array(entry.payloads) { (writer, payload) throws(JSONWriter.Unrepresentable) in
                try writer.value(payload)
            }
            writer.raw(#","posts":"#)
            writer.integer(Int64(entry.posts))
            writer.byte(UInt8(ascii: "}"))
        }
        writer.raw(#","limit":"#)
        writer.integer(Int64(limit))
        writer.byte(UInt8(ascii: "}"))
    }
}

extension SceneSession {
    public func writeJSON(into writer: inout JSONWriter) throws(JSONWriter.Unrepresentable) {
        writer.raw(#"{"configuration":"#)
        writer.string(configuration)
        writer.raw(#","connectionOptions":"#)
        try writer.value(connectionOptions)
        writer.raw(#","id":"#)
        writer.string(id)
        writer.raw(#","lastActivation":"#)
        writer.integer(Int64(lastActivation))
        writer.raw(#","role":"#)
        writer.string(role)
        if let savedState {
            writer.raw(#","savedState":"#)
            try writer.value(savedState)
        }
        writer.member(#","state":"#, state?.rawValue)
        writer.byte(UInt8(ascii: "}"))
    }
}

extension BackgroundTask {
    public func writeJSON(into writer: inout JSONWriter) {
        writer.raw(#"{"id":"#)
        writer.integer(Int64(id))
        writer.raw(#","name":"#)
        writer.string(name)
        writer.byte(UInt8(ascii: "}"))
    }
}
