"""What the vectors do not show: the asyncio integration, errors, the environment."""
from __future__ import annotations

import asyncio
import errno
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import textwrap

import pytest

from lifecycled_client import Application, ApplicationDelegate, AppState, AsyncioDriver


def test_a_coroutine_delegate_is_acknowledged_when_it_completes() -> None:
    daemon, client = socket.socketpair()
    order = []

    class Delegate(ApplicationDelegate):
        async def did_enter_background(self, application):
            order.append("saving")
            await asyncio.sleep(0.05)
            order.append("saved")

    async def main() -> None:
        app = Application(Delegate(), client, name="notes")
        driver = AsyncioDriver(app, asyncio.get_running_loop())
        driver.start()
        loop = asyncio.get_running_loop()
        hello = await loop.sock_recv(daemon, 4096)
        assert json.loads(hello) == {"type": "hello", "protocol": 1}
        await loop.sock_sendall(daemon, b'{"deadlineMs":5000,"id":4,"type":"didEnterBackground"}\n')
        ack = await asyncio.wait_for(loop.sock_recv(daemon, 4096), 5)
        assert json.loads(ack) == {"type": "ack", "id": 4}
        assert order == ["saving", "saved"], "acknowledged before the coroutine completed"
        assert app.state is AppState.BACKGROUND
        driver.stop()

    daemon.setblocking(False)
    asyncio.run(main())


def test_errors() -> None:
    os.environ["LIFECYCLE_FD"] = "x3"
    with pytest.raises(OSError) as error:
        Application.from_environment()
    assert error.value.errno == errno.EBADF and "LIFECYCLE_FD" not in os.environ
    daemon, client = socket.socketpair()
    app = Application(None, client, name="notes")
    with pytest.raises(OSError) as error:
        app.post("x")
    assert error.value.errno == errno.ENOTCONN, "a post before start"
    app.start()
    with pytest.raises(OSError) as error:
        app.post("x", "a" * 70000)
    assert error.value.errno == errno.EMSGSIZE
    with pytest.raises(KeyError):
        app.end_background_task(9)
    assert not os.get_inheritable(client.fileno()), "the socket is inherited by children"
    daemon.close()
    while app.process():
        pass
    assert not app.connected


def test_standalone() -> None:
    os.environ.pop("LIFECYCLE_FD", None)
    seen = []

    class Delegate(ApplicationDelegate):
        def did_finish_launching(self, application, options):
            seen.append(options.launched_by)
        def did_become_active(self, application):
            seen.append("active")

    app = Application.from_environment(Delegate())
    app.start()
    while app.process():
        pass
    app.post("anything")
    assert seen == ["standalone", "active"] and app.standalone and app.state is AppState.ACTIVE


def test_the_readme_s_sigterm_handler_for_run_async_exits_0(tmp_path: pathlib.Path) -> None:
    # The README's snippet, standalone: run_async itself leaves SIGTERM to the app.
    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    snippet = readme.split("```python\n")[2].split("```")[0]
    script = tmp_path / "app.py"
    script.write_text("import asyncio, signal, sys\n"
                      "from lifecycled_client import Application, ApplicationDelegate, run_async\n"
                      "class Delegate(ApplicationDelegate):\n"
                      "    def did_become_active(self, application):\n"
                      "        print('active', flush=True)\n"
                      + textwrap.dedent(snippet) + "print('exited cleanly', flush=True)\n")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("LIFECYCLE_")}
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=environment)
    assert process.stdout is not None
    assert process.stdout.readline() == "active\n"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    assert process.stdout.read() == "exited cleanly\n"
