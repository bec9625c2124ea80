#!/usr/bin/env python3
"""Plays journald for one service, for the tests. Run it in a private mount namespace
(`unshare --mount --propagation private`): it mounts a tmpfs on /run there, so the host's /run is
untouched and no other test's daemon sees this journal. It listens on /run/systemd/journal/socket
(sd_journal_sendv's records, in the native protocol) and /run/systemd/journal/stdout
(sd_journal_stream_fd's streams), runs the command, and records what arrives as JSON lines:
  {"kind": "record", "fields": {...}}   {"kind": "stream", "identifier": "...", "line": "..."}

usage: unshare --mount --propagation private -- fake_journal.py --record FILE -- COMMAND ARGS...
"""
import argparse, json, os, select, signal, socket, struct, subprocess, sys

signal.pthread_sigmask(signal.SIG_SETMASK, [])  # a test runner's worker thread blocks nearly everything
parser = argparse.ArgumentParser()
parser.add_argument("--record", required=True)
parser.add_argument("command", nargs=argparse.REMAINDER)
options = parser.parse_args()
command = options.command[1:] if options.command[:1] == ["--"] else options.command

subprocess.run(["mount", "-t", "tmpfs", "tmpfs", "/run"], check=True)
os.makedirs("/run/systemd/journal")
records = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
records.bind("/run/systemd/journal/socket")
streams = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
streams.bind("/run/systemd/journal/stdout")
streams.listen(64)

pid = os.fork()
if pid == 0:
    os.execvp(command[0], command)
for number in (signal.SIGTERM, signal.SIGINT):
    signal.signal(number, lambda signum, frame: os.kill(pid, signum))

out = open(options.record, "a", buffering=1)


def parse_native(data):
    fields, i = {}, 0
    while i < len(data):
        end = data.index(b"\n", i)
        line = data[i:end]
        if b"=" in line:
            key, value = line.split(b"=", 1)
            i = end + 1
        else:
            key = line
            (length,) = struct.unpack("<Q", data[end + 1:end + 9])
            value = data[end + 9:end + 9 + length]
            i = end + 9 + length + 1
        fields[key.decode()] = value.decode(errors="replace")
    return fields


connections = {}  # socket -> [buffer, header lines or None]
status = None
while status is None:
    try:
        ready, _, _ = select.select([records, streams] + list(connections), [], [], 0.05)
    except InterruptedError:
        continue
    for sock in ready:
        if sock is records:
            out.write(json.dumps({"kind": "record", "fields": parse_native(records.recv(1 << 20))}) + "\n")
        elif sock is streams:
            connection, _ = streams.accept()
            connections[connection] = [b"", []]
        else:
            data = sock.recv(65536)
            state = connections[sock]
            state[0] += data
            while b"\n" in state[0]:
                line, state[0] = state[0].split(b"\n", 1)
                if len(state[1]) < 7:  # identifier, unit, priority, level prefix, syslog, kmsg, console
                    state[1].append(line.decode())
                else:
                    out.write(json.dumps({"kind": "stream", "identifier": state[1][0], "line": line.decode()}) + "\n")
            if not data:
                sock.close()
                del connections[sock]
    done, code = os.waitpid(pid, os.WNOHANG)
    if done:
        status = code
sys.exit(os.waitstatus_to_exitcode(status))
