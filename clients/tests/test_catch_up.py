"""The catch-up under a real lifecycled, with the Python package's example app: a client that says hello late, or
reconnects after a kill -9 of the daemon, hears the callbacks that take it (and its scenes) from what it last heard
of to where the app is, in UIKit's order."""
from __future__ import annotations

import pathlib

import pytest
from conftest import C_EXAMPLE, PYTHON_EXAMPLE, Daemon


def after_last_connect(d: Daemon, app: str) -> list:
    records = d.records(app)
    connects = [i for i, r in enumerate(records) if r["type"] == "connection" and r.get("event") == "connected"]
    assert connects, records
    return [(r["type"], r.get("scene")) for r in records[connects[-1] + 1:]]


def test_a_scene_app_focused_elsewhere_while_the_daemon_was_down_is_caught_up_scene_by_scene(daemon: Daemon) -> None:
    daemon.app("app", f"[App]\nExec={PYTHON_EXAMPLE}\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
                      "[Scenes]\nConfiguration=window:Main\n")
    daemon.start()
    daemon.lifectl("focus", "app")
    daemon.wait_until("didBecomeActive", lambda: daemon.types("app")[-1:] == ["didBecomeActive"])
    assert daemon.types("app") == ["didFinishLaunching", "sceneWillConnect", "sceneWillEnterForeground",
                                   "sceneDidBecomeActive", "didBecomeActive"]
    pid = daemon.records("app")[0]["pid"]
    daemon.kill9()
    # The next daemon focuses another app as it starts, before it reads any reconnection: the scene app goes to
    # the background without a word to its client.
    daemon.app("other", f"[App]\nExec={PYTHON_EXAMPLE}\nAutoLaunch=focus\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
    daemon.start()
    daemon.wait_until("the catch-up", lambda: daemon.types("app")[-1:] == ["didEnterBackground"])
    assert after_last_connect(daemon, "app") == [("sceneWillResignActive", "s1"), ("willResignActive", None),
                                                 ("sceneDidEnterBackground", "s1"), ("didEnterBackground", None)]
    # The other app becomes active once its own launch is acknowledged, which may come after the catch-up.
    daemon.wait_until("the other app active", lambda: daemon.state("other") == "active")
    assert daemon.state("app") == "background"
    assert all(r["pid"] == pid for r in daemon.records("app")), "the app was restarted instead of re-adopted"
    scenes = daemon.lifectl("scenes", "app").stdout
    assert "background" in scenes and "foregroundActive" not in scenes, scenes


def test_a_late_first_hello_hears_did_finish_launching_and_the_way_to_where_the_app_is(daemon: Daemon) -> None:
    daemon.app("app", f"[App]\nExec={PYTHON_EXAMPLE} --hello-after 5\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
                      "LaunchTimeoutSec=1\n")
    daemon.start()
    daemon.lifectl("focus", "app")
    daemon.wait_until("active without its client", lambda: daemon.state("app") == "active")
    assert daemon.records("app") == [], "the client has not said hello yet"
    daemon.wait_until("the catch-up", lambda: daemon.types("app")[-1:] == ["didBecomeActive"])
    assert daemon.types("app") == ["didFinishLaunching", "didBecomeActive"]
    assert [r["launchedBy"] for r in daemon.records("app") if r["type"] == "didFinishLaunching"] == ["lifectl"]
    daemon.lifectl("background", "app")
    daemon.wait_until("didEnterBackground", lambda: daemon.types("app")[-1:] == ["didEnterBackground"])
    assert daemon.types("app") == ["didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground"]



@pytest.mark.parametrize("client", ["c", "python", "python-asyncio"])
def test_a_client_whose_connection_died_before_its_hello_connects_again_and_hears_the_launch(
        daemon: Daemon, client: str, tmp_path: pathlib.Path) -> None:
    # The client starts slowly, past the daemon's kill -9: its hello meets the dead socketpair, and it connects to
    # the next daemon with the token it was started with, which catches it up from the launch it never heard of.
    go = tmp_path / "say-hello"
    command = {"c": str(C_EXAMPLE), "python": PYTHON_EXAMPLE, "python-asyncio": f"{PYTHON_EXAMPLE} --asyncio"}[client]
    daemon.app("app", f"[App]\nExec={command} --hello-when {go}\n[Lifecycle]\nBackgroundTimeSec=infinity\n"
                      "LaunchTimeoutSec=1\n")
    daemon.start()
    daemon.lifectl("focus", "app")
    daemon.wait_until("active without its client", lambda: daemon.state("app") == "active")
    assert daemon.records("app") == [], "the client has not said hello yet"
    daemon.kill9()
    daemon.start()
    assert daemon.state("app") == "active"
    go.write_text("")
    daemon.wait_until("the catch-up", lambda: daemon.types("app")[-1:] == ["didBecomeActive"])
    assert daemon.types("app") == ["didFinishLaunching", "didBecomeActive"]
    assert [r["launchedBy"] for r in daemon.records("app") if r["type"] == "didFinishLaunching"] == ["lifectl"]
    assert [r["event"] for r in daemon.records("app") if r["type"] == "connection"] == ["reconnecting", "connected"]
    assert len({r["pid"] for r in daemon.records("app")}) == 1, "the app was restarted instead of re-adopted"
