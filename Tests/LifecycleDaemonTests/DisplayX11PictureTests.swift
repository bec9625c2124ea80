import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// The x11 source's pure part: property values as the server sends them, and the picture built from the root's and
/// the clients' properties (what openbox reports for minimized windows, other desktops, sticky windows).
@Suite struct DisplayX11PictureTests {
    static func bytes(_ values: [UInt32]) -> [UInt8] { values.flatMap { value in withUnsafeBytes(of: value) { Array($0) } } }

    @Test func cardinalsAreThirtyTwoBitItemsInHostOrder() {
        #expect(X11Property.cardinals(Self.bytes([0x80_0003, 7, 0xFFFF_FFFF]), format: 32) == [0x80_0003, 7, 0xFFFF_FFFF])
        #expect(X11Property.cardinals([], format: 32) == [])
    }

    @Test func aTruncatedOrWronglyFormattedCardinalPropertyGivesOnlyWholeItems() {
        #expect(X11Property.cardinals(Self.bytes([5]) + [1, 2], format: 32) == [5])
        #expect(X11Property.cardinals(Array("abcd".utf8), format: 8) == [])
    }

    @Test func wmClassIsTheInstanceThenTheClass() {
        let names = X11Property.wmClass(Array("xterm\0XTerm\0".utf8), format: 8)
        #expect(names.instance == "xterm")
        #expect(names.class == "XTerm")
    }

    @Test func aWmClassWithoutItsClassOrTerminatorStillGivesWhatIsThere() {
        #expect(X11Property.wmClass(Array("xlogo".utf8), format: 8).instance == "xlogo")
        #expect(X11Property.wmClass(Array("xlogo".utf8), format: 8).class == nil)
        #expect(X11Property.wmClass(Array("\0XLogo\0".utf8), format: 8).instance == nil)
        #expect(X11Property.wmClass(Array("\0XLogo\0".utf8), format: 8).class == "XLogo")
        #expect(X11Property.wmClass(Self.bytes([1]), format: 32).class == nil)
    }

    @Test func visibleMeansViewableNotHiddenAndOnTheCurrentDesktop() {
        let root = X11Root(clients: [1, 2, 3, 4, 5], active: 1, currentDesktop: 0)
        let clients: [UInt32: X11Client] = [
            1: X11Client(window: 1, pid: 100, instance: "xterm", class: "XTerm", desktop: 0),
            2: X11Client(window: 2, pid: 200, desktop: 1, viewable: false),
            3: X11Client(window: 3, pid: 300, desktop: 0, hidden: true, viewable: false),
            4: X11Client(window: 4, pid: 400, desktop: X11Client.allDesktops),
            5: X11Client(window: 5, pid: 500, desktop: 1),
        ]

        let picture = X11Picture.picture(root: root, clients: clients)

        #expect(picture.windows.map(\.id) == [1, 2, 3, 4, 5])
        #expect(picture.windows.map(\.visible) == [true, false, false, true, false],
                "another desktop hides a window even while the window manager still maps it")
        #expect(picture.focused?.id == 1)
        #expect(picture.windows[0].appID == "XTerm" && picture.windows[0].instance == "xterm")
        #expect(picture.windows[1].pid == 200)
    }

    @Test func aMinimizedWindowThatStaysMappedIsHidden() {
        let picture = X11Picture.picture(root: X11Root(clients: [9], currentDesktop: 0),
                                         clients: [9: X11Client(window: 9, pid: 1, desktop: 0, hidden: true)])
        #expect(picture.windows.map(\.visible) == [false])
    }

    @Test func noActiveWindowAndNoDesktopsAreHandled() {
        let root = X11Root(clients: [7, 8], active: 0, currentDesktop: nil)
        let picture = X11Picture.picture(root: root, clients: [7: X11Client(window: 7, desktop: 3), 8: X11Client(window: 8)])
        #expect(picture.focused == nil)
        #expect(picture.windows.map(\.visible) == [true, true])
    }

    @Test func aWindowGoneBetweenTheListAndItsReadsIsLeftOut() {
        let picture = X11Picture.picture(root: X11Root(clients: [1, 2], active: 2, currentDesktop: 0),
                                         clients: [1: X11Client(window: 1, pid: 5, desktop: 0)])
        #expect(picture.windows.map(\.id) == [1])
        #expect(picture.focused == nil)
    }

    @Test func appIdMatchesTheX11InstanceAsWellAsTheClass() {
        let ownership = WindowOwnership(apps: [
            WindowOwnership.App(name: "term", appID: "xterm", holds: { _ in false }),
            WindowOwnership.App(name: "logo", appID: "XLogo", holds: { _ in false }),
            WindowOwnership.App(name: "byPid", appID: nil, holds: { $0 == 42 }),
        ])
        let picture = X11Picture.picture(root: X11Root(clients: [1, 2, 3], active: 3, currentDesktop: 0), clients: [
            1: X11Client(window: 1, instance: "xterm", class: "XTerm", desktop: 0),
            2: X11Client(window: 2, instance: "xlogo", class: "XLogo", desktop: 1),
            3: X11Client(window: 3, pid: 42, instance: "xmessage", class: "Xmessage", desktop: 0),
        ])

        let facts = ownership.facts(of: picture)

        #expect(facts.visible == ["term", "byPid"])
        #expect(facts.windowed == ["term", "logo", "byPid"])
        #expect(facts.focused == "byPid")
    }

    @Test func sourceX11TakesDisplayOrItsKey() {
        var config = DisplayConfig()
        config.source = .x11
        #expect(config.resolved(environment: ["DISPLAY": ":3"], runtimeDirectories: []) == (.x11, ":3"))
        config.x11Display = ":9"
        #expect(config.resolved(environment: ["DISPLAY": ":3"], runtimeDirectories: []) == (.x11, ":9"))
        config.x11Display = nil
        #expect(config.resolved(environment: ["DISPLAY": ""], runtimeDirectories: []).address == nil)
    }

    /// The whole picture first; then only the windows whose part changed, and those gone; nothing when a touched
    /// window reads as it was reported.
    @Test func reportsAfterTheFirstNameOnlyWhatChanged() throws {
        var root = X11Root(clients: [1, 2], active: 1, currentDesktop: 0)
        var clients: [UInt32: X11Client] = [1: X11Client(window: 1, pid: 10, desktop: 0), 2: X11Client(window: 2, pid: 20, desktop: 0)]
        var reports = X11Reports()

        let whole = reports.next(root: root, clients: clients, serverVouches: false, changedAt: nil)
        let first = try #require(whole)
        #expect(first.isWhole && first.windows.map(\.id) == [1, 2])

        reports.touch(2)
        let unchanged = reports.next(root: root, clients: clients, serverVouches: false, changedAt: nil)
        #expect(unchanged == nil, "window 2 reads as reported")

        root.active = 2
        reports.touch([1, 2])
        let moved = reports.next(root: root, clients: clients, serverVouches: false, changedAt: .seconds(3))
        let focus = try #require(moved)
        #expect(!focus.isWhole && focus.windows.map(\.id) == [1, 2] && focus.windows.map(\.focused) == [false, true])
        #expect(focus.changedAt == .seconds(3))

        clients[1] = nil
        root.clients = [2]
        reports.close(1)
        let gone = reports.next(root: root, clients: clients, serverVouches: false, changedAt: nil)
        let closed = try #require(gone)
        #expect(closed.windows.isEmpty && closed.gone == [1])

        reports.restart()
        let again = reports.next(root: root, clients: clients, serverVouches: false, changedAt: nil)
        #expect(again?.isWhole == true)
    }
}
