#!/usr/bin/env python3
"""Counts the saves of one file in a directory, as the kernel reports them (inotify), for the state-file tests
(Tests/IntegrationTests/SceneIntegrationTests.swift).

usage: count_writes.py DIRECTORY NAME

Each IN_MOVED_TO of NAME in DIRECTORY counts as one save: the daemon writes an app's state under APP.json.tmp and
then moves it to NAME (APP.json), by a rename or by exchanging the two names, so every save moves a file to NAME
once. Prints "ready" once the watch is in place, then, on SIGTERM, the count, and exits.
"""
import ctypes, os, signal, struct, sys

IN_MOVED_TO = 0x00000080
directory, name = sys.argv[1], sys.argv[2].encode()
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
if fd < 0 or libc.inotify_add_watch(fd, directory.encode(), IN_MOVED_TO) < 0:
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
        if mask & IN_MOVED_TO and entry == name:
            count += 1
