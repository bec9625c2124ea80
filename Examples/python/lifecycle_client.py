#!/usr/bin/env python3
"""A lifecycled client in Python 3, standard library only: the example of docs/PROTOCOL.md.

Started by lifecycled, it says hello on the socket inherited as LIFECYCLE_FD, runs one handler method
per lifecycle message (the App class below: put your app's code there), and acks each message after its
handler returned. Started by hand (no LIFECYCLE_FD), it runs standalone; with --connect it attaches to the
daemon as an external app (an app whose config says External=yes; docs/PROTOCOL.md, external apps).

  --connect PATH          attach as an external app: connect to the daemon's app socket PATH (RUNTIME_DIR/app.sock)
                          and say hello with the app's name and no token
  --app NAME              the app's name for --connect (default: LIFECYCLE_APP, else the program's name)
  --new-process-group     call setpgid(0, 0) first: an external app must lead its own process group
                          (with --connect: an error before the daemon's welcome ends the client with status 3)

It is also the test client of the integration tests:

  LIFECYCLE_RECORD=FILE   append every message received, as one JSON line each, when it is received
                          (before its handler runs):
                          {"app": NAME, "type": TYPE, "id": ID or null, "t": time.monotonic_ns(),
                           "pid": PID, "launchOptions": {...} (didFinishLaunching only),
                           "deadlineMs": MS (lifecycle messages), "state": S (the daemon's hello),
                           "message": TEXT (error)}
  --no-ack                never ack (the deadline path)
  --ack-delay SECONDS     wait this long in every handler before acking
  --garbage               after hello, send the line `this is not json`; keep reading until the daemon
                          closes, then stay alive without a socket
  --children N            start N `sleep 100000` children in our process group; killed at exit
  --exit-on TYPE:CODE     exit with CODE right after acking a TYPE message (repeatable)
  --state-file PATH       demo: count the entries into the background, saved there, restored at launch
  --ignore-sigterm        do not exit on SIGTERM (to test the SIGKILL after TimeoutStopSec)
  --configuration NAME    scenes: answer configurationForConnecting with NAME (default: the proposed one)
  --open-scene-on-active CONFIG
                          scenes: after the first didBecomeActive, ask for a new scene with CONFIG
                          (requestSceneActivation)
  --close-others-on-active
                          scenes: a single-window kiosk: when a scene becomes active, ask to destroy every
                          other scene it has connected (requestSceneDestruction)

Scenes (apps with [Scenes] in their lifecycled config): each scene keeps a count of its entries into the
background; it is handed to the daemon with the ack of sceneDidEnterBackground and comes back in
sceneWillConnect's "state" when the session connects again, even after a relaunch.

Exit: 0 on SIGTERM, 0 after acking willTerminate (on the SIGTERM that follows, or after 2 s).
When the daemon goes away (a restart, a crash), it reconnects through LIFECYCLE_SOCKET with the token of
the daemon's hello, for up to 60 s (docs/PROTOCOL.md, reconnection); after an error message from the
daemon, or when that fails, it keeps running, idle, until SIGTERM.
"""

import argparse
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections import deque

PROTOCOL_VERSION = 1
MAX_LINE = 65536  # bytes per line, the "\n" not counted
CALLBACKS = (
    "didFinishLaunching",
    "didBecomeActive",
    "willResignActive",
    "didEnterBackground",
    "willEnterForeground",
    "willTerminate",
)
SCENE_CALLBACKS = (
    "sceneWillConnect",
    "sceneWillEnterForeground",
    "sceneDidBecomeActive",
    "sceneWillResignActive",
    "sceneDidEnterBackground",
    "sceneDidDisconnect",
)
# After acking willTerminate, how long to wait for the daemon's SIGTERM before exiting by ourselves.
TERMINATE_WAIT = 2.0


def snake_case(name):
    return "".join("_" + c.lower() if c.isupper() else c for c in name)


