#!/usr/bin/env python3
"""A desktop app that double-forks a worker, for the adoption tests (Tests/IntegrationTests/AdoptWorkerTests.swift).
Launched as sway's `exec` launches one: a child starts a session, forks the app and exits at once, so the app leads
neither its session nor its process group (a signal to "its" group reaches nothing). The app then forks a child that
forks the worker and exits at once: the worker is reparented away (no descendant of the app any more) and keeps the
session. Between the session's first process and the app stands an elder that starts the app and waits, as a
launcher's `sh -c` does: older than the app and its parent, it is not the app's. The app prints "APP WORKER ELDER" on
one line once they run, then sleeps; the worker sleeps too. All are named (comm) worker-app.

With --setsid-worker-on-usr1, each SIGUSR1 makes the app double-fork one more worker that calls setsid() (it leaves
the launch session, so only a cgroup follows it); the app prints "LATE WORKER" once it runs.

usage: double_forking_app.py [--setsid-worker-on-usr1]
"""
import ctypes, os, signal, sys, time

# Named as a desktop app's process is, not after the interpreter: the adopted app takes this name.
ctypes.CDLL(None).prctl(15, b"worker-app", 0, 0, 0)  # PR_SET_NAME


# The launcher's part: the session starts in the child that exits.
launcher = os.fork()
if launcher:
    os.waitpid(launcher, 0)
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
elder = os.getpid()
if os.fork():
    while True:
        time.sleep(3600)
# The app.
read_end, write_end = os.pipe()
middle = os.fork()
if middle == 0:
    worker = os.fork()
    if worker == 0:
        while True:
            time.sleep(3600)
    os.write(write_end, str(worker).encode())
    os._exit(0)
os.waitpid(middle, 0)
worker = int(os.read(read_end, 64))


def late_worker(signum, frame):
    middle = os.fork()
    if middle == 0:
        worker = os.fork()
        if worker == 0:
            os.setsid()
            while True:
                time.sleep(3600)
        os.write(write_end, str(worker).encode())
        os._exit(0)
    os.waitpid(middle, 0)
    os.write(1, f"LATE {int(os.read(read_end, 64))}\n".encode())


if "--setsid-worker-on-usr1" in sys.argv:
    signal.signal(signal.SIGUSR1, late_worker)
os.write(1, f"{os.getpid()} {worker} {elder}\n".encode())
while True:
    time.sleep(3600)
