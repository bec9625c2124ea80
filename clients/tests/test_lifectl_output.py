"""lifectl's human output under a real lifecycled, with an app that names its background task with a terminal
escape: what an app chooses never reaches the terminal as control characters (the JSON output stays JSON)."""
from __future__ import annotations

import json
import pathlib
import sys

from conftest import Daemon

EVIL = "upload\u001b]0;pwned\u0007done"
CLIENT = f"""
import sys
from lifecycled_client import Application, ApplicationDelegate, run

class Delegate(ApplicationDelegate):
    def did_finish_launching(self, application, options):
        application.begin_background_task({EVIL!r})

run(Application.from_environment(Delegate()))
"""


def test_lifectl_status_escapes_a_background_task_name_with_a_terminal_escape(daemon: Daemon,
                                                                             tmp_path: pathlib.Path) -> None:
    script = tmp_path / "evil.py"
    script.write_text(CLIENT)
    daemon.app("evil", f"[App]\nExec={sys.executable} {script}\n[Lifecycle]\nBackgroundTimeSec=infinity\n")
    daemon.start()
    daemon.lifectl("launch", "evil")

    def tasks() -> list:
        status = json.loads(daemon.lifectl("status", "evil", "--json").stdout)
        return [task["name"] for task in status["apps"][0]["backgroundTasks"]]
    daemon.wait_until("the background task", lambda: tasks() == [EVIL])

    shown = daemon.lifectl("status", "evil").stdout
    assert "background tasks: 1 upload\\x1b]0;pwned\\x07done" in shown, shown
    assert "\u001b" not in shown and "\u0007" not in shown, repr(shown)
    everything = daemon.lifectl("status").stdout + daemon.lifectl("list").stdout
    assert "\u001b" not in everything and "\u0007" not in everything, repr(everything)
