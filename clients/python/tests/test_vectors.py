"""The conformance vectors of docs/protocol-tests (their README says the format), played against the package."""
from __future__ import annotations

import json
import os
import pathlib
import select
import socket
import tempfile
import time
from typing import Any

import pytest

from lifecycled_client import NO_STATE, Application, ApplicationDelegate, SceneDelegate

VECTORS = pathlib.Path(__file__).resolve().parents[3] / "docs" / "protocol-tests"


class Run:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.output: list[dict[str, Any]] = []
        self.answer: dict[str, Any] = {}
        self.deferred: Any = None
        self.daemon: socket.socket | None = None
        self.listener: socket.socket | None = None
        self.input = b""
        self.app: Application | None = None
        self.memory_warnings = 0

    def answer_for(self, kind: str) -> dict[str, Any]:
        if self.answer.get("on") == kind:
            answer, self.answer = self.answer, {}
            return answer
        return {}


def recording_delegates(run: Run):
    def result(kind: str, app: Application) -> Any:
        answer = run.answer_for(kind)
        if answer.get("defer"):
            run.deferred = app.defer_ack()
            return run.deferred
        return None

    class Scenes(SceneDelegate):
        def __init__(self) -> None:
            self.saved: Any = NO_STATE

        def _record(self, kind: str, scene: Any, **extra: Any) -> Any:
            run.events.append({"event": kind, "scene": scene.session.persistent_identifier, **extra})
            answer = run.answer_for(kind)
            if "state" in answer:
                self.saved = answer["state"]
            if answer.get("defer"):
                run.deferred = run.app.defer_ack()
                return run.deferred
            return None

        def will_connect(self, scene, session, options):
            return self._record("sceneWillConnect", scene, role=session.role, configuration=session.configuration,
                                options=options, state=scene.restored_state)
        def will_enter_foreground(self, scene): return self._record("sceneWillEnterForeground", scene)
        def did_become_active(self, scene): return self._record("sceneDidBecomeActive", scene)
        def will_resign_active(self, scene): return self._record("sceneWillResignActive", scene)
        def did_enter_background(self, scene): return self._record("sceneDidEnterBackground", scene)
        def did_disconnect(self, scene): return self._record("sceneDidDisconnect", scene)
        def state_restoration_activity(self, scene):
            saved, self.saved = self.saved, NO_STATE
            return saved

    class App(ApplicationDelegate):
        def _simple(self, kind: str, app: Application) -> Any:
            run.events.append({"event": kind})
            return result(kind, app)
        def did_finish_launching(self, app, options):
            run.events.append({"event": "didFinishLaunching", "launchedBy": options.launched_by,
                               "background": options.background,
                               "terminatedInBackground": options.terminated_in_background})
            return result("didFinishLaunching", app)
        def did_become_active(self, app): return self._simple("didBecomeActive", app)
        def will_resign_active(self, app): return self._simple("willResignActive", app)
        def did_enter_background(self, app): return self._simple("didEnterBackground", app)
        def will_enter_foreground(self, app): return self._simple("willEnterForeground", app)
        def will_terminate(self, app): return self._simple("willTerminate", app)
        def configuration_for_connecting(self, app, session, options):
            run.events.append({"event": "configurationForConnecting", "scene": session.persistent_identifier,
                               "role": session.role, "configuration": session.configuration, "options": options,
                               "state": None})
            return run.answer_for("configurationForConnecting").get("configuration")
        def perform_fetch(self, app):
            run.events.append({"event": "performFetch"})
            return run.answer_for("performFetch").get("result")
        def did_discard_scene_sessions(self, app, sessions):
            run.events.append({"event": "didDiscardSceneSessions", "scenes": sessions})
            return result("didDiscardSceneSessions", app)
        def did_receive_memory_warning(self, app):
            run.memory_warnings += 1
        def notification(self, app, n):
            if n.name == "didReceiveMemoryWarning":
                assert run.memory_warnings == 1, "the memory-warning callback runs once, before the notification"
                run.memory_warnings = 0
            event = {"event": "notification", "name": n.name, "posts": n.posts, "dropped": n.dropped}
            if n.has_payload:
                event["payload"] = n.payload
            if n.payloads is not None:
                event["payloads"] = n.payloads
            run.events.append(event)
        def request_failed(self, app, request, message):
            run.events.append({"event": "requestFailed", "request": request, "message": message})
        def connection_changed(self, app, event):
            run.events.append({"event": "connection", "connection": event.value, "state": app.state.value})

    return App(), Scenes


