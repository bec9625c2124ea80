// sway's tree kept as far as visibility needs it, so that a focus change is followed from its event alone: which
// container holds which, each one's layout and focus order, and which workspace each output shows. sway's own rule
// (view_is_visible in sway/tree/view.c) is that a view is visible when its workspace is the one its output shows
// and, under every tabbed or stacked ancestor, it lies on that container's active tab (the first tiling child in
// the container's focus order). A focus moves each ancestor's focus to the path of the focused view and shows its
// workspace on its output. What the model does not follow (fullscreen, sticky windows, a tree whose flags this rule
// does not reproduce) makes it inexact, and then every change is read from a whole tree again.

/// The tree model of one sway connection and the picture it gives.
struct SwayTreeModel {
    enum Kind: Equatable {
        case root, output, workspace, container
    }

    struct Container {
        var kind: Kind
        var parent: Int64?
        /// A tabbed or stacked container: only its active tiling child shows.
        var stacks: Bool
        /// A floating child of its parent (tabs never hide it).
        var floating: Bool
        var children: [Int64]
        /// The children, most recently focused first (sway's "focus" array).
        var focus: [Int64]
        var isView: Bool
    }

    private(set) var containers: [Int64: Container] = [:]
    /// The workspace each output shows, by the output's id.
    private var shown: [Int64: Int64] = [:]
    /// The picture as sway's flags give it, kept sorted by window id.
    private(set) var picture = WindowPicture()
    private var position: [Int64: Int] = [:]
    private var focusedID: Int64?
    /// The model follows focus changes by itself; false for a tree with something it does not follow.
    private(set) var exact = true

    init() {}

    /// The model of a GET_TREE reply, with the picture the reply's own flags give.
    init(tree root: SwayNode) {
        var views: [DisplayWindow] = []
        var outputs: [(id: Int64, current: String?)] = []
        var workspaceIDs: [String: Int64] = [:]
        var stack: [(node: SwayNode, parent: Int64?, floating: Bool)] = [(root, nil, false)]
        while let (node, parent, floating) = stack.popLast() {
            let kind: Kind = switch node.type {
            case "root": .root
            case "output": .output
            case "workspace": .workspace
            default: .container
            }
            let tiling = node.nodes ?? []
            let floaters = node.floatingNodes ?? []
            let window = SwayTree.window(of: node)
            containers[node.id] = Container(kind: kind, parent: parent, stacks: node.layout == "tabbed" || node.layout == "stacked",
                                            floating: floating, children: tiling.map(\.id) + floaters.map(\.id),
                                            focus: node.focus ?? [], isView: window != nil)
            if let window { views.append(window) }
            if kind == .container, (node.fullscreenMode ?? 0) != 0 || node.sticky == true { exact = false }
            if kind == .output { outputs.append((node.id, node.currentWorkspace)) }
            if kind == .workspace, let name = node.name { workspaceIDs[name] = node.id }
            for child in tiling { stack.append((child, node.id, false)) }
            for child in floaters { stack.append((child, node.id, true)) }
        }
        for (output, current) in outputs {
            if let current, let workspace = workspaceIDs[current], containers[workspace]?.parent == output { shown[output] = workspace }
        }
        views.sort { $0.id < $1.id }
        picture = WindowPicture(windows: views)
        for (index, window) in views.enumerated() {
            position[window.id] = index
            if window.focused { focusedID = window.id }
            // The rule must give what sway says, or the model cannot stand in for the tree.
            if visible(window.id) != window.visible { exact = false }
        }
        if let focusedID, !picture.windows[position[focusedID]!].visible { exact = false }
    }

    // MARK: Events

    /// What an event asks of the source: report the model's picture, read the tree, or both. Neither: the event
    /// changes nothing lifecycled follows.
    struct Step: Equatable {
        var changed = false
        var readTree = false
    }

    /// A window event. A focus is placed in the model; a close leaves the picture at once, and the tree is read as
    /// a closed tab shows the one behind it, which no focus event may name. Every other change but a title, mark
    /// or urgency changes the structure.
    mutating func follow(window change: String, _ window: DisplayWindow?) -> Step {
        switch change {
        case "title", "mark", "urgent":
            return Step()
        case "focus":
            guard let window else { return Step(readTree: true) }
            if focus(window) { return Step(changed: true) }
            focusUnplaced(window)
            return Step(changed: true, readTree: true)
        case "close":
            guard let window else { return Step(readTree: true) }
            close(window.id)
            return Step(changed: true, readTree: true)
        default:
            return Step(readTree: true)
        }
    }

    /// A workspace event: one shown is placed in the model; one made, emptied, moved or reloaded changes the
    /// structure.
    mutating func follow(workspace change: String, _ workspace: Int64?) -> Step {
        switch change {
        case "rename", "urgent":
            return Step()
        case "focus":
            guard let workspace, show(workspace: workspace) else { return Step(readTree: true) }
            return Step(changed: true)
        default:
            return Step(readTree: true)
        }
    }

