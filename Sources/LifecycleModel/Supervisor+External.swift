// External apps (`External=yes`): the daemon never starts them; a process someone else started attaches on the
// app socket, and from then on the app is supervised like any other. docs/PROTOCOL.md ("External apps").

extension Supervisor {
    /// An external app's process attached: the app goes notRunning → inactive as if launched, without a spawn,
    /// and is told didFinishLaunching (with `launchedBy`) once its hello is in. Throws when the app is unknown,
    /// not external, or running already (a second client), so that the daemon can refuse the connection.
    mutating func attach(_ name: String, launchedBy: String) throws(RequestError) -> [Effect] {
        let request = Request.launch(background: false)
        guard let app = table.record(name) else {
            throw RequestError(app: name, state: nil, request: request, reason: .unknownApp)
        }
        guard app.policy.external || app.policy.adopted else {
            throw RequestError(app: name, state: app.state, request: request,
                               reason: .notAllowed(hint: "it is not an external app (no External=yes)"))
        }
        guard !app.state.isRunning else {
            throw RequestError(app: name, state: app.state, request: request, reason: .notAllowed(hint: "it is running already"))
        }
        launch(name, LaunchOptions(launchedBy: launchedBy, terminatedInBackground: app.terminatedInBackground), spawn: false)
        return finish(name)
    }
}
