import Foundation
import Glibc
import LifecycleProtocol
import Testing

/// docs/CONTROL.md's example transcript, replayed against the real daemon with the apps it describes: each line a
/// connection receives must be the document's, byte for byte but for the values the document says differ per run.
@Suite("control protocol: CONTROL.md's transcript", .serialized)
struct ControlTranscriptTests {
    /// The fields whose values differ from run to run (CONTROL.md section 9 names them).
    static let varying = #""(pid|since|sinceSeconds|time|cgroup|suspendMethod)":("[^"]*"|-?[0-9.e+]+|null)"#

    static func masked(_ line: String) -> String {
        line.replacingOccurrences(of: varying, with: #""$1":…"#, options: .regularExpression)
    }

    /// The lines of the document's ```control-transcript block.
    static func transcript() throws -> [String] {
        let text = try String(contentsOf: DaemonHarness.repository.appendingPathComponent("docs/CONTROL.md"), encoding: .utf8)
        guard let start = text.range(of: "```control-transcript\n"),
              let end = text.range(of: "\n```", range: start.upperBound..<text.endIndex) else {
            throw HarnessError("docs/CONTROL.md has no ```control-transcript block")
        }
        return text[start.upperBound..<end.lowerBound].split(separator: "\n").map(String.init)
    }

    @Test("CONTROL.md documents every verb the daemon knows, and the request's and watch events' fields")
    func everyVerbIsDocumented() throws {
        let text = try String(contentsOf: DaemonHarness.repository.appendingPathComponent("docs/CONTROL.md"), encoding: .utf8)
        for verb in ControlRequest.queryVerbs + ControlRequest.lifecycleVerbs + ControlRequest.otherVerbs {
            #expect(text.contains("`\(verb)`"), "docs/CONTROL.md does not document the verb \(verb)")
        }
        for field in ["verb", "app", "background", "name", "data", "scene", "role", "configuration"] {
            #expect(text.contains("| `\(field)` |"), "docs/CONTROL.md does not document the request field \(field)")
        }
        for event in ["app", "scene", "ready", "transition", "sceneTransition", "added", "removed", "dropped", "closing"] {
            #expect(text.contains("`\(event)`"), "docs/CONTROL.md does not document the watch event \(event)")
        }
    }

    @Test("every line of CONTROL.md's example transcript is what the daemon sends")
    func exampleTranscriptIsTrue() throws {
        let app = "[App]\nExec=\(DaemonHarness.pythonClient)\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
        let lines = try Self.transcript()
        #expect(lines.count >= 10, "the transcript is there: \(lines)")
        try DaemonHarness.running(["notes": app, "clock": app]) { daemon in
            let socket = daemon.runtimeDirectory.appendingPathComponent("control.sock").path
            var connections: [Substring: ControlLine] = [:]
            var replayed: [String] = []
            for line in lines {
                guard let match = line.firstMatch(of: /^([0-9])([<>]) (.*)$/) else {
                    Issue.record("not a transcript line: \(line)")
                    continue
                }
                let connection = try connections[match.1] ?? ControlLine(socket)
                connections[match.1] = connection
                if match.2 == ">" {
                    try connection.send(String(match.3))
                    replayed.append(line)
                    continue
                }
                let received = try connection.receive()
                replayed.append("\(match.1)< \(received)")
                #expect(Self.masked(received) == Self.masked(String(match.3)),
                        "connection \(match.1) received another line than CONTROL.md says; the run so far:\n\(replayed.joined(separator: "\n"))")
            }
        }
    }
}
