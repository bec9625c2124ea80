/// The apps' records in an array, looked up by name through an index: reads borrow and writes mutate in place
/// (a dictionary of structs would copy a record out on every read through its subscript).
struct AppTable: Sendable {
    private(set) var records: [AppRecord] = []
    private var slots: [String: Int] = [:]
    /// While a launch waits for its spawn: each written record as it was before its first write, by slot, so that
    /// a failed spawn puts back exactly the records the launch touched (`Supervisor.launchFailed`).
    private var originals: [Int: AppRecord]?

    var names: [String] { records.map(\.name) }

    private func find(_ name: String) -> Int? { slots[name] }

    func record(_ name: String) -> AppRecord? { find(name).map { records[$0] } }

    func slot(_ name: String) -> Int { find(name)! }

    func slotIfPresent(_ name: String) -> Int? { find(name) }

    func contains(_ name: String) -> Bool { find(name) != nil }

    /// `body` with the record borrowed (`record(_:)` copies it whole); nil for an unknown app.
    func with<Result>(_ name: String, _ body: (borrowing AppRecord) -> Result) -> Result? {
        guard let slot = find(name) else { return nil }
        // Through the buffer, whose subscript lends the element in place; the array's own getter copies it.
        return records.withUnsafeBufferPointer { body($0[slot]) }
    }

    /// The name of the first record for which `predicate` holds, each read in place.
    func firstName(where predicate: (borrowing AppRecord) -> Bool) -> String? {
        records.withUnsafeBufferPointer { buffer in
            for index in buffer.indices where predicate(buffer[index]) { return buffer[index].name }
            return nil
        }
    }

    /// The record of an app that exists (a programmer error otherwise).
    subscript(name: String) -> AppRecord {
        _read { yield records[find(name)!] }
        _modify {
            let slot = find(name)!
            keepOriginal(slot)
            yield &records[slot]
        }
    }

    subscript(slot: Int) -> AppRecord {
        _read { yield records[slot] }
        _modify {
            keepOriginal(slot)
            yield &records[slot]
        }
    }

    private mutating func keepOriginal(_ slot: Int) {
        if originals != nil, originals![slot] == nil { originals![slot] = records[slot] }
    }

    /// From now on each record keeps its state before its first write, until `keepNoOriginals` or `restoreOriginals`.
    mutating func keepOriginals() { originals = [:] }

    mutating func keepNoOriginals() { originals = nil }

    /// Every record written since `keepOriginals` is as it was then.
    mutating func restoreOriginals() {
        guard let kept = originals else { return }
        originals = nil
        for (slot, record) in kept { records[slot] = record }
    }

    /// Apps come and go only between inputs, never while originals are kept.
    mutating func insert(_ record: AppRecord) {
        precondition(originals == nil, "an app added while a launch waits for its spawn")
        slots[record.name] = records.count
        records.append(record)
    }

    mutating func remove(_ name: String) {
        precondition(originals == nil, "an app removed while a launch waits for its spawn")
        guard let slot = slots.removeValue(forKey: name) else { return }
        let last = records.count - 1
        if slot != last {
            records.swapAt(slot, last)
            slots[records[slot].name] = slot
        }
        records.removeLast()
    }
}
