#!/usr/bin/env python3
"""Plays systemd's part for one service, for the tests: a NOTIFY_SOCKET whose datagrams are recorded,
an optional watchdog (WATCHDOG_USEC), a listening socket passed in with LISTEN_FDS/LISTEN_FDNAMES
(socket activation), and the file-descriptor store (FDSTORE=1 with FDNAME=, FDSTOREREMOVE=1).
Forwards SIGTERM and SIGHUP to the service and exits with its status.

With --restart-on-failure, a service that dies by a signal or exits non-zero is started again, as
Restart=on-failure does, with the stored descriptors passed back (LISTEN_FDS/LISTEN_FDNAMES, after the
listening socket). Like KillMode=process, the service's other processes (its apps) are left alone.

usage: fake_service_manager.py --record FILE [--watchdog-usec N] [--listen PATH] [--restart-on-failure]
                               [--restart-on-signal] [--keep-removed] -- COMMAND ARGS...
Each received notification is one JSON line: {"t": monotonic ns, "message": "READY=1\\nSTATUS=...",
"fds": N (descriptors that came with it, if any)}; each restart is {"t": ..., "restart": N, "fds": [names],
"status": the exit status of the service that ended, "requested": true when SIGUSR1 asked for it}.
"""
import argparse, array, json, os, select, signal, socket, sys, tempfile, time

# Started from a test runner's worker thread, this process inherits a signal mask that blocks nearly
# everything (libdispatch's workers block signals): unblock, or SIGTERM and SIGHUP are never forwarded.
signal.pthread_sigmask(signal.SIG_SETMASK, [])

parser = argparse.ArgumentParser()
parser.add_argument("--record", required=True)
parser.add_argument("--watchdog-usec", type=int)
parser.add_argument("--listen")
parser.add_argument("--restart-on-failure", action="store_true")
parser.add_argument("--restart-on-signal", action="store_true")
# FDSTOREREMOVE=1 is recorded, but the descriptors stay open here (systemd closes its copy when it gets to the
# message, which may be after the service went on): the service must not depend on the store letting go of a file.
parser.add_argument("--keep-removed", action="store_true")
parser.add_argument("command", nargs=argparse.REMAINDER)
options = parser.parse_args()
command = options.command[1:] if options.command[:1] == ["--"] else options.command

directory = tempfile.mkdtemp(prefix="fake-systemd-")
notify_path = os.path.join(directory, "notify")
notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
notify.bind(notify_path)
notify.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)

listener = None
if options.listen:
    os.makedirs(os.path.dirname(options.listen), exist_ok=True)
    if os.path.exists(options.listen):
        os.unlink(options.listen)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(options.listen)
    os.chmod(options.listen, 0o666)
    listener.listen(128)

# The file-descriptor store: (name, fd) in the order stored; systemd allows a name more than once.
store = []
kept = []  # removed from the store but left open (--keep-removed)


def start():
    passed = ([("control", listener.fileno())] if listener else []) + store
    child = os.fork()
    if child == 0:
        environment = dict(os.environ, NOTIFY_SOCKET=notify_path)
        if options.watchdog_usec:
            environment["WATCHDOG_USEC"] = str(options.watchdog_usec)
            environment["WATCHDOG_PID"] = str(os.getpid())
        if passed:
            # Move them out of the way first, then to 3, 4, ... in order.
            moved = [os.dup(fd) for _, fd in passed]
            for index, fd in enumerate(moved):
                os.dup2(fd, 3 + index)
                os.set_inheritable(3 + index, True)
            environment.update(LISTEN_FDS=str(len(passed)), LISTEN_FDNAMES=":".join(name for name, _ in passed),
                               LISTEN_PID=str(os.getpid()))
        os.execvpe(command[0], command, environment)
    return child


def receive(record):
    data, ancillary, _, _ = notify.recvmsg(65536, socket.CMSG_SPACE(253 * 4))
    fds = array.array("i")
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
    message = data.decode()
    fields = dict(line.split("=", 1) for line in message.split("\n") if "=" in line)
    if fields.get("FDSTORE") == "1":
        for fd in fds:
            store.append((fields.get("FDNAME", "stored"), fd))
    else:
        for fd in fds:
            os.close(fd)
    if fields.get("FDSTOREREMOVE") == "1":
        for entry in [entry for entry in store if entry[0] == fields.get("FDNAME")]:
            store.remove(entry)
            if options.keep_removed:
                kept.append(entry[1])
            else:
                os.close(entry[1])
    entry = {"t": time.monotonic_ns(), "message": message}
    if fds:
        entry["fds"] = len(fds)
    record.write(json.dumps(entry) + "\n")


pid = start()
for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(number, lambda signum, frame: os.kill(pid, signum))
restart_requested = False


def request_restart(signum, frame):
    global restart_requested
    restart_requested = True
    os.kill(pid, signal.SIGTERM)


if options.restart_on_signal:
    signal.signal(signal.SIGUSR1, request_restart)

record = open(options.record, "a", buffering=1)
restarts = 0
status = None
while status is None:
    try:
        ready, _, _ = select.select([notify], [], [], 0.05)
    except InterruptedError:
        continue
    if ready:
        receive(record)
    done, code = os.waitpid(pid, os.WNOHANG)
    if done:
        failed = os.WIFSIGNALED(code) or os.waitstatus_to_exitcode(code) != 0
        if (options.restart_on_failure and failed) or restart_requested:
            # What the service sent just before it exited comes first.
            notify.setblocking(False)
            try:
                while True:
                    receive(record)
            except BlockingIOError:
                pass
            notify.setblocking(True)
            restarts += 1
            record.write(json.dumps({"t": time.monotonic_ns(), "restart": restarts,
                                     "fds": [name for name, _ in store],
                                     "status": os.waitstatus_to_exitcode(code),
                                     "requested": restart_requested}) + "\n")
            restart_requested = False
            pid = start()
        else:
            status = code
# Whatever the service sent just before it exited.
notify.setblocking(False)
try:
    while True:
        receive(record)
except BlockingIOError:
    pass
os.unlink(notify_path)
os.rmdir(directory)
sys.exit(os.waitstatus_to_exitcode(status))
