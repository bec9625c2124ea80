import LifecycleProtocol

// The i3/sway IPC wire format (sway-ipc(7)): each message is the magic "i3-ipc", a 32-bit payload length and a
// 32-bit type, both in the host's byte order (little-endian on every machine lifecycled runs on), then the JSON
// payload. Events carry the type with its high bit set. This file only frames and parses; SwaySource drives it.

/// The message and event types lifecycled uses.
enum SwayMessageType {
    static let runCommand: UInt32 = 0
    static let subscribe: UInt32 = 2
    static let getTree: UInt32 = 4
    /// Events: the high bit set on the event's number.
    static let eventBit: UInt32 = 0x8000_0000
    static let workspaceEvent: UInt32 = eventBit | 0
    static let outputEvent: UInt32 = eventBit | 1
    static let windowEvent: UInt32 = eventBit | 3
    static let bindingEvent: UInt32 = eventBit | 5
    static let shutdownEvent: UInt32 = eventBit | 6
}

/// One framed message, without its header.
struct SwayFrame: Equatable {
    var type: UInt32
    var payload: [UInt8]

    var isEvent: Bool { type & SwayMessageType.eventBit != 0 }
}

/// Input that is not the IPC's framing: the connection cannot be read on, and is dropped and made again.
enum SwayIPCError: Error, Equatable, CustomStringConvertible {
    case badMagic([UInt8])
    case tooLarge(UInt32)
    case malformedPayload(type: UInt32, reason: String)

    var description: String {
        switch self {
        case .badMagic(let bytes):
            "the message does not start with \"i3-ipc\" (got \(bytes.map { String($0, radix: 16) }.joined(separator: " ")))"
        case .tooLarge(let length): "a message announces \(length) bytes, more than the \(SwayCodec.maxPayload) taken"
        case .malformedPayload(let type, let reason): "the payload of message type \(type) is not what sway sends: \(reason)"
        }
    }
}

enum SwayCodec {
    static let magic = Array("i3-ipc".utf8)
    static let headerSize = magic.count + 8
    /// A tree of thousands of windows is well under this; a length beyond it is a broken or hostile stream, not a
    /// big tree.
    static let maxPayload: UInt32 = 8 << 20

    /// One message to send.
    static func encode(type: UInt32, payload: String = "") -> [UInt8] {
        let body = Array(payload.utf8)
        var bytes = magic
        bytes.reserveCapacity(headerSize + body.count)
        appendLittleEndian(UInt32(body.count), to: &bytes)
        appendLittleEndian(type, to: &bytes)
        return bytes + body
    }

    private static func appendLittleEndian(_ value: UInt32, to bytes: inout [UInt8]) {
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
    }

    static func littleEndian(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var value: UInt32 = 0
        for (index, byte) in bytes.enumerated() { value |= UInt32(byte) << UInt32(8 * index) }
        return value
    }
}

/// Cuts the byte stream of one connection into frames; a frame split across reads waits for its rest.
struct SwayFrameDecoder {
    private var buffer: [UInt8] = []
    private var start = 0

    /// Bytes waiting for the rest of their frame.
    var pending: Int { buffer.count - start }

    mutating func append(_ bytes: some Sequence<UInt8>) {
        if start > 0, start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole frame, nil when more bytes are needed; throws on input that is not the framing.
    mutating func next() throws(SwayIPCError) -> SwayFrame? {
        let available = buffer.count - start
        let magicCount = SwayCodec.magic.count
        // A wrong magic is reported as soon as its first bytes are in, not after a header's worth.
        let checked = min(available, magicCount)
        guard buffer[start..<start + checked].elementsEqual(SwayCodec.magic[..<checked]) else {
            throw .badMagic(Array(buffer[start..<start + checked]))
        }
        guard available >= SwayCodec.headerSize else { return nil }
        let length = SwayCodec.littleEndian(buffer[start + magicCount..<start + magicCount + 4])
        let type = SwayCodec.littleEndian(buffer[start + magicCount + 4..<start + SwayCodec.headerSize])
        guard length <= SwayCodec.maxPayload else { throw .tooLarge(length) }
        let end = start + SwayCodec.headerSize + Int(length)
        guard buffer.count >= end else { return nil }
        let frame = SwayFrame(type: type, payload: Array(buffer[start + SwayCodec.headerSize..<end]))
        start = end
        if start > 1 << 16, start * 2 > buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
        return frame
    }
}

/// What lifecycled reads of sway's tree: every view with its pid, app_id (or X11 class), focus and visibility, and
/// what the tree model needs to follow a focus change (layout, focus order, the workspace each output shows).
struct SwayNode: JSONReadable {
    var id: Int64
    var type: String?
    var name: String?
    var pid: Int32?
    var appID: String?
    var focused: Bool?
    var visible: Bool?
    var layout: String?
    var focus: [Int64]?
    var sticky: Bool?
    var fullscreenMode: Int?
    /// An output's shown workspace, by name.
    var currentWorkspace: String?
    var windowProperties: WindowProperties?
    var nodes: [SwayNode]?
    var floatingNodes: [SwayNode]?

