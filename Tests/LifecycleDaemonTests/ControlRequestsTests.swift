import LifecycleModel
import LifecycleProtocol
import Testing
@testable import LifecycleDaemon

/// lifectl's requests through `ControlRequests`, driven through a fake port (`FakePort`) without a daemon: a
/// refusal is answered at once, an accepted request waits for its app to settle, and nothing is asked of the model
/// while the daemon stops or when the display server carries the request out.
@Suite struct ControlRequestsTests {
    let port = FakePort()
    let requests: ControlRequests
    let mail: AppRuntime

    init() throws {
        requests = ControlRequests(loop: try EventLoop(), host: port, placement: ProcessGroupPlacement())
        mail = AppRuntime(name: "mail", config: AppConfig(name: "mail", exec: ["/bin/true"]), place: ProcessGroupPlacement())
        port.apps["mail"] = mail
        port.handle(.add(app: "mail", policy: AppPolicy()))
    }

    @Test func aRefusedRequestIsAnsweredAtOnceAndLeavesNoWaiter() {
        let client = RecordingWaiter()
        requests.handle(.resume, for: "mail", from: client)
        #expect(port.inputs.last == "request resume mail from lifectl")
        #expect(client.replies.count == 1)
        #expect(client.replies.first?.ok == false)
        #expect(client.replies.first?.error?.contains("only a suspended app can be resumed") == true)
        #expect(mail.waiters.isEmpty)
    }

    @Test func anAcceptedRequestWaitsForItsAppToSettleAndGetsItsStatus() {
        let client = RecordingWaiter()
        requests.handle(.terminate, for: "mail", from: client)
        #expect(client.replies.isEmpty, "no answer before the app settles")
        #expect(mail.waiters.count == 1)
        requests.settled(mail)
        #expect(client.replies.count == 1)
        #expect(client.replies.first?.ok == true)
        #expect(client.replies.first?.apps?.map(\.name) == ["mail"])
        #expect(client.replies.first?.apps?.first?.state == .notRunning)
        #expect(mail.waiters.isEmpty)
    }

    @Test func nothingReachesTheModelWhileTheDaemonStops() {
        port.stopping = true
        let client = RecordingWaiter()
        let before = port.inputs
        requests.handle(.focus, for: "mail", from: client)
        #expect(port.inputs == before)
        #expect(client.replies == [.failure("lifecycled is shutting down")])
    }

    @Test func aRequestTheDisplayServerCarriesOutWaitsWithoutTheModel() {
        port.displayCarries = ["mail"]
        let client = RecordingWaiter()
        let before = port.inputs
        requests.handle(.focus, for: "mail", from: client)
        #expect(port.inputs == before)
        #expect(client.replies.isEmpty)
        #expect(mail.waiters.count == 1)
    }

    @Test func theWaitersOfAForgottenAppAreToldItWasRemoved() {
        let client = RecordingWaiter()
        requests.handle(.terminate, for: "mail", from: client)
        requests.forgetting(mail)
        #expect(client.replies == [.failure("mail was removed from the configuration")])
    }
}
