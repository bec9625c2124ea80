import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// A display source a test drives: each `show` is a picture as a display server would report it.
final class ScriptedDisplaySource: DisplaySource {
    let name = "dbus"
    let address = "a test"
    private(set) var connected = false
    private var report: ((WindowPicture) -> Void)?

    func start(report: @escaping (WindowPicture) -> Void) {
        self.report = report
        connected = true
    }

    func stop() { connected = false }
    func focus(window: Int64) {}
    func hide(window: Int64) {}
    func show(_ picture: WindowPicture) { report?(picture) }
}

/// `DisplayFollower` through a fake port (`FakePort`): which pictures reach the model.
@Suite struct DisplayFollowerTests {
    let port = FakePort()
    let follower: DisplayFollower
    let source = ScriptedDisplaySource()

    init() throws {
        let loop = try EventLoop()
        follower = DisplayFollower(loop: loop, host: port, requests: ControlRequests(loop: loop, host: port, placement: ProcessGroupPlacement()))
        follower.dbusSource = source
        // Running apps as adoption makes them: attached to a process (the test's own, which nothing signals here).
        var policy = AppPolicy()
        policy.adopted = true
        policy.speaksProtocol = false
        policy.restart = .no
        for (name, appID) in [("mail", "org.example.Mail"), ("notes", "org.example.Notes")] {
            var config = AppConfig(name: name, exec: ["/bin/true"])
            config.appID = appID
            let app = AppRuntime(name: name, config: config, place: ProcessGroupPlacement())
            app.pid = getpid()
            port.apps[name] = app
            port.handle(.add(app: name, policy: policy))
            port.handle(.attach(app: name, launchedBy: "a test"))
        }
        var config = DisplayConfig()
        config.source = .dbus
        follower.start(config, environment: [:])
    }

    private var displayInputs: Int { port.inputs.filter { $0.hasPrefix("display(") }.count }

    /// A title change, the stacking order or another program's window changes no fact the model reads: such a
    /// picture costs the model nothing. A picture that changes a fact reaches it, and so does the same picture
    /// again once an app was added (the rule reads the windows anew).
    static let mail = DisplayWindow(id: 1, appID: "org.example.Mail", visible: true, focused: true)
    static let notes = DisplayWindow(id: 2, appID: "org.example.Notes", visible: false)
    /// The focus moved from mail's window to notes', which shows now: mail's and notes' windows.
    static let focusOnNotes = (
        DisplayWindow(id: 1, appID: "org.example.Mail", visible: true),
        DisplayWindow(id: 2, appID: "org.example.Notes", visible: true, focused: true)
    )

    @Test func aPictureThatChangesNoFactIsNotHandedOn() {
        let (mail, notes) = (Self.mail, Self.notes)
        let stranger = DisplayWindow(id: 3, appID: "org.example.Other", visible: true)
        source.show(WindowPicture(windows: [mail, notes]))
        #expect(displayInputs == 1)
        #expect(port.model.displayFacts.focused == "mail")

        source.show(WindowPicture(windows: [notes, mail]))
        source.show(WindowPicture(windows: [mail, notes, stranger]))
        #expect(displayInputs == 1, "the same facts: \(port.inputs)")

        let (unfocusedMail, focusedNotes) = Self.focusOnNotes
        source.show(WindowPicture(windows: [unfocusedMail, focusedNotes, stranger]))
        #expect(displayInputs == 2)
        #expect(port.model.displayFacts.focused == "notes")

        follower.appChanged(.added("calendar"))
        source.show(WindowPicture(windows: [unfocusedMail, focusedNotes, stranger]))
        #expect(displayInputs == 3, "heard again after the apps changed")
    }

    /// A source that follows changes reports only the windows that changed: the model hears the facts of the whole
    /// picture, and a change to a window no app owns reaches it not at all.
    @Test func aReportOfChangesIsHeardAsTheWholePicture() {
        let (mail, notes) = (Self.mail, Self.notes)
        var stranger = DisplayWindow(id: 3, appID: "org.example.Other", visible: true)
        source.show(WindowPicture(windows: [mail, notes, stranger]))
        #expect(displayInputs == 1)

        stranger.visible = false
        source.show(.changes([stranger], gone: []))
        #expect(displayInputs == 1, "no fact changed: \(port.inputs)")

        let (unfocusedMail, focusedNotes) = Self.focusOnNotes
        source.show(.changes([unfocusedMail, focusedNotes], gone: []))
        #expect(displayInputs == 2)
        #expect(port.model.displayFacts.focused == "notes")
        #expect(port.model.displayFacts.visible == ["mail", "notes"])

        source.show(.changes([], gone: [1]))
        #expect(displayInputs == 3)
        #expect(port.model.displayFacts.windowed == ["notes"], "mail's only window closed")
    }
}
