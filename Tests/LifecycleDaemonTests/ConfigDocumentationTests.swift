import Testing
@testable import LifecycleDaemon

/// The example file and the reference are part of the interface: these keep them in step with the key table.
@Suite struct ConfigDocumentationTests {
    /// The package root, from this file's place in `Tests/LifecycleDaemonTests/`.
    private static let root: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }()

    @Test func exampleDaemonFileLoadsCleanAndItsCommentedValuesAreTheBuiltInDefaults() throws {
        let text = try ConfigLoader.readTextFile(Self.root + "/Config/lifecycled.conf")
        let uncommented = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.first == "#" && line.dropFirst().first?.isUppercase == true && line.contains("=") ? line.dropFirst() : line
        }.joined(separator: "\n")

        let (asShipped, shippedDiagnostics) = ConfigLoader.parseDaemon(text: text, file: "lifecycled.conf")
        let (withEveryKey, diagnostics) = ConfigLoader.parseDaemon(text: uncommented, file: "lifecycled.conf")

        #expect(shippedDiagnostics == [])
        #expect(asShipped == DaemonConfig())
        #expect(diagnostics == [])
        #expect(withEveryKey == DaemonConfig())
        let shown = uncommented.split(separator: "\n").compactMap { line in
            line.contains("=") && !line.hasPrefix("#") ? String(line.prefix { $0 != "=" }) : nil
        }
        #expect(shown.sorted() == ConfigLoader.daemonKeys.map(\.name).sorted())
    }

    @Test func referenceDocumentsEveryKey() throws {
        let reference = try ConfigLoader.readTextFile(Self.root + "/docs/CONFIG.md")

        let keys = ConfigLoader.appKeys.map(\.name) + ConfigLoader.daemonKeys.map(\.name)
        for key in keys {
            #expect(reference.contains("`\(key)=`"), "docs/CONFIG.md does not document \(key)=")
        }
        for section in Set(ConfigLoader.appKeys.map(\.section) + ConfigLoader.daemonKeys.map(\.section)) {
            #expect(reference.contains("### [\(section)]"), "docs/CONFIG.md has no [\(section)] heading")
        }
    }
}
