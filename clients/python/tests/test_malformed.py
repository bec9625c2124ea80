"""Lines from the daemon the package cannot use: each one reaches the delegate's ``malformed_line`` in place of an
exception out of ``process()``, and the connection follows PROTOCOL.md section 10 (the line is skipped, a lifecycle
message with a usable id is still answered, the connection stays)."""
from __future__ import annotations

import json
import socket
from typing import Any

from lifecycled_client import Application, ApplicationDelegate, ConnectionEvent

HELLO = b'{"app":"notes","protocol":1,"state":"background","token":"abc","type":"hello"}\n'


class Recorder(ApplicationDelegate):
    def __init__(self) -> None:
        self.malformed: list[tuple[bytes, str]] = []
        self.discarded: list[list[str]] = []
        self.events: list[ConnectionEvent] = []

    def malformed_line(self, application: Application, line: bytes, reason: str) -> None:
        self.malformed.append((line, reason))

    def did_discard_scene_sessions(self, application: Application, sessions: list[str]) -> Any:
        self.discarded.append(sessions)

    def connection_changed(self, application: Application, event: ConnectionEvent) -> None:
        self.events.append(event)


def connected() -> tuple[socket.socket, Application, Recorder]:
    daemon, client = socket.socketpair()
    delegate = Recorder()
    app = Application(delegate, client, name="notes")
    app.log = lambda text: None
    app.start()
    daemon.sendall(HELLO)
    while app.process():
        pass
    assert json.loads(daemon.recv(4096)) == {"type": "hello", "protocol": 1}
    return daemon, app, delegate


def feed(daemon: socket.socket, app: Application, line: bytes) -> None:
    daemon.sendall(line + b"\n")
    while app.process():
        pass


def still_served(daemon: socket.socket, app: Application) -> None:
    """The connection stays: the next lifecycle message is handled and acknowledged."""
    feed(daemon, app, b'{"deadlineMs":5000,"id":40,"type":"willEnterForeground"}')
    assert json.loads(daemon.recv(4096)) == {"type": "ack", "id": 40}
    assert app.connected


def test_background_time_will_expire_with_tasks_not_an_array_is_reported() -> None:
    daemon, app, delegate = connected()
    expired: list[int] = []
    task = app.begin_background_task("upload", expired.append)
    daemon.recv(4096)
    feed(daemon, app, b'{"remainingMs":5000,"tasks":5,"type":"backgroundTimeWillExpire"}')
    assert [reason for _, reason in delegate.malformed] == ["backgroundTimeWillExpire: 'tasks' is not an array"]
    assert delegate.malformed[0][0] == b'{"remainingMs":5000,"tasks":5,"type":"backgroundTimeWillExpire"}'
    assert expired == [] and app.background_time_remaining == 5.0
    feed(daemon, app, b'{"remainingMs":4000,"tasks":[7,{"task":"x"},{"task":%d}],"type":"backgroundTimeWillExpire"}'
         % task)
    assert expired == [task], "a good entry after bad ones still expires its task"
    assert len(delegate.malformed) == 2
    still_served(daemon, app)


def test_did_discard_scene_sessions_with_scenes_not_an_array_is_reported_and_acknowledged() -> None:
    daemon, app, delegate = connected()
    feed(daemon, app, b'{"deadlineMs":5000,"id":3,"scenes":7,"type":"didDiscardSceneSessions"}')
    assert [reason for _, reason in delegate.malformed] == ["didDiscardSceneSessions: 'scenes' is not an array"]
    assert delegate.discarded == [[]], "the message is handled as one without sessions"
    assert json.loads(daemon.recv(4096)) == {"type": "ack", "id": 3}, "the daemon is not left waiting"
    still_served(daemon, app)


def test_a_line_nested_too_deep_for_the_parser_is_skipped() -> None:
    daemon, app, delegate = connected()
    deep = b'{"name":"batteryLevelDidChange","payload":' + b"[" * 30000 + b"]" * 30000 + b',"type":"notification"}'
    assert len(deep) < 65536
    feed(daemon, app, deep)
    assert len(delegate.malformed) == 1 and delegate.malformed[0][1] == "not a JSON object (nested too deeply)"
    still_served(daemon, app)
    assert ConnectionEvent.DISCONNECTED not in delegate.events


def test_lines_that_are_not_messages_are_reported_and_skipped() -> None:
    daemon, app, delegate = connected()
    for line in (b"not json", b"[1,2]", b'{"type":7}', b"\xff\xfe", b'{"id":1}'):
        feed(daemon, app, line)
    assert [reason for _, reason in delegate.malformed] == [
        "not a JSON object", "not a JSON object", "no string 'type'", "not UTF-8", "no string 'type'"]
    still_served(daemon, app)


def test_the_default_malformed_line_logs_and_the_app_runs_on() -> None:
    daemon, client = socket.socketpair()
    logged: list[str] = []
    app = Application(ApplicationDelegate(), client, name="notes")
    app.log = logged.append
    app.start()
    daemon.sendall(HELLO + b'{"remainingMs":5000,"tasks":5,"type":"backgroundTimeWillExpire"}\n')
    while app.process():
        pass
    assert logged == ["ignored a malformed line from lifecycled (backgroundTimeWillExpire: 'tasks' is not an array)"]


def test_a_malformed_line_handler_that_raises_does_not_end_the_app() -> None:
    daemon, client = socket.socketpair()

    class Raising(ApplicationDelegate):
        def malformed_line(self, application: Application, line: bytes, reason: str) -> None:
            raise RuntimeError("handler bug")

    app = Application(Raising(), client, name="notes")
    app.log = lambda text: None
    app.start()
    daemon.sendall(HELLO + b"not json\n")
    while app.process():
        pass
    assert app.connected
