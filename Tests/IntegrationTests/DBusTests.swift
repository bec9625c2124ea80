import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// The D-Bus API against a real private dbus-daemon, driven by two independent clients: busctl (sd-bus) and
/// gdbus (GLib's GDBus). Serialized: each test starts its own bus and daemon.
@Suite("the D-Bus API", .serialized)
struct DBusTests {
    static let name = "org.lifecycled.Lifecycle1"
    static let manager = "/org/lifecycled/Lifecycle1"
    static let managerInterface = "org.lifecycled.Lifecycle1.Manager"
    static let appInterface = "org.lifecycled.Lifecycle1.App"
    static let nobody: UInt32 = 65534

    func client(_ arguments: String = "") -> String {
        "[App]\nExec=\(DaemonHarness.pythonClient) \(arguments)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
    }

    /// A bus, then a daemon told its address, with these apps; both stopped and removed after `body`.
    func withBus(_ apps: [String: String], daemonConfig: String = "", environment: [String: String] = [:],
                 _ body: (DaemonHarness, PrivateBus) throws -> Void) throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let bus = try PrivateBus(directory: harness.root.appendingPathComponent("bus"))
        defer { bus.stop() }
        for (name, text) in apps { try harness.app(name, text) }
        try harness.daemonConfig(daemonConfig)
        // The socket's path alone: the address dbus-daemon prints names its guid, which a restarted bus does not keep.
        try harness.start(extraEnvironment: ["LIFECYCLED_BUS_ADDRESS": "unix:path=\(bus.socketPath)"].merging(environment) { $1 })
        try harness.waitUntil("the daemon owns \(Self.name)") {
            try bus.run("busctl", ["status", Self.name]).status == 0
        }
        try body(harness, bus)
        #expect(harness.isDaemonRunning, "the daemon must still be running at the end of the test")
    }

    static func path(_ app: String) -> String { "\(manager)/app/\(app)" }

    /// `busctl call` on the manager (`app` nil) or an app object.
    @discardableResult
    func call(_ bus: PrivateBus, _ method: String, on app: String? = nil, _ signature: String = "", _ arguments: String...,
              asUser uid: UInt32? = nil) throws -> PrivateBus.Output {
        let path = app.map(Self.path) ?? Self.manager
        let interface = app == nil ? Self.managerInterface : Self.appInterface
        return try bus.run("busctl", ["call", Self.name, path, interface, method] + (signature.isEmpty ? [] : [signature]) + arguments,
                           asUser: uid)
    }

    func mustCall(_ bus: PrivateBus, _ method: String, on app: String? = nil, _ signature: String = "", _ arguments: String...) throws -> String {
        try mustCall(bus, method, on: app, signature, arguments)
    }

    func mustCall(_ bus: PrivateBus, _ method: String, on app: String? = nil, _ signature: String, _ arguments: [String]) throws -> String {
        let path = app.map(Self.path) ?? Self.manager
        let interface = app == nil ? Self.managerInterface : Self.appInterface
        let output = try bus.run("busctl", ["call", Self.name, path, interface, method] + (signature.isEmpty ? [] : [signature]) + arguments)
        guard output.status == 0 else { throw HarnessError("busctl call \(method) failed: \(output.stderr)") }
        return output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func property(_ bus: PrivateBus, _ name: String, of app: String? = nil, asUser uid: UInt32? = nil) throws -> String {
        let output = try bus.run("busctl", ["get-property", Self.name, app.map(Self.path) ?? Self.manager,
                                            app == nil ? Self.managerInterface : Self.appInterface, name], asUser: uid)
        guard output.status == 0 else { throw HarnessError("busctl get-property \(name) failed: \(output.stderr)") }
        return output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// `gdbus call` of `interface.method` on `path`.
    func gdbus(_ bus: PrivateBus, _ path: String, _ method: String, _ arguments: String...) throws -> PrivateBus.Output {
        try bus.run("gdbus", ["call", "--address", "ADDRESS", "--dest", Self.name, "--object-path", path, "--method", method] + arguments)
    }

    @Test("busctl and gdbus see the documented interface and call every manager method; changes answer once settled")
    func managerMethodsAndProperties() throws {
        try withBus(["a": client(), "b": client("--observe significantTimeChange")]) { daemon, bus in
            let introspection = try bus.run("busctl", ["introspect", Self.name, Self.manager]).stdout
            for member in ["ListApps", "GetApp", "Launch", "Focus", "Deactivate", "Background", "Suspend", "Resume", "Terminate",
                           "Post", "Reload", "SetDisplay", "SetDisplayPids", "StateChanged", "Version", "CgroupLayout",
                           "DisplaySource", "AppsActive", "org.freedesktop.DBus.ObjectManager"] {
                #expect(introspection.contains(member), "introspection lacks \(member)")
            }
            #expect(try mustCall(bus, "ListApps")
                == "a(ssuo) 2 \"a\" \"notRunning\" 0 \"\(Self.path("a"))\" \"b\" \"notRunning\" 0 \"\(Self.path("b"))\"")
            #expect(try mustCall(bus, "GetApp", "s", "b") == "o \"\(Self.path("b"))\"")

            // Each change is answered when the app has settled: the state is already the new one.
            _ = try mustCall(bus, "Launch", "sb", "a", "false")
            #expect(try daemon.status("a").state.rawValue == "inactive")
            let launched = try gdbus(bus, Self.manager, "\(Self.managerInterface).Launch", "b", "true")
            #expect(launched.status == 0, "\(launched.stderr)")
            #expect(try daemon.status("b").state.rawValue == "background")
            for (method, state) in [("Focus", "active"), ("Deactivate", "inactive"), ("Focus", "active"), ("Background", "background"),
                                    ("Suspend", "suspended"), ("Resume", "background"), ("Terminate", "notRunning")] {
                _ = try mustCall(bus, method, "s", "a")
                #expect(try daemon.status("a").state.rawValue == state, "after \(method)")
            }
            #expect(daemon.records("a").first { $0.type == "didFinishLaunching" }?.launchOptions?["launchedBy"] == .string("D-Bus"))

            let listed = try mustCall(bus, "ListApps")
            let pid = try #require(try daemon.status("b").pid)
            #expect(listed.contains("\"b\" \"background\" \(pid) \"\(Self.path("b"))\""))

            let posted = try gdbus(bus, Self.manager, "\(Self.managerInterface).Post", "significantTimeChange", "", "{}")
            #expect(posted.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "(uint32 1, uint32 0)", "\(posted.stderr)")
            try daemon.waitUntil("b hears the post") { daemon.records("b").contains { $0.type == "notification" || $0.name == "significantTimeChange" } }

            _ = try mustCall(bus, "Reload")
            #expect(daemon.log.contains("Reload requested by uid 0"))

            let refused = try call(bus, "SetDisplay", "ass", "1", "a", "a")
            #expect(refused.status != 0 && refused.stderr.contains("needs [Display] Source=dbus"))
            let refusedPids = try call(bus, "SetDisplayPids", "auu", "0", "0")
            #expect(refusedPids.status != 0 && refusedPids.stderr.contains("needs [Display] Source=dbus"))

            // The daemon's properties, through both clients.
            #expect(try property(bus, "Version") == "s \"0.1.0\"")
            let layout = try #require(try daemon.lifectl("status", "--json").stdout.split(separator: "\"cgroupLayout\":\"").dropFirst().first?
                .prefix { $0 != "\"" })
            #expect(try property(bus, "CgroupLayout") == "s \"\(layout)\"")
            #expect(try property(bus, "DisplaySource").contains("none"))
            for (name, count) in [("AppsNotRunning", 1), ("AppsInactive", 0), ("AppsActive", 0), ("AppsBackground", 1), ("AppsSuspended", 0)] {
                #expect(try property(bus, name) == "u \(count)", "\(name)")
            }
            let all = try gdbus(bus, Self.manager, "org.freedesktop.DBus.Properties.GetAll", Self.managerInterface)
            #expect(all.stdout.contains("'Version': <'0.1.0'>") && all.stdout.contains("'AppsBackground': <uint32 1>"), "\(all.stdout)")
        }
    }

    @Test("app objects: every property and method; StateChanged, PropertiesChanged, InterfacesAdded and InterfacesRemoved")
    func appObjectsAndSignals() throws {
        try withBus(["a": client()]) { daemon, bus in
            let signals = daemon.root.appendingPathComponent("signals.txt")
            let monitor = try bus.monitor(into: signals)
            defer { PrivateBus.end(monitor) }

            _ = try mustCall(bus, "Launch", on: "a", "b", "true")
            _ = try mustCall(bus, "Focus", on: "a")
            _ = try mustCall(bus, "Deactivate", on: "a")
            _ = try mustCall(bus, "Background", on: "a")
            _ = try mustCall(bus, "Suspend", on: "a")
            #expect(try property(bus, "State", of: "a") == "s \"suspended\"")
            _ = try mustCall(bus, "Resume", on: "a")
            let status = try daemon.status("a")
            #expect(try property(bus, "Name", of: "a") == "s \"a\"")
            #expect(try property(bus, "State", of: "a") == "s \"background\"")
            #expect(try property(bus, "Pid", of: "a") == "u \(try #require(status.pid))")
            #expect(try property(bus, "Protocol", of: "a") == "s \"\(status.protocol)\"")
            #expect(try property(bus, "Adopted", of: "a") == "b false")
            #expect(try property(bus, "DeadlineMisses", of: "a") == "u 0")
            #expect(try property(bus, "QueuedNotifications", of: "a") == "u 0")
            #expect(try property(bus, "Scenes", of: "a") == "a(ssss) 0")
            #expect(try property(bus, "Reclaim", of: "a") == "(stttt) \"\" 0 0 0 0", "no reclaim yet")
            let since = try property(bus, "Since", of: "a").split(separator: " ").last.flatMap { UInt64($0) } ?? 0
            let now = UInt64(Date().timeIntervalSince1970 * 1_000_000)
            #expect(since > now - 600_000_000 && since <= now, "Since is the transition's realtime in microseconds")
            _ = try mustCall(bus, "Terminate", on: "a")

            // An app added and removed by a reload: its object appears and goes.
            try daemon.app("c", client())
            daemon.reload()
            try daemon.waitUntil("c's object appears") { (try? self.property(bus, "Name", of: "c")) == "s \"c\"" }
            let objects = try gdbus(bus, Self.manager, "org.freedesktop.DBus.ObjectManager.GetManagedObjects")
            #expect(objects.stdout.contains("'\(Self.path("c"))': {") && objects.stdout.contains("{'Name': <'c'>, 'State': <'notRunning'>"),
                    "\(objects.stdout)")
            try daemon.removeApp("c")
            daemon.reload()
            try daemon.waitUntil("c's object goes") { (try? self.property(bus, "Name", of: "c")) == nil }
            try daemon.waitUntil("the monitor saw InterfacesRemoved") {
                ((try? String(contentsOf: signals, encoding: .utf8)) ?? "").contains("InterfacesRemoved")
            }
            PrivateBus.end(monitor)

            let lines = try String(contentsOf: signals, encoding: .utf8).split(separator: "\n").map(String.init)
            let transitions = lines.filter { $0.contains("StateChanged") }.compactMap { line -> String? in
                let fields = line.split(separator: "'").map(String.init)
                return fields.count > 5 ? "\(fields[3])>\(fields[5])" : nil
            }
            #expect(transitions == ["notRunning>inactive", "inactive>background", "background>inactive", "inactive>active", "active>inactive",
                                    "inactive>background", "background>suspended", "suspended>background", "background>notRunning"],
                    "\(lines.joined(separator: "\n"))")
            #expect(lines.contains { $0.contains("StateChanged ('a', 'notRunning', 'inactive', 'launched by D-Bus')") })
            let changes = lines.filter { $0.hasPrefix("\(Self.path("a")): org.freedesktop.DBus.Properties.PropertiesChanged") }
            #expect(changes.contains { $0.contains("'State': <'suspended'>") })
            #expect(changes.contains { $0.contains("'Pid': <uint32 0>") && $0.contains("'State': <'notRunning'>") })
            #expect(lines.contains { $0.contains("InterfacesAdded (objectpath '\(Self.path("c"))'") })
            #expect(lines.contains { $0.contains("InterfacesRemoved (objectpath '\(Self.path("c"))'") })
            #expect(lines.contains { $0.contains("\(Self.manager): org.freedesktop.DBus.Properties.PropertiesChanged ('\(Self.managerInterface)', {'AppsNotRunning'") })
            // The manager's counts follow each change: a suspended and resumed, then c added beside the terminated a.
            let counts = lines.filter { $0.hasPrefix("\(Self.manager): org.freedesktop.DBus.Properties.PropertiesChanged") }
            #expect(counts.contains { $0.contains("'AppsSuspended': <uint32 1>") }, "\(counts.joined(separator: "\n"))")
            #expect(counts.contains { $0.contains("'AppsSuspended': <uint32 0>") }, "\(counts.joined(separator: "\n"))")
            #expect(counts.contains { $0.contains("'AppsNotRunning': <uint32 2>") }, "\(counts.joined(separator: "\n"))")
        }
    }

    @Test("an app's scene sessions are its Scenes property; a new scene is a PropertiesChanged of Scenes")
    func scenesProperty() throws {
        let scenes = "[Scenes]\nSupportsMultipleScenes=yes\nConfiguration=window:Main window:Editor\n"
        try withBus(["s": client() + "\n" + scenes]) { daemon, bus in
            _ = try mustCall(bus, "Focus", on: "s")
            let first = try #require(try daemon.status("s").scenes?.first)
            #expect(try property(bus, "Scenes", of: "s")
                == "a(ssss) 1 \"\(first.scene)\" \"\(first.role)\" \"\(first.configuration)\" \"\(first.state)\"")
            let signals = daemon.root.appendingPathComponent("scene-signals.txt")
            let monitor = try bus.monitor(into: signals)
            defer { PrivateBus.end(monitor) }
            try daemon.control("scene", "open", "s")
            try daemon.waitUntil("Scenes changes") {
                ((try? String(contentsOf: signals, encoding: .utf8)) ?? "").contains("'Scenes': <[('\(first.scene)'")
            }
            let all = try #require(try daemon.status("s").scenes)
            #expect(all.count == 2)
            #expect(try property(bus, "Scenes", of: "s").hasPrefix("a(ssss) 2 \"\(first.scene)\""))
        }
    }

    @Test("named errors carry lifectl's text: UnknownApp, Refused")
    func namedErrors() throws {
        try withBus(["a": client()]) { daemon, bus in
            let unknown = try gdbus(bus, Self.manager, "\(Self.managerInterface).Focus", "nope")
            let lifectlUnknown = try daemon.lifectl("focus", "nope").stderr.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(unknown.status != 0)
            #expect(unknown.stderr.contains("org.lifecycled.Lifecycle1.Error.UnknownApp: cannot focus 'nope': no such app"))
            #expect(lifectlUnknown.contains("cannot focus 'nope': no such app"))
            let unknownObject = try gdbus(bus, Self.manager, "\(Self.managerInterface).GetApp", "nope")
            #expect(unknownObject.stderr.contains("org.lifecycled.Lifecycle1.Error.UnknownApp: no such app 'nope'"))
            let unknownPost = try gdbus(bus, Self.manager, "\(Self.managerInterface).Post", "significantTimeChange", "nope", "{}")
            #expect(unknownPost.stderr.contains("org.lifecycled.Lifecycle1.Error.UnknownApp: cannot post 'significantTimeChange' to 'nope': no such app"))

            let refused = try gdbus(bus, Self.path("a"), "\(Self.appInterface).Suspend")
            let lifectlRefused = try daemon.lifectl("suspend", "a").stderr
            #expect(refused.status != 0)
            #expect(refused.stderr.contains("org.lifecycled.Lifecycle1.Error.Refused: "))
            let text = try #require(refused.stderr.components(separatedBy: "Error.Refused: ").last?.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(!text.isEmpty && lifectlRefused.contains(text), "bus: \(text); lifectl: \(lifectlRefused)")
            let badPost = try gdbus(bus, Self.manager, "\(Self.managerInterface).Post", "noSuchType", "", "{}")
            #expect(badPost.stderr.contains("org.lifecycled.Lifecycle1.Error.Refused: cannot post 'noSuchType': no such notification type"))
        }
    }

    @Test("nobody reads everything and is refused every change with AccessDenied; [Control] Group= grants changes")
    func authorization() throws {
        try withBus(["a": client()]) { daemon, bus in
            #expect(try property(bus, "State", of: "a", asUser: Self.nobody) == "s \"notRunning\"")
            #expect(try call(bus, "ListApps", asUser: Self.nobody).status == 0)
            for (method, signature, arguments) in [("Focus", "s", ["a"]), ("Launch", "sb", ["a", "true"]), ("Reload", "", []),
                                                   ("Post", "sss", ["significantTimeChange", "", "{}"])] {
                let output = try bus.run("busctl", ["call", Self.name, Self.manager, Self.managerInterface, method]
                                                   + (signature.isEmpty ? [] : [signature]) + arguments, asUser: Self.nobody)
                #expect(output.status != 0 && output.stderr.contains("permission denied: \(method) is for root"), "\(method): \(output.stderr)")
            }
            let onObject = try call(bus, "Focus", on: "a", asUser: Self.nobody)
            #expect(onObject.stderr.contains("permission denied"))
            #expect(try daemon.status("a").state.rawValue == "notRunning")
            let named = try bus.run("gdbus", ["call", "--address", "ADDRESS", "--dest", Self.name, "--object-path", Self.manager,
                                              "--method", "\(Self.managerInterface).Focus", "a"], asUser: Self.nobody)
            #expect(named.stderr.contains("org.lifecycled.Lifecycle1.Error.AccessDenied"))

            // The group is looked up at each call: the next one is allowed.
            try daemon.daemonConfig("[Control]\nGroup=nogroup\n")
            daemon.reload()
            try daemon.waitUntil("nobody, in group nogroup, may focus a") {
                try call(bus, "Focus", "s", "a", asUser: Self.nobody).status == 0
            }
            #expect(try daemon.status("a").state.rawValue == "active")
        }
    }

    @Test("on the system bus with no polkit there, a stranger is still refused (polkit asked, no answer)")
    func systemBusWithoutPolkitRefuses() throws {
        // No polkitd on this bus: the question to polkit fails and the refusal stands. The tests below run one.
        try withBus(["a": client()], daemonConfig: "[Control]\nBus=system\n") { daemon, bus in
            #expect(daemon.log.contains("on the system bus at unix:path=\(bus.socketPath)"))
            let output = try call(bus, "Focus", "s", "a", asUser: Self.nobody)
            #expect(output.status != 0 && output.stderr.contains("permission denied"))
            #expect(try daemon.status("a").state.rawValue == "notRunning")
            _ = try mustCall(bus, "Focus", "s", "a")
            #expect(try daemon.status("a").state.rawValue == "active")
        }
    }

    /// `lifectl VERB` is answered while `what` holds, within far less than sd-bus's own timeout of a call, which a
    /// loop waiting for the stalled peer would sit out.
    func expectAnswered(_ harness: DaemonHarness, _ verb: String, while what: String) throws {
        let lifectl = try harness.startLifectl(verb)
        defer { PrivateBus.end(lifectl) }
        if (try? harness.waitUntil("lifectl \(verb) is answered while \(what)", timeout: 8) { !lifectl.isRunning }) != nil {
            #expect(lifectl.terminationStatus == 0)
        } else {
            Issue.record("lifectl \(verb) is not answered while \(what): the loop waits for it")
        }
    }

    // MARK: polkit

    /// The test's polkit rule: `daemon` (uid 1) allowed, `bin` (uid 2) asked to authenticate as an administrator
    /// (`auth_admin`, an interactive check), anyone else denied.
    static let polkitRules = """
        polkit.addRule(function(action, subject) {
            if (action.id != "org.lifecycled.manage") return polkit.Result.NOT_HANDLED;
            if (subject.user == "daemon") return polkit.Result.YES;
            if (subject.user == "bin") return polkit.Result.AUTH_ADMIN;
            return polkit.Result.NO;
        });
        """
    static let allowedUser: UInt32 = 1
    static let authAdminUser: UInt32 = 2

    /// A bus, a real polkitd on it (with `polkitRules` and the project's action file), and a daemon that takes the
    /// bus for the system bus, so that it asks polkit about callers its own rule refuses.
    func withPolkit(_ apps: [String: String], daemonConfig: String = "", _ body: (DaemonHarness, PrivateBus, PolkitDaemon) throws -> Void) throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let bus = try PrivateBus(directory: harness.root.appendingPathComponent("bus"))
        defer { bus.stop() }
        let polkit = try PolkitDaemon(bus: bus, directory: harness.root.appendingPathComponent("polkit"), rules: Self.polkitRules)
        defer { polkit.stop() }
        for (name, text) in apps { try harness.app(name, text) }
        try harness.daemonConfig("[Control]\nBus=system\n" + daemonConfig)
        try harness.start(extraEnvironment: ["LIFECYCLED_BUS_ADDRESS": "unix:path=\(bus.socketPath)"])
        try harness.waitUntil("the daemon owns \(Self.name)") { try bus.run("busctl", ["status", Self.name]).status == 0 }
        try body(harness, bus, polkit)
        #expect(harness.isDaemonRunning, "the daemon must still be running at the end of the test")
    }

    /// A `busctl call` of the manager's `method` on `app` as `uid`, left running; its output in files beside it.
    final class BackgroundCall {
        let process = Process()
        let out: URL, err: URL

        init(_ bus: PrivateBus, _ method: String, _ app: String, asUser uid: UInt32, in directory: URL, tag: String) throws {
            out = directory.appendingPathComponent("\(tag).out")
            err = directory.appendingPathComponent("\(tag).err")
            for file in [out, err] { _ = FileManager.default.createFile(atPath: file.path, contents: nil) }
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.currentDirectoryURL = URL(fileURLWithPath: "/")
            process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/usr/bin/busctl", "--address=\(bus.address)",
                                 "--allow-interactive-authorization=no", "--timeout=90", "call", DBusTests.name, DBusTests.manager,
                                 DBusTests.managerInterface, method, "s", app]
            process.standardOutput = try FileHandle(forWritingTo: out)
            process.standardError = try FileHandle(forWritingTo: err)
            try process.run()
        }

        var stderr: String { (try? String(contentsOf: err, encoding: .utf8)) ?? "" }
        func end() { PrivateBus.end(process) }
    }

    @Test("polkitd on the bus: the user its rule allows changes states, one it denies gets AccessDenied, an auth_admin check without interaction gets InteractiveAuthorizationRequired")
    func polkitAllowsAndDenies() throws {
        try withPolkit(["a": client()]) { daemon, bus, _ in
            let allowed = try call(bus, "Focus", "s", "a", asUser: Self.allowedUser)
            #expect(allowed.status == 0, "\(allowed.stderr)")
            #expect(try daemon.status("a").state.rawValue == "active")
            #expect(daemon.log.contains("asking polkit whether uid \(Self.allowedUser)"))

            let denied = try bus.run("gdbus", ["call", "--address", "ADDRESS", "--dest", Self.name, "--object-path", Self.manager,
                                               "--method", "\(Self.managerInterface).Background", "a"], asUser: Self.nobody)
            #expect(denied.status != 0)
            #expect(denied.stderr.contains("org.lifecycled.Lifecycle1.Error.AccessDenied: permission denied: Background is for root"), "\(denied.stderr)")
            #expect(try daemon.status("a").state.rawValue == "active")

            // auth_admin without interaction allowed (gdbus's default): the standard name, which says what to do.
            let challenge = try bus.run("gdbus", ["call", "--address", "ADDRESS", "--dest", Self.name, "--object-path", Self.manager,
                                                  "--method", "\(Self.managerInterface).Background", "a"], asUser: Self.authAdminUser)
            #expect(challenge.stderr.contains("org.freedesktop.DBus.Error.InteractiveAuthorizationRequired: permission denied: "),
                    "\(challenge.stderr)")
            #expect(challenge.stderr.contains("call with interactive authorization allowed"))
            // Interaction allowed, but no authentication agent for the caller: polkit cannot ask anyone.
            let noAgent = try bus.run("busctl", ["--allow-interactive-authorization=yes", "call", Self.name, Self.manager,
                                                 Self.managerInterface, "Background", "s", "a"], asUser: Self.authAdminUser)
            #expect(noAgent.status != 0 && noAgent.stderr.contains("polkit asked for authentication, which did not succeed"), "\(noAgent.stderr)")
            #expect(try daemon.status("a").state.rawValue == "active")
        }
    }

    @Test("an interactive check whose agent never answers is cancelled at AuthenticationTimeoutSec=: the caller gets AuthorizationTimedOut, polkit withdraws the agent's request")
    func interactiveCheckIsBoundedAndCancelled() throws {
        // 8 s: the agent must be asked first (polkitd, pkttyagent and the setuid helper, each started on demand).
        try withPolkit(["a": client()], daemonConfig: "AuthenticationTimeoutSec=8\n") { daemon, bus, polkit in
            // A caller that stays connected after its answer (busctl and gdbus leave at once, and polkit ends the
            // request of a caller that left): what withdraws the agent's request is the daemon's cancellation.
            let answers = daemon.root.appendingPathComponent("caller.out")
            _ = FileManager.default.createFile(atPath: answers.path, contents: nil)
            let caller = Process()
            caller.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            caller.currentDirectoryURL = URL(fileURLWithPath: "/")
            // The user may not reach the checkout (a CI clone can sit in a 0700 folder): its program text is passed on.
            let program = try String(contentsOf: DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/lingering_caller.py"),
                                     encoding: .utf8)
            caller.arguments = ["--reuid=\(Self.authAdminUser)", "--regid=\(Self.authAdminUser)", "--clear-groups", "/usr/bin/python3",
                                "-c", program, bus.socketPath, Self.name, Self.manager, Self.managerInterface, "Focus", "a"]
            let go = Pipe()
            caller.standardInput = go
            caller.standardOutput = try FileHandle(forWritingTo: answers)
            try caller.run()
            defer { PrivateBus.end(caller) }
            let shown = daemon.root.appendingPathComponent("agent.txt")
            let (agent, input) = try polkit.agent(for: caller.processIdentifier, output: shown)
            defer { PolkitDaemon.end(agent: agent) }
            _ = input
            // Every message on the bus: polkit's CancelAuthentication to the agent is what withdraws the request
            // (pkttyagent itself sits in its password read and shows nothing of it).
            let traffic = daemon.root.appendingPathComponent("bus-traffic.txt")
            _ = FileManager.default.createFile(atPath: traffic.path, contents: nil)
            let monitor = Process()
            // Line-buffered through stdbuf, so that each message is in the file as it is seen.
            monitor.executableURL = URL(fileURLWithPath: "/usr/bin/stdbuf")
            monitor.arguments = ["-oL", "/usr/bin/busctl", "--address=\(bus.address)", "monitor"]
            monitor.standardOutput = try FileHandle(forWritingTo: traffic)
            monitor.standardError = FileHandle.nullDevice
            try monitor.run()
            defer { PrivateBus.end(monitor) }
            try daemon.waitUntil("the monitor sees the bus") {
                try bus.run("busctl", ["call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus.Peer", "Ping"])
                return ((try? String(contentsOf: traffic, encoding: .utf8)) ?? "").contains("Member=Ping")
            }
            go.fileHandleForWriting.write(Data("go\n".utf8))
            try daemon.waitUntil("the agent asks for the administrator's password") {
                ((try? String(contentsOf: shown, encoding: .utf8)) ?? "").contains("Password:")
            }
            try daemon.waitUntil("the caller is answered") { ((try? String(contentsOf: answers, encoding: .utf8)) ?? "").contains("\n") }
            let answer = (try? String(contentsOf: answers, encoding: .utf8)) ?? ""
            #expect(answer.hasPrefix("error org.lifecycled.Lifecycle1.Error.AuthorizationTimedOut: permission denied: Focus needs "
                                     + "authentication for org.lifecycled.manage, and none came within 8s"), "\(answer)")
            #expect(daemon.log.contains("nobody authenticated within 8s; polkit's check is cancelled"))
            // The daemon cancels the check, and polkit withdraws the request from the agent while the caller is
            // still on the bus.
            try daemon.waitUntil("polkit withdraws the agent's request") {
                ((try? String(contentsOf: traffic, encoding: .utf8)) ?? "").contains("Member=CancelAuthentication")
            }
            #expect(caller.isRunning, "the caller is still connected")
            #expect(try daemon.status("a").state.rawValue == "notRunning")
        }
    }

    @Test("a user past 16 waiting polkit checks gets LimitsExceeded at once; other users' checks and root's calls go on")
    func pendingChecksAreCappedPerUser() throws {
        try withPolkit(["a": client(), "b": client()]) { daemon, bus, polkit in
            // polkitd stopped: every check waits, so the user's calls pile up.
            kill(polkit.pid, SIGSTOP)
            defer { kill(polkit.pid, SIGCONT) }
            var flood: [BackgroundCall] = []
            defer { for call in flood { call.end() } }
            for index in 1...16 {
                flood.append(try BackgroundCall(bus, "Focus", "a", asUser: Self.nobody, in: daemon.root, tag: "flood-\(index)"))
                try daemon.waitUntil("check \(index) of uid \(Self.nobody) waits") {
                    daemon.log.contains("asking polkit whether uid \(Self.nobody)") && daemon.log.contains("\(index) of its checks waiting")
                }
            }
            let refused = try bus.run("gdbus", ["call", "--address", "ADDRESS", "--dest", Self.name, "--object-path", Self.manager,
                                                "--method", "\(Self.managerInterface).Focus", "a"], asUser: Self.nobody)
            #expect(refused.stderr.contains("org.freedesktop.DBus.Error.LimitsExceeded: Focus refused: uid \(Self.nobody) already has 16 calls waiting for polkit"),
                    "\(refused.stderr)")
            #expect(daemon.log.contains("D-Bus: uid \(Self.nobody) has 16 calls waiting for polkit"))

            // Another user is still asked about, and root is served at once.
            let other = try BackgroundCall(bus, "Focus", "a", asUser: Self.allowedUser, in: daemon.root, tag: "other")
            defer { other.end() }
            try daemon.waitUntil("uid \(Self.allowedUser)'s check waits too") {
                daemon.log.contains("asking polkit whether uid \(Self.allowedUser)")
            }
            _ = try mustCall(bus, "Launch", "sb", "b", "true")
            #expect(try daemon.status("b").state.rawValue == "background")

            kill(polkit.pid, SIGCONT)
            try daemon.waitUntil("uid \(Self.allowedUser)'s call is answered") { !other.process.isRunning }
            #expect(other.process.terminationStatus == 0, "\(other.stderr)")
            #expect(try daemon.status("a").state.rawValue == "active")
            try daemon.waitUntil("the flood is answered") { flood.allSatisfy { !$0.process.isRunning } }
            for call in flood { #expect(call.stderr.contains("permission denied: Focus is for root"), "\(call.stderr)") }
            // Answered, the checks no longer count: the user's next call is asked of polkit again.
            let again = try call(bus, "Focus", "s", "a", asUser: Self.nobody)
            #expect(again.stderr.contains("permission denied: Focus is for root"), "\(again.stderr)")
        }
    }

    @Test("a stopped polkitd holds only the calls waiting for it: lifectl status and root's calls are answered, the check completes once polkitd runs, or is refused after 25 s")
    func stoppedPolkitdDoesNotHoldTheLoop() throws {
        try withPolkit(["a": client(), "b": client()]) { daemon, bus, polkit in
            kill(polkit.pid, SIGSTOP)
            defer { kill(polkit.pid, SIGCONT) }
            let waiting = try BackgroundCall(bus, "Focus", "a", asUser: Self.allowedUser, in: daemon.root, tag: "waiting")
            defer { waiting.end() }
            try daemon.waitUntil("the check waits at the stopped polkitd") {
                daemon.log.contains("asking polkit whether uid \(Self.allowedUser)")
            }

            try expectAnswered(daemon, "status", while: "polkitd is stopped")
            _ = try mustCall(bus, "Launch", "sb", "b", "true")
            #expect(try daemon.status("b").state.rawValue == "background")
            #expect(waiting.process.isRunning, "the call waits for polkit's answer")

            kill(polkit.pid, SIGCONT)
            try daemon.waitUntil("the call completes once polkitd runs") { !waiting.process.isRunning }
            #expect(waiting.process.terminationStatus == 0, "\(waiting.stderr)")
            #expect(try daemon.status("a").state.rawValue == "active")

            // Stopped for longer than a check that asks nobody may take: the call is refused, saying so.
            kill(polkit.pid, SIGSTOP)
            let unanswered = try BackgroundCall(bus, "Background", "a", asUser: Self.allowedUser, in: daemon.root, tag: "unanswered")
            defer { unanswered.end() }
            try daemon.waitUntil("the call is refused at the bound", timeout: 60) { !unanswered.process.isRunning }
            #expect(unanswered.stderr.contains("permission denied: polkit did not answer within 25s whether you may Background; the check is cancelled"),
                    "\(unanswered.stderr)")
            #expect(try daemon.status("a").state.rawValue == "active")
        }
    }

    @Test("the name already owned by another daemon: the second says who owns it, waits in the queue, and serves once the first is gone")
    func nameOwnedByAnotherWaitsInTheQueue() throws {
        let first = try DaemonHarness()
        let second = try DaemonHarness()
        // In the second harness's folder, which outlives the first.
        let bus = try PrivateBus(directory: second.root.appendingPathComponent("bus"))
        defer {
            second.stop()
            first.stop()
            bus.stop()
        }
        let address = ["LIFECYCLED_BUS_ADDRESS": "unix:path=\(bus.socketPath)"]
        try first.app("a", client())
        try first.start(extraEnvironment: address)
        try first.waitUntil("the first daemon owns \(Self.name)") { try bus.run("busctl", ["status", Self.name]).status == 0 }
        try second.app("b", client())
        try second.start(extraEnvironment: address)
        let firstPID = try #require(first.daemonPID)
        try second.waitUntil("the second daemon says who owns the name") {
            second.log.contains("D-Bus: \(Self.name) on the session bus at unix:path=\(bus.socketPath) is owned by process \(firstPID) (lifecycled); queued for it")
        }
        #expect(!second.log.contains("D-Bus: serving"), "it does not claim to serve a name it does not hold")
        #expect(try call(bus, "ListApps").stdout.contains("\"a\""), "the first still answers")
        first.stop()
        try second.waitUntil("the second serves once the name is free") {
            second.log.contains("D-Bus: \(Self.name) is free now; serving it on")
        }
        try second.waitUntil("its apps are on the bus") { try call(bus, "ListApps").stdout.contains("\"b\"") }
    }

    @Test("the bus killed and started again: the daemon goes on, says so once, and serves the new bus")
    func busRestart() throws {
        try withBus(["a": client()]) { daemon, bus in
            bus.kill()
            try daemon.waitUntil("the daemon logs the loss") { daemon.log.contains("D-Bus: failed to stay connected") }
            try daemon.control("focus", "a")
            #expect(try daemon.status("a").state.rawValue == "active")
            usleep(1_000_000)  // several retries against no bus
            #expect(daemon.log.components(separatedBy: "D-Bus: failed to").count == 2, "the loss is logged once")
            try bus.start()
            try daemon.waitUntil("the daemon is back on the bus") { (try? self.property(bus, "State", of: "a")) == "s \"active\"" }
            #expect(daemon.log.contains("D-Bus: reconnected to"))
            _ = try mustCall(bus, "Background", "s", "a")
            #expect(try daemon.status("a").state.rawValue == "background")
        }
    }

    /// The context switches of every thread of `pid` so far: each wakeup of the daemon counts one or more.
    func wakeups(_ pid: pid_t) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.reduce(0) { sum, task in
            let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
            return sum + status.split(separator: "\n").filter { $0.contains("ctxt_switches:") }
                .compactMap { Int($0.split(separator: ":").last!.trimmingCharacters(in: .whitespaces)) }.reduce(0, +)
        }
    }

    @Test("no bus at the start, not even its directory: the daemon is not woken while it is absent, and serves it as its socket appears")
    func absentBusIsWatchedNotPolled() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let directory = harness.root.appendingPathComponent("later/bus")
        try harness.app("a", client())
        try harness.start(extraEnvironment: ["LIFECYCLED_BUS_ADDRESS": "unix:path=\(directory.path)/bus.sock"])
        try harness.waitUntil("the daemon logs the missing bus") { harness.log.contains("D-Bus: failed to connect") }
        try harness.control("launch", "a")
        try harness.waitUntil("app a runs") { try harness.status("a").state.rawValue != "notRunning" }
        let pid = try #require(harness.daemonPID)
        // The start's last saves and log lines, and the launch's.
        let before = try DaemonHarness.waitForQuiet("the daemon") { wakeups(pid) }
        usleep(2_000_000)
        #expect(wakeups(pid) == before, "nothing wakes the daemon while the bus is absent")
        let bus = try PrivateBus(directory: directory)
        defer { bus.stop() }
        try harness.waitUntil("the daemon owns \(Self.name) on the new bus") {
            try bus.run("busctl", ["status", Self.name]).status == 0
        }
        #expect(try call(bus, "ListApps").stdout.contains("\"a\""))
    }

    @Test("a bus daemon that hangs while the daemon asks it who called: lifectl is answered meanwhile, the call completes once the bus runs again")
    func hungBusDaemonDoesNotHoldTheLoop() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        let bus = try PrivateBus(directory: harness.root.appendingPathComponent("bus"))
        defer { bus.stop() }
        // The stopper passes the daemon's connection through and stops the bus daemon as the Focus call reaches
        // the daemon, so that the daemon's question about the caller meets a hung bus daemon every time.
        let proxyPath = harness.root.appendingPathComponent("bus-proxy.sock").path
        let marker = harness.root.appendingPathComponent("bus-stopped").path
        let stopper = Process()
        stopper.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        stopper.arguments = [DaemonHarness.repository.appendingPathComponent("Tests/Fixtures/bus_stopper.py").path,
                             proxyPath, bus.socketPath, String(bus.pid), "Focus", marker]
        try stopper.run()
        defer { PrivateBus.end(stopper) }
        defer { kill(bus.pid, SIGCONT) }
        try harness.waitUntil("the stopper listens") { FileManager.default.fileExists(atPath: proxyPath) }
        try harness.app("a", client())
        try harness.start(extraEnvironment: ["LIFECYCLED_BUS_ADDRESS": "unix:path=\(proxyPath)"])
        try harness.waitUntil("the daemon owns \(Self.name)") { try bus.run("busctl", ["status", Self.name]).status == 0 }

        let focus = Process()
        focus.executableURL = URL(fileURLWithPath: "/usr/bin/busctl")
        focus.arguments = ["--address=\(bus.address)", "call", Self.name, Self.manager, Self.managerInterface, "Focus", "s", "a"]
        focus.standardOutput = FileHandle.nullDevice
        focus.standardError = FileHandle.nullDevice
        try focus.run()
        defer { PrivateBus.end(focus) }
        try harness.waitUntil("the bus daemon is stopped with the call on its way to the daemon") {
            FileManager.default.fileExists(atPath: marker)
        }

        try expectAnswered(harness, "list", while: "the bus daemon is stopped")

        kill(bus.pid, SIGCONT)
        try harness.waitUntil("the Focus call completes once the bus daemon runs") { !focus.isRunning }
        #expect(focus.terminationStatus == 0)
        #expect(try harness.status("a").state.rawValue == "active")
        #expect(harness.isDaemonRunning)
    }
}