class App:
    """The app's code: one method per lifecycle message, UIKit's names in snake_case.

    Each method runs before the ack; return when the work is done (before the message's deadline).
    """

    def __init__(self, name, options):
        self.name = name
        self.options = options
        self.background_entries = 0
        self.scenes = {}

    def say(self, text):
        try:
            print(f"[{self.name}] {text}", flush=True)
        except OSError:
            pass  # no stdout: carry on

    def did_finish_launching(self, launch_options):
        # Initialise, restore saved state; not active yet.
        if self.options.state_file:
            try:
                with open(self.options.state_file) as f:
                    self.background_entries = int(json.load(f).get("backgroundEntries", 0))
            except (OSError, ValueError, AttributeError):
                self.background_entries = 0
            self.say(f"restored: entered the background {self.background_entries} times before")

    def did_become_active(self):
        pass  # start or resume interactive work

    def will_resign_active(self):
        pass  # pause interactive work, timers, input

    def did_enter_background(self):
        # Save data and state, release shared resources, stop timers.
        self.background_entries += 1
        if self.options.state_file:
            temporary = self.options.state_file + ".tmp"
            with open(temporary, "w") as f:
                json.dump({"backgroundEntries": self.background_entries}, f)
            os.replace(temporary, self.options.state_file)

    def will_enter_foreground(self):
        pass  # undo what did_enter_background did

    def will_terminate(self):
        pass  # save, clean up; SIGTERM follows the ack

    # Scenes (UISceneDelegate): one method per scene message, the scene's session id first.

    def configuration_for_connecting(self, scene, role, proposed, options):
        # Which configuration the new scene uses: None takes the proposed one.
        return self.options.configuration

    def scene_will_connect(self, scene, configuration, saved_state):
        # Build the scene's UI from its configuration; restore what it saved.
        restored = saved_state if isinstance(saved_state, dict) else {}
        self.scenes[scene] = {"configuration": configuration,
                              "backgroundEntries": int(restored.get("backgroundEntries", 0))}
        self.say(f"scene {scene} ({configuration}) connected"
                 + (f", restored {restored}" if restored else ""))

    def scene_did_enter_background(self, scene):
        # Returns the state to keep with the session (UIKit's stateRestorationActivity).
        kept = self.scenes.setdefault(scene, {"backgroundEntries": 0})
        kept["backgroundEntries"] += 1
        return {"scene": scene, "backgroundEntries": kept["backgroundEntries"]}

    def scene_did_disconnect(self, scene):
        self.scenes.pop(scene, None)

    def perform_fetch(self):
        # A background wake (ResumeEverySec=): fetch what is new, say what came of it.
        return "newData"

    def did_discard_scene_sessions(self, scenes):
        for scene in scenes:
            self.scenes.pop(scene, None)


class Recorder:
    """Appends one JSON line per received message to LIFECYCLE_RECORD, with one write() each
    (O_APPEND), so that several clients can share one file."""

    def __init__(self, path, app):
        self.app = app
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if path else None

    def record(self, message, received_ns):
        if self.fd is None:
            return
        entry = {"app": self.app, "type": message.get("type"), "id": message.get("id"),
                 "t": received_ns, "pid": os.getpid()}
        for key in ("launchOptions", "deadlineMs", "state", "message", "name", "payload", "payloads",
                    "posts", "dropped", "task", "tasks", "remainingMs", "scene", "scenes", "role",
                    "configuration", "options", "request"):
            if key in message:
                entry[key] = message[key]
        os.write(self.fd, (json.dumps(entry) + "\n").encode())


