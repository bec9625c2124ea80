import Foundation
import Glibc
@testable import LifecycleDaemon
@testable import LifecycleModel
import Testing

/// StateStore's files: each save writes a new NAME.json.tmp and renames it over NAME.json, in a state directory the
/// store made and checked. Real files in a temporary directory.
@Suite("State files: a temporary file renamed over")
struct StateStoreTests {
    /// A runtime directory of this test's own, and a store on it, prepared (its state directory made and checked).
    private func makeStore() throws -> (StateStore, runtime: String, state: String) {
        let runtime = NSTemporaryDirectory() + "state-store-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        let store = StateStore(runtimeDirectory: runtime)
        try store.prepare()
        return (store, runtime, runtime + "/state")
    }

    /// The same app with a different amount of data each time: `extra` bytes of token (40 or 2 by the version's
    /// parity unless given).
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

    private func names(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    private func lstatus(_ path: String) -> stat? {
        var info = stat()
        return lstat(path, &info) == 0 ? info : nil
    }

    @Test func eachSaveReplacesTheFileWithExactlyTheNewBytes() throws {
        let (store, runtime, state) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let path = state + "/notes.json"
        var previous: [UInt8]?
        for version in 1...6 {
            let app = app("notes", version, extra: (version % 3) * 1500)  // longer and shorter than the previous save
            // A descriptor opened on the file before the save keeps the old bytes: the save wrote another file.
            let before = open(path, O_RDONLY)
            defer { if before >= 0 { close(before) } }
            try store.save(app)
            #expect(try bytes(path) == store.encode(app), "save \(version): the file holds exactly the encoding")
            #expect(try names(state) == ["notes.json"], "save \(version): the file alone, no temporary left beside it")
            #expect(lstatus(path).map { $0.st_mode & 0o7777 } == 0o600)
            if before >= 0, let previous {
                let held = try FileHandle(fileDescriptor: before, closeOnDealloc: false).readToEnd().map { [UInt8]($0) }
                #expect(held == previous, "save \(version): the earlier file was replaced, not rewritten")
            }
            previous = store.encode(app)
        }
        #expect(store.loadAll().apps.map(\.snapshot.launches) == [6])
    }

    /// Nothing is taken for written: a file removed or altered behind the daemon's back is whole again at the next
    /// save, even of the same app.
    @Test func aSaveOfTheSameAppWritesTheFileAgain() throws {
        let (store, runtime, state) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        try store.save(app("notes", 1))
        #expect(unlink(state + "/notes.json") == 0)
        try store.save(app("notes", 1))
        #expect(try bytes(state + "/notes.json") == store.encode(app("notes", 1)))
        try Data("{\"half".utf8).write(to: URL(fileURLWithPath: state + "/notes.json"))
        try store.save(app("notes", 1))
        #expect(try bytes(state + "/notes.json") == store.encode(app("notes", 1)))
    }

    /// A temporary file left behind (a save cut short) is replaced; a symlink or a FIFO planted under its name is not
    /// written through: the name is unlinked (the link, not its target) and the file made afresh.
    @Test func aStaleTemporaryIsReplacedAndASymlinkedOneIsNotFollowed() throws {
        let (store, runtime, state) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let target = runtime + "/elsewhere"
        try Data("untouched".utf8).write(to: URL(fileURLWithPath: target))
        #expect(symlink(target, state + "/notes.json.tmp") == 0)
        try Data(String(repeating: "stale", count: 1000).utf8).write(to: URL(fileURLWithPath: state + "/other.json.tmp"))
        #expect(mkfifo(state + "/piped.json.tmp", 0o600) == 0)

        try store.save(app("notes", 1))
        try store.save(app("other", 1))
        try store.save(app("piped", 1))  // a FIFO under the temporary name neither blocks nor is written
        #expect(try bytes(state + "/piped.json") == store.encode(app("piped", 1)))

        #expect(String(decoding: try bytes(target), as: UTF8.self) == "untouched")
        #expect(try bytes(state + "/notes.json") == store.encode(app("notes", 1)))
        #expect(try bytes(state + "/other.json") == store.encode(app("other", 1)))
        #expect(try names(state) == ["notes.json", "other.json", "piped.json"])
    }

    /// A symlink at NAME.json is never followed: a save replaces the link itself, and the loader reports it
    /// instead of reading what it points to.
    @Test func aSymlinkedStateFileIsNeitherWrittenThroughNorRead() throws {
        let (store, runtime, state) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let target = runtime + "/elsewhere.json"
        try Data(store.encode(app("notes", 3))).write(to: URL(fileURLWithPath: target))
        #expect(symlink(target, state + "/notes.json") == 0)

        let (loaded, problems) = store.loadAll()
        #expect(loaded.isEmpty)
        #expect(problems.count == 1 && problems.first?.contains("notes.json") == true, "\(problems)")

        try store.save(app("notes", 1))
        #expect(lstatus(state + "/notes.json").map { $0.st_mode & S_IFMT } == S_IFREG, "the link was replaced")
        #expect(try bytes(target) == store.encode(app("notes", 3)), "what the link pointed to is untouched")
    }

    @Test func aSymlinkedStateDirectoryIsRefused() throws {
        let runtime = NSTemporaryDirectory() + "state-store-link-\(getpid())-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        try FileManager.default.createDirectory(atPath: runtime + "/real", withIntermediateDirectories: true)
        #expect(chmod(runtime + "/real", 0o700) == 0)
        #expect(symlink(runtime + "/real", runtime + "/state") == 0)
        let store = StateStore(runtimeDirectory: runtime)

        #expect(throws: SystemError.self) { try store.prepare() }
        #expect(throws: SystemError.self) { try store.save(app("notes", 1)) }
        #expect(try names(runtime + "/real") == [], "nothing written through the link")
        #expect(store.loadAll().apps.isEmpty)
    }

    @Test func aStateDirectoryWithAnotherModeIsRefused() throws {
        let runtime = NSTemporaryDirectory() + "state-store-mode-\(getpid())-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        try FileManager.default.createDirectory(atPath: runtime + "/state", withIntermediateDirectories: true)
        #expect(chmod(runtime + "/state", 0o755) == 0)
        let store = StateStore(runtimeDirectory: runtime)

        let error = try #require(throws: SystemError.self) { try store.prepare() }
        #expect(error.errno == EPERM)
        #expect(error.description.contains("mode 755"), "\(error)")
        #expect(throws: SystemError.self) { try store.save(app("notes", 1)) }
        #expect(try names(runtime + "/state") == [])
    }

    /// Only root can give the directory to another owner; without it the owner check cannot be arranged.
    @Test(.enabled(if: geteuid() == 0, "needs root to give the state directory to another user"))
    func aStateDirectoryOfAnotherOwnerIsRefused() throws {
        let runtime = NSTemporaryDirectory() + "state-store-owner-\(getpid())-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        try FileManager.default.createDirectory(atPath: runtime + "/state", withIntermediateDirectories: true)
        #expect(chmod(runtime + "/state", 0o700) == 0)
        #expect(chown(runtime + "/state", 65534, 65534) == 0)
        let store = StateStore(runtimeDirectory: runtime)

        let error = try #require(throws: SystemError.self) { try store.prepare() }
        #expect(error.description.contains("owner uid 65534"), "\(error)")
        #expect(throws: SystemError.self) { try store.save(app("notes", 1)) }
    }

    @Test func removeDeletesTheFileAndTheNextSaveWritesItAgain() throws {
        let (store, runtime, state) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        try store.save(app("notes", 1))
        store.remove("notes")
        #expect(try names(state) == [])
        try store.save(app("notes", 1))
        #expect(try names(state) == ["notes.json"])
    }

    @Test func loadAllRemovesTemporaryFiles() throws {
        let (store, runtime, state) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        try store.save(app("notes", 1))
        try Data("{\"half".utf8).write(to: URL(fileURLWithPath: state + "/notes.json.tmp"))
        let (loaded, problems) = store.loadAll()
        #expect(problems == [] && loaded.map(\.name) == ["notes"])
        #expect(try names(state) == ["notes.json"])
    }

    /// A file padded with spaces before its newline (JSON allows whitespace after the value) loads.
    @Test func aFileWithTrailingSpacesLoads() throws {
        let (store, runtime, state) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        var padded = store.encode(app("notes", 2))
        padded.insert(contentsOf: repeatElement(UInt8(ascii: " "), count: 100), at: padded.count - 1)
        try Data(padded).write(to: URL(fileURLWithPath: state + "/notes.json"))
        #expect(store.loadAll().apps.map(\.snapshot.launches) == [2])
    }
}
