#!/usr/bin/env bash
# The comparison benchmark: lifecycled against supervisord, s6 and runit on the same work, in one run
# (docs/BENCHMARKS.md says what each figure measures). Prints a table and writes docs/BENCHMARKS.md and
# docs/bench-launch-memory.svg.
#   bash bench/run.sh            default: N = 100 and 1000, 3 repetitions, notifications with 200,000 posts
#   bash bench/run.sh --smoke    N = 10, one repetition, 20,000 posts (a check that everything works;
#                                prints the table only, docs/ is left as it is)
#   bash bench/run.sh --large    also N = 10,000 for scaling, and the full 1,000,000 posts
# Environment: REPS (default 3), BENCH_SCRATCH (the release build directory, default
# /var/tmp/lifecycled-bench-build: its own, so that it does not wait on .build's lock), NO_NOTIFICATIONS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=default
for arg in "$@"; do
    case $arg in
        --smoke) mode=smoke ;;
        --large) mode=large ;;
        *) echo "usage: bench/run.sh [--smoke|--large]" >&2; exit 2 ;;
    esac
done
scratch=${BENCH_SCRATCH:-/var/tmp/lifecycled-bench-build}
tmp=$(mktemp -d /tmp/lifecycled-peers.XXXXXX)
driver=
cleanup() {
    # The driver kills what it started on its own; this is for an interrupt that reached us first.
    if [ -n "$driver" ] && kill -0 "$driver" 2>/dev/null; then kill -INT "$driver" 2>/dev/null || true; wait "$driver" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The peers, from Debian's packages, when missing. Nothing is enabled as a boot service here: the packages
# only install the binaries (there is no running init to start them in a container; elsewhere the test
# instances below are private, under $tmp).
missing=()
command -v supervisord >/dev/null || missing+=(supervisor)
command -v s6-svscan >/dev/null || missing+=(s6)
command -v runsvdir >/dev/null || missing+=(runit)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}…" >&2
    if [ "$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 || {
        $sudo apt-get update >&2 && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2; }
fi

echo "building lifecycled and lifectl (release, $scratch)…" >&2
swift build -c release --scratch-path "$scratch" --product lifecycled >&2
swift build -c release --scratch-path "$scratch" --product lifectl >&2
bin=$(swift build -c release --scratch-path "$scratch" --show-bin-path)
mkdir -p "$tmp/tools"
for tool in sleeper client launchwait suspend_floor pingpong ctlbench repeat; do
    cc -O2 -Wall -o "$tmp/tools/$tool" "bench/$tool.c"
done
ulimit -n 65536 2>/dev/null || ulimit -n 8192 2>/dev/null || true

args=(--bin "$bin" --tools "$tmp/tools" --tmp "$tmp" --reps "${REPS:-3}" --json "$tmp/results.json")
posts=200000
case $mode in
    smoke) args+=(--smoke --out "$tmp/BENCHMARKS.md" --svg "$tmp/chart.svg"); posts=20000 ;;  # docs/ untouched
    large) args+=(--large); posts=1000000 ;;
esac
if [ -z "${NO_NOTIFICATIONS:-}" ]; then
    echo "notifications benchmark ($posts posts)…" >&2
    POSTS=$posts LIFECYCLED_BIN_DIR="$bin" timeout 600 bash bench/notifications.sh > "$tmp/notifications.txt" 2>&1 \
        || echo "(notifications.sh failed, status $?)" >> "$tmp/notifications.txt"
    args+=(--notifications "$tmp/notifications.txt")
fi
python3 bench/bench.py "${args[@]}" &
driver=$!
wait "$driver"
