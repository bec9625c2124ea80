#!/usr/bin/env python3
"""A misbehaving lifecycled client, for the hostile-client tests (Tests/IntegrationTests/HostileClientTests.swift).

It writes raw bytes to the socket inherited as LIFECYCLE_FD. Unless the mode says otherwise it first behaves:
it says hello and acks didFinishLaunching (so the launch watchdog leaves it alone), then does its one bad
thing, then goes on reading and acking lifecycle messages until the daemon hangs up. It records every message
it receives, and what happened to the connection, as JSON lines in $LIFECYCLE_RECORD (the format of
Examples/python/lifecycle_client.py, plus "eof", "reset", "sent" and "sendFailed" entries).

usage: hostile_client.py MODE [--count N] [--size BYTES] [--observe TYPE]

modes (after the launch, unless said otherwise):
  oversized      70,000 bytes without a newline (over the 65,536-byte line limit)
  oversized-line a 70,000-byte line, newline included
  invalid-utf8   a JSON object whose string holds bytes that are not UTF-8 (0xff 0xfe)
  invalid-json   a line that is not JSON: {"type":"ack",
  not-object     a JSON value that is not an object: [1,2,3]
  no-type        an object without "type"
  unknown-type   {"type":"selfDestruct"}
  bad-field      {"type":"ack","id":"3"}
  unknown-ack    acks for ids never sent (999999, 0, -5, 2**62), then a second ack of the launch; stays a good client
  second-hello   a second hello
  bad-version    a hello with protocol 2 (first and only hello)
  before-hello   an ack before any hello (first line)
  no-hello       connects and never says anything; keeps reading
  flood          a thread sends COUNT (0: endless) ignored lines (acks of unknown ids) as fast as the socket
                 takes them, while the main thread goes on reading and acking
  no-read        observes TYPE, posts COUNT notifications of SIZE bytes of payload to itself, and never reads
                 again: the daemon's buffer for it fills up
Exit: 0 on SIGTERM. It never exits by itself.
"""
import argparse, json, os, signal, socket, sys, threading, time

signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
CALLBACKS = {"didFinishLaunching", "didBecomeActive", "willResignActive", "didEnterBackground",
             "willEnterForeground", "willTerminate"}

parser = argparse.ArgumentParser()
parser.add_argument("mode")
parser.add_argument("--count", type=int, default=0)
parser.add_argument("--size", type=int, default=60000)
parser.add_argument("--observe", default="blob")
options = parser.parse_args()

app = os.environ.get("LIFECYCLE_APP", "?")
record_fd = os.open(os.environ["LIFECYCLE_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) \
    if os.environ.get("LIFECYCLE_RECORD") else None


def record(kind, **fields):
    if record_fd is None:
        return
    entry = {"app": app, "type": kind, "t": time.monotonic_ns(), "pid": os.getpid()}
    entry.update(fields)
    os.write(record_fd, (json.dumps(entry) + "\n").encode())


sock = socket.socket(fileno=int(os.environ["LIFECYCLE_FD"]))
sock.setblocking(True)
send_lock = threading.Lock()
buffer = b""


def send(data):
    with send_lock:
        try:
            sock.sendall(data)
            return True
        except OSError as error:
            record("sendFailed", message=error.strerror or str(error))
            return False


def message(obj):
    return json.dumps(obj, separators=(",", ":")).encode() + b"\n"


def next_message():
    """The next message, or None at end of file or reset (recorded)."""
    global buffer
    while b"\n" not in buffer:
        try:
            data = sock.recv(65536)
        except ConnectionResetError:
            record("reset")
            return None
        if not data:
            record("eof")
            return None
        buffer += data
    line, buffer = buffer.split(b"\n", 1)
    parsed = json.loads(line)
    fields = {k: parsed[k] for k in ("id", "message", "state", "name", "posts") if k in parsed}
    record(parsed.get("type"), **fields)
    return parsed


def serve(until=None):
    """Read and ack lifecycle messages; return after acking a message of type `until`, or at end of file."""
    while True:
        received = next_message()
        if received is None:
            return False
        kind = received.get("type")
        if kind in CALLBACKS:
            send(message({"type": "ack", "id": received["id"]}))
        if kind == until:
            return True


def idle():
    while True:
        signal.pause()


mode = options.mode
if mode == "no-hello":
    serve()
    idle()
if mode == "before-hello":
    send(message({"type": "ack", "id": 1}))
    serve()
    idle()
if mode == "bad-version":
    send(message({"type": "hello", "protocol": 2}))
    serve()
    idle()

hello = {"type": "hello", "protocol": 1}
if mode == "no-read":
    hello["observe"] = [options.observe]
send(message(hello))
if not serve(until="didFinishLaunching"):
    idle()

bad = {
    "oversized": b"x" * 70000,
    "oversized-line": b"x" * 70000 + b"\n",
    "invalid-utf8": b'{"type":"observe","names":["\xff\xfe"]}\n',
    "invalid-json": b'{"type":"ack",\n',
    "not-object": b"[1,2,3]\n",
    "no-type": b'{"id":3}\n',
    "unknown-type": b'{"type":"selfDestruct"}\n',
    "bad-field": b'{"type":"ack","id":"3"}\n',
    "second-hello": message({"type": "hello", "protocol": 1}),
}
if mode in bad:
    send(bad[mode])
    serve()
    idle()
elif mode == "unknown-ack":
    for ack_id in (999999, 0, -5, 2 ** 62, 1):
        send(message({"type": "ack", "id": ack_id}))
    serve()
    idle()
elif mode == "flood":
    chunk = message({"type": "ack", "id": 987654321}) * 2000

    def flood():
        sent = 0
        while options.count == 0 or sent < options.count:
            if not send(chunk):
                return
            sent += 2000
        record("sent", posts=sent)

    threading.Thread(target=flood, daemon=True).start()
    serve()
    idle()
elif mode == "no-read":
    payload = {"blob": "y" * options.size}
    sent = 0
    for _ in range(options.count or 40):
        if not send(message({"type": "post", "name": options.observe, "payload": payload, "app": app})):
            break
        sent += 1
    record("sent", posts=sent)
    idle()
else:
    sys.exit(f"unknown mode {mode!r}")
