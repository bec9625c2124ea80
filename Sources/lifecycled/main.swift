import CSupport
import Glibc
import LifecycleDaemon
import LifecycleProtocol

// Block the signals the loop handles before anything can start a thread: sd-event sees SIGCHLD
// (and the stop/continue events of apps) through a signalfd, which only works for signals blocked
// in every thread.
blockSignals([SIGCHLD, SIGTERM, SIGINT, SIGHUP])
signal(SIGPIPE, SIG_IGN)
// A daemon that runs for months must give back what a burst took. glibc raises its mmap threshold each time a large
// mmapped block is freed (up to 32 MiB), after which big buffers (a slow reader's backlog, a long `list`) come from
// the heap and stay as fragmentation; a fixed 64 KiB threshold keeps them mmapped, returned to the kernel on free.
_ = cs_set_mmap_threshold(64 * 1024)
// Two descriptors per running app (its pidfd and its output pipe or socket): the soft limit goes up to the hard one
// (systemd: 1024:524288), and the apps get the soft limit back (cs_spawn).
var descriptorLimitBefore: UInt64 = 0, descriptorLimitAfter: UInt64 = 0
_ = cs_raise_nofile_limit(&descriptorLimitBefore, &descriptorLimitAfter)

let usage = """
    Usage: lifecycled [--config DIR] [--runtime-dir DIR] [--log-level LEVEL]

    Supervises apps through the iOS app lifecycle: notRunning, inactive, active, background, suspended.

      --config DIR        configuration directory: DIR/lifecycled.conf, DIR/apps/*.conf (default /etc/lifecycled
                          for root; otherwise $XDG_CONFIG_HOME/lifecycled, ~/.config/lifecycled, if it exists,
                          else /etc/xdg/lifecycled)
      --runtime-dir DIR   sockets (default: $LIFECYCLED_RUNTIME_DIR, /run/lifecycled for root,
                          $XDG_RUNTIME_DIR/lifecycled otherwise)
      --log-level LEVEL   debug, info (default), notice, warning, error
      --version           print the version
      -h, --help          this text

    Signals: SIGTERM/SIGINT stop every app (willTerminate, SIGTERM, SIGKILL) and exit, unless systemd's job
    for the unit is a restart: then the apps are left running to the next daemon. SIGHUP reloads the config.
    """

var environment: [String: String] = [:]
for (key, value) in ProcessEnvironment.all() { environment[key] = value }
var configDirectory = ConfigDirectory.path(uid: getuid(), environment: environment)
var runtimeDirectory = RuntimeDirectory.path(environment: environment, uid: getuid())
var arguments = CommandLine.arguments.dropFirst()

func fail(_ message: String) -> Never {
    _ = "lifecycled: \(message)\n".withCString { write(2, $0, strlen($0)) }
    exit(2)
}

while let argument = arguments.popFirst() {
    switch argument {
    case "--config":
        guard let value = arguments.popFirst() else { fail("--config needs a directory") }
        configDirectory = value
    case "--runtime-dir":
        guard let value = arguments.popFirst() else { fail("--runtime-dir needs a directory") }
        runtimeDirectory = value
    case "--log-level":
        let levels: [String: Log.Level] = ["debug": .debug, "info": .info, "notice": .notice, "warning": .warning, "error": .error]
        guard let value = arguments.popFirst(), let level = levels[value] else { fail("--log-level needs one of debug, info, notice, warning, error") }
        Log.threshold = level
    case "--version":
        print("lifecycled \(daemonVersion)")
        exit(0)
    case "-h", "--help":
        print(usage)
        exit(0)
    default:
        fail("unknown argument '\(argument)'\n\n\(usage)")
    }
}
Log.levelPrefixes = environment["JOURNAL_STREAM"] != nil
// Structured records go to the journal where journald listens; otherwise the same words go to stderr.
Log.toJournal = journalIsAvailable()
if descriptorLimitAfter != descriptorLimitBefore {
    Log.info("descriptor limit raised from \(descriptorLimitBefore) to \(descriptorLimitAfter); apps get \(descriptorLimitBefore)")
}

do {
    let daemon = try Daemon(options: DaemonOptions(configDirectory: configDirectory, runtimeDirectory: runtimeDirectory,
                                                   environment: environment))
    exit(try daemon.run())
} catch {
    Log.error("Failed to start: \(error)")
    exit(1)
}
