"""Running the client: a blocking loop, or inside an asyncio event loop."""
from __future__ import annotations

import asyncio
import select
import signal
from typing import Any

from .application import Application
from .types import Message


def run(application: Application, *, exit_on_sigterm: bool = True) -> None:
    """Starts the application (if needed) and runs it until SIGTERM (exit status 0) or forever."""
    if exit_on_sigterm:
        def exit_on(signum: int, frame: Any) -> None:
            application.flush(1.0)
            raise SystemExit(0)
        signal.signal(signal.SIGTERM, exit_on)
    if not application._started:
        application.start()
    while True:
        while application.process():
            pass
        fd = application.fileno()
        timeout = application.timeout()
        if fd < 0:
            select.select([], [], [], 3600 if timeout is None else timeout)
            continue
        writers = [fd] if application.wants_write() else []
        select.select([fd], writers, [], timeout)


class AsyncioDriver:
    """Runs an Application on an asyncio loop: the socket is watched with add_reader, timed work with
    call_later, and a delegate method that returns an awaitable is acknowledged when it completes."""

    def __init__(self, application: Application, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.application = application
        self.loop = loop or asyncio.get_event_loop()
        self._fd = -1
        self._timer: asyncio.TimerHandle | None = None
        application.on_awaitable = self._on_awaitable

    def start(self) -> None:
        if not self.application._started:
            self.application.start()
        self._pump()

    def stop(self) -> None:
        self._watch(-1)
        if self._timer is not None:
            self._timer.cancel()

    def _on_awaitable(self, awaitable: Any, message: Message) -> None:
        async def finish() -> None:
            try:
                await awaitable
            finally:
                self.application._ack(message)
                self._pump()
        self.loop.create_task(finish())

    def _watch(self, fd: int) -> None:
        if fd == self._fd:
            return
        if self._fd >= 0:
            self.loop.remove_reader(self._fd)
        self._fd = fd
        if fd >= 0:
            self.loop.add_reader(fd, self._pump)

    def _pump(self) -> None:
        app = self.application
        while app.process():
            pass
        self._watch(app.fileno())
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        timeout = app.timeout()
        if app.wants_write() and timeout is None:
            timeout = 0.05
        if timeout is not None:
            self._timer = self.loop.call_later(timeout, self._pump)


async def run_async(application: Application) -> None:
    """Runs the application on the running asyncio loop until cancelled."""
    driver = AsyncioDriver(application, asyncio.get_running_loop())
    driver.start()
    try:
        await asyncio.Event().wait()
    finally:
        driver.stop()
