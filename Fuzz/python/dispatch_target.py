"""The Python package's reader and dispatch under arbitrary input, as clients/c/fuzz/linereader.c does for the C
library: the input is what a daemon sends, cut into reads at the bytes 0xFF, read and dispatched by an Application
whose delegates answer every callback (one deferring, one saving a scene's state). ``one_input`` raises
``AssertionError`` on a finding: an exception out of ``process()``, a line the package's own checks did not
foresee, or a line the client sent that is not a JSON object with a ``type``."""
from __future__ import annotations

import json
import socket
from typing import Any

from lifecycled_client import (
    LINE_MAX,
    Application,
    ApplicationDelegate,
    DeferredAck,
    Scene,
    SceneDelegate,
    SceneSession,
)
from lifecycled_client.application import INTERNAL_FAILURE


class _Scenes(SceneDelegate):
    def will_connect(self, scene: Scene, session: SceneSession, options: Any) -> Any:
        return (scene.restored_state, session.role, options)

    def state_restoration_activity(self, scene: Scene) -> Any:
        return {"k": [1, 2]}


class _Delegate(ApplicationDelegate):
    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.deferred: DeferredAck | None = None

    def will_resign_active(self, application: Application) -> Any:
        if self.deferred is None:
            self.deferred = application.defer_ack()
            return self.deferred
        return None

    def configuration_for_connecting(self, application: Application, session: SceneSession,
                                     options: Any) -> str | None:
        return "Main"

    def malformed_line(self, application: Application, line: bytes, reason: str) -> None:
        self.reasons.append(reason)


def _drain(daemon: socket.socket, sent: bytearray) -> None:
    while True:
        try:
            data = daemon.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except ConnectionResetError:
            # The client closed its end with input it had not read (after an error, as the protocol asks): the
            # conversation is over, and what it sent before is in `sent`.
            return
        if not data:
            return
        sent += data


def one_input(data: bytes) -> None:
    daemon, client = socket.socketpair()
    daemon.setblocking(False)
    delegate = _Delegate()
    app = Application(delegate, client, name="fuzz")
    app.log = lambda text: None
    app.register_scene_delegate(_Scenes)
    sent = bytearray()
    try:
        app.start()
        app.begin_background_task("fuzz", lambda task: app.end_background_task(task))
        for chunk in data.split(b"\xff"):
            if chunk:
                try:
                    daemon.sendall(chunk)
                except OSError:
                    break
            for _ in range(64):
                if not app.process():
                    break
            _drain(daemon, sent)
        try:
            daemon.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        for _ in range(64):
            if not app.process():
                break
        if delegate.deferred is not None:
            delegate.deferred.ack()
        _drain(daemon, sent)
    finally:
        daemon.close()
        app._drop()
    unforeseen = [reason for reason in delegate.reasons if INTERNAL_FAILURE in reason]
    assert not unforeseen, f"a line the checks did not foresee: {unforeseen}"
    for line in bytes(sent).split(b"\n")[:-1]:
        assert len(line) <= LINE_MAX, "the client sent a line over the limit"
        message = json.loads(line)
        assert isinstance(message, dict) and isinstance(message.get("type"), str), f"the client sent {line!r}"
