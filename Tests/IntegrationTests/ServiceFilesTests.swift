import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// What `make install` ships around the binaries (the systemd units, the man pages, the bash completion, the
/// install and uninstall targets) and lifectl's systemctl-like habits (-q, --json, exit statuses, logs).
/// Tools that may be missing (systemd-analyze, man, make) turn their test into a skip that names the package.
@Suite("service files, man pages, install, lifectl habits", .serialized)
struct ServiceFilesTests {
    static let repository = DaemonHarness.repository
    static let systemdAnalyze = Tool.find("systemd-analyze")
    static let man = Tool.find("man")
    static let make = Tool.find("make")
    static let bash = Tool.find("bash")
    static let pages = ["lifectl.1", "lifecycled.8", "lifecycled.conf.5"]

    // MARK: Units

    @Test("every unit passes systemd-analyze verify, with ExecStart= on the built lifecycled and its man pages found",
          .enabled(if: ServiceFilesTests.systemdAnalyze != nil,
                   "systemd-analyze is not installed (Debian package systemd), so the units cannot be verified here"))
    func unitsPassSystemdAnalyzeVerify() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // verify insists that ExecStart= and ExecReload= exist: point a copy at the programs this test run built.
        let daemon = DaemonHarness.products.appendingPathComponent("lifecycled").path
        let service = try String(contentsOf: Self.repository.appendingPathComponent("systemd/lifecycled.service"), encoding: .utf8)
        let execStart = "ExecStart=/usr/local/bin/lifecycled "
        #expect(service.contains("\n" + execStart), "make install rewrites this line; it must stay as it is")
        let execReload = "ExecReload=/usr/local/bin/lifectl "
        #expect(service.contains("\n" + execReload), "make install rewrites this line; it must stay as it is")
        let lifectl = DaemonHarness.products.appendingPathComponent("lifectl").path
        try service.replacingOccurrences(of: "\n" + execStart, with: "\nExecStart=\(daemon) ")
            .replacingOccurrences(of: "\n" + execReload, with: "\nExecReload=\(lifectl) ")
            .write(to: directory.url.appendingPathComponent("lifecycled.service"), atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(at: Self.repository.appendingPathComponent("systemd/lifecycled.socket"),
                                         to: directory.url.appendingPathComponent("lifecycled.socket"))
        // Documentation=man:… is checked with man(1): give it our pages, or skip that part where man is missing.
        var environment = ProcessInfo.processInfo.environment
        var arguments = ["verify"]
        if Self.man != nil {
            environment["MANPATH"] = try manTree(in: directory.url).path
        } else {
            arguments.append("--man=no")
        }
        arguments += ["./lifecycled.service", "./lifecycled.socket"]

        let result = try Tool.run(Self.systemdAnalyze!, arguments, environment: environment, directory: directory.url)
        // Unknown keys and bad values are only warnings (exit status 0), so stderr must be empty too.
        #expect(result.status == 0, "systemd-analyze verify failed: \(result.stderr)")
        #expect(result.stderr.isEmpty, "systemd-analyze verify warned: \(result.stderr)")
    }

    @Test("the service is a notify service with watchdog, delegation, process kill mode with an fd store, reload by lifectl reload; the socket passes 'control'")
    func unitsSayWhatTheDaemonNeeds() throws {
        let service = try keys(of: "systemd/lifecycled.service")
        #expect(service["Type"] == ["notify"])
        #expect(service["NotifyAccess"] == ["main"])
        #expect(service["WatchdogSec"]?.isEmpty == false)
        #expect(service["Delegate"] == ["yes"])
        #expect(service["KillMode"] == ["process"], "a crashed daemon's apps live on, to be re-adopted")
        #expect(service["FileDescriptorStoreMax"].map { $0.compactMap(Int.init) }?.first ?? 0 >= 1024,
                "the clients' connections are kept in the fd store")
        #expect(service["ExecReload"] == ["/usr/local/bin/lifectl reload"], "systemctl reload waits for the reload and fails with its errors")
        #expect(service["RuntimeDirectory"] == ["lifecycled"])
        #expect(service["RuntimeDirectoryPreserve"] == ["yes"], "the socket unit's file lives in the runtime directory")
        // The daemon writes its app cgroups and every app inherits the sandbox: these must not be on.
        #expect(service["ProtectControlGroups"] != ["yes"])
        #expect(service["MemoryDenyWriteExecute"] != ["yes"])
        #expect(service["NoNewPrivileges"] != ["yes"])
        #expect(service["PrivateDevices"] == nil && service["CapabilityBoundingSet"] == nil && service["ProtectClock"] == nil)

