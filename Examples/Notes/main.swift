// notes-example: a Swift app that adopts lifecycled's protocol through LifecycleClient.
//
// Like a UIKit app it saves its state when it enters the background (the last moment it is
// guaranteed to run: after the grace time it is stopped without notice) and restores it at launch.
// It also records every lifecycle message it gets, for the integration tests and the demo tour.

import Dispatch
import FoundationEssentials
import Glibc
import LifecycleClient
import LifecycleProtocol

struct NotesState: Codable {
    var launches = 0
    var backgroundEntries = 0
    var activations = 0
    var draft = ""
}

@MainActor
final class NotesDelegate: ApplicationDelegate {
    let stateFile = ProcessEnvironment.get("NOTES_STATE_FILE") ?? "notes-state.json"
    var state = NotesState()
    var observations: [LifecycleNotificationCenter.Observation] = []

    func application(_ application: LifecycleApplication, didFinishLaunchingWithOptions options: LaunchOptions) {
        if let data = try? Data(contentsOf: URL(filePath: stateFile)),
           let saved = try? JSONDecoder().decode(NotesState.self, from: data) {
            state = saved
            say("restored state: \(saved.launches) launches, \(saved.backgroundEntries) times in the background")
        } else {
            say("no saved state at \(stateFile); starting fresh")
        }
        state.launches += 1
        say("launched by \(options.launchedBy)" + (options.terminatedInBackground ? " (terminated in the background last time)" : ""))
    }

    func applicationDidBecomeActive(_ application: LifecycleApplication) {
        state.activations += 1
        say("active: editing draft #\(state.activations)")
    }

    func applicationWillResignActive(_ application: LifecycleApplication) {
        say("resigning: pausing the editor")
    }

    func applicationDidEnterBackground(_ application: LifecycleApplication) {
        state.backgroundEntries += 1
        state.draft = "draft saved at background entry \(state.backgroundEntries)"
        save()
        // Like a UIKit app finishing an upload: ask for background time, do the work after this handler
        // has returned, and end the task when done. Until then the daemon does not suspend the app.
        let task = application.beginBackgroundTask(withName: "sync") { [weak self] in
            self?.say("sync: time is running out")
        }
        DispatchQueue.main.asyncAfter(deadline: .now() + .milliseconds(300)) { [weak self] in
            MainActor.assumeIsolated {
                self?.say("sync: done, \(application.backgroundTimeRemaining.isFinite ? "\(Int(application.backgroundTimeRemaining))s were left" : "in the foreground")")
                application.endBackgroundTask(task)
            }
        }
    }

    func applicationWillEnterForeground(_ application: LifecycleApplication) {
        say("coming back to the foreground")
    }

    func applicationWillTerminate(_ application: LifecycleApplication) {
        save()
        say("terminating")
    }

    func save() {
        do {
            try JSONEncoder().encode(state).write(to: URL(filePath: stateFile), options: .atomic)
            say("saved state to \(stateFile)")
        } catch {
            say("could not save state to \(stateFile): \(error)")
        }
    }

    func say(_ text: String) {
        _ = "[notes] \(text)\n".withCString { write(1, $0, strlen($0)) }
    }

    /// The locale changed: a UIKit app would reload its formatters. Observing it makes the library ask
    /// the daemon for this type; while the app sleeps, changes are coalesced into one.
    func observeLocale(_ center: LifecycleNotificationCenter) {
        observations.append(center.addObserver(forName: .currentLocaleDidChange) { [weak self] notification in
            self?.say("locale changed (\(notification.posts) times while away): \(notification.payload.map { "\($0)" } ?? "-")")
            self?.record(type: "notification", name: notification.name.rawValue, id: nil, posts: notification.posts)
        })
    }

    /// Record each message as it arrives (before the delegate's own logic is judged), one JSON line
    /// per message, in the same format as the Python example, for tests and the demo.
    func recordMessages(_ center: LifecycleNotificationCenter) {
        for callback in LifecycleCallback.allCases {
            observations.append(center.addObserver(forName: .lifecycle(callback)) { [weak self] notification in
                self?.record(type: callback.rawValue, name: nil, id: notification.userInfo["id"], posts: nil)
            })
        }
    }

    func record(type: String, name: String?, id: String?, posts: Int?) {
        guard let path = ProcessEnvironment.get("LIFECYCLE_RECORD") else { return }
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let t = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        let app = ProcessEnvironment.get("LIFECYCLE_APP") ?? "notes"
        var line = "{\"app\":\"\(app)\",\"type\":\"\(type)\",\"id\":\(id ?? "null"),\"t\":\(t),\"pid\":\(getpid())"
        if let name { line += ",\"name\":\"\(name)\"" }
        if let posts { line += ",\"posts\":\(posts)" }
        line += "}\n"
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return }
        _ = line.withCString { write(fd, $0, strlen($0)) }
        close(fd)
    }
}

// NOTES_HELLO_WHEN=FILE: a slow start that ends when FILE exists, so that the tests choose what happens before the hello.
if let path = ProcessEnvironment.get("NOTES_HELLO_WHEN") {
    while access(path, F_OK) != 0 { usleep(50_000) }
}
let delegate = NotesDelegate()
// Observers go in before the first message is read.
LifecycleApplication.main(delegate: delegate, configure: { application in
    delegate.recordMessages(application.notificationCenter)
    delegate.observeLocale(application.notificationCenter)
})
