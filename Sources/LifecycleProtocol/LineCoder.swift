import LifecycleModel

/// One JSON value per line, each way.
///
/// Every type on the wire and in the state files reads and writes itself over one parser and one writer
/// (JSONReader.swift, JSONWriter.swift), with no second decoder behind them: one path decides what a line means and
/// how an error is worded, and the messages of an app switch stay cheap enough for its latency target.
public struct LineCoder {
    public init() {}

    /// The value as one JSON line, newline included.
    public func encode(_ value: some JSONWritable) -> [UInt8] {
        var writer = JSONWriter(capacity: 256)
        value.writeJSON(into: &writer)
        writer.byte(UInt8(ascii: "\n"))
        return writer.bytes
    }

    /// The value of one line (without its newline); the error says what was wrong in a sentence for the sender.
    public func decode<T: JSONReadable>(_ type: T.Type, from line: [UInt8]) throws(ProtocolError) -> T {
        let value = try JSONParser.parse(line)
        do {
            return try T(json: value, path: "")
        } catch where error == .notAnObject {
            throw ProtocolError("not a JSON object: \(ProtocolError.preview(line))")
        }
    }
}
