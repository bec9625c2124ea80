#!/usr/bin/env python3
"""Makes real memory pressure: moves itself into a v1 memory cgroup (argv[1]) whose limit is far below the size of
the file it then reads over and over through a mapping (argv[2]). Each pass evicts the pages the next pass needs,
so the process stalls in reclaim and on refaults, which the kernel counts in /proc/pressure/memory."""
import mmap
import os
import sys

cgroup, path = sys.argv[1], sys.argv[2]
with open(os.path.join(cgroup, "cgroup.procs"), "w") as procs:
    procs.write(str(os.getpid()))
with open(path, "rb") as f:
    # Pages already cached stay charged to whoever read them first: drop them so that this cgroup pays for each.
    # Only clean pages can be dropped: write back whatever is still dirty first.
    os.fsync(f.fileno())
    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    pages = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    total = 0
    while True:
        for offset in range(0, len(pages), 4096):
            total += pages[offset]
