#!/usr/bin/env python3
"""Stands between one client and a real dbus-daemon, forwarding bytes both ways, and stops (SIGSTOP) the bus
daemon at the moment a message naming TRIGGER reaches the client, before the client sees it: whatever the
client asks the bus while handling that message meets a hung bus daemon, without racing the client. The
bus daemon is not touched again: the test continues it. MARKER is created once it is stopped.

usage: bus_stopper.py LISTEN_PATH BUS_PATH BUS_PID TRIGGER MARKER
"""
import os, select, signal, socket, sys

listen_path, bus_path, bus_pid, trigger, marker = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].encode(), sys.argv[5]
signal.pthread_sigmask(signal.SIG_SETMASK, [])
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(listen_path)
server.listen(8)
peers = {}  # socket -> (other socket, True when it carries the bus's side)
stopped = False
while True:
    ready, _, _ = select.select([server] + list(peers), [], [])
    for sock in ready:
        if sock is server:
            client, _ = server.accept()
            bus = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            bus.connect(bus_path)
            peers[client] = (bus, False)
            peers[bus] = (client, True)
            continue
        if sock not in peers:
            continue
        other, from_bus = peers[sock]
        data = sock.recv(65536)
        if not data:
            for end in (sock, other):
                peers.pop(end, None)
                end.close()
            continue
        if from_bus and not stopped and trigger in data:
            os.kill(bus_pid, signal.SIGSTOP)
            stopped = True
            open(marker, "w").close()
        other.sendall(data)
