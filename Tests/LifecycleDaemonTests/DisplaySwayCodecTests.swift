import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// The i3/sway IPC codec and the tree reader, on recorded sway 1.7 output and on broken input.
@Suite struct DisplaySwayCodecTests {
    private static let fixtures: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(2)
        return parts.joined(separator: "/") + "/Fixtures/sway"
    }()

    static func fixture(_ name: String) throws -> [UInt8] {
        Array(try ConfigLoader.readTextFile("\(fixtures)/\(name)").utf8)
    }

    @Test func aMessageIsMagicLittleEndianLengthAndTypeThenThePayload() {
        let bytes = SwayCodec.encode(type: SwayMessageType.subscribe, payload: #"["window"]"#)

        #expect(Array(bytes[0..<6]) == Array("i3-ipc".utf8))
        #expect(Array(bytes[6..<10]) == [10, 0, 0, 0])
        #expect(Array(bytes[10..<14]) == [2, 0, 0, 0])
        #expect(Array(bytes[14...]) == Array(#"["window"]"#.utf8))
    }

    @Test func framesSplitAcrossReadsAndRunTogetherAreCutApart() throws {
        let stream = SwayCodec.encode(type: SwayMessageType.windowEvent, payload: #"{"change":"focus"}"#)
            + SwayCodec.encode(type: SwayMessageType.getTree, payload: "{}")
        var decoder = SwayFrameDecoder()
        var frames: [SwayFrame] = []

        for byte in stream {
            decoder.append([byte])
            while let frame = try decoder.next() { frames.append(frame) }
        }

        #expect(frames == [SwayFrame(type: SwayMessageType.windowEvent, payload: Array(#"{"change":"focus"}"#.utf8)),
                           SwayFrame(type: SwayMessageType.getTree, payload: Array("{}".utf8))])
        #expect(frames[0].isEvent && !frames[1].isEvent)
        #expect(decoder.pending == 0)
    }

    @Test func aTruncatedFrameWaitsForItsRest() throws {
        var decoder = SwayFrameDecoder()
        decoder.append(SwayCodec.encode(type: SwayMessageType.getTree, payload: #"{"id":1}"#).dropLast(3))

        #expect(try decoder.next() == nil)
        #expect(decoder.pending > 0)
    }

    @Test func aStreamThatIsNotTheIPCIsRejectedAtItsFirstBytes() {
        var decoder = SwayFrameDecoder()
        decoder.append(Array("HTTP/".utf8))

        #expect(throws: SwayIPCError.badMagic(Array("HTTP/".utf8))) { try decoder.next() }
    }

    @Test func anAbsurdLengthIsRejectedRatherThanBuffered() {
        var bytes = Array("i3-ipc".utf8) + [0xff, 0xff, 0xff, 0x7f] + [4, 0, 0, 0]
        bytes += [0x7b]
        var decoder = SwayFrameDecoder()
        decoder.append(bytes)

        #expect(throws: SwayIPCError.tooLarge(0x7fff_ffff)) { try decoder.next() }
    }

    @Test func aTreeOverEightMebibytesIsTakenForABrokenPeer() throws {
        let over = UInt32(8 << 20) + 1
        var bytes = Array("i3-ipc".utf8)
        for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8(truncatingIfNeeded: over >> UInt32(shift))) }
        bytes += [4, 0, 0, 0, 0x7b]
        var decoder = SwayFrameDecoder()
        decoder.append(bytes)
        #expect(throws: SwayIPCError.tooLarge(over)) { try decoder.next() }

        var exact = Array("i3-ipc".utf8) + [0, 0, 0x80, 0] + [4, 0, 0, 0]
        exact += [UInt8](repeating: 0x20, count: 8 << 20)
        var whole = SwayFrameDecoder()
        whole.append(exact)
        #expect(try whole.next()?.payload.count == 8 << 20, "8 MiB itself is taken")
    }

    @Test func aWindowEventGivesItsViewAsThePictureWouldShowIt() throws {
        let payload = Array(#"{"change":"focus","container":{"id":7,"type":"con","pid":42,"app_id":"foot","visible":true,"focused":true,"nodes":[]}}"#.utf8)
        let event = try SwayTree.windowEvent(payload)
        #expect(event.change == "focus")
        #expect(event.window == DisplayWindow(id: 7, pid: 42, appID: "foot", visible: true, focused: true))
        let workspace = try SwayTree.windowEvent(Array(#"{"change":"close","container":{"id":3,"type":"workspace"}}"#.utf8))
        #expect(workspace.window == nil, "a container that is no view")
    }

    @Test func theTreeGivesEveryViewWithItsPidAppIdVisibilityAndFocus() throws {
        let picture = try SwayTree.picture(fromTree: Self.fixture("tree-two-windows.json"))

        #expect(picture.windows.map(\.appID) == ["probe-a", "probe-b"])
        #expect(picture.windows.allSatisfy { $0.pid != nil && $0.visible })
        #expect(picture.focused?.appID == "probe-b")
    }

    @Test func windowsInTheScratchpadAndOnAnotherWorkspaceAreHidden() throws {
        let picture = try SwayTree.picture(fromTree: Self.fixture("tree-scratchpad-and-workspace.json"))

        #expect(picture.windows.count == 2)
        #expect(picture.windows.allSatisfy { !$0.visible && !$0.focused })
        #expect(picture.focused == nil)
    }

    @Test(arguments: ["", "[]", #"{"id":"one"}"#, #"{"id":1,"nodes":[{"id":2,"type":"con","pid":"x"}]}"#, "{\"id\":1,"])
    func aTreeThatIsNotSwaysIsAnErrorNotACrash(_ payload: String) {
        #expect(throws: SwayIPCError.self) { try SwayTree.picture(fromTree: Array(payload.utf8)) }
    }

    @Test func aCommandReplySaysWhichCommandFailed() throws {
        #expect(try SwayTree.commandOutcome(Array(#"[{"success":true}]"#.utf8)) == nil)
        #expect(try SwayTree.commandOutcome(Array(#"[{"success":false,"error":"No matching node."}]"#.utf8))
                == "No matching node.")
    }
}

/// The window-to-app rule.
@Suite struct DisplayOwnershipTests {
    static var rule: WindowOwnership { WindowOwnership(apps: [
        .init(name: "editor", appID: nil, holds: { [100, 101].contains($0) }),
        .init(name: "browser", appID: "org.example.Browser", holds: { $0 == 200 }),
    ]) }

    @Test func aWindowBelongsToTheAppWhoseProcessTreeHoldsItsPid() {
        #expect(Self.rule.owner(of: DisplayWindow(id: 1, pid: 101, appID: "foot", visible: true)) == "editor")
    }

    @Test func anAppIdNamesTheAppWhateverThePid() {
        #expect(Self.rule.owner(of: DisplayWindow(id: 2, pid: 999, appID: "org.example.Browser", visible: true)) == "browser")
    }

    @Test func aWindowNoConfiguredAppOwnsIsLeftAlone() {
        #expect(Self.rule.owner(of: DisplayWindow(id: 3, pid: 999, appID: "other", visible: true)) == nil)
        #expect(Self.rule.owner(of: DisplayWindow(id: 4, pid: nil, appID: nil, visible: true)) == nil)
    }

    @Test func thePictureBecomesFactsPerApp() {
        let picture = WindowPicture(windows: [
            DisplayWindow(id: 1, pid: 100, visible: true, focused: false),
            DisplayWindow(id: 2, pid: 101, visible: false),
            DisplayWindow(id: 3, pid: 200, visible: false),
            DisplayWindow(id: 4, pid: 999, visible: true, focused: true),
        ])

        let facts = Self.rule.facts(of: picture)

        #expect(facts == DisplayFacts(visible: ["editor"], windowed: ["editor", "browser"], focused: nil))
    }

    @Test func aFocusRequestNamesTheAppsVisibleWindowFirst() {
        let picture = WindowPicture(windows: [
            DisplayWindow(id: 1, pid: 100, visible: false),
            DisplayWindow(id: 2, pid: 101, visible: true),
        ])

        #expect(Self.rule.windows(of: "editor", in: picture).map(\.id) == [2, 1])
    }
}

/// `[Display]` and `AppId=`.
@Suite struct DisplayConfigTests {
    @Test func theDisplayKeysAreParsed() {
        let (daemon, diagnostics) = ConfigLoader.parseDaemon(
            text: "[Display]\nSource=sway\nSwaySocket=/run/user/1000/sway-ipc.sock\nX11Display=:1\n", file: "lifecycled.conf")

        #expect(diagnostics == [])
        #expect(daemon.display.source == .sway)
        #expect(daemon.display.swaySocket == "/run/user/1000/sway-ipc.sock")
        #expect(daemon.display.x11Display == ":1")
    }

    @Test func anUnknownSourceIsAnErrorThatKeepsNone() {
        let (daemon, diagnostics) = ConfigLoader.parseDaemon(text: "[Display]\nSource=wayland\n", file: "lifecycled.conf")

        #expect(diagnostics.count == 1)
        #expect(daemon.display.source == DisplayConfig.Source.none)
    }

    @Test func appIdIsParsed() {
        let (app, diagnostics) = ConfigLoader.parseApp(name: "browser", text: "[App]\nExec=browser\nAppId=org.example.Browser\n",
                                                       file: "apps/browser.conf", defaults: AppDefaults())

        #expect(diagnostics.isEmpty)
        #expect(app?.appID == "org.example.Browser")
    }

    @Test func autoPicksSwayThenX11ThenNone() {
        var config = DisplayConfig()
        config.source = .auto

        #expect(config.resolved(environment: ["SWAYSOCK": "/s.sock", "DISPLAY": ":0"], runtimeDirectories: []) == (.sway, "/s.sock"))
        #expect(config.resolved(environment: ["DISPLAY": ":0"], runtimeDirectories: []) == (.x11, ":0"))
        #expect(config.resolved(environment: [:], runtimeDirectories: []).source == DisplayConfig.Source.none)
    }

    @Test func aSwaySocketInARuntimeDirectoryIsFound() throws {
        let directory = "/tmp/lifecycled-display-\(getpid())"
        mkdir(directory, 0o700)
        defer {
            unlink("\(directory)/sway-ipc.1000.42.sock")
            rmdir(directory)
        }
        close(open("\(directory)/sway-ipc.1000.42.sock", O_CREAT | O_WRONLY, 0o600))
        var config = DisplayConfig()
        config.source = .auto

        #expect(config.resolved(environment: [:], runtimeDirectories: ["/nonexistent", directory])
                == (.sway, "\(directory)/sway-ipc.1000.42.sock"))
    }
}