    init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        id = try fields.required("id")
        type = try fields.optional("type")
        name = try fields.optional("name")
        pid = try fields.optional("pid")
        appID = try fields.optional("app_id")
        focused = try fields.optional("focused")
        visible = try fields.optional("visible")
        layout = try fields.optional("layout")
        focus = try fields.optional("focus")
        sticky = try fields.optional("sticky")
        fullscreenMode = try fields.optional("fullscreen_mode")
        currentWorkspace = try fields.optional("current_workspace")
        windowProperties = try fields.optional("window_properties")
        nodes = try fields.optional("nodes")
        floatingNodes = try fields.optional("floating_nodes")
    }

    struct WindowProperties: JSONReadable {
        var `class`: String?
        var instance: String?

        init(json: ParsedJSON, path: String) throws(ProtocolError) {
            let fields = try JSONFields(json, path: path)
            `class` = try fields.optional("class")
            instance = try fields.optional("instance")
        }
    }
}

/// A RUN_COMMAND reply: one result per command.
struct SwayCommandResult: JSONReadable {
    var success: Bool
    var error: String?

    init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        success = try fields.required("success")
        error = try fields.optional("error")
    }
}

/// A window event: what changed, and the view it changed, as the tree would show it.
struct SwayWindowEvent: JSONReadable {
    var change: String
    var container: SwayNode?

    init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        change = try fields.required("change")
        container = try fields.optional("container")
    }
}

/// A binding event: the command a key binding ran.
struct SwayBindingEvent: JSONReadable {
    var command: String

    init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let binding = try JSONFields(try JSONFields(json, path: path).required("binding", as: ParsedJSON.self), path: "binding")
        command = try binding.required("command")
    }
}

/// A workspace event: what changed, and the workspace it concerns (its id is what the tree model needs).
struct SwayWorkspaceEvent: JSONReadable {
    var change: String
    var current: Int64?

    init(json: ParsedJSON, path: String) throws(ProtocolError) {
        let fields = try JSONFields(json, path: path)
        change = try fields.required("change")
        current = try fields.optional("current", as: ParsedJSON.self).map { current throws(ProtocolError) in
            try JSONFields(current, path: "current").required("id")
        }
    }
}

enum SwayTree {
    /// The view a window event names, as a picture's window; nil for a container that is no view.
    static func windowEvent(_ payload: [UInt8], coder: LineCoder = LineCoder()) throws(SwayIPCError) -> (change: String, window: DisplayWindow?) {
        let event: SwayWindowEvent
        do {
            event = try coder.decode(SwayWindowEvent.self, from: payload)
        } catch {
            throw .malformedPayload(type: SwayMessageType.windowEvent, reason: "\(error)")
        }
        return (event.change, event.container.flatMap(window(of:)))
    }

    static func window(of node: SwayNode) -> DisplayWindow? {
        guard let pid = node.pid, node.type == "con" || node.type == "floating_con" else { return nil }
        let appID = node.appID ?? node.windowProperties?.class ?? node.windowProperties?.instance
        return DisplayWindow(id: node.id, pid: pid > 0 ? pid : nil, appID: appID,
                             visible: node.visible ?? false, focused: node.focused ?? false)
    }

    /// The change and workspace of a workspace event.
    static func workspaceEvent(_ payload: [UInt8], coder: LineCoder = LineCoder()) throws(SwayIPCError) -> (change: String, workspace: Int64?) {
        do {
            let event = try coder.decode(SwayWorkspaceEvent.self, from: payload)
            return (event.change, event.current)
        } catch {
            throw .malformedPayload(type: SwayMessageType.workspaceEvent, reason: "\(error)")
        }
    }

    /// The command of a binding event.
    static func bindingCommand(_ payload: [UInt8], coder: LineCoder = LineCoder()) throws(SwayIPCError) -> String {
        do {
            return try coder.decode(SwayBindingEvent.self, from: payload).command
        } catch {
            throw .malformedPayload(type: SwayMessageType.bindingEvent, reason: "\(error)")
        }
    }

    /// The tree model of a GET_TREE reply.
    static func model(fromTree payload: [UInt8], coder: LineCoder = LineCoder()) throws(SwayIPCError) -> SwayTreeModel {
        do {
            return SwayTreeModel(tree: try coder.decode(SwayNode.self, from: payload))
        } catch {
            throw .malformedPayload(type: SwayMessageType.getTree, reason: "\(error)")
        }
    }

    /// The picture in a GET_TREE reply: every view (a node with a pid), wherever it sits in the tree.
    static func picture(fromTree payload: [UInt8], coder: LineCoder = LineCoder()) throws(SwayIPCError) -> WindowPicture {
        try model(fromTree: payload, coder: coder).picture
    }

    /// Whether every command of a RUN_COMMAND reply succeeded, and the first error otherwise.
    static func commandOutcome(_ payload: [UInt8], coder: LineCoder = LineCoder()) throws(SwayIPCError) -> String? {
        let results: [SwayCommandResult]
        do {
            results = try coder.decode([SwayCommandResult].self, from: payload)
        } catch {
            throw .malformedPayload(type: SwayMessageType.runCommand, reason: "\(error)")
        }
        return results.first { !$0.success }.map { $0.error ?? "failed" }
    }
}
