import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// The notification sources' tests, one nested suite per source (in the other `Source*Tests.swift` files).
/// Serialized: the clock test sets the wall clock, which wakes every cancel-on-set timer on the machine, and the
/// quiet-loop test counts wakeups; neither may overlap another source test.
@Suite(.serialized) struct SourceTests {}

/// One post, as `SystemSources` makes it.
struct SourcePost: Equatable, CustomStringConvertible {
    var type: String
    var payload: JSONValue
    var app: String?

    var description: String { "\(type) \(payload)\(app.map { " to \($0)" } ?? "")" }
}

/// A real `EventLoop` with a `SystemSources` on it, a temporary directory for the files it watches, and a
/// script to run on the loop: act, wait for posts, wait a while. Cleans up the directory and the sources.
/// The loop runs once: sd-event cannot run again after it exited.
final class SourceHarness {
    enum Step {
        /// Runs on the loop's thread, then the next step follows at once.
        case act(() -> Void)
        /// Waits until the posts so far satisfy the predicate (checked now and after every post).
        case waitFor(([SourcePost]) -> Bool)
        /// Waits this long, for what must not happen (a post after a change that changed nothing).
        case wait(Duration)
    }

    let loop: EventLoop
    let directory: String
    private(set) var sources: SystemSources!
    private(set) var posts: [SourcePost] = []
    private(set) var readings: [MemoryPressureReading] = []
    private var steps: [Step] = []
    private var next = 0
    private var finished = false
    private var pause: EventSource?

    /// `configure` gets the temporary directory and returns the sources' configuration. Files the sources must
    /// find at start are written in `prepare` first.
    init(prepare: (String) throws -> Void = { _ in }, configure: (String) -> SourcesConfig) throws {
        loop = try EventLoop()
        var template = Array("/tmp/lifecycled-sources-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SystemError(operation: "mkdtemp", errno: errno) }
        directory = String(cString: made)
        try prepare(directory)
        sources = SystemSources(
            loop: loop, config: configure(directory),
            post: { [weak self] type, payload, app in self?.received(SourcePost(type: type, payload: payload, app: app)) },
            memoryPressure: { [weak self] reading in self?.readings.append(reading) })
    }

    deinit {
        sources?.stop()
        SourceFixture.removeTree(directory)
    }

    /// Runs `steps` on the loop; returns true if all of them completed before `timeout`.
    @discardableResult
    func run(timeout: Duration = .seconds(5), _ steps: [Step]) throws -> Bool {
        self.steps = steps
        next = 0
        let deadline = try loop.timer { [unowned self] in loop.exit(code: 1) }
        deadline.arm(after: timeout)
        let start = try loop.deferred { [unowned self] in advance() }
        let code = loop.run()
        _ = (deadline, start)
        pause = nil
        self.steps = []  // the steps' closures often capture this harness: let it go
        return code == 0 && finished
    }

    private func received(_ post: SourcePost) {
        posts.append(post)
        advance()
    }

    private func advance() {
        while next < steps.count {
            switch steps[next] {
            case .act(let action):
                next += 1
                action()
            case .waitFor(let predicate):
                guard predicate(posts) else { return }
                next += 1
            case .wait(let duration):
                guard pause == nil else { return }
                do {
                    pause = try loop.timer { [unowned self] in
                        pause = nil
                        next += 1
                        advance()
                    }
                    pause?.arm(after: duration)
                } catch {
                    Issue.record("timer: \(error)")
                    loop.exit(code: 2)
                }
                return
            }
        }
        if !finished {
            finished = true
            loop.exit()
        }
    }
}

// MARK: - File helpers for the tests

/// Files and checks for the source tests (namespaced: other test files have helpers of the same names).
enum SourceFixture {
    /// Writes `text` in place: open with O_TRUNC, write, close (IN_MODIFY, then IN_CLOSE_WRITE).
    static func rewrite(_ path: String, _ text: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        precondition(fd >= 0, "open \(path): \(errno)")
        let bytes = Array(text.utf8)
        precondition(write(fd, bytes, bytes.count) == bytes.count)
        close(fd)
    }

    static func rewrite(_ path: String, bytes: [UInt8]) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        precondition(fd >= 0, "open \(path): \(errno)")
        precondition(write(fd, bytes, bytes.count) == bytes.count)
        close(fd)
    }

    /// Replaces `path` atomically, as editors and package managers do: a new file beside it, renamed over it
    /// (IN_CREATE and IN_CLOSE_WRITE of the temporary name, then IN_MOVED_TO of `path`).
    static func replaceByRename(_ path: String, _ text: String) {
        rewrite(path + ".new", text)
        precondition(rename(path + ".new", path) == 0)
    }

    static func replaceByRename(_ path: String, bytes: [UInt8]) {
        rewrite(path + ".new", bytes: bytes)
        precondition(rename(path + ".new", path) == 0)
    }

    static func makeDirectories(_ path: String) {
        var prefix = ""
        for part in path.split(separator: "/") {
            prefix += "/" + part
            mkdir(prefix, 0o755)
        }
    }

    /// `rm -rf`, for the temporary directories (no symlinks followed).
    static func removeTree(_ path: String) {
        if let names = try? ConfigLoader.listDirectory(path) {
            for name in names {
                let child = path + "/" + name
                var status = stat()
                if lstat(child, &status) == 0, status.st_mode & S_IFMT == S_IFDIR { removeTree(child) } else { unlink(child) }
            }
        }
        rmdir(path)
    }

    static func fileBytes(_ path: String) throws -> [UInt8] { try readWatchedFile(path) }

    /// Whether this process holds `capability` (a bit of CapEff in /proc/self/status).
    static func hasCapability(_ capability: Int) -> Bool {
        guard let status = try? readKernelFile("/proc/self/status"),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
              let mask = UInt64(line.dropFirst("CapEff:".count).trimmingPrefix(while: { $0 == "\t" || $0 == " " }), radix: 16)
        else { return false }
        return mask & (1 << UInt64(capability)) != 0
    }

    /// A configuration with every source off, for tests that turn on one.
    static func sourcesOff() -> SourcesConfig {
        var config = SourcesConfig()
        config.timeChange = false
        config.locale = false
        config.battery = false
        config.memoryPressure = false
        config.userDefaults = false
        return config
    }
}
