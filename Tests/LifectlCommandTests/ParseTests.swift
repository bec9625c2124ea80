import LifecycleModel
import LifecycleProtocol
@testable import LifectlCommand
import Testing

/// The words of a command line, as a shell would split them.
private func words(_ line: String) -> [String] {
    line.split(separator: " ").map(String.init)
}

private func command(_ line: String) throws -> Command {
    try parse(words(line)).1
}

private func invocation(_ line: String) throws -> Invocation {
    try parse(words(line)).0
}

/// The usage error `line` gives; fails the test when it parses.
private func usageError(_ line: String, sourceLocation: SourceLocation = #_sourceLocation) -> UsageError? {
    do {
        let parsed = try parse(words(line))
        Issue.record("'\(line)' parsed as \(parsed)", sourceLocation: sourceLocation)
        return nil
    } catch {
        return error
    }
}

@Suite("lifectl's command line")
struct ParseTests {
    @Test("the queries take an optional app, except list, which takes none")
    func queries() throws {
        #expect(try command("list") == .list)
        #expect(try command("status") == .status(app: nil))
        #expect(try command("status notes") == .status(app: "notes"))
        #expect(try command("scenes") == .scenes(app: nil))
        #expect(try command("scenes notes") == .scenes(app: "notes"))
        #expect(try command("watch") == .watch(app: nil))
        #expect(try command("watch notes") == .watch(app: "notes"))
    }

