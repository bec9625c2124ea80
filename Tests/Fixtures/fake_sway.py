#!/usr/bin/env python3
"""A fake sway IPC socket for the display tests: it answers each connection by the next scenario in argv.

  fake_sway.py SOCKET SCENARIO...

Scenarios: `garbage` (bytes that are not the IPC), `truncated` (half a GET_TREE reply, then the connection
closes), `good` (a proper SUBSCRIBE and GET_TREE reply, then silence). The last scenario repeats. Each
connection's scenario is printed to stdout as it starts, so the test can tell which ones ran.
"""
import json
import os
import socket
import struct
import sys

MAGIC = b"i3-ipc"


def frame(kind, payload):
    body = json.dumps(payload).encode()
    return MAGIC + struct.pack("<II", len(body), kind) + body


def read_message(connection):
    header = b""
    while len(header) < 14:
        chunk = connection.recv(14 - len(header))
        if not chunk:
            return None
        header += chunk
    length, kind = struct.unpack("<II", header[6:])
    body = b""
    while len(body) < length:
        chunk = connection.recv(length - len(body))
        if not chunk:
            return None
        body += chunk
    return kind


TREE = {"id": 1, "type": "root", "nodes": [{"id": 3, "type": "output", "nodes": [
    {"id": 4, "type": "workspace", "nodes": [
        {"id": 5, "type": "con", "pid": 1, "app_id": "nobody-owns-this", "visible": True, "focused": True,
         "nodes": [], "floating_nodes": []}], "floating_nodes": []}]}]}


def main():
    path, scenarios = sys.argv[1], sys.argv[2:]
    if os.path.exists(path):
        os.unlink(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(4)
    index = 0
    held = []
    while True:
        connection, _ = server.accept()
        scenario = scenarios[min(index, len(scenarios) - 1)]
        index += 1
        print(scenario, flush=True)
        if scenario == "garbage":
            connection.sendall(b"this is not the sway ipc\n")
            held.append(connection)
        elif scenario == "truncated":
            read_message(connection)
            connection.sendall(frame(2, {"success": True}))
            read_message(connection)
            # The output subscription, sent after GET_TREE: read, so that the close is a clean end of stream.
            read_message(connection)
            connection.sendall(frame(4, TREE)[:20])
            connection.close()
        else:
            read_message(connection)
            connection.sendall(frame(2, {"success": True}))
            read_message(connection)
            connection.sendall(frame(4, TREE))
            held.append(connection)


main()
