#!/usr/bin/env python3
"""Plays systemd's part for one service, for the tests: a NOTIFY_SOCKET whose datagrams are recorded,
an optional watchdog (WATCHDOG_USEC), and a listening socket passed in with LISTEN_FDS/LISTEN_FDNAMES
(socket activation). Forwards SIGTERM and SIGHUP to the service and exits with its status.

usage: fake_service_manager.py --record FILE [--watchdog-usec N] [--listen PATH] -- COMMAND ARGS...
Each received notification is one JSON line: {"t": monotonic ns, "message": "READY=1\\nSTATUS=..."}.
"""
import argparse, json, os, select, signal, socket, sys, tempfile, time

# Started from a test runner's worker thread, this process inherits a signal mask that blocks nearly
# everything (libdispatch's workers block signals): unblock, or SIGTERM and SIGHUP are never forwarded.
signal.pthread_sigmask(signal.SIG_SETMASK, [])

parser = argparse.ArgumentParser()
parser.add_argument("--record", required=True)
parser.add_argument("--watchdog-usec", type=int)
parser.add_argument("--listen")
parser.add_argument("command", nargs=argparse.REMAINDER)
options = parser.parse_args()
command = options.command[1:] if options.command[:1] == ["--"] else options.command

directory = tempfile.mkdtemp(prefix="fake-systemd-")
notify_path = os.path.join(directory, "notify")
notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
notify.bind(notify_path)

listener = None
if options.listen:
    os.makedirs(os.path.dirname(options.listen), exist_ok=True)
    if os.path.exists(options.listen):
        os.unlink(options.listen)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(options.listen)
    os.chmod(options.listen, 0o666)
    listener.listen(128)

pid = os.fork()
if pid == 0:
    environment = dict(os.environ, NOTIFY_SOCKET=notify_path)
    if options.watchdog_usec:
        environment["WATCHDOG_USEC"] = str(options.watchdog_usec)
        environment["WATCHDOG_PID"] = str(os.getpid())
    if listener:
        os.dup2(listener.fileno(), 3)
        os.set_inheritable(3, True)
        environment.update(LISTEN_FDS="1", LISTEN_FDNAMES="control", LISTEN_PID=str(os.getpid()))
    os.execvpe(command[0], command, environment)

for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(number, lambda signum, frame: os.kill(pid, signum))

record = open(options.record, "a", buffering=1)
status = None
while status is None:
    try:
        ready, _, _ = select.select([notify], [], [], 0.05)
    except InterruptedError:
        continue
    if ready:
        data = notify.recv(65536)
        record.write(json.dumps({"t": time.monotonic_ns(), "message": data.decode()}) + "\n")
    done, code = os.waitpid(pid, os.WNOHANG)
    if done:
        status = code
# Whatever the service sent just before it exited.
notify.setblocking(False)
try:
    while True:
        record.write(json.dumps({"t": time.monotonic_ns(), "message": notify.recv(65536).decode()}) + "\n")
except BlockingIOError:
    pass
os.unlink(notify_path)
os.rmdir(directory)
sys.exit(os.waitstatus_to_exitcode(status))
