import Glibc
import LifecycleModel
import LifecycleProtocol

extension Daemon: DaemonHost {
    var now: MonotonicTime { loop.now }
    var stopping: Bool { shutdown.stopping }
    var appNames: [String] { registry.names }
    func record(_ name: String) -> AppRecord? { inPlace { $0.app(name) } }
    func withRecord<Result>(_ name: String, _ body: (borrowing AppRecord) -> Result) -> Result? { inPlace { $0.withApp(name, body) } }
    var records: [AppRecord] { model.records }
    func hasOpenTask(app: String, id: Int) -> Bool { inPlace { $0.hasOpenTask(app: app, id: id) } }
    func snapshot(of name: String) -> AppSnapshot? { inPlace { $0.snapshot(of: name) } }

    /// `body` on the model where it is: a call that does not mutate the property of a class copies the whole
    /// `Supervisor` out first (the property could change during the call), while an inout access lends it. `body`
    /// only reads, and must not reach the daemon again: the model is held for it (the exclusivity check traps).
    func inPlace<Result>(_ body: (inout Supervisor) -> Result) -> Result { body(&model) }

    @discardableResult
    func handle(_ input: Input, at: MonotonicTime?) -> Outcome {
        if case .event(let event) = input, busy {
            events.append(event)
            return Outcome()
        }
        let at = max(min(at ?? loop.now, loop.now), model.now)
        let wasBusy = busy
        busy = true
        var outcome = model.handle(input, now: at)
        if case .request(_, let name, _) = input, let spawned = spawnFirst(name, of: &outcome) { outcome = spawned }
        perform(outcome.effects, since: at)
        busy = wasBusy
        drain()
        return outcome
    }

    /// A request that launches its app takes effect only once the app's process runs (`LifecycleRules.launchWaitsForSpawn`):
    /// the spawn comes first, taken out of the outcome; when it fails, the model undoes the request
    /// (`Input.launchFailed`) and the failure is the request's refusal, which this returns.
    private func spawnFirst(_ name: String, of outcome: inout Outcome) -> Outcome? {
        guard model.launchIsPending(name), let app = runtime(name),
              let index = outcome.effects.firstIndex(where: { if case .spawn(name, _) = $0 { true } else { false } }),
              case .spawn(_, let options) = outcome.effects.remove(at: index) else { return nil }
        guard let failure = processes.spawn(app, options) else { return nil }
        log(name, .spawnFailed(failure))
        return model.handle(.launchFailed(app: name, reason: failure), now: model.now)
    }

    func openConnection(_ app: String, fd: FileDescriptor) throws(SystemError) -> Connection { try sessions.open(app, fd: fd) }

    func terminateAll() {
        // Adopted apps are the desktop's: let go, thawed, rather than terminated.
        adoption.stop()
        handle(.shutdown)
    }

    func backgroundModes(of name: String) -> Set<String> { inPlace { $0.backgroundModes(of: name) } }

    func throughDisplay(_ request: Request, for name: String) -> Bool { display.carryOut(request, for: name) }

    func markDirty(_ name: String) {
        if let app = runtime(name) { persistence.markDirty(app) }
    }

    var adoptConfig: AdoptConfig { configuration.config.daemon.adopt }

    func adoptWindows(_ windows: [DisplayWindow], gone: [Int64], ownership: WindowOwnership) -> Bool {
        adoption.adoptWindows(windows, gone: gone, ownership: ownership)
    }
}
