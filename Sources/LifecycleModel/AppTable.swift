/// The apps' records in an array, looked up by name through an index: reads borrow and writes mutate in place
/// (a dictionary of structs would copy a record out on every read through its subscript).
struct AppTable: Sendable {
    private(set) var records: [AppRecord] = []
    private var slots: [String: Int] = [:]

    var names: [String] { records.map(\.name) }

    private func find(_ name: String) -> Int? { slots[name] }

    func record(_ name: String) -> AppRecord? { find(name).map { records[$0] } }

    func slot(_ name: String) -> Int { find(name)! }

    func slotIfPresent(_ name: String) -> Int? { find(name) }

    func contains(_ name: String) -> Bool { find(name) != nil }

    /// `body` with the record borrowed (`record(_:)` copies it whole); nil for an unknown app.
    func with<Result>(_ name: String, _ body: (borrowing AppRecord) -> Result) -> Result? {
        guard let slot = find(name) else { return nil }
        return body(records[slot])
    }

    /// The record of an app that exists (a programmer error otherwise).
    subscript(name: String) -> AppRecord {
        _read { yield records[find(name)!] }
        _modify { yield &records[find(name)!] }
    }

    subscript(slot: Int) -> AppRecord {
        _read { yield records[slot] }
        _modify { yield &records[slot] }
    }

    mutating func insert(_ record: AppRecord) {
        slots[record.name] = records.count
        records.append(record)
    }

    mutating func remove(_ name: String) {
        guard let slot = slots.removeValue(forKey: name) else { return }
        let last = records.count - 1
        if slot != last {
            records.swapAt(slot, last)
            slots[records[slot].name] = slot
        }
        records.removeLast()
    }
}
