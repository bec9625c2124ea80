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
    func queue(_ event: Event) { events.append(event) }

    /// A request that launches its app takes effect only once the app's process runs: the spawn comes first, and
    /// when it fails the model is as it was before the request (no other app left the foreground, nobody was told
    /// anything) and the failure is the request's answer.
    ///
    /// Only a request that finds its app not running can launch it (the rules' table), so only then is the model
    /// kept to go back to: a kept copy shares the apps' records, and the request's first write would copy all of
    /// them.
    func request(_ request: Request, for name: String, origin: String) throws(RequestError) -> [Effect] {
        let before = model.projectedState(of: name)?.isRunning == false ? model : nil
        var effects = try model.handle(request, for: name, origin: origin, now: loop.now)
        guard let index = effects.firstIndex(where: { if case .spawn = $0 { true } else { false } }),
              case .spawn(let launched, let options) = effects[index], let app = runtime(launched) else { return effects }
        effects.remove(at: index)
        if let failure = processes.spawn(app, options) {
            let state = before?.state(of: name) ?? model.state(of: name)
            if let before { model = before }
            log(launched, .spawnFailed(failure))
            throw RequestError(app: name, state: state, request: request, reason: .spawnFailed(failure))
        }
        return effects
    }

    func post(_ type: String, payload: JSONValue, to app: String?, from origin: PostOrigin = .daemon) throws(PostError) -> PostOutcome {
        let outcome = try model.post(type, payload: payload, to: app, from: origin, now: loop.now)
        perform(outcome.effects)
        return outcome
    }

    func openConnection(_ app: String, fd: FileDescriptor) throws(SystemError) -> Connection { try sessions.open(app, fd: fd) }

    func attach(_ name: String) throws(RequestError) -> [Effect] {
        try model.attach(name, launchedBy: "external", now: loop.now)
    }

    func terminateAll() {
        // Adopted apps are the desktop's: let go, thawed, rather than terminated.
        adoption.stop()
        perform(model.shutdown(now: loop.now))
        drain()
    }

    func adopt(_ name: String, _ snapshot: AppSnapshot, running: Bool, processesStopped: Bool?) {
        perform(model.adopt(name, snapshot, running: running, processesStopped: processesStopped, now: loop.now))
    }

    /// `at`: the event that started the change, so that a grace time it starts counts from there, not from when
    /// the display source had read the whole picture. Never before what the model took last.
    func displayChanged(_ facts: DisplayFacts, at: MonotonicTime) {
        let at = max(min(at, loop.now), model.now)
        perform(model.displayChanged(facts, now: at), since: at)
        drain()
    }

    func displayForgotten() { model.displayForgotten() }

    func backgroundModes(of name: String) -> Set<String> { model.backgroundModes(of: name) }

    func audioChanged(playing: Set<String>) {
        perform(model.audioChanged(playing: playing, now: loop.now))
        drain()
    }

    func powerChanged(onBattery: Bool) {
        perform(model.powerChanged(onBattery: onBattery, now: loop.now))
        drain()
    }

    func throughDisplay(_ request: Request, for name: String) -> Bool { display.carryOut(request, for: name) }

    func markDirty(_ name: String) {
        if let app = runtime(name) { persistence.markDirty(app) }
    }
}
