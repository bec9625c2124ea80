import CBus
import CSystemd
import Glibc
import LifecycleModel
import LifecycleProtocol

/// The D-Bus API (docs/DBUS.md): `org.lifecycled.Lifecycle1` with its manager object, one object per app, and the
/// standard Properties, Introspectable and ObjectManager interfaces, which sd-bus answers from the vtables.
///
/// The vtables are declared in C (Sources/CBus): sd-bus's vtable macros do not import into Swift, and a vtable
/// lets sd-bus answer Introspect, Properties and ObjectManager from one declaration, where a hand-written
/// `sd_bus_add_object` handler would repeat the interface in three answers. Every call and property read comes
/// back here. Requests go through the same calls as lifectl's (`ControlRequests`), and a changing call is
/// answered once its app has settled, without holding the loop.
final class BusService: AppObserver {
    private let context: ControlContext
    private let display: DisplayFollower
    private let cgroupLayout: String
    let connection: BusConnection
    private(set) lazy var authorization = BusAuthorization(loop: context.loop, configuration: context.configuration, connection: connection)
    private var slots: [UnsafeMutableRawPointer?] = []
    /// What each app object showed last, for `PropertiesChanged`; empty while not connected.
    private var shown: [String: BusAppProperties] = [:]
    /// How many of the shown apps are in each state (no entry for none), kept with `shown` (`show`), so that the
    /// manager's counts after a change are not counted again over every app.
    private var shownCounts: [AppState: UInt32] = [:]
    private var shownManager: BusManagerProperties?
    /// What a `PropertiesChanged` being sent carries: sd-bus reads each changed property back through `read`,
    /// which answers from these rather than working the object's properties out again for each one.
    private var emittingApp: (path: String, properties: BusAppProperties)?
    private var emittingManager: BusManagerProperties?
    /// Apps whose properties are compared after the current callback.
    private var pending: Set<String> = []
    private var flushQueued = false
    /// `SetDisplay` and `SetDisplayPids` go to the display source when `[Display] Source=dbus`.
    var displayInput: ((BusCall, BusCaller) -> Void)?

    init(context: ControlContext, display: DisplayFollower, cgroupLayout: String, endpoint: BusEndpoint) {
        self.context = context
        self.display = display
        self.cgroupLayout = cgroupLayout
        connection = BusConnection(loop: context.loop, endpoint: endpoint)
        connection.connected = { [unowned self] bus in self.register(on: bus) }
        connection.disconnected = { [unowned self] in self.unregister() }
    }

    func start() {
        context.observers.add(self)
        connection.start()
    }

    func stop() {
        context.observers.remove(self)
        connection.stop()
    }

    private var userdata: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    private static func from(_ userdata: UnsafeMutableRawPointer?) -> BusService {
        Unmanaged<BusService>.fromOpaque(userdata!).takeUnretainedValue()
    }

    private func register(on bus: OpaquePointer) {
        var handlers = cbus_handlers(
            method: { message, userdata, _ in
                BusService.from(userdata).called(BusCall(OpaquePointer(message!)))
                return 1
            },
            property: { _, path, _, property, reply, userdata, _ in
                BusService.from(userdata).read(String(cString: property!), of: String(cString: path!), into: OpaquePointer(reply!))
            },
            find: { path, userdata in
                BusPath.appName(String(cString: path!)).map { BusService.from(userdata).context.host.runtime($0) != nil } == true ? 1 : 0
            },
            nodes: { userdata in
                mallocStrv(BusService.from(userdata).context.host.appNames.map(BusPath.app))
            })
        slots = Array(repeating: nil, count: 4)
        let result = slots.withUnsafeMutableBufferPointer { buffer in
            cbus_register(UnsafeMutableRawPointer(bus), &handlers, userdata, buffer.baseAddress, Int32(buffer.count))
        }
        if result < 0 { Log.error("D-Bus: failed to register the objects: \(BusConnection.reason(result))") }
        shown = [:]
        shownCounts = [:]
        for name in context.host.appNames { if let properties = properties(of: name) { show(name, properties) } }
        shownManager = managerProperties(counts: shownCounts)
    }

    private func unregister() {
        authorization.forgetQuestions()
        for slot in slots { if let slot { sd_bus_slot_unref(OpaquePointer(slot)) } }
        slots = []
        shown = [:]
        shownCounts = [:]
        shownManager = nil
    }

    // MARK: Properties

