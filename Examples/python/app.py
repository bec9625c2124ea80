#!/usr/bin/env python3
"""A Python app on the lifecycled_client package (clients/python): it prints each callback, records it
(LIFECYCLE_RECORD=FILE, one JSON line each, for the tests), saves a counter in didEnterBackground, keeps each
scene's state, and holds a background task while it "uploads". ``--asyncio`` runs it on an asyncio loop.

    pip install clients/python && python3 Examples/python/app.py [--asyncio] [--observe TYPE,TYPE] [--task-on-background]
        [--hello-after SECONDS] [--hello-when FILE]
"""
import argparse
import asyncio
import json
import os
import signal
import time

from lifecycled_client import Application, ApplicationDelegate, SceneDelegate, run, run_async


class Recorder:
    def __init__(self) -> None:
        path = os.environ.get("LIFECYCLE_RECORD")
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644) if path else None

    def __call__(self, app: Application, kind: str, **extra) -> None:
        try:
            print(f"{app.name or 'python-example'}: {kind} {extra or ''}", flush=True)
        except OSError:
            pass  # the output is a pipe to the daemon, which may be gone (a crash): the app runs on
        if self.fd is not None:
            entry = {"app": app.name or "", "type": kind, "pid": os.getpid(), "client": "python", **extra}
            os.write(self.fd, json.dumps(entry).encode() + b"\n")   # one write: several apps share the file


record = Recorder()


class Delegate(ApplicationDelegate):
    def __init__(self, task_on_background: bool) -> None:
        self.task_on_background = task_on_background
        self.task = None

    def did_finish_launching(self, app, options):
        record(app, "didFinishLaunching", launchedBy=options.launched_by)
    def did_become_active(self, app): record(app, "didBecomeActive")
    def will_resign_active(self, app): record(app, "willResignActive")
    def will_enter_foreground(self, app): record(app, "willEnterForeground")
    def will_terminate(self, app): record(app, "willTerminate")

    def did_enter_background(self, app):
        record(app, "didEnterBackground")
        if self.task_on_background and self.task is None:
            def expired(task):
                record(app, "backgroundTimeWillExpire")
                app.end_background_task(task)
                self.task = None
            self.task = app.begin_background_task("upload", expired)

    def notification(self, app, n):
        record(app, "notification", name=n.name, posts=n.posts, payload=n.payload, payloads=n.payloads)

    def connection_changed(self, app, event):
        record(app, "connection", event=event.value, state=app.state.value)


class Scenes(SceneDelegate):
    def __init__(self, app: Application) -> None:
        self.app = app

    def will_connect(self, scene, session, options):
        record(self.app, "sceneWillConnect", scene=session.persistent_identifier, savedState=scene.restored_state)
    def will_enter_foreground(self, scene):
        record(self.app, "sceneWillEnterForeground", scene=scene.session.persistent_identifier)
    def did_become_active(self, scene):
        record(self.app, "sceneDidBecomeActive", scene=scene.session.persistent_identifier)
    def will_resign_active(self, scene):
        record(self.app, "sceneWillResignActive", scene=scene.session.persistent_identifier)
    def did_enter_background(self, scene):
        record(self.app, "sceneDidEnterBackground", scene=scene.session.persistent_identifier)
    def did_disconnect(self, scene):
        record(self.app, "sceneDidDisconnect", scene=scene.session.persistent_identifier)
    def state_restoration_activity(self, scene):
        return {"savedBy": "python-example", "scene": scene.session.persistent_identifier}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--asyncio", action="store_true")
    parser.add_argument("--observe", default="")
    parser.add_argument("--task-on-background", action="store_true")
    parser.add_argument("--hello-after", type=float, default=0, help="say hello only after SECONDS (a slow start)")
    parser.add_argument("--hello-when", help="say hello only once FILE exists (a slow start the tests end)")
    options = parser.parse_args()
    time.sleep(options.hello_after)
    while options.hello_when and not os.path.exists(options.hello_when):
        time.sleep(0.05)
    app = Application.from_environment(Delegate(options.task_on_background))
    app.register_scene_delegate(lambda: Scenes(app))
    app.observe([name for name in options.observe.split(",") if name])
    if options.asyncio:
        asyncio.run(run_on_asyncio(app))
    else:
        run(app)


async def run_on_asyncio(app: Application) -> None:
    # run_async leaves SIGTERM to the app: lifecycled's SIGTERM after willTerminate ends the loop, and exit is 0.
    task = asyncio.ensure_future(run_async(app))
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        app.flush(1.0)


if __name__ == "__main__":
    main()
