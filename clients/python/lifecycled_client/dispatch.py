"""One decoded message from the daemon: turned into delegate calls, acknowledged."""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from .delegates import _FETCH_RESULTS, FETCH_NO_DATA, NO_STATE, SceneDelegate
from .types import AppState, ConnectionEvent, LaunchOptions, Message, Notification, Scene, SceneSession

if TYPE_CHECKING:
    from .application import Application

_DID_STATES = {"didFinishLaunching": AppState.INACTIVE, "didBecomeActive": AppState.ACTIVE,
               "didEnterBackground": AppState.BACKGROUND}
_STATES = {state.value for state in AppState}
MEMORY_WARNING = "didReceiveMemoryWarning"
_ACKNOWLEDGED = {"didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground",
                 "willEnterForeground", "willTerminate", "configurationForConnecting", "didDiscardSceneSessions",
                 "sceneWillConnect", "sceneWillEnterForeground", "sceneDidBecomeActive", "sceneWillResignActive",
                 "sceneDidEnterBackground", "sceneDidDisconnect", "performFetch"}


def _uint(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(m: dict[str, Any], key: str, problems: list[str]) -> str:
    """A string field the app is handed; any other value is reported and read as empty."""
    value = m.get(key, "")
    if isinstance(value, str):
        return value
    problems.append(f"{m['type']}: '{key}' is not a string")
    return ""


def dispatch(app: Application, m: dict[str, Any], problems: list[str]) -> None:
    """Turns one message into delegate calls. What is wrong with its fields goes into ``problems``: a field of
    the wrong type is read as absent, as the C library does, so that an acknowledged message is still answered."""
    kind = m["type"]
    if kind == "hello":
        if isinstance(m.get("app"), str):
            app.name = m["app"]
        if isinstance(m.get("token"), str):
            app._token = m["token"]
        state = m.get("state")
        if not isinstance(state, str):
            problems.append("hello: 'state' is not a string")
        elif state in _STATES:
            app.state = AppState(state)
        app.connected = True
        app._reconnecting = False
        app._next_attempt = None
        app._notify(ConnectionEvent.CONNECTED)
    elif kind == "error":
        app._lost(f"lifecycled reported a protocol error: {_text(m, 'message', problems)}", after_error=True)
    elif kind == "notification":
        name = m.get("name")
        if not isinstance(name, str):
            problems.append("notification: no string 'name'")
            return
        payloads = m.get("payloads")
        if payloads is not None and not isinstance(payloads, list):
            problems.append("notification: 'payloads' is not an array")
            payloads = None
        posts = _uint(m.get("posts"))
        note = Notification(name=name, payload=m.get("payload"), payloads=payloads,
                            posts=1 if posts is None else posts, dropped=_uint(m.get("dropped")) or 0,
                            has_payload="payload" in m)
        # UIKit calls applicationDidReceiveMemoryWarning, then posts the notification: both, in that order.
        if note.name == MEMORY_WARNING:
            _call(app, app.delegate.did_receive_memory_warning, app)
        _call(app, app.delegate.notification, app, note)
    elif kind == "backgroundTaskBegan":
        remaining = _uint(m.get("remainingMs"))
        app.background_time_remaining = None if remaining is None else remaining / 1000
    elif kind == "backgroundTimeWillExpire":
        remaining = _uint(m.get("remainingMs"))
        if remaining is not None:
            app.background_time_remaining = remaining / 1000
        tasks = m.get("tasks")
        if not isinstance(tasks, list):
            problems.append("backgroundTimeWillExpire: 'tasks' is not an array")
            return
        for task in tasks:
            ident = _uint(task.get("task")) if isinstance(task, dict) else None
            if ident is None:
                problems.append("backgroundTimeWillExpire: a 'tasks' entry without a task id")
                continue
            handler = app._tasks.get(ident)
            if handler is not None:
                _call(app, handler, ident)
    elif kind in ("postFailed", "requestFailed"):
        request = "post" if kind == "postFailed" else _text(m, "request", problems)
        _call(app, app.delegate.request_failed, app, request, _text(m, "message", problems))
    elif kind in _ACKNOWLEDGED:
        ident = _uint(m.get("id"))
        if not ident:
            # Without an id there is nothing to acknowledge: PROTOCOL.md section 10 skips it.
            problems.append(f"{kind}: no usable 'id'")
            return
        message = Message(type=kind, id=ident, deadline_ms=_uint(m.get("deadlineMs")) or 0, fields=m,
                          generation=app._generation)
        if kind.startswith("scene") or kind == "configurationForConnecting":
            if not isinstance(m.get("scene"), str):
                problems.append(f"{kind}: no string 'scene'")
                return
            run_scene_callback(app, message, problems)
        else:
            run_app_callback(app, message, problems)
    # Anything else is a type a later version added: ignored, never acknowledged.


def _call(app: Application, method: Any, *arguments: Any) -> Any:
    """A delegate method that raises is reported and its message acknowledged anyway: the app runs on."""
    try:
        return method(*arguments)
    except Exception as error:  # noqa: BLE001 - the library must not die with the app's handler
        app.log(f"the {getattr(method, '__name__', 'delegate')} handler failed: {error!r}")
        return None


def _finish(app: Application, message: Message, result: Any) -> None:
    from .application import DeferredAck
    if isinstance(result, DeferredAck):
        result.message = message
    elif inspect.isawaitable(result) and app.on_awaitable is not None:
        app.on_awaitable(result, message)
    else:
        app._ack(message)


def run_app_callback(app: Application, message: Message, problems: list[str]) -> None:
    kind, fields, delegate = message.type, message.fields, app.delegate
    if kind in _DID_STATES:
        app.state = _DID_STATES[kind]
    if app.state is not AppState.BACKGROUND:
        app.background_time_remaining = None
    if kind == "didFinishLaunching":
        options = fields.get("launchOptions")
        if not isinstance(options, dict):
            problems.append("didFinishLaunching: 'launchOptions' is not an object")
            options = {}
        launched_by = options.get("launchedBy", "unknown")
        if not isinstance(launched_by, str):
            problems.append("didFinishLaunching: 'launchedBy' is not a string")
            launched_by = "unknown"
        result = _call(app, delegate.did_finish_launching, app, LaunchOptions(
            launched_by=launched_by, background=options.get("background") is True,
            terminated_in_background=options.get("terminatedInBackground") is True))
    elif kind == "didDiscardSceneSessions":
        given = fields.get("scenes")
        if not isinstance(given, list):
            problems.append("didDiscardSceneSessions: 'scenes' is not an array")
            given = []
        scenes = [s for s in given if isinstance(s, str)]
        if len(scenes) != len(given):
            problems.append("didDiscardSceneSessions: a session id that is not a string")
        result = _call(app, delegate.did_discard_scene_sessions, app, scenes)
    elif kind == "performFetch":
        found = _call(app, delegate.perform_fetch, app)
        message.result = found if found in _FETCH_RESULTS else FETCH_NO_DATA
        app._ack(message)
        return
    else:
        from .application import _APP_CALLBACKS
        result = _call(app, getattr(delegate, _APP_CALLBACKS[kind]), app)
    _finish(app, message, result)


def _scene_delegate(app: Application, configuration: str) -> SceneDelegate:
    factory = app._scene_factories.get(configuration) or app._scene_factories.get(None)
    return factory() if factory is not None else SceneDelegate()


def run_scene_callback(app: Application, message: Message, problems: list[str]) -> None:
    from .application import _SCENE_CALLBACKS
    kind, fields = message.type, message.fields
    ident = fields["scene"]
    role, configuration = _text(fields, "role", problems), _text(fields, "configuration", problems)
    options = fields.get("options", {})
    if not isinstance(options, dict):
        problems.append(f"{kind}: 'options' is not an object")
        options = {}
    if kind == "configurationForConnecting":
        session = SceneSession(ident, role, configuration)
        message.configuration = _call(app, app.delegate.configuration_for_connecting, app, session, options)
        app._ack(message)
        return
    if kind == "sceneWillConnect":
        session = SceneSession(ident, role, configuration)
        connecting = Scene(session, _scene_delegate(app, configuration), fields.get("state"), options)
        app.connected_scenes[ident] = connecting
        _finish(app, message, _call(app, connecting.delegate.will_connect, connecting, session, options))
        return
    scene = app.connected_scenes.get(ident)
    if scene is None:
        app._ack(message)
        return
    method, on_arrival, _ = _SCENE_CALLBACKS[kind]
    if on_arrival is not None:
        scene.activation_state = on_arrival
    result = _call(app, getattr(scene.delegate, method), scene)
    if kind == "sceneDidEnterBackground":
        state = _call(app, scene.delegate.state_restoration_activity, scene)
        if state is not NO_STATE and state is not None:
            message.state, message.has_state = state, True
    if kind == "sceneDidDisconnect":
        app.connected_scenes.pop(ident, None)
    _finish(app, message, result)


def after_scene_ack(app: Application, message: Message) -> None:
    from .application import _SCENE_CALLBACKS
    entry = _SCENE_CALLBACKS.get(message.type)
    scene = app.connected_scenes.get(message.fields.get("scene", "")) if entry else None
    if entry and scene is not None and entry[2] is not None:
        scene.activation_state = entry[2]
