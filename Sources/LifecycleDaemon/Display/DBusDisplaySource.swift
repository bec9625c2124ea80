import Glibc

/// `[Display] Source=dbus`: the integrator that owns the display (a homescreen, a compositor) reports what shows
/// over the D-Bus API, by app name (`SetDisplay(as visible, s focused)`) or by process (`SetDisplayPids(au visible,
/// u focused)`); each call is the whole picture, as a display server's would be. lifectl's focus and background of a
/// shown app are asked of the integrator with the `FocusRequested` and `HideRequested` signals, and the state moves
/// when the integrator reports the change, as with any display source.
final class DBusDisplaySource: DisplaySource {
    let name = "dbus"
    private unowned let bus: BusService
    /// The running app's main process, by name (nil: not running).
    private let pid: (String) -> pid_t?
    private var report: ((WindowPicture) -> Void)?
    /// The app each window of the last picture stands for, by window id.
    private var owners: [Int64: String] = [:]
    private var reported = false

    init(bus: BusService, pid: @escaping (String) -> pid_t?) {
        self.bus = bus
        self.pid = pid
    }

    var address: String { "\(BusConnection.busName) on \(bus.connection.description)" }

    /// An integrator has reported a picture on the bus as it is now.
    var connected: Bool { reported && bus.connection.bus != nil }

    func start(report: @escaping (WindowPicture) -> Void) {
        self.report = report
        bus.displayInput = { [unowned self] call, caller in self.called(call, by: caller) }
    }

    func stop() {
        bus.displayInput = nil
        report = nil
    }

    func focus(window: Int64) {
        if let app = owners[window] { bus.emitDisplayRequest("FocusRequested", app: app) }
    }

    func hide(window: Int64) {
        if let app = owners[window] { bus.emitDisplayRequest("HideRequested", app: app) }
    }

    /// One window per process named (by the app's main process for a name): the window-to-app rule then finds the
    /// app as for any display server's window. A caller other than root names only processes of its own uid: a
    /// process is the one thing a window source can make the daemon adopt and stop, and `[Control] Group=` grants
    /// moving apps, not another user's processes.
    private func called(_ call: BusCall, by caller: BusCaller) {
        var windows: [DisplayWindow] = []
        owners = [:]
        if call.member == "SetDisplay" {
            let visible = call.readArray(of: BusType.string) { call.readString() }
            let focused = call.readString()
            for app in Set(visible + (focused.isEmpty ? [] : [focused])).sorted() {
                guard bus.knows(app) else { return call.fail(.unknownApp, "no such app '\(app)'") }
                // An app that does not run shows nothing: its window would belong to no process.
                guard let pid = pid(app) else { continue }
                let id = Int64(windows.count + 1)
                owners[id] = app
                windows.append(DisplayWindow(id: id, pid: pid, visible: true, focused: app == focused))
            }
        } else {
            let visible = call.readArray(of: BusType.uint32) { call.readUInt32() }
            let focused = call.readUInt32()
            for process in Set(visible + (focused == 0 ? [] : [focused])).sorted() {
                if caller.uid != 0, let owner = ProcessIdentity.realUID(of: pid_t(bitPattern: process)), owner != caller.uid {
                    return call.fail(.refused, "SetDisplayPids: process \(process) is uid \(owner)'s, not the caller's (uid \(caller.uid)); only root names another user's processes")
                }
                let id = Int64(windows.count + 1)
                windows.append(DisplayWindow(id: id, pid: pid_t(bitPattern: process), visible: true, focused: process == focused))
            }
        }
        reported = true
        report?(WindowPicture(windows: windows))
        // The window ids of a picture by process name no app until the rule has placed them.
        for window in windows where owners[window.id] == nil {
            if let pid = window.pid, let app = bus.owner(of: pid) { owners[window.id] = app }
        }
        call.succeed()
    }
}