def pump(run: Run, until: list[Any] | None = None, timeout: float = 0.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert run.app is not None
        while run.app.process():
            pass
        if until:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return
        watched = [s for s in (run.daemon, run.listener) if s is not None]
        if run.app.fileno() >= 0:
            watched.append(run.app.fileno())
        wait = min(remaining, 0.02)
        readable, _, _ = select.select(watched, [], [], wait)
        if run.listener in readable:
            connection, _ = run.listener.accept()
            if run.daemon is not None:
                run.daemon.close()
            run.daemon, run.input = connection, b""
        if run.daemon is not None and run.daemon in readable:
            try:
                data = run.daemon.recv(65536)
            except OSError:
                data = b""
            if not data:
                run.daemon.close()
                run.daemon = None
            run.input += data
            while b"\n" in run.input:
                line, run.input = run.input.split(b"\n", 1)
                run.output.append(json.loads(line))


def act(run: Run, action: dict[str, Any]) -> None:
    app, what = run.app, action["do"]
    assert app is not None
    if what == "ackDeferred":
        assert run.deferred is not None, "nothing deferred"
        run.deferred.ack()
        run.deferred = None
    elif what == "post":
        app.post(action["name"], action.get("payload"), action.get("app"), has_payload="payload" in action)
    elif what == "beginBackgroundTask":
        app.begin_background_task(action["name"], lambda task: run.events.append({"event": "expire", "task": task}))
    elif what == "endBackgroundTask":
        app.end_background_task(action["task"])
    elif what == "observe":
        app.observe(action["names"])
    elif what == "requestSceneActivation":
        app.request_scene_activation(action.get("scene"), action.get("role"), action.get("configuration"),
                                     action.get("options"))
    elif what == "requestSceneDestruction":
        app.request_scene_destruction(action["scene"])
    elif what == "state":
        run.events.append({"event": "state", "state": app.state.value})
    elif what == "hangup":
        pump(run, timeout=0.05)
        if run.daemon is not None:
            run.daemon.close()
            run.daemon = None
    elif what == "sendRaw":
        assert run.daemon is not None
        run.daemon.setblocking(False)
        data = b"a" * action["bytes"]
        while data and run.daemon is not None:
            try:
                data = data[run.daemon.send(data):]
            except BlockingIOError:
                pump(run, timeout=0.01)
            except OSError:
                break
    else:
        raise AssertionError(f"unknown action {what}")


@pytest.mark.parametrize("path", sorted(VECTORS.glob("*.txt")), ids=lambda p: p.name)
def test_vector(path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run()
    setup: dict[str, Any] = {}
    started = False
    with tempfile.TemporaryDirectory() as directory:
        for number, raw in enumerate(path.read_text().splitlines(), 1):
            where = f"{path.name}:{number}"
            if not raw or raw.startswith("#"):
                continue
            if raw.startswith("setup "):
                setup = json.loads(raw[6:])
                continue
            if not started:
                started = True
                monkeypatch.delenv("LIFECYCLE_FD", raising=False)
                if not setup.get("standalone"):
                    daemon, client = socket.socketpair()
                    run.daemon = daemon
                    run.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                    run.listener.bind(os.path.join(directory, "app.sock"))
                    run.listener.listen(16)
                    monkeypatch.setenv("LIFECYCLE_FD", str(client.detach()))
                    monkeypatch.setenv("LIFECYCLE_SOCKET", os.path.join(directory, "app.sock"))
                monkeypatch.setenv("LIFECYCLE_APP", "notes")
                if setup.get("token"):
                    monkeypatch.setenv("LIFECYCLE_TOKEN", setup["token"])
                else:
                    monkeypatch.delenv("LIFECYCLE_TOKEN", raising=False)
                delegate, scenes = recording_delegates(run)
                run.app = Application.from_environment(delegate)
                run.app.log = lambda text: None
                assert not {"LIFECYCLE_FD", "LIFECYCLE_APP", "LIFECYCLE_SOCKET", "LIFECYCLE_TOKEN"} & set(os.environ), \
                    "environment kept"
                run.app.register_scene_delegate(scenes)
                if setup.get("observe"):
                    run.app.observe(setup["observe"])
                run.app.start()
            kind, body = raw[0], raw[2:]
            if kind == "<":
                for _ in range(300):
                    if run.daemon is not None:
                        break
                    pump(run, timeout=0.01)
                assert run.daemon is not None, f"{where}: no connection to send on"
                run.daemon.sendall(body.encode() + b"\n")
                if body.startswith("{") and json.loads(body).get("type") == "error":
                    # As the daemon does after an error: the connection is over.
                    run.daemon.close()
                    run.daemon = None
            elif kind in "<>=":
                queue = run.output if kind == ">" else run.events
                pump(run, queue, timeout=3.0)
                assert queue, f"{where}: expected {body}, got nothing"
                assert queue.pop(0) == json.loads(body), f"{where}"
            elif kind == "@":
                run.answer = json.loads(body)
            elif kind == "!":
                act(run, json.loads(body))
            else:
                raise AssertionError(f"{where}: unknown line")
        pump(run, timeout=0.3)
        assert run.output == [], f"{path.name}: the client sent more"
        assert run.events == [], f"{path.name}: the library reported more"
        assert run.memory_warnings == 0, f"{path.name}: a memory-warning callback without its notification"
        for s in (run.daemon, run.listener):
            if s is not None:
                s.close()
