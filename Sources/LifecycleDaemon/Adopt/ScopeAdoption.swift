import CSupport
import Glibc
import LifecycleModel

/// `[Adopt] Scopes=yes`: the units desktop launchers make under the session's `app.slice` become apps. The slice is
/// watched with inotify (a unit appears or goes), and each unit's `cgroup.events` too (its first process arrives,
/// its last one leaves): nothing is polled. A unit becomes the app named by its AppID, all of its processes
/// together, until its last process exits.
final class ScopeAdoption {
    private unowned let adoption: Adoption
    private let watcher: DirectoryWatcher
    private(set) var slice: AppSlice?
    private var sliceWatch: Int?
    /// Each unit seen in the slice, watched for its processes: its `cgroup.events` subscription.
    private var unitWatches: [String: Int] = [:]
    /// Adopted units, with their app's name.
    private(set) var adopted: [String: String] = [:]

    init(adoption: Adoption, watcher: DirectoryWatcher) {
        self.adoption = adoption
        self.watcher = watcher
    }

    var running: Bool { sliceWatch != nil }

    /// Start watching the slice `config` names (or found from the daemon's own cgroup, or `User=`), and adopt
    /// every unit already in it. Logs why when no slice is found.
    func start(_ config: AdoptConfig) {
        guard sliceWatch == nil else { return }
        let mountinfo = (try? readKernelFile("/proc/self/mountinfo")) ?? ""
        let own = (try? readKernelFile("/proc/self/cgroup")) ?? ""
        do {
            let found = try AppSlice.find(config, mountinfo: mountinfo, ownCgroup: own, uid: ConfigLoader.systemUserID)
            sliceWatch = try watcher.subscribe(directory: found.path, names: nil,
                                               mask: CS_IN_CREATE | CS_IN_DELETE | CS_IN_MOVED_TO | CS_IN_MOVED_FROM) {
                [unowned self] events in self.sliceChanged(events)
            }
            slice = found
            Log.info("adopt: watching \(found.path) (found by \(found.foundBy)) for the apps desktop launchers start")
        } catch let failure as AdoptFailure {
            return Log.warning("adopt: Scopes=yes, but \(failure); no scope is adopted")
        } catch {
            return Log.warning("adopt: Failed to watch the app slice: \(error); no scope is adopted")
        }
        scan()
    }

    /// Stop watching; the adopted apps are let go by `Adoption`.
    func stop() {
        if let sliceWatch { watcher.unsubscribe(sliceWatch) }
        sliceWatch = nil
        for watch in unitWatches.values { watcher.unsubscribe(watch) }
        unitWatches = [:]
        slice = nil
    }

    /// Every unit in the slice, as at a start or after lost events.
    private func scan() {
        guard let slice, let directory = opendir(slice.path) else { return }
        var units: [String] = []
        while let entry = readdir(directory) {
            let name = directoryEntryName(entry)
            if name.hasPrefix("app-") { units.append(name) }
        }
        closedir(directory)
        for unit in units.sorted() { appeared(unit) }
    }

    private func sliceChanged(_ events: [DirectoryEvent]) {
        for event in events {
            if event.mask & CS_IN_Q_OVERFLOW != 0 { scan() }
            guard let unit = event.name, unit.hasPrefix("app-") else { continue }
            if event.mask & (CS_IN_CREATE | CS_IN_MOVED_TO) != 0 {
                appeared(unit)
            } else if event.mask & (CS_IN_DELETE | CS_IN_MOVED_FROM) != 0 {
                vanished(unit)
            }
        }
    }

    /// A unit is in the slice: watched for its processes, and adopted once it has some.
    private func appeared(_ unit: String) {
        guard let slice, LauncherUnit(unit: unit) != nil else { return }
        let path = slice.path + "/" + unit
        if unitWatches[unit] == nil {
            do {
                unitWatches[unit] = try watcher.subscribe(directory: path, names: ["cgroup.events"], mask: CS_IN_MODIFY) {
                    [unowned self] _ in self.eventsChanged(unit)
                }
            } catch {
                return Log.warning("adopt: Failed to watch \(path): \(error); it is not adopted")
            }
        }
        eventsChanged(unit)
    }

    private func vanished(_ unit: String) {
        if let watch = unitWatches.removeValue(forKey: unit) { watcher.unsubscribe(watch) }
        if let name = adopted.removeValue(forKey: unit) { adoption.ended(name) }
    }

    /// The unit's `cgroup.events` changed: its first process came (adopt it) or its last one left (forget it).
    private func eventsChanged(_ unit: String) {
        guard let slice else { return }
        let path = slice.path + "/" + unit
        let events = (try? readKernelFile(path + "/cgroup.events")) ?? ""
        let populated = events.split(separator: "\n").contains("populated 1")
        if let name = adopted[unit] {
            guard !populated else { return adoption.membersChanged(name) }
            adopted[unit] = nil
            adoption.ended(name)
        } else if populated, let launcher = LauncherUnit(unit: unit) {
            if let name = adoption.adoptScope(launcher, path: path) { adopted[unit] = name }
        }
    }

    /// Lets go of `unit` (the daemon stops adopting it); its watch stays, so that it is adopted again if asked.
    func forget(_ unit: String) { adopted[unit] = nil }
}
