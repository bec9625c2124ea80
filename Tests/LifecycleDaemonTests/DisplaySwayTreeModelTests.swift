import Foundation
import Testing
@testable import LifecycleDaemon

/// The sway tree model: a focus and a workspace switch followed from their events give the picture a tree read
/// gives, and what the model cannot follow asks for the tree. `focus-steps.json` is sway 1.7 recorded (trimmed to
/// the fields lifecycled reads): workspace 1 holds `a` beside a tabbed container of `b` and `c` (tabbed in split),
/// workspace 2 a stacked container of `d`, `e` and `f`, workspace 3 the tiled `h` and the floating `g`; each step is
/// a command, the events it sent and the tree after it.
@Suite struct DisplaySwayTreeModelTests {
    struct Step {
        var command: String
        var events: [(type: UInt32, payload: [UInt8])]
        var tree: [UInt8]
    }

    static func json(_ object: Any) throws -> [UInt8] { Array(try JSONSerialization.data(withJSONObject: object)) }

    static func recording() throws -> (initial: [UInt8], steps: [Step]) {
        let object = try JSONSerialization.jsonObject(with: Data(try DisplaySwayCodecTests.fixture("focus-steps.json")))
        let root = try #require(object as? [String: Any])
        let steps = try #require(root["steps"] as? [[String: Any]]).map { step in
            Step(command: step["command"] as? String ?? "",
                 events: try (step["events"] as? [[Any]] ?? []).map { pair in
                     (SwayMessageType.eventBit | UInt32(pair[0] as? Int ?? -1), try json(pair[1]))
                 },
                 tree: try json(step["tree"] as Any))
        }
        return (try json(root["initial"] as Any), steps)
    }

    /// What SwaySource does with an event, on the model alone.
    static func follow(_ model: inout SwayTreeModel, _ type: UInt32, _ payload: [UInt8]) throws -> SwayTreeModel.Step {
        switch type {
        case SwayMessageType.windowEvent:
            let event = try SwayTree.windowEvent(payload)
            return model.follow(window: event.change, event.window)
        case SwayMessageType.workspaceEvent:
            let event = try SwayTree.workspaceEvent(payload)
            return model.follow(workspace: event.change, event.workspace)
        default:
            Issue.record("an event of type \(type) in the recording")
            return SwayTreeModel.Step(readTree: true)
        }
    }

    @Test func theRuleGivesSwaysOwnVisibilityOnEveryRecordedTree() throws {
        let (initial, steps) = try Self.recording()
        for tree in [initial] + steps.map(\.tree) {
            let model = try SwayTree.model(fromTree: tree)
            #expect(model.exact, "every view's visible flag is what the rule derives")
            for window in model.picture.windows { #expect(model.visible(window.id) == window.visible) }
        }
        let first = try SwayTree.picture(fromTree: initial)
        #expect(first.windows.filter(\.visible).count == 2, "a and the shown tab of b and c; workspaces 2 and 3 are hidden")
    }

    @Test func focusAndWorkspaceEventsGiveThePictureATreeReadGivesWithoutReadingIt() throws {
        let (initial, steps) = try Self.recording()
        var model = try SwayTree.model(fromTree: initial)
        var reads: [String] = []
        var compared = 0
        for step in steps {
            var readTree = false
            for (type, payload) in step.events { readTree = try Self.follow(&model, type, payload).readTree || readTree }
            let truth = try SwayTree.picture(fromTree: step.tree)
            if readTree {
                reads.append(step.command)
                model = try SwayTree.model(fromTree: step.tree)
            } else if !step.events.isEmpty {
                // Without an event (`focus parent`, a layout change) there is nothing to follow.
                #expect(model.picture == truth, "after \(step.command)")
                compared += 1
            }
        }
        // Only a workspace made (init) or removed (empty) changes the structure among these steps.
        #expect(reads == ["workspace 4", "workspace 3"])
        #expect(compared >= 20)
    }

    @Test func aHiddenTabShowsWhenFocusedAndHidesTheOther() throws {
        let (initial, steps) = try Self.recording()
        var model = try SwayTree.model(fromTree: initial)
        let ids = Dictionary(uniqueKeysWithValues: model.picture.windows.map { ($0.appID ?? "", $0.id) })
        let b = try #require(ids["b"]), c = try #require(ids["c"])
        for step in steps.prefix(3) {
            for (type, payload) in step.events { _ = try Self.follow(&model, type, payload) }
            let visible = Set(model.picture.windows.filter(\.visible).compactMap(\.appID))
            if step.command == "[con_id=\(b)] focus" { #expect(visible == ["a", "b"]) }
            if step.command == "[con_id=\(c)] focus" { #expect(visible == ["a", "c"]) }
        }
        #expect(model.picture.focused?.id == c)
    }

    @Test func aFocusOnAContainerTheModelDoesNotHoldShowsItAtOnceAndReadsTheTree() throws {
        var model = try SwayTree.model(fromTree: Self.recording().initial)
        let stranger = DisplayWindow(id: 999, pid: 4242, appID: "new", visible: true, focused: true)

        let step = model.follow(window: "focus", stranger)

        #expect(step == SwayTreeModel.Step(changed: true, readTree: true))
        #expect(model.picture.focused == stranger)
        #expect(model.picture.windows.filter(\.focused).count == 1)
        #expect(!model.exact, "until the tree places it, every focus reads the tree")
    }

    @Test(arguments: [#""fullscreen_mode":1"#, #""sticky":true"#])
    func aFullscreenOrStickyWindowMakesEveryFocusReadTheTree(_ field: String) throws {
        let tree = #"{"id":1,"type":"root","nodes":[{"id":2,"type":"output","current_workspace":"1","nodes":[{"id":3,"type":"workspace","name":"1","layout":"splith","focus":[4,5],"nodes":[{"id":4,"type":"con","pid":10,"app_id":"x","visible":true,"focused":true,"#
            + field + #"},{"id":5,"type":"con","pid":11,"app_id":"y","visible":true}]}]}]}"#
        var model = try SwayTree.model(fromTree: Array(tree.utf8))
        #expect(!model.exact)
        #expect(model.follow(window: "focus", DisplayWindow(id: 5, pid: 11, appID: "y", visible: true, focused: true)).readTree)
        #expect(model.follow(workspace: "focus", 3).readTree)
    }

    @Test func structureChangesReadTheTreeAndTitlesChangeNothing() throws {
        var model = try SwayTree.model(fromTree: Self.recording().initial)
        let window = try #require(model.picture.windows.first)
        for change in ["title", "mark", "urgent"] { #expect(model.follow(window: change, window) == SwayTreeModel.Step()) }
        for change in ["new", "move", "floating", "fullscreen_mode"] { #expect(model.follow(window: change, window).readTree) }
        for change in ["init", "empty", "move", "reload"] { #expect(model.follow(workspace: change, 1).readTree) }
        for change in ["rename", "urgent"] { #expect(model.follow(workspace: change, 1) == SwayTreeModel.Step()) }
        #expect(model.follow(workspace: "focus", 424_242).readTree, "an unknown workspace")

        let close = model.follow(window: "close", window)
        #expect(close == SwayTreeModel.Step(changed: true, readTree: true), "a closed tab may show the one behind it")
        #expect(!model.picture.windows.contains { $0.id == window.id })
    }

    @Test func aBindingReadsTheTreeUnlessItOnlyMovesTheFocus() {
        for command in ["focus left", "workspace number 2", "[con_id=7] focus", "focus right; workspace 3", "nop"] {
            #expect(!SwayTreeModel.follow(binding: command).readTree, "\(command)")
        }
        for command in ["layout tabbed", "splitv", "focus left; layout stacking", "move container to workspace 2", "exec foot", ""] {
            #expect(SwayTreeModel.follow(binding: command).readTree, "\(command)")
        }
    }

    @Test func aBindingEventGivesItsCommand() throws {
        let payload = #"{"change":"run","binding":{"command":"layout tabbed","event_state_mask":["Mod4"],"input_code":0,"symbol":"w","input_type":"keyboard"}}"#
        #expect(try SwayTree.bindingCommand(Array(payload.utf8)) == "layout tabbed")
        #expect(throws: SwayIPCError.self) { try SwayTree.bindingCommand(Array(#"{"change":"run"}"#.utf8)) }
    }
}
