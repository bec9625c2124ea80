import Foundation
import Glibc
@testable import LifecycleDaemon
@testable import LifecycleModel
import Testing

/// StateStore's second and later saves of an app: NAME.json rewritten in place through a descriptor kept open
/// (one pwrite of the padded content), instead of a file made and renamed each time. Real files in a temporary
/// directory (on this machine's /tmp).
@Suite("State files: saves in place")
struct StateStoreInPlaceTests {
    private func makeStore() throws -> (StateStore, String) {
        let directory = NSTemporaryDirectory() + "state-store-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = StateStore(runtimeDirectory: directory)
        try store.prepare()
        #expect(store.directoryOpenError == 0, "the state directory could not be opened: \(String(cString: strerror(store.directoryOpenError)))")
        return (store, directory + "/state")
    }

    /// The same app with a different amount of data each time: `extra` bytes of token (40 or 2 by the version's
    /// parity unless given), and a 9-digit or 1-digit count.
    private func app(_ name: String, _ version: Int, extra: Int? = nil) -> PersistedApp {
        let snapshot = AppSnapshot(
            state: .background, launches: version, deadlineMisses: version % 3 == 0 ? 123_456_789 : 0,
            terminatedInBackground: false, memoryTerminations: 0, observing: [], queue: NotificationQueue(),
            sessions: [], nextSceneNumber: 1, discardedUntold: [], nextMessageID: nil, tasks: nil,
            enteredBackgroundAtMicroseconds: nil)
        return PersistedApp(name: name, pid: 4242, startTime: 99, suspendedWith: nil,
                            token: String(repeating: "t", count: extra ?? (version % 2 == 0 ? 40 : 2)), snapshot: snapshot)
    }

