#!/usr/bin/env python3
"""An app that forks, for the forked-children tests (Tests/IntegrationTests/ForkedChildrenTests.swift).
Run with Protocol=none. It starts three kinds of descendants, all sleeping:
  - a child that stays in the app's process group;
  - a child that calls setsid(), leaving the process group and the session (it escapes signals to the group);
  - a grandchild whose parent exits at once, so that it is reparented (to PID 1 or a subreaper).
It writes their pids, and its own, as JSON to PIDS_FILE once all are started, then:
  stay   sleeps until SIGTERM (exit 0), leaving the descendants as they are
  exit   exits with status 0 (the app's main process is gone; its descendants are not, unless the daemon acts)

usage: forking_app.py PIDS_FILE stay|exit
"""
import json, os, signal, sys, time

path, mode = sys.argv[1], sys.argv[2]


def sleeper(setsid=False):
    pid = os.fork()
    if pid == 0:
        if setsid:
            os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        while True:
            time.sleep(3600)
    return pid


grouped = sleeper()
escaped = sleeper(setsid=True)
read_end, write_end = os.pipe()
middle = os.fork()
if middle == 0:
    orphan = sleeper()
    os.write(write_end, str(orphan).encode())
    os._exit(0)
os.waitpid(middle, 0)
orphan = int(os.read(read_end, 64))
pids = {"main": os.getpid(), "grouped": grouped, "escaped": escaped, "orphan": orphan}
temporary = path + ".tmp"
with open(temporary, "w") as f:
    json.dump(pids, f)
os.replace(temporary, path)
if mode == "exit":
    sys.exit(0)
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
while True:
    signal.pause()
