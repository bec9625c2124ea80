import Glibc

extension IOEvents {
    /// EPOLLPRI: urgent data; a PSI trigger reports with it.
    public static let priority: UInt32 = 0x002
}

/// One read of a PSI file (`/proc/pressure/memory`, a cgroup2 `memory.pressure`), taken when the trigger fired:
/// the share of the last 10 s in which some (resp. all non-idle) tasks were stalled waiting for memory, in
/// percent, and the total stall time of some task.
public struct MemoryPressureReading: Sendable, Equatable {
    public var someAvg10: Double
    public var fullAvg10: Double
    public var someTotalMicroseconds: UInt64

    public init(someAvg10: Double, fullAvg10: Double, someTotalMicroseconds: UInt64) {
        self.someAvg10 = someAvg10
        self.fullAvg10 = fullAvg10
        self.someTotalMicroseconds = someTotalMicroseconds
    }

    /// Parses the file's text:
    /// ```
    /// some avg10=0.00 avg60=0.00 avg300=0.00 total=0
    /// full avg10=0.00 avg60=0.00 avg300=0.00 total=0
    /// ```
    /// The `full` line is optional (absent from the CPU file before Linux 5.13); a missing `full` reads 0.
    /// - Returns: nil without a valid `some` line.
    public static func parse(_ text: String) -> MemoryPressureReading? {
        var some: (avg10: Double, total: UInt64)?
        var fullAvg10 = 0.0
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ")
            guard let kind = words.first else { continue }
            var fields: [Substring: Substring] = [:]
            for word in words.dropFirst() {
                guard let equals = word.firstIndex(of: "=") else { continue }
                fields[word[..<equals]] = word[word.index(after: equals)...]
            }
            guard let avg10 = fields["avg10"].flatMap({ Double($0) }) else { continue }
            switch kind {
            case "some":
                guard let total = fields["total"].flatMap({ UInt64($0) }) else { continue }
                some = (avg10, total)
            case "full":
                fullAvg10 = avg10
            default:
                continue
            }
        }
        guard let some else { return nil }
        return MemoryPressureReading(someAvg10: some.avg10, fullAvg10: fullAvg10, someTotalMicroseconds: some.total)
    }
}

/// Memory pressure from a PSI trigger written to the pressure file (`some 150000 1000000`: 150 ms of stall
/// within any 1 s window), after which the kernel wakes the fd at most once per window, so nothing reads in a
/// loop. Each wakeup is handed on as a reading; what it means (a warning, a termination) is the daemon's decision.
///
/// A descriptor whose trigger the kernel refused is never watched: it would wake the loop at once, forever
/// (docs/PLATFORM.md, "Notification sources").
final class MemoryPressureSource {
    static let type = "didReceiveMemoryWarning"

    private let path: String
    private let trigger: String
    private let callback: (MemoryPressureReading) -> Void
    private var file: FileDescriptor?
    private var source: EventSource?
    private var problem: String?
    /// How many times the loop woke the trigger (for tests).
    private(set) var wakeups = 0

    init(loop: EventLoop, path: String, trigger: String, callback: @escaping (MemoryPressureReading) -> Void) {
        self.path = path
        self.trigger = trigger
        self.callback = callback
        do {
            let file = try FileDescriptor.open(path, O_RDWR | O_NONBLOCK)
            self.file = file
            // The kernel takes the trigger with or without its NUL; the documentation's example sends it.
            let bytes = Array(trigger.utf8) + [0]
            try retryingEINTR("write the trigger '\(trigger)' to \(path)") { write(file.rawValue, bytes, bytes.count) }
            source = try loop.watch(fd: file.rawValue, events: IOEvents.priority) { [weak self] revents in self?.fired(revents) }
        } catch {
            problem = error.description + Self.hint(error)
            close()
        }
    }

    deinit { close() }

    /// Whether the trigger is registered and its fd watched.
    var isOn: Bool { source != nil }

    var descriptions: [String] {
        if let problem { return ["\(Self.type): off (\(problem))"] }
        return ["\(Self.type): PSI trigger '\(trigger)' on \(path)"]
    }

    func stop() { close() }

    private func close() {
        source?.cancel()
        source = nil
        file = nil
    }

    private func fired(_ revents: UInt32) {
        wakeups += 1
        if revents & IOEvents.error != 0 {
            // A cgroup's pressure file whose cgroup was removed, or a trigger the kernel dropped: it would report
            // this on every wait from now on.
            problem = "the kernel reported an error on the trigger (was its cgroup removed?)"
            close()
            return
        }
        guard revents & IOEvents.priority != 0 else { return }
        // The stall numbers at this moment, from a separate read: the trigger fd only says "threshold crossed".
        guard let text = try? readKernelFile(path), let reading = MemoryPressureReading.parse(text) else { return }
        callback(reading)
    }

    private static func hint(_ error: SystemError) -> String {
        switch error.errno {
        case EINVAL: " (a window that is not a multiple of 2 s needs CAP_SYS_RESOURCE; the window must be 0.5 s to 10 s)"
        case ENOENT: " (no PSI: a kernel without CONFIG_PSI, or booted with psi=0)"
        case EOPNOTSUPP: " (PSI is disabled: boot with psi=1)"
        default: ""
        }
    }
}