    private func bytes(_ path: String) throws -> [UInt8] { try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) }

    /// The file holds exactly `app`'s encoding, with only spaces between its JSON and its newline, and a length that
    /// is a multiple of the padding unit (for a file of at most a page).
    private func expectHolds(_ store: StateStore, _ path: String, _ app: PersistedApp, _ comment: Comment,
                             sourceLocation: SourceLocation = #_sourceLocation) throws {
        let file = try bytes(path)
        let encoded = store.encode(app)
        #expect(file.count >= encoded.count, comment, sourceLocation: sourceLocation)
        #expect(Array(file.prefix(encoded.count - 1)) == Array(encoded.dropLast()), comment, sourceLocation: sourceLocation)
        #expect(file.last == UInt8(ascii: "\n"), comment, sourceLocation: sourceLocation)
        #expect(file.dropFirst(encoded.count - 1).dropLast().allSatisfy { $0 == UInt8(ascii: " ") }, comment, sourceLocation: sourceLocation)
        if encoded.count <= StateStore.pageBytes {
            #expect(file.count % StateStore.paddingUnit == 0, "\(comment): length \(file.count)", sourceLocation: sourceLocation)
        } else {
            #expect(file == encoded, "\(comment): a file over a page is not padded", sourceLocation: sourceLocation)
        }
    }

    @Test func laterSavesRewriteTheSameFileInPlace() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/notes.json"
        #expect(try store.save(app("notes", 1)))
        for version in 2...6 {
            let app = app("notes", version)
            let seen = try readThroughEarlierDescriptor(path) { _ = try store.save(app) }
            #expect(seen == (try bytes(path)), "save \(version): written in place, into the file that was open")
            try expectHolds(store, path, app, "save \(version)")
        }
        #expect(store.keptCount == 1)
        #expect(!FileManager.default.fileExists(atPath: directory + "/notes.json.tmp"))
        let (loaded, problems) = StateStore(runtimeDirectory: (directory as NSString).deletingLastPathComponent).loadAll()
        #expect(problems == [])
        #expect(loaded.map(\.snapshot.launches) == [6])
    }

    /// Longer and shorter saves in turn, across the padding unit's boundaries: a shorter save must not leave the
    /// longer one's tail (it pads over it), and each file decodes to the last app saved.
    @Test func everySequenceOfLengthsLeavesExactlyTheLastApp() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let base = store.encode(app("notes", 1, extra: 0)).count
        // Lengths that cross two boundaries of the unit, up and down, and stay at one length.
        let unit = StateStore.paddingUnit
        let room = unit - base % unit
        let extras = [0, room, room - 1, 1, room + unit, room + unit, 3, room + 1, 0, room + 2 * unit, 2]
        let parent = (directory as NSString).deletingLastPathComponent
        for (i, extra) in extras.enumerated() {
            let app = app("notes", i, extra: extra)
            #expect(try store.save(app))
            try expectHolds(store, directory + "/notes.json", app, "save \(i), \(extra) extra bytes")
            let (loaded, problems) = StateStore(runtimeDirectory: parent).loadAll()
            #expect(problems == [])
            #expect(loaded == [app], "save \(i)")
        }
        #expect(store.keptCount == 1)
    }

    /// What a descriptor opened on `path` now reads after `body`: the same file written in place shows the new
    /// bytes, a file made anew and renamed over it leaves the old ones to it (inode numbers are no identity: tmpfs
    /// gives a freed one to the next file).
    private func readThroughEarlierDescriptor(_ path: String, _ body: () throws -> Void) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        #expect(fd >= 0)
        defer { close(fd) }
        try body()
        var buffer = [UInt8](repeating: 0, count: 3 * StateStore.pageBytes)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        return Array(buffer.prefix(max(count, 0)))
    }

    /// Content over a page cannot be written in place (a daemon killed halfway could leave it torn): it is made and
    /// renamed, exactly its bytes, and not kept; once it fits again it is made once more and kept.
    @Test func aFileOverAPageIsMadeAndRenamedEachTime() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/notes.json"
        try store.save(app("notes", 1))
        try store.save(app("notes", 2))
        for version in 3...4 {
            let before = try bytes(path)
            let big = app("notes", version, extra: StateStore.pageBytes + version)
            let seen = try readThroughEarlierDescriptor(path) { try store.save(big) }
            #expect(seen == before, "big save \(version): a new file, renamed over the one that was open")
            try expectHolds(store, path, big, "big save \(version)")
            #expect(store.keptCount == 0)
        }
        let before = try bytes(path)
        let seen = try readThroughEarlierDescriptor(path) { try store.save(app("notes", 5)) }
        #expect(seen == before, "back under a page: made anew")
        try expectHolds(store, path, app("notes", 5), "back under a page")
        #expect(store.keptCount == 1)
        let inPlace = try readThroughEarlierDescriptor(path) { try store.save(app("notes", 6)) }
        #expect(inPlace == (try bytes(path)), "then in place again")
        try expectHolds(store, path, app("notes", 6), "in place again")
    }

    @Test func atMostTheKeptCapacityOfAppsKeepTheirFileOpenAndRemoveClosesIt() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let count = StateStore.keptCapacity + 8
        for round in 1...3 {
            for i in 0..<count { try store.save(app("app\(i)", round)) }
        }
        #expect(store.keptCount == StateStore.keptCapacity)
        for i in 0..<count {
            try expectHolds(store, directory + "/app\(i).json", app("app\(i)", 3), "app\(i)")
        }
        // The state directory's files among this process's descriptors: exactly the kept ones.
        let open = openDescriptorTargets().map(\.target).filter { $0.hasPrefix(directory + "/") }
        #expect(open.count == StateStore.keptCapacity, "\(open.sorted())")

        // The same bytes again write nothing, for a file kept open (its bytes remembered) as for one closed since
        // (their digest).
        for i in 0..<count { #expect(try store.save(app("app\(i)", 3)) == false, "app\(i)") }

        store.remove("app0")
        store.remove("app\(count - 1)")
        for name in ["app0", "app\(count - 1)"] {
            #expect(!FileManager.default.fileExists(atPath: directory + "/\(name).json"))
            #expect(!FileManager.default.fileExists(atPath: directory + "/\(name).json.tmp"))
        }
        #expect(store.keptCount == StateStore.keptCapacity - 1, "the removed app's file was open; the other was closed earlier")
    }

    /// Someone removes NAME.json behind the store: the save in place notices (the file it wrote is unlinked) and
    /// makes the file again, and the next save is in place in the new one.
    @Test func aFileRemovedBehindTheStoreIsMadeAgain() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/notes.json"
        try store.save(app("notes", 1))
        try store.save(app("notes", 2))
        #expect(unlink(path) == 0)

        try store.save(app("notes", 3))
        try expectHolds(store, path, app("notes", 3), "made again")
        let seen = try readThroughEarlierDescriptor(path) { try store.save(app("notes", 4)) }
        try expectHolds(store, path, app("notes", 4), "in place in the new file")
        #expect(seen == (try bytes(path)))
        #expect(store.keptCount == 1)
    }

    @Test func loadAllRemovesTemporaryFiles() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for version in 1...3 { try store.save(app("notes", version)) }
        // What a daemon killed between its create and its rename leaves.
        #expect(FileManager.default.createFile(atPath: directory + "/notes.json.tmp", contents: Data("{\"na".utf8)))

        let (loaded, problems) = StateStore(runtimeDirectory: (directory as NSString).deletingLastPathComponent).loadAll()

        #expect(problems == [])
        #expect(loaded.map(\.name) == ["notes"])
        #expect(!FileManager.default.fileExists(atPath: directory + "/notes.json.tmp"))
    }
}