class Connection:
    """The inherited socket: NDJSON lines in and out. Lines are parsed and recorded as soon as they
    are read, also while a handler waits (see wait()), and queued for the main loop."""

    def __init__(self, sock, recorder, say):
        self.sock = sock
        self.recorder = recorder
        self.say = say
        self.buffer = b""
        self.queue = deque()
        self.open = True
        self.writable = True
        # Called when the daemon hangs up: returns a new socket (hello sent) or None.
        self.reconnector = None
        # The daemon sent an error: it meant to hang up, so no reconnection.
        self.refused = False

    def send_line(self, data):
        if not self.open or not self.writable:
            return
        try:
            self.sock.sendall(data + b"\n")
        except OSError as error:
            # EPIPE, ECONNRESET: the daemon closed. Keep reading what it sent before (an error
            # message, say) until the end of file.
            self.say(f"cannot send: {error.strerror or error}")
            self.writable = False

    def send(self, message):
        self.send_line(json.dumps(message, separators=(",", ":")).encode())

    def close(self):
        if self.open:
            self.open = False
            self.sock.close()
            if self.reconnector and not self.refused:
                sock = self.reconnector()
                if sock is not None:
                    self.sock, self.open, self.writable, self.buffer = sock, True, True, b""
                    return
            self.say("connection closed: running without messages")

    def pump(self, timeout):
        """Read what arrives within `timeout` seconds (None: block until something does)."""
        if not self.open:
            if timeout is None:
                signal.pause()
            else:
                time.sleep(timeout)
            return
        ready, _, _ = select.select([self.sock], [], [], timeout)
        if not ready:
            return
        try:
            data = self.sock.recv(65536)
        except OSError as error:
            self.say(f"read failed: {error.strerror or error}")
            data = b""
        if not data:
            self.close()
            return
        received_ns = time.monotonic_ns()
        self.buffer += data
        while True:
            end = self.buffer.find(b"\n")
            if end < 0:
                break
            line, self.buffer = self.buffer[:end], self.buffer[end + 1:]
            self.received(line, received_ns)
        if len(self.buffer) > MAX_LINE:
            self.say(f"the daemon sent a line longer than {MAX_LINE} bytes: hanging up")
            self.close()

    def received(self, line, received_ns):
        if len(line) > MAX_LINE:
            self.say(f"ignoring a line longer than {MAX_LINE} bytes")
            return
        try:
            message = json.loads(line)
        except ValueError:
            self.say(f"ignoring a line that is not JSON: {line[:80]!r}")
            return
        if not isinstance(message, dict) or not isinstance(message.get("type"), str):
            self.say(f"ignoring a line that is not a message: {line[:80]!r}")
            return
        self.recorder.record(message, received_ns)
        if message["type"] == "error":
            self.refused = True
        self.queue.append(message)

    def next_message(self):
        """The next message received; blocks. Once the connection is closed, blocks forever."""
        while not self.queue:
            self.pump(None)
        return self.queue.popleft()

    def wait(self, seconds):
        """Sleep for `seconds` while still receiving (and recording) what the daemon sends."""
        end = time.monotonic() + seconds
        while (remaining := end - time.monotonic()) > 0:
            self.pump(remaining)


def parse_arguments(argv):
    parser = argparse.ArgumentParser(description="A lifecycled client (see docs/PROTOCOL.md).")
    parser.add_argument("--connect", metavar="PATH",
                        help="attach as an external app through the daemon's app socket PATH")
    parser.add_argument("--app", metavar="NAME", help="the app's name for --connect")
    parser.add_argument("--new-process-group", action="store_true",
                        help="lead a new process group first (external apps must)")
    parser.add_argument("--no-ack", action="store_true", help="never acknowledge a message")
    parser.add_argument("--no-ack-for", action="append", default=[], metavar="TYPE",
                        help="never acknowledge messages of this TYPE (repeatable)")
    parser.add_argument("--ack-delay", type=float, default=0.0, metavar="SECONDS",
                        help="wait in every handler before acking")
    parser.add_argument("--garbage", action="store_true",
                        help="send a line that is not JSON after hello")
    parser.add_argument("--children", type=int, default=0, metavar="N",
                        help="start N sleep children in the process group")
    parser.add_argument("--exit-on", action="append", default=[], metavar="TYPE:CODE",
                        help="exit with CODE right after acking a TYPE message")
    parser.add_argument("--state-file", metavar="PATH",
                        help="save and restore a count of background entries")
    parser.add_argument("--ignore-sigterm", action="store_true", help="do not exit on SIGTERM")
    parser.add_argument("--observe", default="", metavar="TYPE,TYPE",
                        help="notification types to observe (sent with hello)")
    parser.add_argument("--task-on-background", metavar="SECONDS",
                        help="after didEnterBackground, hold a background task for SECONDS (or 'forever')")
    parser.add_argument("--end-on-expire", action="store_true",
                        help="end the open tasks when backgroundTimeWillExpire arrives")
    parser.add_argument("--post-on-active", metavar="TYPE",
                        help="post a notification of TYPE after each didBecomeActive")
    parser.add_argument("--configuration", metavar="NAME",
                        help="scenes: answer configurationForConnecting with NAME")
    parser.add_argument("--open-scene-on-active", metavar="CONFIG",
                        help="scenes: after the first didBecomeActive, ask for a new scene with CONFIG")
    parser.add_argument("--close-others-on-active", action="store_true",
                        help="scenes: when a scene becomes active, destroy the other connected ones")
    options = parser.parse_args(argv)
    options.exit_codes = {}
    for spec in options.exit_on:
        kind, sep, code = spec.rpartition(":")
        if not sep or not kind or not code.lstrip("-").isdigit():
            parser.error(f"--exit-on wants TYPE:CODE, e.g. didBecomeActive:3, not {spec!r}")
        options.exit_codes[kind] = int(code)
    if options.children < 0 or options.ack_delay < 0:
        parser.error("--children and --ack-delay must not be negative")
    return options


