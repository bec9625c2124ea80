import CSupport
import Glibc

/// One inotify event, as a subscriber sees it: a name in the watched directory and what happened to it
/// (`CS_IN_*` bits), or `name == nil` with `CS_IN_Q_OVERFLOW` (events were lost: re-read everything) or
/// `CS_IN_IGNORED` (the directory is gone or unmounted: the watch is over).
struct DirectoryEvent: Equatable {
    var name: String?
    var mask: UInt32
}

/// The one inotify instance behind every file the notification sources watch.
///
/// Files are watched through their parent directory, by name, so that a replace by rename is seen; one instance
/// serves everything, since a directory (`/etc` holds both `localtime` and `locale.conf`) has one watch per
/// instance and instances per user are few (docs/PLATFORM.md, "Notification sources").
///
/// Lives on the loop's thread. Handlers run after all events of one read are sorted, once per subscriber
/// with all of its events, so a burst (`IN_CREATE`, `IN_CLOSE_WRITE`, `IN_MOVED_TO`) is one call.
final class DirectoryWatcher {
    typealias Handler = ([DirectoryEvent]) -> Void

    private struct Subscriber {
        let wd: Int32
        let directory: String
        /// Nil: every name in the directory.
        let names: Set<String>?
        let mask: UInt32
        let handler: Handler
    }

    private let loop: EventLoop
    private var instance: FileDescriptor?
    private var fd: Int32 { instance?.rawValue ?? -1 }
    private var source: EventSource?
    private var subscribers: [Int: Subscriber] = [:]
    private var nextID = 1
    /// How many times the loop woke this watcher (for the no-polling test).
    private(set) var wakeups = 0
    /// Read at most this much of events per wakeup (fairness under a flood of events).
    static let readBudget = 256 * 1024

    init(loop: EventLoop) { self.loop = loop }

    deinit { stop() }

    /// Calls `handler` with the events of `mask` for `names` in `directory` (all names if nil). The inotify
    /// instance is opened at the first subscription, so a daemon with every source off holds none.
    /// - Returns: the subscription, for `unsubscribe`.
    func subscribe(directory: String, names: Set<String>?, mask: UInt32, _ handler: @escaping Handler) throws(SystemError) -> Int {
        if fd < 0 {
            let descriptor = FileDescriptor(
                owning: try retryingEINTR("create an inotify instance") { cs_inotify_open() }, path: "the inotify instance")
            source = try loop.watch(fd: descriptor.rawValue, events: IOEvents.readable) { [weak self] _ in self?.readEvents() }
            instance = descriptor
        }
        // IN_MASK_ADD: another subscriber may already watch this directory with other bits.
        let wd = try retryingEINTR("watch \(directory) with inotify") {
            cs_inotify_add(fd, directory, mask | CS_IN_ONLYDIR | CS_IN_MASK_ADD)
        }
        let id = nextID
        nextID += 1
        subscribers[id] = Subscriber(wd: wd, directory: directory, names: names, mask: mask, handler: handler)
        return id
    }

    /// Ends a subscription; the directory's watch goes when its last subscriber does. Masks are not narrowed
    /// for the remaining subscribers: their filters drop the extra events.
    func unsubscribe(_ id: Int) {
        guard let subscriber = subscribers.removeValue(forKey: id) else { return }
        if fd >= 0, !subscribers.values.contains(where: { $0.wd == subscriber.wd }) {
            _ = cs_inotify_remove(fd, subscriber.wd)
        }
    }

    /// Closes the instance; no handler is called again.
    func stop() {
        subscribers = [:]
        source?.cancel()  // before close: the fd number could be reused by the time sd-event removes it
        source = nil
        instance = nil
    }

    private func readEvents() {
        wakeups += 1
        var batches: [Int: [DirectoryEvent]] = [:]
        let headerSize = cs_inotify_event_header_size()
        // Room for many events; a single one is at most 16 + NAME_MAX + 1 bytes.
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        // Watched directories include apps' own (`PreferencesFile=`): events a user makes without pause are read
        // `readBudget` bytes per wakeup, then the loop serves the others; the level-triggered source fires again.
        var budget = Self.readBudget
        while fd >= 0 && budget > 0 {
            // EAGAIN: all read. Any other error cannot be acted upon here; the next event retries.
            guard let count = try? buffer.withUnsafeMutableBytes({ (raw) throws(SystemError) -> Int in
                try retryingEINTR("read inotify events") { read(fd, raw.baseAddress, raw.count) }
            }), count > 0 else { break }
            budget -= count
            buffer.withUnsafeBytes { raw in
                var offset = 0
                while offset + headerSize <= count {
                    let wd = raw.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                    let mask = raw.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(raw.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let nameBytes = raw[(offset + headerSize)..<min(count, offset + headerSize + length)]
                    let name = length == 0 ? nil : String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                    offset += headerSize + length
                    sort(DirectoryEvent(name: name, mask: mask), wd: wd, into: &batches)
                }
            }
        }
        for id in batches.keys.sorted() {
            // A handler may have unsubscribed another subscriber (or itself) meanwhile.
            guard let subscriber = subscribers[id], let events = batches[id] else { continue }
            subscriber.handler(events)
            if events.contains(where: { $0.mask & CS_IN_IGNORED != 0 }) { subscribers[id] = nil }
        }
    }

    private func sort(_ event: DirectoryEvent, wd: Int32, into batches: inout [Int: [DirectoryEvent]]) {
        if event.mask & CS_IN_Q_OVERFLOW != 0 {
            for id in subscribers.keys { batches[id, default: []].append(DirectoryEvent(name: nil, mask: CS_IN_Q_OVERFLOW)) }
            return
        }
        var freshFile: Bool?
        for (id, subscriber) in subscribers where subscriber.wd == wd {
            if event.mask & CS_IN_IGNORED != 0 {
                batches[id, default: []].append(DirectoryEvent(name: nil, mask: CS_IN_IGNORED))
                continue
            }
            guard event.mask & subscriber.mask != 0, let name = event.name,
                  subscriber.names?.contains(name) ?? true else { continue }
            // A regular file just created by open(O_CREAT) is still empty or half written: its writer's close
            // brings IN_CLOSE_WRITE, so wait for that. Symlinks (`ln -s` of a zone) and hard links have no
            // such close, so their IN_CREATE counts.
            if event.mask & CS_IN_CREATE != 0, subscriber.mask & CS_IN_CLOSE_WRITE != 0 {
                if freshFile == nil { freshFile = Self.isFreshRegularFile(subscriber.directory + "/" + name) }
                if freshFile == true { continue }
            }
            batches[id, default: []].append(event)
        }
    }

    private static func isFreshRegularFile(_ path: String) -> Bool {
        var status = stat()
        guard lstat(path, &status) == 0 else { return false }
        return status.st_mode & S_IFMT == S_IFREG && status.st_nlink == 1
    }
}
