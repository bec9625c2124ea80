import Testing
@testable import LifecycleModel

/// The value types the rules are written in: states, scenes, priorities, callbacks, errors.
@Suite("States, callbacks and errors")
struct StateTypesTests {
    @Test("the app state of a multi-scene app is derived from its scenes as UIKit does", arguments: [
        ([SceneActivationState](), AppState.background),
        ([.unattached], .background),
        ([.background, .unattached], .background),
        ([.foregroundInactive], .inactive),
        ([.background, .foregroundInactive], .inactive),
        ([.foregroundActive], .active),
        ([.foregroundInactive, .foregroundActive, .background], .active),
        ([.unattached, .background, .foregroundActive], .active),
    ])
    func derivedFromScenes(_ scenes: [SceneActivationState], _ expected: AppState) {
        #expect(AppState.derived(fromScenes: scenes) == expected)
    }

    @Test("background task timers stay armed while tasks come and go, and go with the last task")
    func backgroundTaskTimersNeedOpenTasks() {
        let one = BackgroundTask(id: 1, name: "upload")
        var tasks = BackgroundTasks.timed([one])

        tasks.list.append(BackgroundTask(id: 2, name: "sync"))
        #expect(tasks == .timed([one, BackgroundTask(id: 2, name: "sync")]))

        tasks.list = []
        #expect(tasks == .none, "no timers beside an empty list")

        tasks.list = [one]
        #expect(tasks == .open([one]), "new tasks start with their time not counted")
    }

    @Test("each state has its priority class; a process-less state has none", arguments: [
        (AppState.notRunning, PriorityClass?.none),
        (.inactive, .foreground),
        (.active, .foreground),
        (.background, .background),
        (.suspended, .suspended),
        (.failed, nil),
    ])
    func priorityClass(_ state: AppState, _ expected: PriorityClass?) {
        #expect(PriorityClass(state) == expected)
    }

    @Test("running and foreground states", arguments: [
        (AppState.notRunning, false, false),
        (.inactive, true, true),
        (.active, true, true),
        (.background, true, false),
        (.suspended, true, false),
        (.failed, false, false),
    ])
    func runningAndForeground(_ state: AppState, _ running: Bool, _ foreground: Bool) {
        #expect(state.isRunning == running)
        #expect(state.isForeground == foreground)
    }

    @Test("a did callback moves the app when sent, a will callback when acknowledged, to its resulting state",
          arguments: [
              (LifecycleCallback.didFinishLaunching, true, AppState?.none),
              (.didBecomeActive, true, .active),
              (.willResignActive, false, .inactive),
              (.didEnterBackground, true, .background),
              (.willEnterForeground, false, .inactive),
              (.willTerminate, false, nil),
          ])
    func callbackSemantics(_ callback: LifecycleCallback, _ onSend: Bool, _ resulting: AppState?) {
        #expect(callback.changesStateOnSend == onSend)
        #expect(callback.resultingState == resulting)
    }

    @Test("a refusal names the request, the app and its state, with the hint when there is one", arguments: [
        (RequestError(app: "notes", state: .suspended, request: .background,
                      reason: .notAllowed(hint: "resume it first")),
         "cannot background 'notes': it is suspended (resume it first)"),
        (RequestError(app: "notes", state: .active, request: .launch(background: true), reason: .notAllowed(hint: nil)),
         "cannot launch --background 'notes': it is active"),
        (RequestError(app: "ghost", state: nil, request: .focus, reason: .unknownApp),
         "cannot focus 'ghost': no such app"),
    ])
    func requestErrorDescription(_ error: RequestError, _ expected: String) {
        #expect(error.description == expected)
    }

    @Test("requests read as lifectl commands", arguments: [
        (Request.launch(background: false), "launch"), (.launch(background: true), "launch --background"),
        (.focus, "focus"), (.deactivate, "deactivate"), (.background, "background"), (.suspend, "suspend"),
        (.resume, "resume"), (.terminate, "terminate"),
    ])
    func requestDescription(_ request: Request, _ expected: String) {
        #expect(request.description == expected)
    }

    @Test("only exit status 0 is a success", arguments: [
        (ExitStatus.exited(0), true, "exited with status 0"),
        (.exited(1), false, "exited with status 1"),
        (.signaled(9), false, "killed by signal 9"),
        (.signaled(0), false, "killed by signal 0"),
    ])
    func exitStatus(_ status: ExitStatus, _ success: Bool, _ description: String) {
        #expect(status.isSuccess == success)
        #expect(status.description == description)
    }
}
