import FoundationEssentials
import LifecycleModel

/// Foundation's coders, one of each per process, made when first needed: making them per message or per LineCoder
/// costs more than most messages' encoding.
private let foundationEncoder: JSONEncoder = {
    let encoder = JSONEncoder()
    // Stable key order makes the wire output reproducible (and greppable in tests).
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    return encoder
}()
private let foundationDecoder = JSONDecoder()

/// One JSON value per line, each way.
///
/// Every value goes through Foundation's `JSONEncoder` and `JSONDecoder`, except the hot messages, which have
/// overloads of their own: the callbacks and acks of an app switch, lifectl's requests and the daemon's replies.
/// Those are written and read by hand (MessageWriters.swift, MessageReaders.swift) to the same bytes and values as
/// Foundation's; whatever the hand-written code declines goes to Foundation, so that the output and the errors stay
/// Foundation's. The overloads are chosen where the type is known at compile time: a call from generic code takes
/// the Foundation path, with the same result.
public struct LineCoder {
    public init() {}

    // MARK: Encoding

    /// The value as one JSON line, newline included.
    public func encode(_ value: some Encodable) -> [UInt8] { foundationLine(value) }

    private func foundationLine(_ value: some Encodable) -> [UInt8] {
        // Encoding our own message types cannot fail but for a number JSON cannot hold, which no message carries.
        var bytes = [UInt8]((try? foundationEncoder.encode(value)) ?? Data("{}".utf8))
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    public func encode(_ message: ServerMessage) -> [UInt8] {
        var writer = JSONWriter(capacity: 128)
        guard message.writeJSON(into: &writer) else { return foundationLine(message) }
        return writer.line()
    }

    public func encode(_ message: ClientMessage) -> [UInt8] {
        var writer = JSONWriter(capacity: 64)
        guard message.writeJSON(into: &writer) else { return foundationLine(message) }
        return writer.line()
    }

    public func encode(_ request: ControlRequest) -> [UInt8] {
        var writer = JSONWriter(capacity: 128)
        guard (try? request.writeJSON(into: &writer)) != nil else { return foundationLine(request) }
        return writer.line()
    }

    public func encode(_ reply: ControlReply) -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        guard (try? reply.writeJSON(into: &writer)) == true else { return foundationLine(reply) }
        return writer.line()
    }

    // MARK: Decoding

    /// Decodes one line; failures are JSONDecoder's errors (`ProtocolError(decoding:line:)` words them).
    public func decode<T: Decodable>(_ type: T.Type, from line: [UInt8]) throws -> T {
        try foundationDecoder.decode(type, from: Data(line))
    }

    public func decode(_ type: ClientMessage.Type, from line: [UInt8]) throws -> ClientMessage {
        if let id = line.withUnsafeBufferPointer(ClientMessage.plainAckID) { return .ack(id: id) }
        if let value = JSONParser.parse(line), let ack = ClientMessage(parsedAck: value) { return ack }
        return try foundationDecoder.decode(type, from: Data(line))
    }

    public func decode(_ type: ControlRequest.Type, from line: [UInt8]) throws -> ControlRequest {
        if let value = JSONParser.parse(line), let request = ControlRequest(parsed: value) { return request }
        return try foundationDecoder.decode(type, from: Data(line))
    }

    public func decode(_ type: ControlReply.Type, from line: [UInt8]) throws -> ControlReply {
        if let value = JSONParser.parse(line), let reply = ControlReply(parsed: value) { return reply }
        return try foundationDecoder.decode(type, from: Data(line))
    }
}

extension JSONWriter {
    /// What was written, with the line's newline.
    fileprivate mutating func line() -> [UInt8] {
        byte(UInt8(ascii: "\n"))
        return bytes
    }
}
