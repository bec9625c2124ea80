import Glibc
import LifecycleModel
import LifecycleProtocol

extension Daemon: DaemonHost {
    var now: MonotonicTime { loop.now }
    var stopping: Bool { shutdown.stopping }
    var appNames: [String] { apps.keys.sorted() }
    func record(_ name: String) -> AppRecord? { model.app(name) }
    func withRecord<Result>(_ name: String, _ body: (borrowing AppRecord) -> Result) -> Result? { model.withApp(name, body) }
    var records: [AppRecord] { model.records }
    func hasOpenTask(app: String, id: Int) -> Bool { model.hasOpenTask(app: app, id: id) }
    func snapshot(of name: String) -> AppSnapshot? { model.snapshot(of: name) }

    @discardableResult
    func handle(_ input: Input, at: MonotonicTime?) -> Outcome {
        if case .event(let event) = input, busy {
            events.append(event)
            return Outcome()
        }
        let at = max(min(at ?? loop.now, loop.now), model.now)
        let wasBusy = busy
        busy = true
        let outcome: Outcome
        switch input {
        case .request(let request, let name, _) where model.projectedState(of: name)?.isRunning == false:
            outcome = launching(input, request: request, for: name, at: at)
        default:
            outcome = model.handle(input, now: at)
        }
        perform(outcome.effects, since: at)
        busy = wasBusy
        drain()
        return outcome
    }

    /// A request that launches its app takes effect only once the app's process runs: the spawn comes first, and
    /// when it fails the model is as it was before the request (no other app left the foreground, nobody was told
    /// anything) and the failure is the request's refusal.
    ///
    /// Only a request that finds its app not running can launch it (the rules' table), so only then is the model
    /// kept to go back to: a kept copy shares the apps' records, and the request's first write would copy all of
    /// them.
    private func launching(_ input: Input, request: Request, for name: String, at: MonotonicTime) -> Outcome {
        let before = model
        var outcome = model.handle(input, now: at)
        guard let index = outcome.effects.firstIndex(where: { if case .spawn = $0 { true } else { false } }),
              case .spawn(let launched, let options) = outcome.effects[index], let app = runtime(launched) else { return outcome }
        outcome.effects.remove(at: index)
        guard let failure = processes.spawn(app, options) else { return outcome }
        let state = before.state(of: name)
        model = before
        log(launched, .spawnFailed(failure))
        return Outcome(refusal: .request(RequestError(app: name, state: state, request: request, reason: .spawnFailed(failure))))
    }

    func openConnection(_ app: String, fd: FileDescriptor) throws(SystemError) -> Connection { try sessions.open(app, fd: fd) }

    func terminateAll() {
        // Adopted apps are the desktop's: let go, thawed, rather than terminated.
        adoption.stop()
        handle(.shutdown)
    }

    func backgroundModes(of name: String) -> Set<String> { model.backgroundModes(of: name) }

    func throughDisplay(_ request: Request, for name: String) -> Bool { display.carryOut(request, for: name) }

    func markDirty(_ name: String) {
        if let app = runtime(name) { persistence.markDirty(app) }
    }
}