    func properties(of name: String) -> BusAppProperties? {
        guard let runtime = context.host.runtime(name), let status = context.requests.status(of: name) else { return nil }
        return BusAppProperties(status, runtime: runtime)
    }

    /// The manager's properties with every app counted now, for a caller's `Get`.
    func managerProperties() -> BusManagerProperties {
        var counts: [AppState: UInt32] = [:]
        for record in context.host.records { counts[record.state, default: 0] += 1 }
        return managerProperties(counts: counts)
    }

    private func managerProperties(counts: [AppState: UInt32]) -> BusManagerProperties {
        BusManagerProperties(version: daemonVersion, cgroupLayout: cgroupLayout,
                             displaySource: display.description, counts: counts)
    }

    private func read(_ property: String, of path: String, into reply: OpaquePointer) -> Int32 {
        var writer = BusWriter(reply)
        if path == BusPath.manager {
            guard (emittingManager ?? managerProperties()).append(property, to: &writer) else { return -ENOENT }
        } else {
            let emitted = emittingApp.flatMap { $0.path == path ? $0.properties : nil }
            guard let properties = emitted ?? BusPath.appName(path).flatMap(properties(of:)),
                  properties.append(property, to: &writer) else { return -ENOENT }
        }
        return writer.result
    }

    /// `name`'s object shows `properties` now (nil: it is gone), and the counts follow.
    private func show(_ name: String, _ properties: BusAppProperties?) {
        if let old = shown[name], let state = AppState(rawValue: old.state), let count = shownCounts[state] {
            shownCounts[state] = count > 1 ? count - 1 : nil
        }
        shown[name] = properties
        if let properties, let state = AppState(rawValue: properties.state) { shownCounts[state, default: 0] += 1 }
    }

    // MARK: Changes

    func appChanged(_ change: AppChange) {
        guard let bus = connection.bus else { return }
        switch change {
        case .added(let name):
            if let properties = properties(of: name) { show(name, properties) }
            _ = withStrv([String(cString: cbusAppInterface)]) { sd_bus_emit_interfaces_added_strv(bus, BusPath.app(name), $0) }
            changed(nil)
        case .removed(let name):
            show(name, nil)
            _ = withStrv([String(cString: cbusAppInterface)]) { sd_bus_emit_interfaces_removed_strv(bus, BusPath.app(name), $0) }
            changed(nil)
        case .transition(let app, let from, let to, let reason):
            emitManagerSignal("StateChanged", on: bus, [app, from.rawValue, to.rawValue, reason])
            changed(app)
        case .sceneTransition(let app, _, _, _, _), .details(let app):
            changed(app)
        }
    }

    /// Properties are compared once the effects of the current callback are performed: several changes of one
    /// callback make one `PropertiesChanged`, and the model is read when it is consistent.
    private func changed(_ app: String?) {
        if let app { pending.insert(app) }
        guard !flushQueued else { return }
        flushQueued = true
        context.loop.afterCallback { [unowned self] in self.flush() }
    }

    private func flush() {
        flushQueued = false
        let names = pending
        pending = []
        guard let bus = connection.bus else { return }
        for name in names.sorted() {
            guard let now = properties(of: name), let before = shown[name] else { continue }
            show(name, now)
            let changed = now.changed(from: before)
            if !changed.isEmpty {
                let path = BusPath.app(name)
                emittingApp = (path, now)
                _ = withStrv(changed) { sd_bus_emit_properties_changed_strv(bus, path, cbusAppInterface, $0) }
                emittingApp = nil
            }
        }
        let manager = managerProperties(counts: shownCounts)
        if let before = shownManager {
            let changed = manager.changed(from: before)
            if !changed.isEmpty {
                emittingManager = manager
                _ = withStrv(changed) { sd_bus_emit_properties_changed_strv(bus, BusPath.manager, cbusManagerInterface, $0) }
                emittingManager = nil
            }
        }
        shownManager = manager
    }

    /// `FocusRequested(s app)` or `HideRequested(s app)`: lifectl asks the integrator that owns the display.
    func emitDisplayRequest(_ member: String, app: String) {
        guard let bus = connection.bus else { return }
        emitManagerSignal(member, on: bus, [app])
    }

