import Foundation
import Glibc
import Testing
@testable import LifecycleDaemon

/// An app's preferences file is under its own user's control: whatever is put at the path (a symlink to
/// `/dev/zero`, a huge sparse file, a FIFO), one look at it reads at most `preferencesReadLimit` bytes.
@Suite(.serialized) struct SourcePreferencesFileTests {
    let root: String

    init() throws {
        root = NSTemporaryDirectory() + "lifecycled-prefs-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    func fingerprint(_ name: String) -> FileFingerprint {
        FileFingerprint(regularFileAt: root + "/" + name, limit: preferencesReadLimit)
    }

    /// The bytes this process has read through read(2) and its kind so far (`rchar` of /proc/self/io).
    static func bytesRead() -> Int {
        let text = (try? String(contentsOfFile: "/proc/self/io", encoding: .utf8)) ?? ""
        let line = text.split(separator: "\n").first { $0.hasPrefix("rchar:") }
        return line.flatMap { Int($0.dropFirst("rchar:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
    }

    @Test func aSymlinkToDevZeroOrAHugeFileCostsAtMostTheBound() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(symlink("/dev/zero", root + "/zero.json") == 0)
        let fd = open(root + "/huge.json", O_CREAT | O_WRONLY, 0o644)
        #expect(ftruncate(fd, 1 << 30) == 0)
        close(fd)

        let before = Self.bytesRead()
        for _ in 0..<10 {
            #expect(fingerprint("zero.json") == .unreadable(errno: ELOOP), "a symlink is not followed")
            guard case .sampled(let size, _, _) = fingerprint("huge.json") else {
                Issue.record("a file over the bound is sampled")
                return
            }
            #expect(size == 1 << 30)
        }
        let read = Self.bytesRead() - before
        // Twenty looks at the bound are 1.25 MiB; other suites running meanwhile read a little too.
        #expect(read < 16 << 20, "\(read) bytes read")
    }

    @Test func aFIFOOrADirectoryIsNotReadAndDoesNotBlock() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        #expect(mkfifo(root + "/fifo.json", 0o644) == 0)
        #expect(mkdir(root + "/dir.json", 0o755) == 0)
        #expect(fingerprint("fifo.json") == .notRegular(type: S_IFIFO))
        #expect(fingerprint("dir.json") == .notRegular(type: S_IFDIR))
        #expect(fingerprint("missing.json") == .missing)
    }

    @Test func aSmallFileIsComparedByContentAndALargeOneByItsSampleSizeAndTime() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        try "{\"font\":12}".write(toFile: root + "/notes.json", atomically: false, encoding: .utf8)
        let small = fingerprint("notes.json")
        #expect(small == .content(size: 11, hash: hashOf(Array("{\"font\":12}".utf8))))
        try "{\"font\":12}".write(toFile: root + "/notes.json", atomically: false, encoding: .utf8)
        #expect(fingerprint("notes.json") == small, "the same bytes are no change")

        let path = root + "/large.json"
        try Data(repeating: UInt8(ascii: "a"), count: preferencesReadLimit + 10).write(to: URL(fileURLWithPath: path))
        let large = fingerprint("large.json")
        guard case .sampled(let size, _, _) = large else {
            Issue.record("a file over the bound is sampled, got \(large)")
            return
        }
        #expect(size == preferencesReadLimit + 10)
        // A change within the bound is seen; one past it is seen through the modification time.
        var times = [timespec(tv_sec: 1_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        let dated = fingerprint("large.json")
        times = [timespec(tv_sec: 2_000_000, tv_nsec: 0), timespec(tv_sec: 2_000_000, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        #expect(fingerprint("large.json") != dated)
    }

    private func hashOf(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}

extension SourceTests {
    /// Inside `SourceTests`, whose suites never overlap: this one counts the inotify watcher's wakeups.
    @Suite struct PreferencesEventFlood {
        /// A user who makes events without pause in the directory of its preferences file: the watcher reads
        /// them on a budget per wakeup, so other sources are served between its reads, and the change is seen.
        @Test func aFloodOfEventsIsReadOverSeveralWakeups() throws {
            let harness = try SourceHarness(prepare: { directory in
                SourceFixture.rewrite(directory + "/notes.json", "{}")
            }) { _ in
                var config = SourceFixture.sourcesOff()
                config.userDefaults = true
                return config
            }
            let notes = harness.directory + "/notes.json"
            harness.sources.watchPreferences(app: "notes", path: notes)
            let name = String(repeating: "n", count: 200)
            let completed = try harness.run([
                .act {
                    // Every file is a create and a close-write of about 230 bytes each: well over the budget,
                    // all queued before the loop looks.
                    for index in 0..<1500 { SourceFixture.rewrite(harness.directory + "/\(name)\(index)", "") }
                    SourceFixture.rewrite(notes, "{\"font\":14}")
                },
                .waitFor { !$0.isEmpty },
            ])
            #expect(completed)
            #expect(harness.posts == [SourcePost(type: "userDefaultsDidChange", payload: ["path": .string(notes)], app: "notes")])
            #expect((harness.sources.wakeups["inotify"] ?? 0) >= 2, "\(harness.sources.wakeups)")
        }
    }
}
