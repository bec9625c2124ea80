#!/usr/bin/env python3
"""An app with a working set: argv[1] MiB of its own anonymous memory, each page half random bytes and half zeros
(about what compressed swap makes of a real heap: zram keeps a page of zeros, or of one repeated byte, for nothing).
It writes one byte in every page, then idles; each time it is continued (SIGCONT, a resume) it writes every page
again, faulting back whatever was paged out. After each pass it replaces the file argv[2] with
"PASSES MONOTONIC_SECONDS" (CLOCK_MONOTONIC at the pass's end), so that a test or a bench sees when the whole working
set was touched again. argv[3], if given: a cgroup.procs file it moves itself into first (a memory budget)."""
import os
import signal
import sys
import time

size, marker = int(sys.argv[1]) << 20, sys.argv[2]
if len(sys.argv) > 3:
    with open(sys.argv[3], "w") as procs:
        procs.write(str(os.getpid()))
memory = bytearray(os.urandom(2048) + bytes(2048)) * (size // 4096)
passes = 0


def touch():
    global passes
    for offset in range(0, size, 4096):
        memory[offset] = (memory[offset] + 1) & 0xFF
    passes += 1
    with open(marker + ".tmp", "w") as f:
        f.write(f"{passes} {time.monotonic():.6f}\n")
    os.replace(marker + ".tmp", marker)


# SIGCONT blocked and waited for: one that comes during a pass is kept pending, never lost. A blocked SIGCONT
# still continues the process.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCONT})
touch()
while True:
    if signal.sigtimedwait({signal.SIGCONT}, 60) is not None:
        touch()
