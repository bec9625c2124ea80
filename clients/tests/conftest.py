"""A real lifecycled in a temporary config and runtime directory, for the client libraries' end-to-end tests."""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any, Callable

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("LIFECYCLED_BIN", REPOSITORY / ".build" / "debug"))
C_EXAMPLE = REPOSITORY / "clients" / "c" / "build" / "c-example"
GLIB_EXAMPLE = REPOSITORY / "clients" / "c" / "build" / "glib-example"
PYTHON_EXAMPLE = f"{sys.executable} {REPOSITORY / 'Examples' / 'python' / 'app.py'}"


class Daemon:
    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.config = root / "config"
        self.runtime = root / "run"
        self.record = root / "record.jsonl"
        self.log = root / "daemon.log"
        (self.config / "apps").mkdir(parents=True)
        self.process: subprocess.Popen | None = None
        self.daemon_config("")

    def daemon_config(self, text: str) -> None:
        quiet = "[Sources]\nTimeChange=no\nLocaleChange=no\nBattery=no\nMemoryPressure=no\n\n"
        (self.config / "lifecycled.conf").write_text(quiet + text)

    def app(self, name: str, text: str) -> None:
        text = text.replace("[App]\n", f"[App]\nEnvironment=LIFECYCLE_RECORD={self.record}\n", 1)
        (self.config / "apps" / f"{name}.conf").write_text(text)

    @property
    def environment(self) -> dict[str, str]:
        environment = dict(os.environ)
        environment["LIFECYCLED_RUNTIME_DIR"] = str(self.runtime)
        environment["NO_COLOR"] = "1"
        environment.pop("NOTIFY_SOCKET", None)
        return environment

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen([str(BIN / "lifecycled"), "--config", str(self.config), "--log-level", "debug"],
                                            env=self.environment, stdout=log, stderr=log)
        self.wait_until("the daemon answers", lambda: self.lifectl("list", check=False).returncode == 0)

    def lifectl(self, *arguments: str, check: bool = True) -> subprocess.CompletedProcess:
        result = subprocess.run([str(BIN / "lifectl"), *arguments], check=False, env=self.environment, capture_output=True,
                                text=True, timeout=60)
        if check and result.returncode != 0:
            raise AssertionError(f"lifectl {' '.join(arguments)}: {result.returncode} {result.stderr}\n{self.tail()}")
        return result

    def state(self, app: str) -> str:
        listing = json.loads(self.lifectl("list", "--json").stdout)
        apps = listing["apps"] if isinstance(listing, dict) else listing
        return next(entry["state"] for entry in apps if entry["name"] == app)

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def records(self, app: str | None = None) -> list[dict[str, Any]]:
        if not self.record.exists():
            return []
        entries = [json.loads(line) for line in self.record.read_text().splitlines() if line.strip()]
        return [e for e in entries if app is None or e.get("app") == app]

    def types(self, app: str) -> list[str]:
        return [e["type"] for e in self.records(app) if e["type"] != "connection"]

    def wait_until(self, what: str, condition: Callable[[], bool], timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}\nrecords: {self.records()}\n{self.tail()}")

    def tail(self) -> str:
        return "daemon log:\n" + "\n".join(self.log.read_text(errors="replace").splitlines()[-30:]) if self.log.exists() else ""


@pytest.fixture
def daemon(tmp_path: pathlib.Path):
    if not (BIN / "lifecycled").exists():
        pytest.fail(f"no lifecycled in {BIN}: run swift build first")
    harness = Daemon(tmp_path)
    yield harness
    harness.stop()
    # Whatever a killed daemon left running (its apps live on by design) is ended here.
    for entry in harness.records():
        try:
            os.killpg(entry["pid"], signal.SIGKILL)
        except (KeyError, ProcessLookupError, PermissionError):
            pass
