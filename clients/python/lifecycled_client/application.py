"""The client: environment, connection, dispatch, acks, reconnection. No thread of its own: ``process()``
reads and dispatches, ``fileno()`` and ``timeout()`` say when to call it (loops.py runs it)."""
from __future__ import annotations

import errno
import json
import os
import socket
import sys
import time
from collections.abc import Iterable
from typing import Any, Callable

from .delegates import ApplicationDelegate, SceneDelegate
from .types import LINE_MAX, PROTOCOL_VERSION, AppState, ConnectionEvent, Message, Scene

RECONNECT_WINDOW = 60.0
#: The start of a ``malformed_line`` reason for a line the package's own checks did not foresee.
INTERNAL_FAILURE = "the package could not handle this line"
RECONNECT_INTERVAL = 0.2
_APP_CALLBACKS = {
    "didFinishLaunching": "did_finish_launching", "didBecomeActive": "did_become_active",
    "willResignActive": "will_resign_active", "didEnterBackground": "did_enter_background",
    "willEnterForeground": "will_enter_foreground", "willTerminate": "will_terminate",
}
_SCENE_CALLBACKS = {
    "sceneWillEnterForeground": ("will_enter_foreground", None, "foregroundInactive"),
    "sceneDidBecomeActive": ("did_become_active", "foregroundActive", None),
    "sceneWillResignActive": ("will_resign_active", None, "foregroundInactive"),
    "sceneDidEnterBackground": ("did_enter_background", "background", None),
    "sceneDidDisconnect": ("did_disconnect", "disconnected", None),
}


