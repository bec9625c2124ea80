#!/usr/bin/env python3
"""The notification benchmark's poster: a lifecycled client (docs/PROTOCOL.md) that posts N
notifications of three `latest` types as fast as its socket takes them, then posts a marker to
itself; when the marker comes back, the daemon has handled every post before it (one connection
is handled in order). Prints posts per second, as JSON.

Also the floor (`--floor`): the same bytes into a socket whose reader only splits lines (line_floor)."""
import json, os, socket, subprocess, sys, time

N = int(os.environ.get("POSTS", "1000000"))
TYPES = ["levelDidChange", "stateDidChange", "localeDidChange"]
BATCH = 10000


def lines():
    for start in range(0, N, BATCH):
        chunk = []
        for i in range(start, min(N, start + BATCH)):
            chunk.append('{"type":"post","name":"%s","payload":{"n":%d}}\n' % (TYPES[i % 3], i))
        yield "".join(chunk).encode()


def floor():
    # LINE_FLOOR: where notifications.sh compiled it (a temporary directory, not the source tree).
    reader = subprocess.Popen([os.environ.get("LINE_FLOOR") or os.path.join(os.path.dirname(sys.argv[0]), "line_floor")],
                              stdin=subprocess.PIPE)
    chunks = list(lines())
    start = time.perf_counter()
    for chunk in chunks:
        reader.stdin.write(chunk)
    reader.stdin.close()
    reader.wait()
    print(json.dumps({"posts": N, "seconds": time.perf_counter() - start}))


def main():
    if "--floor" in sys.argv:
        return floor()
    sock = socket.socket(fileno=int(os.environ["LIFECYCLE_FD"]))
    sock.sendall(b'{"type":"hello","protocol":1,"observe":["userDefaultsDidChange","benchDone"]}\n')
    buffer = b""
    def read_until(kind):
        nonlocal buffer
        while True:
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                message = json.loads(line)
                if message.get("type") in ("didFinishLaunching", "didBecomeActive", "didEnterBackground",
                                           "willResignActive", "willEnterForeground", "willTerminate"):
                    sock.sendall(b'{"type":"ack","id":%d}\n' % message["id"])
                if message.get("type") == kind:
                    return message
            data = sock.recv(65536)
            if not data:
                sys.exit("daemon closed the connection")
            buffer += data
    read_until("didFinishLaunching")
    # Wait for the go signal: the bench posts userDefaultsDidChange to us once the subscribers sleep.
    read_until("notification")
    chunks = list(lines())
    start = time.perf_counter()
    for chunk in chunks:
        sock.sendall(chunk)
    sock.sendall(b'{"type":"post","name":"benchDone","app":"%s","payload":{"done":true}}\n'
                 % os.environ["LIFECYCLE_APP"].encode())
    read_until("notification")
    seconds = time.perf_counter() - start
    with open(os.environ["BENCH_RESULT"], "w") as f:
        json.dump({"posts": N, "seconds": seconds}, f)
    while True:
        if not sock.recv(65536):
            return


if __name__ == "__main__":
    main()
