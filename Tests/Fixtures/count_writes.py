#!/usr/bin/env python3
"""Counts the writes of one file in a directory, as the kernel reports them (inotify), for the state-file tests
(Tests/IntegrationTests/SceneIntegrationTests.swift).

usage: count_writes.py DIRECTORY NAME

Each IN_CLOSE_WRITE of NAME in DIRECTORY counts as one write: the daemon writes an app's state into a new
NAME (APP.json.tmp), closes it, and renames it over APP.json, so every save closes NAME once. Prints "ready"
once the watch is in place, then, on SIGTERM, the count, and exits.
"""
import ctypes, os, signal, struct, sys

IN_CLOSE_WRITE = 0x00000008
directory, name = sys.argv[1], sys.argv[2].encode()
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
if fd < 0 or libc.inotify_add_watch(fd, directory.encode(), IN_CLOSE_WRITE) < 0:
    sys.exit("inotify: " + os.strerror(ctypes.get_errno()))
count = 0


def finish(*_):
    sys.stdout.write(f"{count}\n")
    sys.stdout.flush()
    os._exit(0)


signal.signal(signal.SIGTERM, finish)
# The test runner may spawn its children with SIGTERM blocked.
signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
sys.stdout.write("ready\n")
sys.stdout.flush()
while True:
    data = os.read(fd, 65536)
    offset = 0
    while offset < len(data):
        _, mask, _, length = struct.unpack_from("iIII", data, offset)
        entry = data[offset + 16: offset + 16 + length].rstrip(b"\0")
        offset += 16 + length
        if mask & IN_CLOSE_WRITE and entry == name:
            count += 1
