// notes-example: a Swift app that adopts lifecycled's protocol through LifecycleClient.
//
// Like a UIKit app it saves its state when it enters the background (the last moment it is
// guaranteed to run: after the grace time it is stopped without notice) and restores it at launch.
// It also records every lifecycle message it gets, for the integration tests and the demo tour.

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

    /// Record each message as it arrives (before the delegate's own logic is judged), one JSON line
    /// per message, in the same format as the Python example, for tests and the demo.
    func recordMessages(_ center: LifecycleNotificationCenter) {
        guard let path = ProcessEnvironment.get("LIFECYCLE_RECORD") else { return }
        for callback in LifecycleCallback.allCases {
            observations.append(center.addObserver(forName: .lifecycle(callback)) { notification in
                var now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &now)
                let t = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
                let id = notification.userInfo["id"] ?? "null"
                let app = ProcessEnvironment.get("LIFECYCLE_APP") ?? "notes"
                let line = "{\"app\":\"\(app)\",\"type\":\"\(callback.rawValue)\",\"id\":\(id),\"t\":\(t),\"pid\":\(getpid())}\n"
                let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o644)
                guard fd >= 0 else { return }
                _ = line.withCString { write(fd, $0, strlen($0)) }
                close(fd)
            })
        }
    }
}

let delegate = NotesDelegate()
// Observers go in before the first message is read.
LifecycleApplication.main(delegate: delegate, configure: { application in
    delegate.recordMessages(application.notificationCenter)
})