    /// A key binding ran `command`. A layout change (`layout tabbed`, `split`) sends no event of its own, so every
    /// binding but one that only moves the focus or switches the workspace (whose events follow) reads the tree.
    static func follow(binding command: String) -> Step {
        let commands = command.split(whereSeparator: { $0 == ";" || $0 == "," })
        let onlyFocus = !commands.isEmpty && commands.allSatisfy { part in
            var text = part.drop { $0 == " " }
            if text.first == "[", let close = text.firstIndex(of: "]") { text = text[text.index(after: close)...].drop { $0 == " " } }
            let verb = text.prefix { $0 != " " }
            return verb == "focus" || verb == "workspace" || verb == "nop"
        }
        return Step(readTree: !onlyFocus)
    }

    // MARK: Changes

    /// A view took the focus (a window `focus` event). Returns false when the model cannot place it (an unknown
    /// container, an inexact model, a view the rule would not show): the tree must be read.
    mutating func focus(_ window: DisplayWindow) -> Bool {
        guard exact, containers[window.id]?.isView == true else { return false }
        var touched: Set<Int64> = []
        var child = window.id
        var workspace: Int64?
        while let parent = containers[child]?.parent, var container = containers[parent] {
            if container.focus.first != child {
                container.focus.removeAll { $0 == child }
                container.focus.insert(child, at: 0)
                containers[parent] = container
            }
            if container.kind == .workspace { workspace = parent }
            if container.kind == .output, let workspace {
                if let before = shown[parent], before != workspace { touched.insert(before) }
                shown[parent] = workspace
            }
            child = parent
        }
        guard let workspace else { return false }
        touched.insert(workspace)
        if let before = focusedID, before != window.id { setFocused(before, false) }
        focusedID = window.id
        if let index = position[window.id] {
            // The event's own view of the window: its app id and pid as sway has them now.
            var updated = window
            updated.visible = picture.windows[index].visible
            updated.focused = true
            picture.windows[index] = updated
        }
        refresh(touched)
        return picture.windows[position[window.id]!].visible
    }

    /// A workspace was shown (a workspace `focus` event): it replaces the one its output showed. Returns false
    /// when the model cannot place it.
    mutating func show(workspace: Int64) -> Bool {
        guard exact, let container = containers[workspace], container.kind == .workspace, let output = container.parent,
              containers[output]?.kind == .output else { return false }
        var touched: Set<Int64> = [workspace]
        if let before = shown[output], before != workspace { touched.insert(before) }
        shown[output] = workspace
        // The focus stays only on a view of the shown workspace; a window event names the next one.
        if let focusedID, self.workspace(of: focusedID) != workspace {
            setFocused(focusedID, false)
            self.focusedID = nil
        }
        refresh(touched)
        return true
    }

    /// A view the model does not hold took the focus: shown as focused at once, as its event says, until the tree
    /// read after it places it.
    mutating func focusUnplaced(_ window: DisplayWindow) {
        if let before = focusedID, before != window.id { setFocused(before, false) }
        for index in picture.windows.indices where picture.windows[index].focused { picture.windows[index].focused = false }
        var focused = window
        focused.focused = true
        focused.visible = true
        if let index = position[window.id] {
            picture.windows[index] = focused
        } else {
            picture.windows.append(focused)
            position[window.id] = picture.windows.count - 1
        }
        focusedID = window.id
        exact = false
    }

    /// A window closed: it leaves the picture at once.
    mutating func close(_ id: Int64) {
        guard let index = position[id] else { return }
        picture.windows.remove(at: index)
        position = [:]
        for (index, window) in picture.windows.enumerated() { position[window.id] = index }
        if focusedID == id { focusedID = nil }
        exact = false
    }

    // MARK: Visibility

    /// Whether sway shows the view `id`, by the rule in the file's header.
    func visible(_ id: Int64) -> Bool {
        var child = id
        while let container = containers[child], let parent = container.parent, let above = containers[parent] {
            switch above.kind {
            case .output:
                return shown[parent] == child
            case .workspace, .container:
                if above.stacks, !container.floating, activeTab(of: above) != child { return false }
            case .root:
                return false
            }
            child = parent
        }
        return false
    }

    private func activeTab(of container: Container) -> Int64? {
        container.focus.first { id in containers[id].map { !$0.floating } ?? false }
            ?? container.children.first { id in containers[id].map { !$0.floating } ?? false }
    }

    private func workspace(of id: Int64) -> Int64? {
        var current: Int64? = id
        while let id = current, let container = containers[id] {
            if container.kind == .workspace { return id }
            current = container.parent
        }
        return nil
    }

    private mutating func setFocused(_ id: Int64, _ focused: Bool) {
        if let index = position[id] { picture.windows[index].focused = focused }
    }

    /// Visibility again for every view of the workspaces `touched`: a focus or a workspace switch moves nothing else.
    private mutating func refresh(_ touched: Set<Int64>) {
        for workspace in touched {
            var stack = [workspace]
            while let id = stack.popLast(), let container = containers[id] {
                if container.isView, let index = position[id] { picture.windows[index].visible = visible(id) }
                stack.append(contentsOf: container.children)
            }
        }
    }
}