def _log_to_stderr(text: str) -> None:
    try:
        print(f"lifecycle: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # stderr may be a pipe to a daemon that is gone: the app runs on regardless


class DeferredAck:
    """Returned by a delegate method (from ``Application.defer_ack()``): the message is acknowledged when
    ``ack()`` is called."""

    def __init__(self, application: Application) -> None:
        self._application = application
        self.message: Message | None = None

    def ack(self) -> bool:
        return self.message is not None and self._application._ack(self.message)


class Application:
    """UIApplication for one process. Make it with ``from_environment``, then ``start()``.

    The package sets every attribute below; the app reads them (``delegate`` and ``log`` it may replace).

    Attributes:
        delegate: The ``ApplicationDelegate`` whose methods the messages call.
        name: The app's name (``LIFECYCLE_APP``, then the daemon's ``hello``); None standalone without one.
        state: The ``AppState`` the app is in, by UIKit's naming rule (PROTOCOL.md 5.1): it changes when a "did"
            message arrives, before its delegate method runs, and when a "will" message is acknowledged. The
            daemon's ``hello`` sets it to what the daemon says; a catch-up's callbacks then move it again, one by
            one, so that each callback runs in the state it names. ``SUSPENDED`` is never seen: a suspended
            process runs no code.
        standalone: True when the program was not started by lifecycled (no ``LIFECYCLE_FD``): it is launched
            and made active at ``start()``, and gets no other message.
        connected: True from the daemon's ``hello`` until the connection ends (a restart of the daemon, an
            ``error``); requests need it (``post`` raises ``OSError(ENOTCONN)`` without it, but standalone).
        connected_scenes: The connected scenes by session id (``"s1"`` …): added at ``sceneWillConnect``,
            removed at ``sceneDidDisconnect``.
        background_time_remaining: Seconds of background time left while a background task runs (from
            ``backgroundTaskBegan`` and ``backgroundTimeWillExpire``); None in the foreground or when unknown.
        log: Where the package's own complaints go, one line each (default: standard error, prefixed
            ``lifecycle:``); a write that fails is dropped, so that an app whose stderr is gone runs on.
        on_awaitable: Set by ``AsyncioDriver``: what to do with a delegate method's awaitable (run it, and
            acknowledge its message when it completes). None under ``run``, which has no event loop: there a
            coroutine delegate method is never awaited, and its message is acknowledged at once.
    """

    def __init__(self, delegate: ApplicationDelegate | None = None, sock: socket.socket | None = None,
                 name: str | None = None, socket_path: str | None = None, standalone: bool = False,
                 token: str | None = None) -> None:
        self.delegate = delegate or ApplicationDelegate()
        self.name = name
        self.state = AppState.INACTIVE
        self.standalone = standalone
        self.connected = False
        self.connected_scenes: dict[str, Scene] = {}
        self.background_time_remaining: float | None = None
        self.log: Callable[[str], None] = _log_to_stderr
        self._socket_path = socket_path
        # LIFECYCLE_TOKEN, then the daemon's hello's: what a hello on LIFECYCLE_SOCKET proves the app with. Known
        # from the start, it lets a client whose inherited connection died before its first hello connect again.
        self._token: str | None = token or None
        self._sock = sock
        self._generation = 0
        self._input = bytearray()
        self._output = bytearray()
        self._observe: list[str] = []
        self._started = False
        self._reconnecting = False
        self._reconnect_deadline = 0.0
        self._next_attempt: float | None = None
        self._standalone_steps: list[str] = []
        self._tasks: dict[int, Callable[[int], None] | None] = {}
        self._next_task = 1
        self._scene_factories: dict[str | None, Callable[[], SceneDelegate]] = {}
        self.on_awaitable: Callable[[Any, Message], None] | None = None
        if sock is not None:
            self._adopt(sock)

    @classmethod
    def from_environment(cls, delegate: ApplicationDelegate | None = None) -> Application:
        """Reads LIFECYCLE_FD, LIFECYCLE_APP, LIFECYCLE_SOCKET and LIFECYCLE_TOKEN and removes them from the
        environment, so that programs the app starts do not take its place. Without LIFECYCLE_FD: standalone."""
        fd_text = os.environ.pop("LIFECYCLE_FD", None)
        name = os.environ.pop("LIFECYCLE_APP", None)
        path = os.environ.pop("LIFECYCLE_SOCKET", None) or None
        token = os.environ.pop("LIFECYCLE_TOKEN", None) or None
        if fd_text is None:
            return cls(delegate, name=name, standalone=True)
        try:
            fd = int(fd_text)
            if fd < 0:
                raise ValueError
        except ValueError:
            raise OSError(errno.EBADF, f"LIFECYCLE_FD is not a descriptor: {fd_text!r}") from None
        return cls(delegate, socket.socket(fileno=fd), name=name, socket_path=path, token=token)

    # -- setup -------------------------------------------------------------------------------------------

    def register_scene_delegate(self, factory: Callable[[], SceneDelegate], configuration: str | None = None) -> None:
        """The delegate type for scenes that connect with ``configuration`` (None: any other)."""
        self._scene_factories[configuration] = factory

    def observe(self, names: Iterable[str]) -> None:
        self._observe = list(names)
        if self._started and self._sock is not None:
            self._send({"type": "observe", "names": self._observe})

    def start(self) -> None:
        """Says hello. Call it early: slow initialisation belongs in did_finish_launching."""
        if self._started:
            raise RuntimeError("started already")
        self._started = True
        if self.standalone:
            self._standalone_steps = ["didFinishLaunching", "didBecomeActive"]
        else:
            self._hello()

    # -- the loop's side ---------------------------------------------------------------------------------

    def fileno(self) -> int:
        """The socket to watch for reading, or -1 when there is none right now (standalone, reconnecting)."""
        return self._sock.fileno() if self._sock is not None else -1

    def wants_write(self) -> bool:
        return bool(self._output) and self._sock is not None

    def timeout(self) -> float | None:
        """Seconds until ``process()`` has timed work (0: now), or None."""
        if self._standalone_steps or (self._input and b"\n" in self._input):
            return 0.0
        if self._next_attempt is not None:
            return max(0.0, self._next_attempt - time.monotonic())
        return None

    def process(self) -> bool:
        """Sends what is queued, reads what is there, dispatches at most one message. True when it did
        something (call it again)."""
        if self.standalone:
            if self._standalone_steps:
                self._dispatch_standalone(self._standalone_steps.pop(0))
                return True
            return False
        if self._sock is None:
            if self._next_attempt is not None and time.monotonic() >= self._next_attempt:
                self._try_reconnect()
                return True
            return False
        self._flush()
        if self._dispatch_buffered():
            return True
        if self._sock is None:
            return False
        try:
            data = self._sock.recv(16384, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            data = b""
        if not data:
            self._lost("lifecycled closed the connection", after_error=False)
            return True
        self._input += data
        self._dispatch_buffered()
        return True

    def flush(self, timeout: float = 1.0) -> bool:
        deadline = time.monotonic() + timeout
        while self._output and self._sock is not None and time.monotonic() < deadline:
            self._flush()
            if self._output and self._sock is not None:
                import select
                select.select([], [self._sock], [], max(0.0, deadline - time.monotonic()))
        return not self._output

    # -- the app's requests ------------------------------------------------------------------------------

    def defer_ack(self) -> DeferredAck:
        """Return this from a delegate method to acknowledge its message later, with ``.ack()``."""
        return DeferredAck(self)

    def begin_background_task(self, name: str = "", expiration: Callable[[int], None] | None = None) -> int:
        """UIKit's beginBackgroundTask(withName:expirationHandler:); returns the task's id."""
        task = self._next_task
        self._next_task += 1
        self._tasks[task] = expiration
        if self._sock is not None:
            self._send({"type": "beginBackgroundTask", "task": task, "name": name})
        return task

    def end_background_task(self, task: int) -> None:
        if task not in self._tasks:
            raise KeyError(f"background task {task} is not open")
        del self._tasks[task]
        if self._sock is not None:
            self._send({"type": "endBackgroundTask", "task": task})

    def post(self, name: str, payload: Any = None, app: str | None = None, *, has_payload: bool | None = None) -> None:
        message: dict[str, Any] = {"type": "post", "name": name}
        if payload is not None or has_payload:
            message["payload"] = payload
        if app is not None:
            message["app"] = app
        self._request(message)

    def request_scene_activation(self, scene: str | None = None, role: str | None = None,
                                 configuration: str | None = None, options: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"type": "requestSceneActivation"}
        for key, value in (("scene", scene), ("role", role), ("configuration", configuration), ("options", options)):
            if value is not None:
                message[key] = value
        self._request(message)

    def request_scene_destruction(self, scene: str) -> None:
        self._request({"type": "requestSceneDestruction", "scene": scene})

    # -- internals ---------------------------------------------------------------------------------------

    def _request(self, message: dict[str, Any]) -> None:
        if self.standalone:
            return
        if not self._started or self._sock is None:
            raise OSError(errno.ENOTCONN, "not connected to lifecycled")
        self._send(message)

    def _adopt(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        os.set_inheritable(sock.fileno(), False)
        self._sock = sock
        self._generation += 1
        self._input.clear()
        self._output.clear()

    def _hello(self) -> None:
        hello: dict[str, Any] = {"type": "hello", "protocol": PROTOCOL_VERSION}
        # The inherited connection is the app's already; only a reconnection names the app and proves it.
        if self._token is not None and self._generation > 1:
            hello["app"] = self.name or ""
            hello["token"] = self._token
        if self._observe:
            hello["observe"] = self._observe
        self._send(hello)

    def _send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
        if len(line) > LINE_MAX:
            raise OSError(errno.EMSGSIZE, f"a line of {len(line)} bytes is over the {LINE_MAX}-byte limit")
        self._output += line + b"\n"
        self._flush()

    def _flush(self) -> None:
        while self._output and self._sock is not None:
            try:
                sent = self._sock.send(self._output, socket.MSG_NOSIGNAL | socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self._lost("lost the connection to lifecycled", after_error=False)
                return
            del self._output[:sent]

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = None
        self.connected = False
        self._input.clear()
        self._output.clear()

    def _notify(self, event: ConnectionEvent) -> None:
        from .dispatch import _call
        _call(self, self.delegate.connection_changed, self, event)

    def _lost(self, why: str, after_error: bool) -> None:
        welcomed = self.connected
        self._drop()
        # An error on a welcomed connection was meant; a refusal or reset before the daemon's hello on a
        # reconnection is retried within the window.
        retry = bool(self._socket_path and self._token) and (not after_error or (self._reconnecting and not welcomed))
        if retry and not self._reconnecting:
            self._reconnecting = True
            self._reconnect_deadline = time.monotonic() + RECONNECT_WINDOW
            self.log(f"{why}; reconnecting through {self._socket_path}")
            self._notify(ConnectionEvent.RECONNECTING)
        if retry and time.monotonic() < self._reconnect_deadline:
            self._next_attempt = time.monotonic() + RECONNECT_INTERVAL
            return
        self._reconnecting = False
        self._next_attempt = None
        self.log(f"{'could not reconnect to lifecycled' if retry else why}; running on without lifecycle messages")
        self._notify(ConnectionEvent.DISCONNECTED)

    def _try_reconnect(self) -> None:
        self._next_attempt = None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.connect(self._socket_path or "")
        except OSError:
            sock.close()
            if time.monotonic() < self._reconnect_deadline:
                self._next_attempt = time.monotonic() + RECONNECT_INTERVAL
                return
            self._reconnecting = False
            self.log("could not reconnect to lifecycled; running on without lifecycle messages")
            self._notify(ConnectionEvent.DISCONNECTED)
            return
        self._adopt(sock)
        self._hello()

    def _dispatch_buffered(self) -> bool:
        end = self._input.find(b"\n")
        if end < 0:
            if len(self._input) > LINE_MAX:
                self._lost(f"lifecycled sent a line longer than {LINE_MAX} bytes", after_error=True)
                return True
            return False
        if end > LINE_MAX:
            self._lost(f"lifecycled sent a line longer than {LINE_MAX} bytes", after_error=True)
            return True
        line = bytes(self._input[:end])
        del self._input[:end + 1]
        self._dispatch_line(line)
        return True

    def _dispatch_line(self, line: bytes) -> None:
        from .dispatch import dispatch
        problems: list[str] = []
        try:
            message = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            problems.append("not UTF-8")
        except RecursionError:
            problems.append("not a JSON object (nested too deeply)")
        except ValueError:
            problems.append("not a JSON object")
        else:
            if not isinstance(message, dict):
                problems.append("not a JSON object")
            elif not isinstance(message.get("type"), str):
                problems.append("no string 'type'")
            else:
                try:
                    dispatch(self, message, problems)
                except Exception as error:  # noqa: BLE001 - a line the checks missed must not end the app
                    problems.append(f"{INTERNAL_FAILURE}: {type(error).__name__}")
        if problems:
            from .dispatch import _call
            # PROTOCOL.md section 10: a line the client cannot use is skipped, and the connection stays.
            _call(self, self.delegate.malformed_line, self, line, "; ".join(problems))

    def _dispatch_standalone(self, kind: str) -> None:
        from .dispatch import run_app_callback
        message = Message(type=kind, id=0, deadline_ms=0, generation=self._generation)
        if kind == "didFinishLaunching":
            message.fields["launchOptions"] = {"launchedBy": "standalone", "background": False,
                                               "terminatedInBackground": False}
        run_app_callback(self, message, [])

    def _ack(self, message: Message) -> bool:
        """Sends the ack (once) and applies the state change of a "will" message."""
        if message.acked:
            return False
        message.acked = True
        if message.type in ("willResignActive", "willEnterForeground"):
            self.state = AppState.INACTIVE
        from .dispatch import after_scene_ack
        after_scene_ack(self, message)
        if message.id == 0 or self.standalone or message.generation != self._generation or self._sock is None:
            return False
        ack: dict[str, Any] = {"type": "ack", "id": message.id}
        if message.configuration is not None:
            ack["configuration"] = message.configuration
        if message.has_state:
            ack["state"] = message.state
        if message.result is not None:
            ack["result"] = message.result
        self._send(ack)
        return True
