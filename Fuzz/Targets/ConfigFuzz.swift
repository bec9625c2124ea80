import LifecycleDaemon
import LifecycleModel

/// One input of the config fuzzer (`fuzz-config`, and the regression tests): the text of a config file.
///
/// The first byte says which file it is (even: `lifecycled.conf`, odd: an app file); the rest is the file, taken
/// only when it is UTF-8, as `ConfigLoader.load` reads files. Besides crashes, the checks are: parsing is
/// deterministic, every diagnostic names the file and a line that exists, an app that loads has a command, and
/// the app parsed with the daemon file's `[Defaults]` (the same text read as both) is the same either way.
public enum ConfigFuzz {
    /// The fuzzers' entry: a broken check crashes, so that libFuzzer keeps the input.
    public static func run(_ data: UnsafeBufferPointer<UInt8>) {
        let failures = check(data)
        if !failures.isEmpty { fatalError("fuzz check failed: " + failures.joined(separator: "; ")) }
    }

    /// The broken checks of one input (empty: all held).
    public static func check(_ data: UnsafeBufferPointer<UInt8>) -> [String] {
        var failures: [String] = []
        func require(_ condition: Bool, _ message: @autoclosure () -> String) {
            if !condition { failures.append(message()) }
        }
        func check(_ diagnostics: [ConfigDiagnostic], file: String, lines: Int) {
            for diagnostic in diagnostics {
                require(diagnostic.file == file, "a diagnostic names \(diagnostic.file), not \(file)")
                if let line = diagnostic.line { require(line >= 1 && line <= lines, "a diagnostic names line \(line) of \(lines)") }
                require(!diagnostic.description.isEmpty, "an empty diagnostic")
            }
        }
        guard let selector = data.first, let text = String(validating: data.dropFirst(), as: UTF8.self) else { return [] }
        // Lines as the parser counts them: by newline bytes (a "\r\n" is one Character to Swift, but a line break).
        let lines = text.utf8.reduce(1) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
        if selector & 1 == 0 {
            let (daemon, diagnostics) = ConfigLoader.parseDaemon(text: text, file: "lifecycled.conf")
            let (again, diagnosticsAgain) = ConfigLoader.parseDaemon(text: text, file: "lifecycled.conf")
            require(daemon == again && diagnostics == diagnosticsAgain, "parsing lifecycled.conf is not deterministic")
            check(diagnostics, file: "lifecycled.conf", lines: lines)
            // The same text as an app file, with these defaults: exercises [Defaults] flowing into apps.
            let (app, appDiagnostics) = ConfigLoader.parseApp(name: "fuzz", text: text, file: "apps/fuzz.conf", defaults: daemon.defaults)
            check(appDiagnostics, file: "apps/fuzz.conf", lines: lines)
            if let app { require(!app.exec.isEmpty || app.externalUID != nil, "an app loaded without a command") }
        } else {
            let (app, diagnostics) = ConfigLoader.parseApp(name: "fuzz", text: text, file: "apps/fuzz.conf", defaults: AppDefaults())
            let (again, diagnosticsAgain) = ConfigLoader.parseApp(name: "fuzz", text: text, file: "apps/fuzz.conf", defaults: AppDefaults())
            require(app == again && diagnostics == diagnosticsAgain, "parsing an app file is not deterministic")
            check(diagnostics, file: "apps/fuzz.conf", lines: lines)
            if let app {
                // An external app (External=yes) has no command: it must have its user instead.
                require(!app.exec.isEmpty || (app.external && app.externalUID != nil), "an app loaded without a command")
                require(app.name == "fuzz", "the app's name is not its file's")
            }
        }
        return failures
    }
}
