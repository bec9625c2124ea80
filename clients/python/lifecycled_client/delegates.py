"""The delegates an app implements: every method has a default that does nothing."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .types import ConnectionEvent, LaunchOptions, Notification, Scene, SceneSession

if TYPE_CHECKING:
    from .application import Application


class ApplicationDelegate:
    """UIApplicationDelegate. Each method's message is acknowledged when it returns, unless it returns the
    handle of ``application.defer_ack()`` (acknowledge later), or, under asyncio, an awaitable (acknowledged
    when it completes)."""

    def did_finish_launching(self, application: Application, options: LaunchOptions) -> Any: ...
    def did_become_active(self, application: Application) -> Any: ...
    def will_resign_active(self, application: Application) -> Any: ...
    def did_enter_background(self, application: Application) -> Any: ...
    def will_enter_foreground(self, application: Application) -> Any: ...
    def will_terminate(self, application: Application) -> Any: ...

    def did_receive_memory_warning(self, application: Application) -> None:
        """Memory is short: free caches. As in UIKit, ``notification`` gets the ``didReceiveMemoryWarning``
        notification right after: free caches in one of the two."""

    def configuration_for_connecting(self, application: Application, session: SceneSession,
                                     options: Any) -> str | None:
        """The configuration the connecting scene uses; None for the proposed one."""
        return None

    def did_discard_scene_sessions(self, application: Application, sessions: list[str]) -> Any: ...

    def perform_fetch(self, application: Application) -> str | None:
        """A background wake (``ResumeEverySec=``; UIKit's performFetch): fetch what is new and return
        ``FETCH_NEW_DATA``, ``FETCH_NO_DATA`` or ``FETCH_FAILED``; the app is suspended again after the return
        (or the message's deadline). None is ``FETCH_NO_DATA``."""
        return None

    def notification(self, application: Application, notification: Notification) -> None:
        """Every notification: the types ``observe`` names, and ``didReceiveMemoryWarning``, which every app gets
        (after ``did_receive_memory_warning``)."""

    def request_failed(self, application: Application, request: str, message: str) -> None: ...
    def connection_changed(self, application: Application, event: ConnectionEvent) -> None: ...

    def malformed_line(self, application: Application, line: bytes, reason: str) -> None:
        """A line from the daemon the package cannot use (not JSON, too deeply nested, no ``type``, a field of the
        wrong type), with the reason. The line is skipped and the connection stays (PROTOCOL.md section 10); a
        lifecycle message with a usable id is still handled, with the bad field read as absent, and acknowledged.
        The default logs it through ``application.log``."""
        application.log(f"ignored a malformed line from lifecycled ({reason})")


class SceneDelegate:
    """UISceneDelegate: one per connected scene, made by the factory registered for its configuration."""

    def will_connect(self, scene: Scene, session: SceneSession, options: Any) -> Any: ...
    def did_disconnect(self, scene: Scene) -> Any: ...
    def did_become_active(self, scene: Scene) -> Any: ...
    def will_resign_active(self, scene: Scene) -> Any: ...
    def will_enter_foreground(self, scene: Scene) -> Any: ...
    def did_enter_background(self, scene: Scene) -> Any: ...

    def state_restoration_activity(self, scene: Scene) -> Any:
        """Asked right after did_enter_background: the state to keep with the session (any JSON value), or
        NO_STATE (or None) to keep what was saved before."""
        return NO_STATE


class _NoState:
    def __repr__(self) -> str:
        return "NO_STATE"


NO_STATE: Any = _NoState()

FETCH_NEW_DATA = "newData"
FETCH_NO_DATA = "noData"
FETCH_FAILED = "failed"
_FETCH_RESULTS = (FETCH_NEW_DATA, FETCH_NO_DATA, FETCH_FAILED)
