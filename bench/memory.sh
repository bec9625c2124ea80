#!/bin/bash
# The memory benchmark (docs/bench/memory.md; bench/run.sh runs it with the release build): a suspended app gives
# its memory back. On a zram swap device it sets up and removes itself, APPS apps (default 20) each touch SIZE MiB
# (default 100) of their own memory and all but one are suspended; bench/memory.py measures the reclaim, the resume
# with and without it, and how many apps stay resumable in a memory budget of BUDGET_APPS times SIZE (default 6): a
# v1 memory cgroup with memory.swappiness 0 here, memory.max where cgroup2 has the memory controller; and the floor:
# the same apps paged out directly by one thread per CPU, no daemon. Needs root.
#   bash bench/memory.sh            # APPS=20 SIZE=100
#   bash bench/memory.sh --smoke    # 4 apps of 32 MiB, budget of 2 apps
# LIFECYCLED_BIN_DIR / LIFECTL_BIN_DIR: the binaries (default: the debug build). RECLAIM_AFTER: ReclaimAfterSec= of
# the reclaim phase (default 1). Everything it makes (zram device, cgroup, daemons, apps, work folder) goes at the end,
# also on failure or Ctrl-C.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
APPS=${APPS:-20} SIZE=${SIZE:-100} BUDGET_APPS=${BUDGET_APPS:-6} RESUMES=${RESUMES:-5}
if [ "${1:-}" = --smoke ]; then APPS=4 SIZE=32 BUDGET_APPS=2 RESUMES=2; fi
LIFECYCLED=${LIFECYCLED_BIN_DIR:-$REPO/.build/debug}/lifecycled
LIFECTL=${LIFECTL_BIN_DIR:-${LIFECYCLED_BIN_DIR:-$REPO/.build/debug}}/lifectl
[ "$(id -u)" = 0 ] || { echo "bench/memory.sh: needs root (a zram swap device, a memory cgroup)" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/lifecycled-memory.XXXXXX")
ZRAM= CGROUP=
cleanup() {
    # Every daemon the driver started is stopped by it; what is left of their apps is in the work folder's cgroup.
    if [ -n "$CGROUP" ] && [ -d "$CGROUP" ]; then
        for pid in $(cat "$CGROUP/cgroup.procs" 2>/dev/null); do kill -CONT "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null; done
        for _ in $(seq 50); do rmdir "$CGROUP" 2>/dev/null && break; sleep 0.1; done
    fi
    if [ -n "$ZRAM" ]; then
        swapoff "/dev/zram$ZRAM" 2>/dev/null || true
        echo "$ZRAM" > /sys/class/zram-control/hot_remove 2>/dev/null || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

modprobe zram 2>/dev/null || true
if [ -e /sys/class/zram-control/hot_add ]; then
    ZRAM=$(cat /sys/class/zram-control/hot_add)
    echo "$(( APPS * SIZE * 3 / 2 + 512 ))M" > "/sys/block/zram$ZRAM/disksize"
    mkswap "/dev/zram$ZRAM" > /dev/null
    swapon -p 100 "/dev/zram$ZRAM"
    echo "zram$ZRAM: $(cat "/sys/block/zram$ZRAM/comp_algorithm" | grep -o '\[[a-z0-9-]*\]'), disksize $(( APPS * SIZE * 3 / 2 + 512 )) MiB" >&2
else
    echo "bench/memory.sh: no zram here; swap as the machine has it: $(tail -n +2 /proc/swaps | wc -l) device(s)" >&2
fi

BUDGET=$(( BUDGET_APPS * SIZE ))
budget_args=()
if [ -e /sys/fs/cgroup/memory/memory.limit_in_bytes ]; then
    CGROUP=/sys/fs/cgroup/memory/lifecycled-bench-$$
    mkdir "$CGROUP"
    echo "${BUDGET}M" > "$CGROUP/memory.limit_in_bytes"
    # Termination alone: the cgroup's own reclaim takes no anonymous memory (process_madvise is not held by this).
    echo 0 > "$CGROUP/memory.swappiness"
    budget_args=(--budget-cgroup "$CGROUP" --budget-mib "$BUDGET")
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    grep -qw memory /sys/fs/cgroup/cgroup.subtree_control || echo +memory > /sys/fs/cgroup/cgroup.subtree_control
    CGROUP=/sys/fs/cgroup/lifecycled-bench-$$
    mkdir "$CGROUP"
    echo "${BUDGET}M" > "$CGROUP/memory.max"
    budget_args=(--budget-cgroup "$CGROUP" --budget-mib "$BUDGET")
else
    echo "bench/memory.sh: no memory controller here: the budget is not measured" >&2
fi
python3 "$REPO/bench/memory.py" --lifecycled "$LIFECYCLED" --lifectl "$LIFECTL" --work "$WORK" --apps "$APPS" \
    --size "$SIZE" --reclaim-after "${RECLAIM_AFTER:-1}" --resumes "$RESUMES" "${budget_args[@]}"