    /// The manager's signal `member`, whose arguments are all strings (`StateChanged`, `FocusRequested`,
    /// `HideRequested`).
    private func emitManagerSignal(_ member: String, on bus: OpaquePointer, _ arguments: [String]) {
        var created: OpaquePointer?
        guard sd_bus_message_new_signal(bus, &created, BusPath.manager, cbusManagerInterface, member) >= 0,
              let signal = created else { return }
        defer { sd_bus_message_unref(signal) }
        var writer = BusWriter(signal)
        for argument in arguments { writer.string(argument) }
        if writer.result >= 0 { _ = sd_bus_send(bus, signal, nil) }
    }

    func knows(_ app: String) -> Bool { context.host.runtime(app) != nil }

    /// The app whose process tree holds `pid`, by the display's window-to-app rule.
    func owner(of pid: pid_t) -> String? {
        display.ownership().owner(of: DisplayWindow(id: 0, pid: pid, visible: true))
    }

    // MARK: Calls

    private static let lifecycleVerbs: [String: Request] = [
        "Focus": .focus, "Deactivate": .deactivate, "Background": .background, "Suspend": .suspend,
        "Resume": .resume, "Terminate": .terminate,
    ]

    private func called(_ call: BusCall) {
        let member = call.member
        if call.path == BusPath.manager {
            switch member {
            case "ListApps": return listApps(call)
            case "GetApp":
                let name = call.readString()
                guard context.host.runtime(name) != nil else { return call.fail(.unknownApp, "no such app '\(name)'") }
                return call.succeed { reply in var writer = BusWriter(reply); writer.string(BusPath.app(name), type: BusType.objectPath); return writer.result }
            default: break
            }
        }
        // Everything else changes something: the caller's credentials decide first.
        authorization.authorize(call, verb: member) { [unowned self] caller in self.perform(call, by: caller) }
    }

    private func perform(_ call: BusCall, by caller: BusCaller) {
        let member = call.member
        let onManager = call.path == BusPath.manager
        switch member {
        case "Post" where onManager:
            return post(call)
        case "Reload" where onManager:
            let reply = context.configuration.reloadRequested(by: caller.uid, pid: caller.pid)
            return reply.ok ? call.succeed() : call.fail(.refused, reply.error ?? "refused")
        case "SetDisplay" where onManager, "SetDisplayPids" where onManager:
            guard let displayInput else {
                return call.fail(.refused, "\(member) needs [Display] Source=dbus in lifecycled.conf (the display source is \(display.description))")
            }
            return displayInput(call, caller)
        default: break
        }
        let name = onManager ? call.readString() : (BusPath.appName(call.path) ?? "")
        let request: Request
        if member == "Launch" {
            request = .launch(background: call.readBool())
        } else if let verb = Self.lifecycleVerbs[member] {
            request = verb
        } else {
            return call.fail(.invalidArgs, "unknown method \(member)")
        }
        guard context.host.runtime(name) != nil else {
            return call.fail(.unknownApp, RequestError(app: name, state: nil, request: request, reason: .unknownApp).description)
        }
        Log.debug("D-Bus: \(member) \(name) from uid \(caller.uid) (\(call.sender ?? "?"))")
        context.requests.handle(request, for: name, from: call, origin: "D-Bus")
    }

    private func listApps(_ call: BusCall) {
        let statuses = context.requests.allStatuses()
        call.succeed { reply in
            var writer = BusWriter(reply)
            writer.container(BusType.array, "(ssuo)") { writer in
                for status in statuses {
                    writer.container(BusType.structure, "ssuo") { writer in
                        writer.string(status.name)
                        writer.string(status.state.rawValue)
                        writer.uint32(UInt32(bitPattern: status.pid ?? 0))
                        writer.string(BusPath.app(status.name), type: BusType.objectPath)
                    }
                }
            }
            return writer.result
        }
    }

    private func post(_ call: BusCall) {
        let type = call.readString(), app = call.readString(), json = call.readString()
        let payload: JSONValue
        do {
            payload = json.isEmpty ? .object([:]) : try context.coder.decode(JSONValue.self, from: Array(json.utf8))
        } catch {
            return call.fail(.invalidArgs, "the payload is not JSON: \(error)")
        }
        let reply = context.requests.post(type, payload: payload, to: app.isEmpty ? nil : app)
        guard reply.ok, let posted = reply.posted else {
            return call.fail(!app.isEmpty && context.host.runtime(app) == nil ? .unknownApp : .refused, reply.error ?? "refused")
        }
        call.succeed { message in
            var writer = BusWriter(message)
            writer.uint32(UInt32(clamping: posted.delivered))
            writer.uint32(UInt32(clamping: posted.queued))
            return writer.result
        }
    }
}