def run_standalone(app):
    app.say("LIFECYCLE_FD is not set: not started by lifecycled, running standalone")
    app.did_finish_launching({"launchedBy": "standalone", "background": False,
                              "terminatedInBackground": False})
    app.did_become_active()
    try:
        while True:
            signal.pause()
    except (KeyboardInterrupt, SystemExit):
        app.will_resign_active()
        app.did_enter_background()
        app.will_terminate()
        raise SystemExit(0)


def run(app, options, connection, socket_path=None, external=False):
    hello = {"type": "hello", "protocol": PROTOCOL_VERSION}
    if external:
        # An external app names itself, without a token: the daemon checks who we are (SO_PEERCRED).
        hello["app"] = app.name
    observe = [name for name in options.observe.split(",") if name]
    if observe:
        hello["observe"] = observe
    connection.send(hello)
    open_tasks = set()
    next_task = 1
    opened_scene = False
    if options.garbage:
        connection.send_line(b"this is not json")
    token = None

    def reconnect():
        # The daemon restarted: its hello gave a token; the app socket takes it back (for up to 60 s).
        if not socket_path or not token:
            return None
        app.say(f"lifecycled went away: reconnecting through {socket_path}")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(socket_path)
                again = dict(hello, app=app.name, token=token)
                sock.sendall(json.dumps(again, separators=(",", ":")).encode() + b"\n")
                app.say("reconnected")
                return sock
            except OSError:
                sock.close()
                time.sleep(0.2)
        return None

    connection.reconnector = reconnect
    while True:
        message = connection.next_message()
        kind = message["type"]
        if kind == "hello":
            if message.get("protocol") != PROTOCOL_VERSION:
                app.say(f"the daemon speaks protocol {message.get('protocol')!r}, not {PROTOCOL_VERSION}")
            app.say(f"connected as {message.get('app')!r}, state {message.get('state')}")
            token = message.get("token") or token
        elif kind == "error":
            app.say(f"error from lifecycled: {message.get('message')}")
            if external and token is None:
                app.say("the daemon refused to let us attach: exiting")
                raise SystemExit(3)
        elif kind == "notification":
            extra = f" ({message.get('posts')} posts, {message.get('dropped')} dropped)" if message.get("posts", 1) > 1 else ""
            app.say(f"notification {message.get('name')}{extra}")
        elif kind == "backgroundTaskBegan":
            remaining = message.get("remainingMs")
            app.say(f"background task {message.get('task')} began, "
                    + (f"{remaining} ms left" if remaining is not None else "in the foreground"))
        elif kind == "backgroundTimeWillExpire":
            app.say(f"background time runs out in {message.get('remainingMs')} ms")
            if options.end_on_expire:
                for task in message.get("tasks", []):
                    connection.send({"type": "endBackgroundTask", "task": task["task"]})
                    open_tasks.discard(task["task"])
        elif kind in CALLBACKS:
            app.say(kind)
            handler = getattr(app, snake_case(kind))
            if kind == "didFinishLaunching":
                handler(message.get("launchOptions") or {})
            else:
                handler()
            if options.ack_delay:
                connection.wait(options.ack_delay)
            if not options.no_ack and kind not in options.no_ack_for:
                connection.send({"type": "ack", "id": message.get("id")})
        elif kind == "configurationForConnecting":
            chosen = app.configuration_for_connecting(message.get("scene"), message.get("role"),
                                                      message.get("configuration"), message.get("options"))
            ack = {"type": "ack", "id": message.get("id")}
            if chosen:
                ack["configuration"] = chosen
            connection.send(ack)
        elif kind == "didDiscardSceneSessions":
            app.say(f"scene sessions discarded: {', '.join(message.get('scenes', []))}")
            app.did_discard_scene_sessions(message.get("scenes", []))
            connection.send({"type": "ack", "id": message.get("id")})
        elif kind in SCENE_CALLBACKS:
            scene = message.get("scene")
            app.say(f"{kind} {scene}")
            ack = {"type": "ack", "id": message.get("id")}
            if kind == "sceneWillConnect":
                app.scene_will_connect(scene, message.get("configuration"), message.get("state"))
            elif kind == "sceneDidEnterBackground":
                ack["state"] = app.scene_did_enter_background(scene)
            elif kind == "sceneDidDisconnect":
                app.scene_did_disconnect(scene)
            if options.ack_delay:
                connection.wait(options.ack_delay)
            if not options.no_ack and kind not in options.no_ack_for:
                connection.send(ack)
            if kind == "sceneDidBecomeActive" and options.close_others_on_active:
                # UIKit's requestSceneSessionDestruction: the daemon disconnects and discards each one.
                for other in [name for name in app.scenes if name != scene]:
                    connection.send({"type": "requestSceneDestruction", "scene": other})
        elif kind == "performFetch":
            app.say("performFetch")
            result = app.perform_fetch()
            if not options.no_ack and kind not in options.no_ack_for:
                connection.send({"type": "ack", "id": message.get("id"), "result": result})
        elif kind == "requestFailed":
            app.say(f"{message.get('request')} refused: {message.get('message')}")
        else:
            pass  # a later version's notification: ignore, do not ack
        if kind == "didEnterBackground" and options.task_on_background:
            # UIKit: beginBackgroundTask in applicationDidEnterBackground, end it when the work is done.
            task = next_task
            next_task += 1
            connection.send({"type": "beginBackgroundTask", "task": task, "name": f"work{task}"})
            open_tasks.add(task)
            if options.task_on_background != "forever":
                connection.wait(float(options.task_on_background))
                if task in open_tasks:
                    connection.send({"type": "endBackgroundTask", "task": task})
                    open_tasks.discard(task)
        if kind == "didBecomeActive" and options.open_scene_on_active and not opened_scene:
            # UIKit's requestSceneSessionActivation with no session: a new scene, connected and focused.
            opened_scene = True
            connection.send({"type": "requestSceneActivation", "configuration": options.open_scene_on_active,
                             "options": {"reason": "the app asked"}})
        if kind == "didBecomeActive" and options.post_on_active:
            connection.send({"type": "post", "name": options.post_on_active, "payload": {"from": app.name}})
        if kind in options.exit_codes:
            app.say(f"exiting with status {options.exit_codes[kind]} after {kind}")
            raise SystemExit(options.exit_codes[kind])
        if kind == "willTerminate" and not options.no_ack:
            # Acked: the daemon's SIGTERM follows. Exit 0 on it, or by ourselves if it does not come.
            # (Exiting before the daemon has read the ack would look like a crash to it.)
            connection.wait(TERMINATE_WAIT)
            raise SystemExit(0)


