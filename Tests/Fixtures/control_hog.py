#!/usr/bin/env python3
"""Opens COUNT connections to lifecycled's control socket and holds them, for the control-socket tests
(Tests/IntegrationTests/SecurityTests.swift). Run it as the user under test (setpriv).

Each sends one `list` request: the connections the daemon kept get its answer and stay open; the ones it
refused got a refusal instead, and are closed. It prints one JSON line, {"open": N, "refused": M,
"replies": [...]}, then holds the open connections until its standard input closes (or SIGTERM).

usage: control_hog.py SOCKET COUNT
"""
import json, socket, sys

path, count = sys.argv[1], int(sys.argv[2])
connections = []
for _ in range(count):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    connections.append(s)

# Every connection gets one line: the answer to a `list` on those the daemon kept, the refusal on the others
# (answered and closed right after accept, before the request: sending it may fail, which is fine).
open_ones, refused, replies = [], 0, []
for s in connections:
    try:
        s.sendall(b'{"verb":"list"}\n')
    except OSError:
        pass
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = s.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        data += chunk
    if b'"ok":true' in data:
        open_ones.append(s)
    else:
        refused += 1
        replies.append(data.decode(errors="replace").strip())
        s.close()

print(json.dumps({"open": len(open_ones), "refused": refused, "replies": replies[:3]}), flush=True)
sys.stdin.read()
