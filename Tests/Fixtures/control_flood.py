#!/usr/bin/env python3
"""Floods lifecycled's control socket with `status` requests from COUNT connections, for the fairness test
(Tests/IntegrationTests/ControlFairnessTests.swift). Run it as the user under test (setpriv).

Commands come on standard input, one a line; what it has to say goes to standard output, one line each:
- at start: connects, sends one `status` on each connection, reads the answers, prints `ready`;
- `burst N`: writes N `status` requests on each connection at once (without reading), prints `sent`, then reads
  every answer; each connection then keeps one request outstanding (a new one as each answer comes) until
- `stop`: prints one JSON line, {"burst": [the daemon's uptimeSeconds in each burst answer], "after": the number
  of answers after the burst, "closed": connections the daemon closed, "failures": [first failed answers]}.

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
pending = {}
for s in connections:
    s.setblocking(False)
    pending[s] = [b"", burst]  # buffer, burst answers still to come
    selector.register(s, selectors.EVENT_READ)
selector.register(sys.stdin, selectors.EVENT_READ)
stamps, after, closed, failures = [], 0, 0, []
running = True
while running:
    for key, _ in selector.select():
        if key.fileobj is sys.stdin:
            line = sys.stdin.readline()
            if not line or line.strip() == "stop":
                running = False
            continue
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
            continue
        state = pending[s]
        state[0] += chunk
        while b"\n" in state[0]:
            line, state[0] = state[0].split(b"\n", 1)
            if b'"ok":true' not in line[:200] and len(failures) < 3:
                failures.append(line[:300].decode(errors="replace"))
            if state[1] > 0:
                state[1] -= 1
                stamps.append(stamp(line))
            else:
                after += 1
            if state[1] == 0:
                try:
                    s.sendall(request)
                except OSError:
                    pass

print(json.dumps({"burst": stamps, "after": after, "closed": closed, "failures": failures}), flush=True)
