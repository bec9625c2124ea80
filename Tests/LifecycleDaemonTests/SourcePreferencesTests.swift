import Glibc
import LifecycleModel
import Testing
@testable import LifecycleDaemon

extension SourceTests {
    @Suite struct Preferences {
        private static func harness(userDefaults: Bool = true) throws -> SourceHarness {
            try SourceHarness(prepare: { directory in
                SourceFixture.rewrite(directory + "/notes.json", "{\"font\":12}")
                SourceFixture.rewrite(directory + "/mail.json", "{}")
            }) { _ in
                var config = SourceFixture.sourcesOff()
                config.userDefaults = userDefaults
                return config
            }
        }

        /// Real inotify on temporary preferences files of two apps in one directory.
        @Test func aChangedPreferencesFilePostsToItsAppOnly() throws {
            let harness = try Self.harness()
            let notes = harness.directory + "/notes.json"
            let mail = harness.directory + "/mail.json"
            harness.sources.watchPreferences(app: "notes", path: notes)
            harness.sources.watchPreferences(app: "mail", path: mail)
            let toNotes = SourcePost(type: "userDefaultsDidChange", payload: ["path": .string(notes)], app: "notes")
            let toMail = SourcePost(type: "userDefaultsDidChange", payload: ["path": .string(mail)], app: "mail")

            let completed = try harness.run([
                .act { SourceFixture.rewrite(notes, "{\"font\":14}") },                 // in place
                .waitFor { $0.count == 1 },
                .act { SourceFixture.replaceByRename(notes, "{\"font\":16}") },         // by rename
                .waitFor { $0.count == 2 },
                .act { SourceFixture.rewrite(notes, "{\"font\":16}") },                 // same bytes: nothing
                .wait(.milliseconds(300)),
                .act { SourceFixture.replaceByRename(mail, "{\"signature\":\"--\"}") }, // the other app's file
                .waitFor { $0.count == 3 },
                .act {
                    harness.sources.unwatchPreferences(app: "mail")
                    SourceFixture.rewrite(mail, "{\"signature\":\"\"}")                  // no longer watched
                },
                .wait(.milliseconds(300)),
                .act { unlink(notes) },                                                // removed: defaults again
                .waitFor { $0.count == 4 },
            ])

            #expect(completed)
            #expect(harness.posts == [toNotes, toNotes, toMail, toNotes])
        }

        @Test func watchingAgainReplacesTheEarlierWatch() throws {
            let harness = try Self.harness()
            let old = harness.directory + "/mail.json"
            let new = harness.directory + "/notes.json"
            harness.sources.watchPreferences(app: "notes", path: old)
            harness.sources.watchPreferences(app: "notes", path: new)

            let completed = try harness.run([
                .act { SourceFixture.rewrite(old, "{\"changed\":1}") },
                .wait(.milliseconds(300)),
                .act { SourceFixture.rewrite(new, "{\"changed\":2}") },
                .waitFor { !$0.isEmpty },
                .wait(.milliseconds(100)),
            ])

            #expect(completed)
            #expect(harness.posts == [SourcePost(type: "userDefaultsDidChange", payload: ["path": .string(new)], app: "notes")])
            #expect(harness.sources.descriptions.suffix(2) == [
                "userDefaultsDidChange: inotify on each app's PreferencesFile= (1 watched)",
                "userDefaultsDidChange notes: \(new)",
            ])
        }

        @Test func problemsAndTheOffSwitchAreDescribed() throws {
            let harness = try Self.harness()
            harness.sources.watchPreferences(app: "gone", path: harness.directory + "/missing/prefs.json")
            #expect(harness.sources.descriptions.last
                == "userDefaultsDidChange gone: \(harness.directory)/missing/prefs.json off (Failed to watch \(harness.directory)/missing with inotify: No such file or directory)")

            let off = try Self.harness(userDefaults: false)
            off.sources.watchPreferences(app: "notes", path: off.directory + "/notes.json")
            #expect(off.sources.descriptions.last == "userDefaultsDidChange: off (UserDefaults=no)")
        }
    }
}
