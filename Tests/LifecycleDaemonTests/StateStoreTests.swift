import CSupport
import Foundation
import Glibc
@testable import LifecycleDaemon
@testable import LifecycleModel
import Testing

/// StateStore's files: each save writes NAME.json.tmp and swaps it with NAME.json (or renames a new one over it), in
/// a state directory the store made and checked. Real files in a temporary directory (tmpfs or the disk), and one
/// through a FUSE file system that cannot exchange names.
@Suite("State files: written aside, then swapped or renamed in")
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

    /// The file's bytes without the spaces a shorter save is padded with before its newline.
    private func unpadded(_ path: String) throws -> [UInt8] {
        var bytes = try bytes(path)
        guard bytes.last == UInt8(ascii: "\n") else { return bytes }
        bytes.removeLast()
        while bytes.last == UInt8(ascii: " ") { bytes.removeLast() }
        return bytes + [UInt8(ascii: "\n")]
    }

    private func inode(_ path: String) -> ino_t? { lstatus(path)?.st_ino }

    @Test func eachSaveLeavesExactlyTheNewBytesUnderTheName() throws {
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
            #expect(try unpadded(path) == store.encode(app), "save \(version): the file holds the encoding, padded at most")
            #expect(try names(state) == (version == 1 ? ["notes.json"] : ["notes.json", "notes.json.tmp"]),
                    "save \(version): the file, and from the second save the previous one beside it")
            #expect(lstatus(path).map { $0.st_mode & 0o7777 } == 0o600)
            if before >= 0, let previous {
                let held = try FileHandle(fileDescriptor: before, closeOnDealloc: false).readToEnd().map { [UInt8]($0) }
                #expect(held.map { Array($0.prefix(previous.count - 1)) } == Array(previous.dropLast()),
                        "save \(version): the earlier file was swapped out, not rewritten")
            }
            previous = store.encode(app)
        }
        #expect(store.loadAll().apps.map(\.snapshot.launches) == [6])
    }

    /// From the third save on, a save makes and frees no file: what NAME.json.tmp held is written and swapped in,
    /// and the previous save goes to NAME.json.tmp.
    @Test func laterSavesSwapTheTwoFiles() throws {
        let (store, runtime, state) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let path = state + "/notes.json", spare = state + "/notes.json.tmp"
        try store.save(app("notes", 1))
        try store.save(app("notes", 2))
        for version in 3...8 {
            let (was, spareWas) = (inode(path), inode(spare))
            try store.save(app("notes", version))
            #expect(store.exchanges)
            #expect(inode(path) == spareWas && inode(spare) == was, "save \(version): the two files traded names")
            #expect(try unpadded(path) == store.encode(app("notes", version)))
            #expect(try unpadded(spare) == store.encode(app("notes", version - 1)), "the previous save, whole, beside it")
        }
    }

    /// Files changed behind the daemon's back never end up under NAME.json: whatever was removed, replaced, linked
    /// or written, each next save leaves exactly its own bytes there.
    @Test func filesChangedBehindTheStoreAreNotSwappedIn() throws {
        let (store, runtime, state) = try makeStore()
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        let path = state + "/notes.json", spare = state + "/notes.json.tmp"
        let stranger = Array("{\"name\":\"notes\",\"stale\":true}\n".utf8)
        let tamperings: [(String, () throws -> Void)] = [
            ("NAME.json removed", { #expect(unlink(path) == 0) }),
            ("NAME.json.tmp removed", { #expect(unlink(spare) == 0) }),
            ("NAME.json replaced by another file", {
                try Data(stranger).write(to: URL(fileURLWithPath: runtime + "/stranger"))
                #expect(rename(runtime + "/stranger", path) == 0)
            }),
            ("NAME.json.tmp replaced by another file", {
                try Data(stranger).write(to: URL(fileURLWithPath: runtime + "/stranger"))
                #expect(rename(runtime + "/stranger", spare) == 0)
            }),
            ("NAME.json.tmp given a second name", { #expect(link(spare, runtime + "/second") == 0) }),
            ("NAME.json written in place", { try Data(stranger).write(to: URL(fileURLWithPath: path)) }),
            ("the files loaded, which removes NAME.json.tmp", { _ = store.loadAll() }),
        ]
        var version = 0
        for (what, tamper) in tamperings {
            for _ in 1...3 {
                version += 1
                try store.save(app("notes", version))
            }
            try tamper()
            for _ in 1...3 {
                version += 1
                try store.save(app("notes", version))
                #expect(try unpadded(path) == store.encode(app("notes", version)), "\(what): save \(version)")
                #expect(store.loadAll().apps.map(\.snapshot.launches) == [version], "\(what): save \(version) loads")
            }
        }
    }

    /// Two descriptors stay open per recently saved app, for at most `keptLimit` apps; the others save as well.
    @Test func onlyTheMostRecentlySavedAppsKeepTheirFilesOpen() throws {
        let runtime = NSTemporaryDirectory() + "state-store-kept-\(getpid())-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: runtime) }
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        let store = StateStore(runtimeDirectory: runtime, keptLimit: 3)
        try store.prepare()
        for version in 1...4 {
            for name in ["a", "b", "c", "d", "e"] {
                try store.save(app(name, version))
                #expect(store.keptCount <= 3)
            }
        }
        #expect(store.loadAll().apps.map(\.name) == ["a", "b", "c", "d", "e"])
        #expect(store.loadAll().apps.allSatisfy { $0.snapshot.launches == 4 })
    }

    /// A file system that cannot exchange two names (bindfs on FUSE 2 answers EINVAL): the store says so once and
    /// renames a new file over NAME.json at every save, keeping nothing open.
    @Test(.enabled(if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/bindfs")
                       && access("/dev/fuse", R_OK | W_OK) == 0,
                   "needs root, /dev/fuse and bindfs (make test-deps installs it) to mount a FUSE file system"))
    func aFileSystemWithoutExchangeGetsARenameAtEverySave() throws {
        let base = NSTemporaryDirectory() + "state-store-fuse-\(getpid())-\(UUID().uuidString.prefix(8))"
        let source = base + "/source", runtime = base + "/mounted"
        try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: true)
        // posix_spawn and waitpid, not Foundation's Process: bindfs forks into the background, and its first process
        // must be waited for even where another test of this process reaps children.
        func spawnAndWait(_ arguments: [String]) {
            let argv = arguments.map { strdup($0) } + [nil]
            defer { for argument in argv { free(argument) } }
            var pid: pid_t = 0
            guard posix_spawn(&pid, arguments[0], nil, nil, argv, environ) == 0 else { return }
            waitpid(pid, nil, 0)
        }
        func isFUSE(_ path: String) -> Bool {
            var magic: UInt64 = 0
            return cs_statfs_magic(path, &magic) == 0 && magic == 0x6573_5546  // FUSE_SUPER_MAGIC
        }
        spawnAndWait(["/usr/bin/bindfs", source, runtime])
        try #require(isFUSE(runtime), "bindfs mounted \(runtime)")
        defer {
            spawnAndWait(["/bin/fusermount", "-u", "-z", runtime])  // lazily: the store may still hold its directory
            try? FileManager.default.removeItem(atPath: base)
        }
        let store = StateStore(runtimeDirectory: runtime)
        try store.prepare()
        let path = runtime + "/state/notes.json"
        for version in 1...5 {
            try store.save(app("notes", version, extra: (version % 3) * 700))
            #expect(try bytes(path) == store.encode(app("notes", version, extra: (version % 3) * 700)), "save \(version)")
            #expect(try names(runtime + "/state") == ["notes.json"], "save \(version): no temporary left beside it")
        }
        #expect(!store.exchanges, "the exchange was tried and refused")
        #expect(store.keptCount == 0)
        #expect(store.loadAll().apps.map(\.snapshot.launches) == [5])
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
        try store.save(app("notes", 2))
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