def main(argv):
    options = parse_arguments(argv)

    def on_sigterm(signum, frame):
        if not options.ignore_sigterm:
            raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_sigterm)

    # Read the variables, then keep them from the programs we start.
    fd_text = os.environ.pop("LIFECYCLE_FD", None)
    socket_path = os.environ.pop("LIFECYCLE_SOCKET", None)
    name = options.app or os.environ.pop("LIFECYCLE_APP", None) or os.path.basename(sys.argv[0])
    app = App(name, options)
    if options.new_process_group:
        os.setpgid(0, 0)

    children = [subprocess.Popen(["sleep", "100000"]) for _ in range(options.children)]
    try:
        if options.connect:
            # Started by anyone: signals a parent blocked stay blocked here, and the daemon's SIGTERM must work.
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(options.connect)
            except OSError as error:
                app.say(f"cannot connect to {options.connect}: {error.strerror or error}")
                return 2
            recorder = Recorder(os.environ.get("LIFECYCLE_RECORD"), name)
            run(app, options, Connection(sock, recorder, app.say), options.connect, external=True)
            return 0
        if fd_text is None:
            run_standalone(app)
        try:
            fd = int(fd_text)
            os.set_inheritable(fd, False)
            sock = socket.socket(fileno=fd)
            sock.setblocking(True)
        except (ValueError, OSError) as error:
            app.say(f"LIFECYCLE_FD={fd_text!r} is not a usable socket: {error}")
            return 2
        recorder = Recorder(os.environ.get("LIFECYCLE_RECORD"), name)
        run(app, options, Connection(sock, recorder, app.say), socket_path)
        return 0
    except SystemExit as exit_request:
        return exit_request.code if isinstance(exit_request.code, int) else 0
    except KeyboardInterrupt:
        return 0
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # exiting already: a second SIGTERM must not interrupt
        for child in children:
            child.kill()
        for child in children:
            child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