    @Test("each lifecycle verb takes one app; launch alone takes --background", arguments: LifecycleVerb.allCases)
    func lifecycleVerbs(verb: LifecycleVerb) throws {
        #expect(try command("\(verb.rawValue) notes") == .lifecycle(verb, app: "notes", background: false))
        #expect(try command("\(verb.rawValue) notes").request == ControlRequest(verb: verb.rawValue, app: "notes"))
        if verb == .launch {
            #expect(try command("launch --background notes") == .lifecycle(.launch, app: "notes", background: true))
            #expect(try command("launch notes --background").request
                    == ControlRequest(verb: "launch", app: "notes", background: true))
        } else {
            #expect(usageError("\(verb.rawValue) notes --background")?.message == "--background goes with launch only")
        }
        #expect(usageError(verb.rawValue)?.message == "\(verb.rawValue) needs an app name")
        #expect(usageError("\(verb.rawValue) notes --all")?.message == (verb == .resume ? "resume --all takes no app" : "--all goes with resume only"))
    }

    @Test("the lifecycle verbs are the protocol's, but for the scene verbs, which lifectl spells scene SUBVERB")
    func lifecycleVerbsFollowTheProtocol() {
        #expect(LifecycleVerb.allCases.map(\.rawValue) == ControlRequest.lifecycleVerbs.filter { !$0.hasPrefix("scene-") })
        #expect(["open"] + SceneCommand.Verb.allCases.map { $0.rawValue }
                == ControlRequest.lifecycleVerbs.filter { $0.hasPrefix("scene-") }.map { String($0.dropFirst("scene-".count)) })
    }

    @Test("resume --all is resume-all on the wire and takes no app")
    func resumeAll() throws {
        #expect(try command("resume --all") == .resumeAll)
        #expect(try command("--all resume").request == ControlRequest(verb: "resume-all"))
        let error = usageError("resume --all notes")
        #expect(error?.message == "resume --all takes no app")
        #expect(error?.status == 2)
    }

    @Test("post TYPE with --app and --data; the data must be JSON")
    func post() throws {
        #expect(try command("post saved") == .post(type: "saved", app: nil, data: nil))
        #expect(try command("post saved --app notes --data {\"id\":7}")
                == .post(type: "saved", app: "notes", data: .object(["id": .number(7)])))
        #expect(try command("--data [1] post saved").request
                == ControlRequest(verb: "post", name: "saved", data: .array([.number(1)])))
        #expect(usageError("post")?.message == "post needs a notification type")
        #expect(usageError("post saved --data {")?.message == "--data is not valid JSON: {")
        #expect(usageError("post saved --app")?.message == "--app needs an app name")
        #expect(usageError("post saved --data")?.message == "--data needs a JSON value")
    }

    @Test("simulate-memory-pressure and reload take no app")
    func appless() throws {
        #expect(try command("simulate-memory-pressure") == .simulateMemoryPressure)
        #expect(try command("simulate-memory-pressure").request == ControlRequest(verb: "simulate-memory-pressure"))
        #expect(try command("reload") == .reload)
        #expect(try command("reload").request == ControlRequest(verb: "reload"))
        #expect(usageError("reload notes")?.message == "reload takes no app")
        #expect(usageError("simulate-memory-pressure notes")?.message == "simulate-memory-pressure takes no app")
        #expect(usageError("list notes")?.message == "list takes no app")
    }

    @Test("scene open takes an app, --role and --config; the other subverbs an app and a scene")
    func scenes() throws {
        #expect(try command("scene open notes") == .scene(.open(app: "notes", role: nil, configuration: nil)))
        #expect(try command("scene open notes --role window --config Compose").request
                == ControlRequest(verb: "scene-open", app: "notes", role: "window", configuration: "Compose"))
        for verb in SceneCommand.Verb.allCases {
            #expect(try command("scene \(verb.rawValue) notes s1") == .scene(.change(verb, app: "notes", scene: "s1")))
            #expect(try command("scene \(verb.rawValue) notes s1").request
                    == ControlRequest(verb: "scene-\(verb.rawValue)", app: "notes", scene: "s1"))
            #expect(usageError("scene \(verb.rawValue) notes")?.message
                    == "scene \(verb.rawValue) needs an app and a scene (lifectl scenes notes lists them)")
            #expect(usageError("scene \(verb.rawValue) notes s1 --role window")?.message == "--role and --config go with scene open only")
        }
        #expect(usageError("scene")?.message
                == "scene needs a subverb: open, focus, background, close, discard\n\n\(sceneUsage)")
        #expect(usageError("scene move notes")?.message
                == "unknown scene subverb 'move' (expected one of: open, focus, background, close, discard)")
        #expect(usageError("scene open")?.message == "scene open needs an app name")
        #expect(usageError("scene open notes s1")?.message == "scene open takes an app, not a scene (it makes a new one)")
        #expect(usageError("scene close notes s1 s2 s3")?.message == "too many arguments: s2 s3")
        #expect(usageError("scene open notes --role")?.message == "--role needs a scene role")
        #expect(usageError("scene open notes --config")?.message == "--config needs a scene configuration name")
    }

    @Test("logs takes an app and -f/--follow; -f goes with logs only, and logs with no other verb option")
    func logs() throws {
        #expect(try command("logs") == .logs(app: nil, follow: false))
        #expect(try command("logs notes -f") == .logs(app: "notes", follow: true))
        #expect(try command("--follow logs") == .logs(app: nil, follow: true))
        #expect(try command("logs").request == nil)
        #expect(usageError("list -f")?.message == "--follow goes with logs only")
        #expect(usageError("logs --background")?.message == "logs takes only an app and -f")
        #expect(usageError("logs --app notes")?.message == "logs takes only an app and -f")
        #expect(usageError("logs --data 1")?.message == "logs takes only an app and -f")
    }

    @Test("the options for every verb, anywhere on the line")
    func globalOptions() throws {
        #expect(try invocation("list") == Invocation(runtimeDirectory: nil, timeoutSeconds: 120, json: false, quiet: false, noPager: false))
        #expect(try invocation("--json list -q --no-pager --runtime-dir /run/x --timeout 2.5")
                == Invocation(runtimeDirectory: "/run/x", timeoutSeconds: 2.5, json: true, quiet: true, noPager: true))
        #expect(try invocation("--quiet list").quiet)
        // An option's value is the next word, whatever it looks like.
        #expect(try parse(words("--app --json post saved")) == (Invocation(), .post(type: "saved", app: "--json", data: nil)))
        #expect(try command("post --data -1 saved") == .post(type: "saved", app: nil, data: .number(-1)))
    }

    @Test("--runtime-dir replaces the environment's directories; without it they come from the environment")
    func runtimeDirectories() throws {
        #expect(try invocation("--runtime-dir /run/x list").runtimeDirectories(lifecycledRuntimeDir: "/run/y", xdgRuntimeDir: nil, uid: 0)
                == ["/run/x"])
        #expect(try invocation("list").runtimeDirectories(lifecycledRuntimeDir: nil, xdgRuntimeDir: "/run/user/1000", uid: 1000)
                == RuntimeDirectory.candidates(lifecycledRuntimeDir: nil, xdgRuntimeDir: "/run/user/1000", uid: 1000))
    }

    @Test("an option without its value is a usage error that names what it needs",
          arguments: [("--app", "an app name"), ("--data", "a JSON value"), ("--role", "a scene role"),
                      ("--config", "a scene configuration name"), ("--runtime-dir", "a directory")])
    func optionWithoutValue(option: String, needs: String) {
        let error = usageError("list \(option)")
        #expect(error?.message == "\(option) needs \(needs)")
        #expect(error?.status == 2)
    }

    @Test("--timeout needs a positive number of seconds", arguments: ["list --timeout", "list --timeout x", "list --timeout 0",
                                                                      "list --timeout -1", "list --timeout nan"])
    func badTimeout(line: String) {
        #expect(usageError(line)?.message == "--timeout needs a number of seconds")
    }

    @Test("-h and --help end the parse: errors before them count, words after them do not")
    func help() throws {
        #expect(try command("-h") == .help)
        #expect(try command("--help --bogus") == .help)
        #expect(try command("status a b c --help") == .help)
        #expect(try command("--help").request == nil)
        #expect(usageError("--bogus --help")?.message == "unknown option '--bogus'\n\n\(usage)")
        #expect(usageError("--timeout x --help")?.message == "--timeout needs a number of seconds")
    }

    @Test("no verb, an unknown verb, an unknown option and too many words are usage errors (status 2)")
    func usageErrors() throws {
        let cases = [
            ("", "no verb given\n\n\(usage)"),
            ("frobnicate", "unknown verb 'frobnicate'\n\n\(usage)"),
            ("scene-open notes", "unknown verb 'scene-open'\n\n\(usage)"),
            ("resume-all", "unknown verb 'resume-all'\n\n\(usage)"),
            ("list --verbose", "unknown option '--verbose'\n\n\(usage)"),
            ("list -", "unknown option '-'\n\n\(usage)"),
            ("focus notes mail", "too many arguments: mail"),
            ("status a b c", "too many arguments: b c"),
        ]
        for (line, message) in cases {
            let error = usageError(line)
            #expect(error?.message == message, "\(line)")
            #expect(error?.status == 2, "\(line)")
        }
    }

    @Test("the help names every verb, the scene verbs among them, and the exit statuses")
    func usageText() {
        #expect(usage.contains(sceneUsage))
        for verb in ControlRequest.queryVerbs + ["post", "simulate-memory-pressure", "reload", "logs"] + LifecycleVerb.allCases.map(\.rawValue) {
            #expect(usage.contains("  \(verb)"), "\(verb)")
        }
        #expect(usage.contains("Exit status: 0 done, 1 refused or failed, 2 usage error, 3 daemon not reachable, 4 no such app."))
        #expect(ExitStatus.usage == 2)
    }
}
