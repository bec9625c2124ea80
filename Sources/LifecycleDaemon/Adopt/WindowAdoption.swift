import Glibc
import LifecycleModel

/// `[Adopt] Windows=yes`: the process behind a window that no configured app or adopted scope owns becomes an app,
/// named by the window's app_id (or WM_CLASS), with its descendants (never its ancestors), stopped by signals. Two
/// windows of one process are one app. Its exit, seen through a pidfd, ends the app.
final class WindowAdoption {
    private unowned let adoption: Adoption
    private let loop: EventLoop
    /// The exit watch of each adopted window process (on the app's pidfd, which `AppRuntime` owns), by app name.
    private var exits: [String: EventSource] = [:]
    /// Windows whose process was looked at and not adopted, with that pid: looked at again only when the window
    /// names another process or the rules change, not at every picture.
    private var passedOver: [Int64: pid_t] = [:]

    init(adoption: Adoption, loop: EventLoop) {
        self.adoption = adoption
        self.loop = loop
    }

    /// Adopts the processes of `windows` (those added or changed since the last report) that `ownership` gives to
    /// no app; `gone`: the windows closed since. Returns whether any was adopted.
    func adopt(_ windows: [DisplayWindow], gone: [Int64], ownership: WindowOwnership, appSlice: String?) -> Bool {
        for id in gone { passedOver[id] = nil }
        var seen: Set<pid_t> = []
        var any = false
        for window in windows {
            guard let pid = window.pid, pid > 0, passedOver[window.id] != pid, seen.insert(pid).inserted,
                  ownership.owner(of: window) == nil else { continue }
            if adoptProcess(pid, window: window, appSlice: appSlice) { any = true } else { passedOver[window.id] = pid }
        }
        return any
    }

    /// The rules changed (`Exclude=`, `User=`): every window no app owns is looked at again.
    func reconsider() { passedOver = [:] }

    private func adoptProcess(_ pid: pid_t, window: DisplayWindow, appSlice: String?) -> Bool {
        let what = "the process \(pid) of window \(window.id)" + (window.appID.map { " (\($0))" } ?? "")
        let cgroup = AppSlice.unifiedCgroup(procSelfCgroup: (try? readKernelFile("/proc/\(pid)/cgroup")) ?? "") ?? ""
        if AdoptRails.underSessionSlice(cgroup) {
            adoption.refuse("window process \(pid)", "\(what) is under session.slice")
            return false
        }
        // A process in a launcher's unit is the scope's to adopt (or to refuse): never adopted apart from it.
        if let appSlice, cgroup.hasPrefix(appSlice + "/") { return false }
        guard let startTime = ProcessTable.startTime(of: pid) else { return false }
        let appID = window.appID.flatMap { $0.isEmpty ? nil : $0 } ?? command(of: pid)
        guard let appID else { return false }
        let rails = adoption.rails()
        // The program's own name too: a compositor or panel that reports a window under another app id.
        if let why = rails.excluded(appID: appID, unit: command(of: pid)) {
            adoption.refuse("window process \(pid)", "\(what): \(why)")
            return false
        }
        let members = ProcessTree.descendants(of: pid)
        // A window is any client's to open: root's processes are never taken through one, unless `User=root` says
        // root's own session is the one adopted from.
        if !adoption.adoptsForRoot, let rootOwned = members.first(where: { ProcessIdentity.realUID(of: $0) == 0 }) {
            adoption.refuse("window process \(pid)", "\(what): process \(rootOwned) is root's, and windows adopt root's processes only with [Adopt] User=root")
            return false
        }
        if let why = rails.refuses(members, uidOf: { ProcessIdentity.realUID(of: $0) }) {
            adoption.refuse("window process \(pid)", "\(what): \(why)")
            return false
        }
        let pidfd: FileDescriptor
        do {
            pidfd = try openPidFD(pid)
        } catch {
            adoption.refuse("window process \(pid)", "\(what) cannot be watched (\(error))")
            return false
        }
        guard let name = adoption.adoptWindowProcess(appID: appID, pid: pid, pidfd: pidfd, startTime: startTime, what: what)
        else { return false }
        do {
            exits[name] = try loop.watch(fd: pidfd.rawValue, events: IOEvents.readable) { [unowned self] _ in self.exited(name) }
        } catch {
            Log.warning("\(name): Failed to watch process \(pid): \(error); it is let go")
            adoption.release(name, reason: "its exit cannot be watched")
        }
        return true
    }

    private func exited(_ name: String) {
        forget(name)
        adoption.ended(name)
    }

    /// The app is let go or ended: its exit is watched no more.
    func forget(_ name: String) {
        // Cancelled before the app's pidfd closes: its number could be reused by then.
        exits.removeValue(forKey: name)?.cancel()
    }

    /// The name of the program (/proc/PID/comm), for a window without an app id.
    private func command(of pid: pid_t) -> String? {
        guard let text = try? readKernelFile("/proc/\(pid)/comm") else { return nil }
        let name = text.split(separator: "\n").first.map(String.init) ?? ""
        return name.isEmpty ? nil : name
    }
}
