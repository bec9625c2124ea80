"""Both client libraries' example apps (Examples/c, Examples/glib, Examples/python) under a real lifecycled:
the app switch, suspension with queued notifications, background tasks, scenes, and a kill -9 of the daemon
followed by reconnection."""
from __future__ import annotations

import os
import signal

import pytest
from conftest import C_EXAMPLE, GLIB_EXAMPLE, PYTHON_EXAMPLE, Daemon

CLIENTS = {"c": str(C_EXAMPLE), "python": PYTHON_EXAMPLE, "python-asyncio": PYTHON_EXAMPLE + " --asyncio"}


def settled(d: Daemon, app: str, state: str) -> None:
    d.wait_until(f"{app} {state}", lambda: d.state(app) == state)


def test_app_switch_between_a_c_app_and_a_python_app(daemon: Daemon) -> None:
    daemon.app("capp", f"[App]\nExec={C_EXAMPLE}\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
    daemon.app("pyapp", f"[App]\nExec={PYTHON_EXAMPLE}\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
    daemon.start()
    daemon.lifectl("focus", "capp")
    daemon.lifectl("focus", "pyapp")
    daemon.lifectl("focus", "capp")
    settled(daemon, "capp", "active")
    daemon.wait_until("pyapp in the background", lambda: daemon.types("pyapp")[-1:] == ["didEnterBackground"])
    assert daemon.types("capp") == ["didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground",
                                    "willEnterForeground", "didBecomeActive"]
    assert daemon.types("pyapp") == ["didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground"]
    assert [r["launchedBy"] for r in daemon.records("capp") if r["type"] == "didFinishLaunching"] == ["lifectl"]


@pytest.mark.parametrize("client", sorted(CLIENTS))
def test_suspension_holds_and_coalesces_notifications(daemon: Daemon, client: str) -> None:
    daemon.daemon_config("[NotificationTypes]\nmessageReceived=none\n")
    daemon.app("app", f"[App]\nExec={CLIENTS[client]} --observe messageReceived\n[Lifecycle]\nBackgroundTimeSec=0.5\n")
    daemon.start()
    daemon.lifectl("launch", "app", "--background")
    settled(daemon, "app", "suspended")
    for n in range(3):
        daemon.lifectl("post", "messageReceived", "--app", "app", "--data", f'{{"n":{n}}}')
    daemon.lifectl("focus", "app")
    settled(daemon, "app", "active")
    daemon.wait_until("didBecomeActive", lambda: daemon.types("app")[-1:] == ["didBecomeActive"])
    notes = [r for r in daemon.records("app") if r["type"] == "notification"]
    assert len(notes) == 1 and notes[0]["posts"] == 3 and notes[0]["payloads"] == [{"n": 0}, {"n": 1}, {"n": 2}]
    types = daemon.types("app")
    assert types.index("notification") < types.index("willEnterForeground"), types


@pytest.mark.parametrize("client", ["c", "python"])
def test_a_background_task_holds_off_suspension_until_it_expires(daemon: Daemon, client: str) -> None:
    daemon.app("app", f"[App]\nExec={CLIENTS[client]} --task-on-background\n[Lifecycle]\nBackgroundTimeSec=0.2\n"
                      "BackgroundTaskTimeSec=3\nExpirationWarningSec=1\n")
    daemon.start()
    daemon.lifectl("launch", "app", "--background")
    daemon.wait_until("the expiry warning", lambda: "backgroundTimeWillExpire" in daemon.types("app"))
    settled(daemon, "app", "suspended")
    assert daemon.types("app") == ["didFinishLaunching", "didEnterBackground", "backgroundTimeWillExpire"]


@pytest.mark.parametrize("client", ["c", "python"])
def test_scenes_keep_their_state_across_close_and_reconnect(daemon: Daemon, client: str) -> None:
    daemon.app("app", f"[App]\nExec={CLIENTS[client]}\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
                      "[Scenes]\nSupportsMultipleScenes=yes\nConfiguration=window:Main\n")
    daemon.start()
    daemon.lifectl("focus", "app")
    daemon.lifectl("scene", "close", "app", "s1")
    daemon.lifectl("scene", "focus", "app", "s1")
    daemon.wait_until("the second connection", lambda: sum(r["type"] == "sceneWillConnect" for r in daemon.records("app")) == 2)
    connects = [r for r in daemon.records("app") if r["type"] == "sceneWillConnect"]
    assert connects[0]["savedState"] is None
    assert connects[1]["savedState"] == {"savedBy": f"{client.split('-')[0]}-example", "scene": "s1"}
    scenes = daemon.lifectl("scenes", "app").stdout
    assert "foregroundActive" in scenes, scenes


@pytest.mark.parametrize("client", ["c", "python"])
def test_kill_9_of_the_daemon_then_reconnection(daemon: Daemon, client: str) -> None:
    daemon.app("app", f"[App]\nExec={CLIENTS[client]}\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
    daemon.start()
    daemon.lifectl("focus", "app")
    settled(daemon, "app", "active")
    pid = daemon.records("app")[0]["pid"]
    daemon.kill9()
    daemon.wait_until("the client noticed", lambda: any(r.get("event") == "reconnecting" for r in daemon.records("app")))
    daemon.start()
    daemon.wait_until("the client reconnected", lambda: [r.get("event") for r in daemon.records("app")
                                                          if r["type"] == "connection"][-1:] == ["connected"])
    assert daemon.records("app")[-1]["state"] == "active"
    daemon.lifectl("background", "app")
    daemon.wait_until("didEnterBackground", lambda: daemon.types("app")[-1:] == ["didEnterBackground"])
    assert daemon.types("app") == ["didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground"]
    assert all(r["pid"] == pid for r in daemon.records("app")), "the app was restarted instead of re-adopted"


def test_the_glib_app_saves_its_state_in_did_enter_background(daemon: Daemon, tmp_path) -> None:
    state = tmp_path / "glib.state"
    daemon.app("glib", f"[App]\nExec={GLIB_EXAMPLE}\nEnvironment=GLIB_EXAMPLE_STATE={state}\n"
                       "[Lifecycle]\nBackgroundTimeSec=infinity\n")
    daemon.start()
    daemon.lifectl("focus", "glib")
    daemon.lifectl("background", "glib")
    settled(daemon, "glib", "background")
    daemon.wait_until("the saved state", lambda: state.exists() and state.read_text() == "1 0\n")
    daemon.lifectl("focus", "glib")
    daemon.lifectl("background", "glib")
    daemon.wait_until("the saved state", lambda: state.read_text() == "1 1\n")


@pytest.mark.parametrize("client", ["c", "python"])
def test_catch_up_after_kill_9_when_focused_before_the_client_reconnects(daemon: Daemon, client: str) -> None:
    daemon.app("app", f"[App]\nExec={CLIENTS[client]}\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
    daemon.start()
    daemon.lifectl("focus", "app")
    daemon.lifectl("background", "app")
    settled(daemon, "app", "background")
    daemon.wait_until("didEnterBackground", lambda: daemon.types("app")[-1:] == ["didEnterBackground"])
    pid = daemon.records("app")[0]["pid"]
    # Stopped, the client cannot notice the crash nor reconnect: the new daemon focuses the app before it does.
    os.kill(pid, signal.SIGSTOP)
    daemon.kill9()
    daemon.start()
    daemon.lifectl("focus", "app")
    daemon.wait_until("the catch-up", lambda: daemon.types("app")[-2:] == ["willEnterForeground", "didBecomeActive"])
    assert daemon.types("app") == ["didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground",
                                   "willEnterForeground", "didBecomeActive"]
    events = [r.get("event") or r["type"] for r in daemon.records("app")]
    assert events[-3:] == ["connected", "willEnterForeground", "didBecomeActive"], events
    assert daemon.state("app") == "active"


@pytest.mark.parametrize("client", ["python", "python-asyncio"])
def test_a_python_app_exits_0_on_the_sigterm_after_will_terminate(daemon: Daemon, client: str) -> None:
    # run() exits on SIGTERM by itself; under run_async the app installs the handler (Examples/python/app.py).
    daemon.app("app", f"[App]\nExec={CLIENTS[client]}\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
    daemon.start()
    daemon.lifectl("focus", "app")
    settled(daemon, "app", "active")
    daemon.lifectl("terminate", "app")
    settled(daemon, "app", "notRunning")
    def exits() -> list:
        return [line for line in daemon.log.read_text().splitlines()
                if line.startswith("app: process") and ("exited with status" in line or "killed by signal" in line)]
    daemon.wait_until("the exit in the log", lambda: bool(exits()))
    assert "exited with status 0" in exits()[-1], exits()
    assert daemon.types("app")[-1] == "willTerminate"
