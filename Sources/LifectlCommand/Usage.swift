// lifectl's help, and the exit statuses it promises; the parser's errors quote the help.

/// `lifectl --help`, also printed after the usage errors that leave the reader unsure what lifectl takes.
public let usage = """
    Usage: lifectl [OPTIONS] VERB [APP] [VERB OPTIONS]

    Queries (anyone):
      list                          every app with its state
      status [APP]                  the daemon, or one app, in detail
      watch [APP]                   every app's state (or APP's), then each change as it happens, one line
                                    each (--json: the daemon's JSON lines), until interrupted
    Lifecycle (root, the daemon's user, [Control] Group=): each waits until the app settles, then prints its state:
      launch APP [--background]     notRunning → inactive (or straight into the background)
      focus APP                     make APP active (launching it if needed); the active app goes to the background
      deactivate APP                interruption: active → inactive
      background APP                → background (suspended after its BackgroundTimeSec)
      suspend APP                   → suspended now
      resume APP                    suspended → background
      resume --all                  every suspended app → background: thawed and continued, adopted ones too
      terminate APP                 willTerminate, SIGTERM, SIGKILL
    Notifications (as lifecycle verbs):
      post TYPE [--app APP] [--data JSON]
                                    deliver to every app observing TYPE (or to APP); queued and
                                    coalesced for apps that are suspended
      simulate-memory-pressure      act as if the memory-pressure trigger fired (first event: warnings;
                                    later ones: terminate suspended apps), for kernels without PSI
                                    triggers and for testing the policy
    Configuration (as lifecycle verbs):
      reload                        read the config directory again and wait until it is applied; a file
                                    with an error is not applied (its app keeps its configuration): the
                                    errors are printed and the exit status is 1
    \(sceneUsage)
    Logs (needs the systemd journal):
      logs [APP] [-f|--follow]      journalctl -u lifecycled [LIFECYCLE_APP=APP + SYSLOG_IDENTIFIER=APP] [-f]

    Options:
      --json                        data as JSON: an array of apps (list, lifecycle verbs), an object
                                    {"daemon", "apps"} (status), {"delivered", "queued"} (post), {}
                                    (simulate-memory-pressure, reload); for logs, journalctl -o json
      -q, --quiet                   nothing on stdout when a changing verb succeeds (errors still go to
                                    stderr); queries print as usual
      --no-pager                    accepted, as systemctl does; lifectl never pages (logs passes it on)
      --runtime-dir DIR             where the daemon's control.sock is
      --timeout SEC                 how long to wait for the daemon's answer (default 120)
      -h, --help                    this text

    The daemon is found at $LIFECYCLED_RUNTIME_DIR/control.sock (default /run/lifecycled for root,
    $XDG_RUNTIME_DIR/lifecycled otherwise). NO_COLOR turns colours off.
    Exit status: 0 done, 1 refused or failed, 2 usage error, 3 daemon not reachable, 4 no such app.
    watch: 0 when interrupted (SIGINT, SIGTERM), 1 when the daemon dropped it for falling behind, 3 when the
    daemon went away.
    """

/// The scene verbs' part of `usage`, also printed when `scene` comes without its subverb.
public let sceneUsage = """
    Scenes (apps with [Scenes]; changes as for lifecycle verbs):
      scene open APP [--role ROLE] [--config NAME]
                                    a new scene session, connected and focused (prints its id)
      scene focus APP SCENE         focus that scene (reconnecting it); focus moves between scenes and apps
      scene background APP SCENE    that scene to the background (the app follows when it was the last one)
      scene close APP SCENE         disconnect the scene, keep its session and saved state
      scene discard APP SCENE       disconnect it and forget the session (didDiscardSceneSessions)
      scenes [APP]                  the scene sessions and their states (anyone)
    """

/// The exit statuses scripts can rely on (also in --help and lifectl(1)).
public enum ExitStatus {
    public static let refused: Int32 = 1
    public static let usage: Int32 = 2
    public static let unreachable: Int32 = 3
    public static let noSuchApp: Int32 = 4
}
