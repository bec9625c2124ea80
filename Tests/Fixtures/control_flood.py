#!/usr/bin/env python3
"""Floods lifecycled's control socket with `status` requests from COUNT connections, for the fairness test
(Tests/IntegrationTests/ControlFairnessTests.swift). Run it as the user under test (setpriv).

At start it connects, sends one `status` on each connection, reads the answers and prints `ready`. Then it
reads `burst N` on standard input, writes N `status` requests on each connection at once (without reading),
prints `sent`, reads every answer, and prints one JSON line: {"burst": [the daemon's uptimeSeconds in each
answer, in the order received], "closed": connections the daemon closed, "failures": [first failed answers]}.

usage: control_flood.py SOCKET COUNT
"""
import json, selectors, socket, sys

path, count = sys.argv[1], int(sys.argv[2])
request = b'{"verb":"status"}\n'
marker = b'"uptimeSeconds":'


def stamp(line):
    at = line.rfind(marker)
    if at < 0:
        return None
    end = at + len(marker)
    stop = end
    while stop < len(line) and line[stop:stop + 1] in b"0123456789.e-+":
        stop += 1
    return float(line[end:stop])


connections = []
for _ in range(count):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    connections.append(s)
for s in connections:
    s.sendall(request)
for s in connections:
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(1 << 20)
        if not chunk:
            sys.exit("the daemon closed a connection before its first answer")
        data += chunk
print("ready", flush=True)

command = sys.stdin.readline().split()
assert command[0] == "burst", command
burst = int(command[1])
for s in connections:
    s.sendall(request * burst)
print("sent", flush=True)

selector = selectors.DefaultSelector()
buffers = {}
for s in connections:
    s.setblocking(False)
    buffers[s] = b""
    selector.register(s, selectors.EVENT_READ)
stamps, closed, failures = [], 0, []
expected = burst * len(connections)
while len(stamps) < expected and len(buffers) > 0:
    for key, _ in selector.select(timeout=300):
        s = key.fileobj
        try:
            chunk = s.recv(1 << 20)
        except BlockingIOError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            closed += 1
            selector.unregister(s)
            del buffers[s]
            continue
        buffers[s] += chunk
        while b"\n" in buffers[s]:
            line, buffers[s] = buffers[s].split(b"\n", 1)
            if b'"ok":true' not in line and len(failures) < 3:
                failures.append(line[:300].decode(errors="replace"))
            stamps.append(stamp(line))

print(json.dumps({"burst": stamps, "closed": closed, "failures": failures}), flush=True)
