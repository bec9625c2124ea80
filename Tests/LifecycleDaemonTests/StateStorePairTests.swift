import Foundation
import Glibc
@testable import LifecycleDaemon
@testable import LifecycleModel
import Testing

/// StateStore's second and later saves of an app: the pair of open files (NAME.json and NAME.json.tmp), written
/// and swapped with renameat2(RENAME_EXCHANGE) instead of a file made and renamed each time. Real files in a
/// temporary directory (on this machine's /tmp).
@Suite("State files: saves through a pair of open files")
struct StateStorePairTests {
    private func makeStore() throws -> (StateStore, String) {
        let directory = NSTemporaryDirectory() + "state-store-pair-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let store = StateStore(runtimeDirectory: directory)
        try store.prepare()
        #expect(store.directoryOpenError == 0, "the state directory could not be opened: \(String(cString: strerror(store.directoryOpenError)))")
        return (store, directory + "/state")
    }

    /// The same app with a different amount of data each time: a longer file, then a shorter one (the pair's
    /// files are reused, so a shorter save must not keep the longer one's tail).
    private func app(_ name: String, _ version: Int) -> PersistedApp {
        let snapshot = AppSnapshot(
            state: .background, launches: version, deadlineMisses: version % 3 == 0 ? 123_456_789 : 0,
            terminatedInBackground: false, memoryTerminations: 0, observing: [], queue: NotificationQueue(),
            sessions: [], nextSceneNumber: 1, discardedUntold: [], nextMessageID: nil, tasks: nil,
            enteredBackgroundAtMicroseconds: nil)
        return PersistedApp(name: name, pid: 4242, startTime: 99, suspendedWith: nil,
                            token: String(repeating: "t", count: version % 2 == 0 ? 40 : 2), snapshot: snapshot)
    }

    private func bytes(_ path: String) throws -> [UInt8] { try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) }

    private func inode(_ path: String) -> ino_t {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_ino : 0
    }

    @Test func laterSavesSwapTwoFilesAndLeaveExactlyTheNewBytes() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var inodes: [ino_t] = []
        for version in 1...6 {
            let app = app("notes", version)
            #expect(try store.save(app))
            #expect(try bytes(directory + "/notes.json") == store.encode(app), "save \(version)")
            inodes.append(inode(directory + "/notes.json"))
        }
        #expect(store.pairedCount == 1)
        // From the second save on, no file is made: the name moves between the same two files.
        for k in 3..<inodes.count {
            #expect(inodes[k] == inodes[k - 2] && inodes[k] != inodes[k - 1], "inodes \(inodes)")
        }
        let (loaded, problems) = StateStore(runtimeDirectory: (directory as NSString).deletingLastPathComponent).loadAll()
        #expect(problems == [])
        #expect(loaded.map(\.snapshot.launches) == [6])
    }

    /// Saves of the same length skip the truncate of the file they reuse; each length in turn after another, so
    /// that a save shorter than the file it reuses, of the same length as the one before it, is among them.
    @Test func everySequenceOfLengthsLeavesExactlyTheLastBytes() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let versions = [2, 1, 1, 2, 2, 1, 3, 3, 1, 2, 6, 6, 6, 1, 4, 1]  // token 40 or 2 bytes, misses 9 digits or 1
        for (i, version) in versions.enumerated() {
            var app = app("notes", version)
            app.snapshot.launches = i  // every save differs, at the same length
            #expect(try store.save(app))
            #expect(try bytes(directory + "/notes.json") == store.encode(app), "save \(i), version \(version)")
        }
    }

    /// A reader that opened NAME.json before a save reads the file it opened, whole: the save wrote the other file.
    @Test func aReaderOfTheFileBeforeASaveReadsItWhole() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try store.save(app("notes", 1))
        try store.save(app("notes", 2))
        let before = store.encode(app("notes", 2))
        let reader = try FileHandle(forReadingFrom: URL(fileURLWithPath: directory + "/notes.json"))
        defer { try? reader.close() }

        try store.save(app("notes", 3))

        #expect([UInt8](reader.readDataToEndOfFile()) == before)
        #expect(try bytes(directory + "/notes.json") == store.encode(app("notes", 3)))
    }

    @Test func atMostThePairedCapacityOfAppsKeepTheirFilesOpenAndRemoveTakesBoth() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let count = StateStore.pairedCapacity + 8
        for round in 1...3 {
            for i in 0..<count { try store.save(app("app\(i)", round)) }
        }
        #expect(store.pairedCount == StateStore.pairedCapacity)
        for i in 0..<count {
            #expect(try bytes(directory + "/app\(i).json") == store.encode(app("app\(i)", 3)))
        }

        store.remove("app0")
        store.remove("app\(count - 1)")
        for name in ["app0", "app\(count - 1)"] {
            #expect(!FileManager.default.fileExists(atPath: directory + "/\(name).json"))
            #expect(!FileManager.default.fileExists(atPath: directory + "/\(name).json.tmp"))
        }
        #expect(store.pairedCount == StateStore.pairedCapacity - 1, "the removed app held a pair; the other was closed earlier")
    }

    /// Someone removes NAME.json.tmp behind the store (as `loadAll` of another store does): the swap fails, the save
    /// is made the first way, and the next one opens a new pair.
    @Test func aTemporaryFileRemovedBehindTheStoreIsNoLoss() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try store.save(app("notes", 1))
        try store.save(app("notes", 2))
        #expect(unlink(directory + "/notes.json.tmp") == 0)

        try store.save(app("notes", 3))
        #expect(try bytes(directory + "/notes.json") == store.encode(app("notes", 3)))
        try store.save(app("notes", 4))
        #expect(try bytes(directory + "/notes.json") == store.encode(app("notes", 4)))
        #expect(store.pairedCount == 1)
    }

    @Test func loadAllRemovesTemporaryFiles() throws {
        let (store, directory) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for version in 1...3 { try store.save(app("notes", version)) }
        #expect(FileManager.default.fileExists(atPath: directory + "/notes.json.tmp"))

        let (loaded, _) = StateStore(runtimeDirectory: (directory as NSString).deletingLastPathComponent).loadAll()

        #expect(loaded.map(\.name) == ["notes"])
        #expect(!FileManager.default.fileExists(atPath: directory + "/notes.json.tmp"))
    }
}
