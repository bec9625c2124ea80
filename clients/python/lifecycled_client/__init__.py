"""The client of the lifecycled protocol (docs/PROTOCOL.md): the UIKit app lifecycle for Python programs.

    from lifecycled_client import Application, ApplicationDelegate, run

    class Delegate(ApplicationDelegate):
        def did_enter_background(self, application):
            save()                      # acknowledged when this returns

    run(Application.from_environment(Delegate()))

Standard library only; no thread of its own. ``run`` is a blocking loop; ``run_async`` / ``AsyncioDriver``
join an asyncio loop, where a delegate method may be a coroutine (acknowledged when it completes).
"""
from .application import Application, DeferredAck
from .delegates import FETCH_FAILED, FETCH_NEW_DATA, FETCH_NO_DATA, NO_STATE, ApplicationDelegate, SceneDelegate
from .loops import AsyncioDriver, run, run_async
from .types import (
    LINE_MAX,
    PROTOCOL_VERSION,
    AppState,
    ConnectionEvent,
    LaunchOptions,
    Notification,
    Scene,
    SceneSession,
)

__all__ = [
    "FETCH_FAILED", "FETCH_NEW_DATA", "FETCH_NO_DATA", "LINE_MAX", "NO_STATE", "PROTOCOL_VERSION", "AppState",
    "Application", "ApplicationDelegate", "AsyncioDriver", "ConnectionEvent", "DeferredAck", "LaunchOptions",
    "Notification", "Scene", "SceneDelegate", "SceneSession", "run", "run_async",
]
