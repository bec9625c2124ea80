import LifecycleModel
import Testing
@testable import LifecycleDaemon

/// The words and journal fields of the records the daemon writes for the model's notes (docs/JOURNAL.md).
@Suite struct LogLinesTests {
    private func line(_ note: Note) -> LogLine { LogLines.line(app: "mail", note: note) }

    private func fields(_ line: LogLine) -> [String] { line.fields.map { "\($0.0)=\($0.1)" } }

    @Test func aMissedAckNamesTheCallbackItsLimitAndTheMissesSoFar() {
        let record = line(.deadlineMissed(.willResignActive, id: 7, after: .milliseconds(1500), misses: 3))
        #expect(record.event == .deadlineMissed)
        #expect(record.level == .warning)
        #expect(record.message == "mail: willResignActive (id 7) was not acknowledged within 1.5s; going on (3 missed so far)")
        #expect(fields(record) == ["LIFECYCLE_APP=mail", "LIFECYCLE_CALLBACK=willResignActive", "LIFECYCLE_MISSES=3"])
    }

    @Test func aReadoptionNamesTheProcessAndTheStateItIsTakenBackIn() {
        let record = LogLines.line(app: "mail", note: .readopted(state: .background), pid: 4242)
        #expect(record.event == .launch)
        #expect(record.level == .notice)
        #expect(record.message == "mail: re-adopted process 4242 in state background from the previous lifecycled")
        #expect(fields(record) == ["LIFECYCLE_APP=mail", "LIFECYCLE_PID=4242", "LIFECYCLE_LAUNCHED_BY=re-adoption",
                                   "LIFECYCLE_TO=background"])
    }

    @Test func theEndOfAProcessThatIsNotOurChildHasAnUnknownStatus() {
        #expect("\(LifecycleModel.ExitStatus.unknown)" == "ended with an unknown status (not lifecycled's child)")
        #expect(!LifecycleModel.ExitStatus.unknown.isSuccess, "a failure for Restart=on-failure")
    }

    @Test func theKernelWinningAtReadoptionIsSaidInTheLog() {
        #expect(line(.adoptedRunning).message == "mail: saved as suspended, but its processes run; taking it back in the background")
        #expect(line(.adoptedStopped(saved: .inactive)).message
            == "mail: saved as inactive, but its processes are stopped (the previous lifecycled died mid-suspension); continuing them")
        #expect(line(.adoptedRunning).level == .notice && line(.adoptedStopped(saved: .inactive)).level == .notice)
    }

    @Test func aLaunchWatchdogNamesItsLimit() {
        let record = line(.launchWatchdog(after: .seconds(20)))
        #expect(record.event == .deadlineMissed)
        #expect(record.level == .error)
        #expect(record.message == "mail: did not finish launching within 20s; killing it (launch watchdog)")
    }

    @Test func aScheduledRestartCarriesItsDelayInMicrosecondsAndItsAttempt() {
        let record = line(.restartScheduled(after: .milliseconds(200), attempt: 2, limit: 5, within: .seconds(10)))
        #expect(record.event == .restart)
        #expect(record.level == .notice)
        #expect(record.message == "mail: restarting in 200ms (start 2 of at most 5 within 10s)")
        #expect(fields(record) == ["LIFECYCLE_APP=mail", "LIFECYCLE_RESTART_DELAY_USEC=200000", "LIFECYCLE_ATTEMPT=2"])
    }

    @Test func aJetsamTerminationGivesTheResidentSizeOnlyWhenItIsKnown() {
        let known = line(.terminatedForMemory(residentBytes: 4096 * 1024))
        #expect(known.message == "mail: terminated while suspended to relieve memory pressure (jetsam), 4096 KiB resident")
        #expect(fields(known) == ["LIFECYCLE_APP=mail", "LIFECYCLE_REASON=memory pressure", "LIFECYCLE_RSS_BYTES=4194304"])
        let unknown = line(.terminatedForMemory(residentBytes: nil))
        #expect(unknown.message == "mail: terminated while suspended to relieve memory pressure (jetsam)")
        #expect(fields(unknown) == ["LIFECYCLE_APP=mail", "LIFECYCLE_REASON=memory pressure"])
    }

    @Test func aSceneTransitionIsATransitionRecordWithItsScene() {
        let record = line(.sceneTransition(scene: "s1", from: nil, to: .foregroundActive, reason: "focus"))
        #expect(record.event == .transition)
        #expect(record.level == .info)
        #expect(record.message == "mail/s1: disconnected → foregroundActive (focus)")
        #expect(fields(record) == ["LIFECYCLE_APP=mail", "LIFECYCLE_SCENE=s1", "LIFECYCLE_FROM=disconnected",
                                   "LIFECYCLE_TO=foregroundActive", "LIFECYCLE_REASON=focus"])
    }

    @Test func plainNotesAreLinesWithoutAJournalEvent() {
        let overrun = line(.taskOverrun(["sync", "upload"], after: .seconds(30), overruns: 2))
        #expect(overrun.event == nil)
        #expect(overrun.level == .warning)
        #expect(overrun.message == "mail: background tasks still open when their 30s ran out: sync, upload; suspending it anyway (2 overruns so far)")
        #expect(line(.scenesDiscarded(["s1"])).message == "mail: discarded scene session s1")
        #expect(line(.scenesDiscarded(["s1", "s2"])).message == "mail: discarded scene sessions s1, s2")
        #expect(line(.spawnFailed("no such file")).level == .error)
    }

    @Test func aTransitionLineNamesBothStatesAndThePidWhenThereIsOne() {
        #expect(LogLines.transitionMessage(app: "mail", from: .active, to: .inactive, reason: "lifectl")
            == "mail: active → inactive (lifectl)")
        let fields = LogLines.transitionFields(app: "mail", from: .active, to: .inactive, reason: "lifectl", pid: 42)
        #expect(fields.map { "\($0.0)=\($0.1)" }
            == ["LIFECYCLE_APP=mail", "LIFECYCLE_FROM=active", "LIFECYCLE_TO=inactive", "LIFECYCLE_REASON=lifectl", "LIFECYCLE_PID=42"])
        #expect(LogLines.transitionFields(app: "mail", from: .active, to: .notRunning, reason: "exit", pid: nil).count == 4)
    }
}