        let socket = try keys(of: "systemd/lifecycled.socket")
        #expect(socket["ListenStream"] == [RuntimeDirectory.controlSocket(in: "/run/lifecycled")])
        #expect(socket["FileDescriptorName"] == ["control"])
        #expect(socket["SocketMode"] == ["0666"])
        #expect(socket["Service"] == ["lifecycled.service"])
        #expect(socket["WantedBy"] == ["sockets.target"])
    }

    @Test("the unit's ExecReload= waits for the reload: exit 0 once applied, 1 with the errors when a file has one")
    func execReloadWaitsAndFails() throws {
        let command = try #require(try keys(of: "systemd/lifecycled.service")["ExecReload"]?.first)
        let words = command.split(separator: " ").map(String.init)
        #expect(words.first == "/usr/local/bin/lifectl")
        let lifectl = DaemonHarness.products.appendingPathComponent("lifectl").path
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("sleeper", "[App]\nExec=sleep 100000\nProtocol=none\n")
        try harness.start()

        try harness.app("second", "[App]\nExec=sleep 100000\nProtocol=none\n")
        let good = try Tool.run(lifectl, Array(words.dropFirst()), environment: harness.environment)
        #expect(good.status == 0, "\(good)")
        #expect(try harness.list().map(\.name) == ["second", "sleeper"], "applied before lifectl returns")

        try harness.app("third", "[App]\nExec=\"sleep 100000\nProtocol=none\n")
        let broken = try Tool.run(lifectl, Array(words.dropFirst()), environment: harness.environment)
        #expect(broken.status == 1, "\(broken)")
        #expect(broken.stderr.contains("apps/third.conf:") && broken.stderr.contains("not applied"), "\(broken)")
    }

    // MARK: Man pages

    @Test("the man pages render without a warning",
          .enabled(if: ServiceFilesTests.man != nil, "man is not installed (Debian packages man-db and groff-base), so the pages cannot be rendered here"))
    func manPagesRenderWithoutWarnings() throws {
        var environment = ProcessInfo.processInfo.environment
        environment["MANWIDTH"] = "80"
        environment["LC_ALL"] = "C.UTF-8"
        for page in Self.pages {
            let path = Self.repository.appendingPathComponent("docs/man/\(page)").path
            let result = try Tool.run(Self.man!, ["--warnings", "-l", path], environment: environment)
            #expect(result.status == 0, "man -l \(page) failed: \(result.stderr)")
            #expect(result.stderr.isEmpty, "man --warnings -l \(page): \(result.stderr)")
            #expect(result.stdout.contains("NAME") && result.stdout.contains("SEE ALSO"), "\(page) rendered: \(result.stdout.prefix(300))")
        }
    }

    @Test("lifectl(1) has every verb, option and exit status of lifectl --help; lifecycled(8) every option of lifecycled --help")
    func manPagesFollowTheHelp() throws {
        let lifectl = try page("lifectl.1")
        let help = try Tool.run(DaemonHarness.products.appendingPathComponent("lifectl").path, ["--help"]).stdout
        // The wire's `scene-open` is `scene open` on the command line.
        let verbs = (ControlRequest.queryVerbs + ControlRequest.lifecycleVerbs + ControlRequest.otherVerbs + ["logs"])
            .map { $0.hasPrefix("scene-") ? "scene " + $0.dropFirst("scene-".count) : $0 }
        for verb in verbs {
            #expect(help.contains("  \(verb)"), "lifectl --help lacks \(verb)")
            #expect(lifectl.contains(".B \(verb)") || lifectl.contains(".BR \(verb)") || lifectl.contains(".BI \(verb)")
                    || lifectl.contains(".BR \"\(verb)\""),
                    "lifectl.1 does not document \(verb)")
        }
        for option in options(in: help) {
            #expect(lifectl.contains(option), "lifectl.1 does not document \(option)")
        }
        for (status, meaning) in [(0, "done"), (1, "refused"), (2, "usage"), (3, "daemon not reachable"), (4, "no such app")] {
            #expect(help.contains("\(status) \(meaning)"), "lifectl --help does not give exit status \(status)")
            #expect(lifectl.contains(".B \(status)\n"), "lifectl.1 does not give exit status \(status)")
        }

        let daemon = try page("lifecycled.8")
        let daemonHelp = try Tool.run(DaemonHarness.products.appendingPathComponent("lifecycled").path, ["--help"]).stdout
        let daemonOptions = options(in: daemonHelp)
        #expect(daemonOptions.isSuperset(of: ["--config", "--runtime-dir", "--log-level", "--version", "--help"]))
        for option in daemonOptions {
            #expect(daemon.contains(option), "lifecycled.8 does not document \(option)")
        }
    }

    @Test("lifecycled.conf(5) documents every section and key that docs/CONFIG.md documents")
    func configPageHasEveryKey() throws {
        let page = try page("lifecycled.conf.5")
        let reference = try String(contentsOf: Self.repository.appendingPathComponent("docs/CONFIG.md"), encoding: .utf8)
        var keys: Set<String> = []
        var sections: Set<String> = []
        for line in reference.split(separator: "\n") {
            if line.hasPrefix("### [") { sections.insert(String(line.dropFirst(4))) }
            // A definition line: "`Key=`" or "`User=`, `Group=`".
            guard line.hasPrefix("`") else { continue }
            for word in line.split(separator: "`") where word.hasSuffix("=") && word.first?.isUppercase == true {
                keys.insert(String(word))
            }
        }
        #expect(keys.count >= 35, "found only \(keys.sorted()) in docs/CONFIG.md")
        #expect(sections.isSuperset(of: ["[Defaults]", "[NotificationTypes]", "[Memory]", "[Sources]", "[App]", "[Lifecycle]"]))
        // Each key heads an entry: the line after a .TP.
        let lines = page.split(separator: "\n", omittingEmptySubsequences: false)
        let headings = zip(lines, lines.dropFirst()).filter { $0.0 == ".TP" }.map { String($0.1) }
        for key in keys.sorted() {
            #expect(headings.contains { $0.hasPrefix(".B") && $0.split(separator: " ").contains(Substring(key)) },
                    "lifecycled.conf.5 has no entry for \(key)")
        }
        for section in sections.sorted() {
            #expect(page.contains(".SS \(section)\n"), "lifecycled.conf.5 has no \(section) heading")
        }
    }

    // MARK: make install / uninstall

    @Test("make install into a DESTDIR puts exactly the expected files; make uninstall removes them and keeps the config",
          .enabled(if: ServiceFilesTests.make != nil, "make is not installed (Debian package make), so the install targets cannot run here"))
    func installAndUninstall() throws {
        let destination = try TemporaryDirectory()
        defer { destination.remove() }
        let root = destination.url.path
        let variables = ["DESTDIR=\(root)", "PREFIX=/usr/local", "BINDIR_SOURCE=\(DaemonHarness.products.path)"]

        try runMake(["install"] + variables)
        let functions = try headerFunctions()
        let expected: [String: mode_t] = [
            "usr/local/bin/lifecycled": 0o755,
            "usr/local/bin/lifectl": 0o755,
            "usr/local/lib/systemd/system/lifecycled.service": 0o644,
            "usr/local/lib/systemd/system/lifecycled.socket": 0o644,
            "usr/local/lib/systemd/user/lifecycled.service": 0o644,
            "usr/local/share/man/man1/lifectl.1": 0o644,
            "usr/local/share/man/man5/lifecycled.conf.5": 0o644,
            "usr/local/share/man/man8/lifecycled.8": 0o644,
            "usr/local/share/bash-completion/completions/lifectl": 0o644,
            "etc/lifecycled/lifecycled.conf": 0o644,
            // The D-Bus API's bus policy and polkit action, where dbus-daemon and polkitd read them.
            "usr/share/dbus-1/system.d/org.lifecycled.Lifecycle1.conf": 0o644,
            "usr/share/polkit-1/actions/org.lifecycled.policy": 0o644,
            // liblifecycle (clients/c): the header, the libraries (the two links resolve to the shared one), the
            // pkg-config file and the man pages of section 3: lifecycle(3) and one per function of the header, its
            // own or a ".so" page naming the page that documents it.
            "usr/local/include/lifecycle.h": 0o644,
            "usr/local/lib/liblifecycle.so.1.0.0": 0o755,
            "usr/local/lib/liblifecycle.so.1": 0o755,
            "usr/local/lib/liblifecycle.so": 0o755,
            "usr/local/lib/liblifecycle.a": 0o644,
            "usr/local/lib/pkgconfig/lifecycle.pc": 0o644,
        ].merging((["lifecycle"] + functions)
            .map { ("usr/local/share/man/man3/\($0).3", mode_t(0o644)) }) { $1 }
        #expect(files(under: root) == Set(expected.keys))
        for (file, mode) in expected {
            var info = stat()
            #expect(stat(root + "/" + file, &info) == 0 && info.st_mode & 0o7777 == mode, "\(file) has mode \(String(info.st_mode & 0o7777, radix: 8))")
        }
        #expect(isDirectory(root + "/etc/lifecycled/apps"))
        let service = try String(contentsOfFile: root + "/usr/local/lib/systemd/system/lifecycled.service", encoding: .utf8)
        #expect(service.contains("\nExecStart=/usr/local/bin/lifecycled --config /etc/lifecycled\n"))
        #expect(service.contains("\nExecReload=/usr/local/bin/lifectl reload\n"))
        // The desktop session's unit: no --config (the user's own directories), Type=notify, Delegate=yes.
        let userService = try String(contentsOfFile: root + "/usr/local/lib/systemd/user/lifecycled.service", encoding: .utf8)
        #expect(userService.contains("\nExecStart=/usr/local/bin/lifecycled --log-level info\n"))
        #expect(userService.contains("\nType=notify\n") && userService.contains("\nDelegate=yes\n"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: root + "/etc/lifecycled/lifecycled.conf"))
            == Data(contentsOf: Self.repository.appendingPathComponent("Config/lifecycled.conf")))
        #expect(try Data(contentsOf: URL(fileURLWithPath: root + "/usr/local/bin/lifectl"))
            == Data(contentsOf: DaemonHarness.products.appendingPathComponent("lifectl")))

        // Installing again leaves an edited configuration alone.
        let mine = "# edited by the administrator\n[Defaults]\nBackgroundTimeSec=1min\n"
        try mine.write(toFile: root + "/etc/lifecycled/lifecycled.conf", atomically: true, encoding: .utf8)
        try runMake(["install"] + variables)
        #expect(try String(contentsOfFile: root + "/etc/lifecycled/lifecycled.conf", encoding: .utf8) == mine)

        try runMake(["uninstall"] + variables)
        #expect(files(under: root) == ["etc/lifecycled/lifecycled.conf"])
        #expect(try String(contentsOfFile: root + "/etc/lifecycled/lifecycled.conf", encoding: .utf8) == mine)
        #expect(isDirectory(root + "/etc/lifecycled/apps"))
    }

    @Test("another PREFIX: ExecStart= and ExecReload= follow it",
          .enabled(if: ServiceFilesTests.make != nil, "make is not installed (Debian package make), so the install targets cannot run here"))
    func installFollowsThePrefix() throws {
        let destination = try TemporaryDirectory()
        defer { destination.remove() }
        let root = destination.url.path
        try runMake(["install", "DESTDIR=\(root)", "PREFIX=/opt/lifecycled", "BINDIR_SOURCE=\(DaemonHarness.products.path)"])
        let service = try String(contentsOfFile: root + "/opt/lifecycled/lib/systemd/system/lifecycled.service", encoding: .utf8)
        #expect(service.contains("\nExecStart=/opt/lifecycled/bin/lifecycled --config /etc/lifecycled\n"))
        #expect(service.contains("\nExecReload=/opt/lifecycled/bin/lifectl reload\n"))
        #expect(FileManager.default.isExecutableFile(atPath: root + "/opt/lifecycled/bin/lifecycled"))
    }

    // MARK: lifectl habits, against a real daemon

    @Test("-q is silent on success but not on errors; exit 4 for an unknown app; --json for lifecycle verbs, post and status")
    func lifectlHabits() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("sleeper", "[App]\nExec=sleep 100000\nProtocol=none\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
        try harness.daemonConfig("[NotificationTypes]\nmessageReceived=none\n")
        try harness.start()

        let quiet = try harness.lifectl("-q", "launch", "sleeper")
        #expect(quiet.status == 0 && quiet.stdout.isEmpty && quiet.stderr.isEmpty, "\(quiet)")
        #expect(try harness.status("sleeper").state.rawValue == "inactive")
        let refused = try harness.lifectl("--quiet", "resume", "sleeper")
        #expect(refused.status == 1 && refused.stdout.isEmpty)
        #expect(refused.stderr.contains("cannot resume 'sleeper'"), "errors still go to stderr under -q")
        let listed = try harness.lifectl("-q", "--no-pager", "list")
        #expect(listed.status == 0 && listed.stdout.contains("sleeper"), "queries print under -q: \(listed)")

        for arguments in [["focus", "nosuch"], ["status", "nosuch"], ["post", "messageReceived", "--app", "nosuch"], ["-q", "terminate", "nosuch"]] {
            let result = try lifectl(harness, arguments)
            #expect(result.status == 4, "lifectl \(arguments.joined(separator: " ")): \(result)")
            #expect(result.stderr.contains("no such app"))
        }
        #expect(try harness.lifectl("post", "noSuchType").status == 1, "an unknown type is a refusal, not a missing app")

        let background = try harness.lifectl("--json", "background", "sleeper")
        #expect(background.status == 0, "\(background)")
        let apps = try LineCoder().decode([AppStatus].self, from: Array(background.stdout.utf8))
        #expect(apps.map(\.name) == ["sleeper"] && apps.first?.state.rawValue == "background")

        let posted = try harness.lifectl("post", "messageReceived", "--json")
        #expect(posted.status == 0)
        #expect((try? LineCoder().decode(PostSummary.self, from: Array(posted.stdout.utf8))) != nil, "\(posted)")

        let status = try harness.lifectl("status", "--json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
        let daemon = try #require(object["daemon"] as? [String: Any])
        #expect((daemon["notificationTypes"] as? [String])?.contains("messageReceived: none") == true)

        let pressure = try harness.lifectl("simulate-memory-pressure", "--json")
        #expect(pressure.status == 0 && pressure.stdout == "{}\n", "\(pressure)")
        #expect(try harness.lifectl("-q", "simulate-memory-pressure").stdout.isEmpty)

        let terminated = try harness.lifectl("terminate", "sleeper", "--json")
        #expect(try LineCoder().decode([AppStatus].self, from: Array(terminated.stdout.utf8)).first?.state.rawValue == "notRunning")

        #expect(try harness.lifectl("list", "-f").status == 2, "-f goes with logs only")
    }

    @Test("the bash completion offers verbs, the daemon's apps and its notification types",
          .enabled(if: ServiceFilesTests.bash != nil, "bash is not installed"))
    func bashCompletion() throws {
        let harness = try DaemonHarness()
        defer { harness.stop() }
        try harness.app("notes", "[App]\nExec=sleep 100000\nProtocol=none\n")
        try harness.app("news.reader", "[App]\nExec=sleep 100000\nProtocol=none\n")
        try harness.daemonConfig("[NotificationTypes]\nmessageReceived=none\n")
        try harness.start()

        func complete(_ words: String...) throws -> [String] {
            let script = Self.repository.appendingPathComponent("completion/lifectl.bash").path
            let quoted = words.map { "'\($0)'" }.joined(separator: " ")
            let result = try Tool.run(Self.bash!, ["--norc", "--noprofile", "-c", """
                source '\(script)'
                COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count - 1)
                _lifectl
                printf '%s\\n' "${COMPREPLY[@]}"
                """], environment: harness.environment)
            #expect(result.stderr.isEmpty, "completion printed errors: \(result.stderr)")
            return result.stdout.split(separator: "\n").map(String.init)
        }

        #expect(try complete("lifectl", "fo") == ["focus"])
        #expect(try complete("lifectl", "").contains("simulate-memory-pressure"))
        #expect(try Set(complete("lifectl", "focus", "")) == ["notes", "news.reader"])
        #expect(try complete("lifectl", "--json", "status", "new") == ["news.reader"])
        #expect(try complete("lifectl", "post", "x", "--app", "no") == ["notes"])
        let types = try complete("lifectl", "post", "")
        #expect(types.contains("messageReceived") && types.contains("batteryLevelDidChange"), "\(types)")
        #expect(try complete("lifectl", "launch", "notes", "--b") == ["--background"])
        #expect(try complete("lifectl", "logs", "notes", "-").contains("--follow"))
        #expect(try complete("lifectl", "focus", "notes", "").isEmpty, "one app per verb")
        #expect(try complete("lifectl", "--runtime-dir", "/nonexistent", "focus", "").isEmpty, "no daemon there")
    }

    // MARK: logs

    @Test("lifectl logs without a journal (or without journalctl) exits 1 and says where the log goes")
    func logsWithoutAJournal() throws {
        let lifectl = DaemonHarness.products.appendingPathComponent("lifectl").path
        let empty = try TemporaryDirectory()
        defer { empty.remove() }
        var environment = ProcessInfo.processInfo.environment
        // No journalctl in PATH: whichever check fails first, the answer is the same kind.
        environment["PATH"] = empty.url.path
        var results = [try Tool.run(lifectl, ["logs", "notes", "-f"], environment: environment)]
        if !FileManager.default.fileExists(atPath: "/run/systemd/journal/socket") {
            // This machine runs no journal: the real PATH must give the same answer.
            let real = try Tool.run(lifectl, ["logs", "notes"])
            #expect(real.stderr.contains("no systemd journal here"), "\(real)")
            results.append(real)
        }
        for result in results {
            #expect(result.status == 1, "\(result)")
            #expect(result.stdout.isEmpty)
            #expect(result.stderr.contains("journal") && result.stderr.contains("standard error"), "\(result.stderr)")
        }
        #expect(try Tool.run(lifectl, ["logs", "notes", "--app", "x"], environment: environment).status == 2)
    }

    // MARK: Helpers

    /// `make -C REPOSITORY ARGUMENTS`, outside of any make that runs the tests (its jobserver is not ours).
    func runMake(_ arguments: [String]) throws {
        var environment = ProcessInfo.processInfo.environment
        for key in ["MAKEFLAGS", "MAKELEVEL", "MFLAGS", "DESTDIR", "PREFIX", "BINDIR_SOURCE"] { environment.removeValue(forKey: key) }
        let result = try Tool.run(Self.make!, ["-C", Self.repository.path] + arguments, environment: environment)
        #expect(result.status == 0, "make \(arguments.joined(separator: " ")) failed:\n\(result.stdout)\n\(result.stderr)")
    }

    /// The functions lifecycle.h declares: each name followed by its parameter list (a function pointer type's
    /// name is followed by ")").
    func headerFunctions() throws -> [String] {
        let header = try String(contentsOf: Self.repository.appendingPathComponent("clients/c/include/lifecycle.h"), encoding: .utf8)
        let declaration = try Regex(#"\b(lifecycle_[a-z0-9_]+)\s*\("#)
        return Set(header.matches(of: declaration).compactMap { $0.output[1].substring.map(String.init) }).sorted()
    }

    /// A MANPATH tree holding the pages of docs/man, for man(1) to find them by name.
    func manTree(in directory: URL) throws -> URL {
        let tree = directory.appendingPathComponent("man")
        for page in Self.pages {
            let section = tree.appendingPathComponent("man" + String(page.last!))
            try FileManager.default.createDirectory(at: section, withIntermediateDirectories: true)
            try FileManager.default.copyItem(at: Self.repository.appendingPathComponent("docs/man/\(page)"),
                                             to: section.appendingPathComponent(page))
        }
        return tree
    }

    /// The roff source of a page with `\-` read as `-`, so that options can be looked up as typed.
    func page(_ name: String) throws -> String {
        try String(contentsOf: Self.repository.appendingPathComponent("docs/man/\(name)"), encoding: .utf8)
            .replacingOccurrences(of: "\\-", with: "-")
    }

    /// The long and short options a --help text names (words starting with "-" followed by a letter).
    func options(in help: String) -> Set<String> {
        var found: Set<String> = []
        for word in help.split(whereSeparator: { " \n,[]()|".contains($0) }) {
            guard word.hasPrefix("-"), word.dropFirst().drop(while: { $0 == "-" }).first?.isLetter == true else { continue }
            found.insert(String(word.prefix { $0.isLetter || $0.isNumber || $0 == "-" }))
        }
        return found
    }

    /// Key → values of a unit file (comments skipped).
    func keys(of file: String) throws -> [String: [String]] {
        let text = try String(contentsOf: Self.repository.appendingPathComponent(file), encoding: .utf8)
        var result: [String: [String]] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") && !line.hasPrefix("[") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            result[String(line[..<equals]), default: []].append(String(line[line.index(after: equals)...]))
        }
        return result
    }

    /// Files (anything but directories) below `root`, relative to it.
    func files(under root: String) -> Set<String> {
        let paths = (try? FileManager.default.subpathsOfDirectory(atPath: root)) ?? []
        return Set(paths.filter { !isDirectory(root + "/" + $0) })
    }

    /// `lifectl ARGUMENTS` against the harness's daemon (DaemonHarness.lifectl takes a variadic list).
    func lifectl(_ harness: DaemonHarness, _ arguments: [String]) throws -> Tool.Result {
        try Tool.run(DaemonHarness.products.appendingPathComponent("lifectl").path, arguments, environment: harness.environment)
    }

    func isDirectory(_ path: String) -> Bool {
        var directory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &directory) && directory.boolValue
    }

    /// Programs the tests run, found the way a shell would, and run with their output captured in files (two pipes
    /// read one after the other can deadlock when the second fills up).
    enum Tool {
        struct Result: CustomStringConvertible {
            var status: Int32
            var stdout: String
            var stderr: String
            var description: String { "status \(status), stdout: \(stdout.debugDescription), stderr: \(stderr.debugDescription)" }
        }

        static func find(_ name: String) -> String? {
            let path = (ProcessInfo.processInfo.environment["PATH"] ?? "") + ":/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
            for directory in path.split(separator: ":") {
                let candidate = "\(directory)/\(name)"
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            }
            return nil
        }

        static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                        directory: URL? = nil) throws -> Result {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            if let environment { process.environment = environment }
            if let directory { process.currentDirectoryURL = directory }
            return try run(process)
        }

        static func run(_ process: Process) throws -> Result {
            let scratch = try TemporaryDirectory()
            defer { scratch.remove() }
            let out = scratch.url.appendingPathComponent("stdout"), err = scratch.url.appendingPathComponent("stderr")
            _ = FileManager.default.createFile(atPath: out.path, contents: nil)
            _ = FileManager.default.createFile(atPath: err.path, contents: nil)
            let outHandle = try FileHandle(forWritingTo: out), errHandle = try FileHandle(forWritingTo: err)
            defer {
                try? outHandle.close()
                try? errHandle.close()
            }
            process.standardInput = FileHandle.nullDevice
            process.standardOutput = outHandle
            process.standardError = errHandle
            try process.run()
            process.waitUntilExit()
            return Result(status: process.terminationStatus,
                          stdout: (try? String(contentsOf: out, encoding: .utf8)) ?? "",
                          stderr: (try? String(contentsOf: err, encoding: .utf8)) ?? "")
        }
    }

    /// A fresh directory; `defer { directory.remove() }` cleans up even when the test fails.
    struct TemporaryDirectory {
        let url: URL

        init() throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("lifecycled-files-\(getpid())-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        }

        func remove() { try? FileManager.default.removeItem(at: url) }
    }
}
