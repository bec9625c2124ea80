#!/usr/bin/env bash
# The comparison benchmark: lifecycled against supervisord, s6 and runit on the same work, in one run
# (docs/BENCHMARKS.md says what each figure measures). Prints a table and writes docs/BENCHMARKS.md and
# docs/bench-launch-memory.svg.
#   bash bench/run.sh            default: N = 100 and 1000, 3 repetitions, notifications with 200,000 posts
#   bash bench/run.sh --smoke    N = 10, one repetition, 20,000 posts to 20 apps: a check that the harness works
#                                (CI: `make bench-smoke`). Writes its report under a temporary directory only;
#                                docs/ is left as it is. Bounded:
#                                the measurements stop after SMOKE_TIMEOUT seconds (default 240).
#   bash bench/run.sh --large    also N = 10,000 for scaling (or the most the descriptor limit allows), and the
#                                full 1,000,000 posts
# Exit status: 0 when every measurement ran, whatever the figures say (a missed target is a finding, not a
# failure); 1 when the harness broke (a build, a tool, a peer or the daemon failed, or the smoke run timed out).
# Peers that apt cannot install are left out of the report (said so), not a failure.
# Environment: REPS (default 3), BENCH_SCRATCH (the release build directory, default
# /var/tmp/lifecycled-bench-build: its own, so that it never waits on .build's lock nor disturbs it),
# NO_NOTIFICATIONS=1, NO_DISPLAY=1 (skip bench/display.sh), NO_DESKTOP=1 (skip bench/desktop.sh),
# NO_DESKTOP_PEERS=1 (skip bench/desktop-peers.sh), NO_DBUS=1 (skip bench/dbus.sh), NO_MEMORY=1 (skip bench/memory.sh), CI (set: run apt-get update
# before installing).
set -euo pipefail
cd "$(dirname "$0")/.."
# The run's own start: the load average before anything of it runs, and the time it takes in all.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date +%s)
mode=default
for arg in "$@"; do
    case $arg in
        --smoke) mode=smoke ;;
        --large) mode=large ;;
        *) echo "usage: bench/run.sh [--smoke|--large]" >&2; exit 2 ;;
    esac
done
scratch=${BENCH_SCRATCH:-/var/tmp/lifecycled-bench-build}
# Everything runs in a tmpfs where there is one: a systemd machine keeps /run (lifecycled's runtime directory,
# where it saves each app's state per transition) and s6/runit their scan directories on tmpfs; here / is ext4.
base=/tmp
if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then base=/dev/shm; fi
tmp=$(mktemp -d "$base/lifecycled-peers.XXXXXX")
driver=
cleanup() {
    # The driver kills what it started on its own; this is for an interrupt that reached us first.
    if [ -n "$driver" ] && kill -0 "$driver" 2>/dev/null; then kill -INT "$driver" 2>/dev/null || true; wait "$driver" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi

# What the harness itself needs and the peers, from Debian's packages, when missing. Nothing is enabled as a boot
# service here: the packages only install the binaries (there is no running init to start them in a container;
# elsewhere the test instances below are private, under $tmp).
need=()
command -v python3 >/dev/null || need+=(python3)
command -v cc >/dev/null || command -v gcc >/dev/null || command -v clang >/dev/null || need+=(gcc libc6-dev)
peers=()
command -v supervisord >/dev/null || peers+=(supervisor)
command -v s6-svscan >/dev/null || peers+=(s6)
command -v runsvdir >/dev/null || peers+=(runit)
apt_install() { $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >&2; }
if [ $(( ${#need[@]} + ${#peers[@]} )) -gt 0 ]; then
    echo "installing ${need[*]} ${peers[*]}…" >&2
    # A fresh machine (CI) has no package lists yet; elsewhere try without updating first.
    if [ -n "${CI:-}" ]; then $sudo apt-get update -q >&2 || true; fi
    if ! apt_install "${need[@]}" "${peers[@]}"; then
        $sudo apt-get update -q >&2 || true
        # The harness's own needs must install; a peer that does not is left out of the report.
        [ ${#need[@]} -eq 0 ] || apt_install "${need[@]}"
        for package in "${peers[@]}"; do apt_install "$package" || echo "warning: could not install $package; it is left out" >&2; done
    fi
fi
available=()
command -v supervisord >/dev/null && available+=(supervisord)
command -v s6-svscan >/dev/null && available+=(s6)
command -v runsvdir >/dev/null && available+=(runit)
cc=$(command -v cc || command -v gcc || command -v clang)

# Built as `make install` builds them (release; lifecycled with the Swift runtime linked statically, lifectl as a
# static executable), into scratch paths of our own. Where lifectl does not link as a static executable, it is
# built like lifecycled and the report says so.
echo "building lifecycled (release, --static-swift-stdlib, $scratch)…" >&2
swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product lifecycled >&2
bin=$(swift build -c release --static-swift-stdlib --scratch-path "$scratch" --show-bin-path)
echo "building lifectl (release, -static-executable, $scratch-static-executable)…" >&2
lifectl_build="a static executable (\`-Xswiftc -static-executable\`, as \`make install\` builds it)"
if swift build -c release --scratch-path "$scratch-static-executable" --product lifectl -Xswiftc -static-executable >&2 2>"$tmp/static-exe.log"; then
    lifectl_dir=$(swift build -c release --scratch-path "$scratch-static-executable" -Xswiftc -static-executable --show-bin-path)
else
    echo "warning: lifectl does not build as a static executable here ($(tail -1 "$tmp/static-exe.log")); using --static-swift-stdlib" >&2
    swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product lifectl >&2
    lifectl_dir=$bin
    lifectl_build="\`--static-swift-stdlib\` (it did not link as a static executable here, unlike \`make install\`'s build)"
fi
mkdir -p "$tmp/tools"
for tool in sleeper client launchwait suspend_floor pingpong ctlbench ctlconn relay_floor repeat; do
    "$cc" -O2 -Wall -o "$tmp/tools/$tool" "bench/$tool.c"
done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

note="Temporary directories (runtime directories, scan directories, configuration) on $(stat -f -c %T "$tmp") ($base)."
args=(--bin "$bin" --lifectl-dir "$lifectl_dir" --lifectl-build "$lifectl_build" --tools "$tmp/tools" --tmp "$tmp"
      --reps "${REPS:-3}" --peers "$(IFS=,; echo "${available[*]}")" --runtime-note "$note"
      --load-before "$load_before" --started "$started")
posts=200000 apps=100 limit=600
case $mode in
    smoke) args+=(--smoke --out "$tmp/BENCHMARKS.md" --svg "$tmp/chart.svg" --raw-dir "$tmp/bench"); posts=20000 apps=20 limit=90 ;;  # docs/ untouched
    large) args+=(--large); posts=1000000 ;;
esac
notifications_failed=
if [ -z "${NO_NOTIFICATIONS:-}" ]; then
    echo "notifications benchmark ($posts posts to $apps apps)…" >&2
    status=0
    POSTS=$posts APPS=$apps LIFECYCLED_BIN_DIR="$bin" LIFECTL_BIN_DIR="$lifectl_dir" TMPDIR="$base" timeout "$limit" bash bench/notifications.sh \
        > "$tmp/notifications.txt" 2>&1 || status=$?
    if [ "$status" != 0 ]; then
        echo "(notifications.sh failed, status $status)" >> "$tmp/notifications.txt"
        notifications_failed=$status
        tail -5 "$tmp/notifications.txt" >&2
    fi
    args+=(--notifications "$tmp/notifications.txt")
fi
display_failed=
if [ -z "${NO_DISPLAY:-}" ]; then
    # Smoke: 5 rounds and 5 s per CPU phase instead of 30 and 30 s.
    if [ "$mode" = smoke ]; then rounds=5 duration=5; else rounds=30 duration=30; fi
    echo "display benchmarks (headless sway: $rounds focus rounds, $duration s per CPU phase)…" >&2
    status=0
    K=$rounds DURATION=$duration LIFECYCLED_BIN_DIR="$bin" LIFECTL_BIN_DIR="$lifectl_dir" TMPDIR="$base" \
        timeout $((2 * duration + 300)) bash bench/display.sh > "$tmp/display.txt" 2>&1 || status=$?
    if [ "$status" != 0 ]; then
        echo "(display.sh failed, status $status)" >> "$tmp/display.txt"
        display_failed=$status
        tail -5 "$tmp/display.txt" >&2
    fi
    args+=(--display "$tmp/display.txt" --display-duration "$duration")
fi
desktop_failed=
if [ -z "${NO_DESKTOP:-}" ]; then
    # Smoke: 5 s per phase instead of 30 s.
    if [ "$mode" = smoke ]; then duration=5; else duration=30; fi
    echo "desktop benchmark (ten adopted apps on a headless sway: $duration s per phase)…" >&2
    status=0
    DURATION=$duration LIFECYCLED_BIN_DIR="$bin" LIFECTL_BIN_DIR="$lifectl_dir" TMPDIR="$base" \
        timeout $((2 * duration + 300)) bash bench/desktop.sh > "$tmp/desktop.txt" 2>&1 || status=$?
    if [ "$status" != 0 ]; then
        echo "(desktop.sh failed, status $status)" >> "$tmp/desktop.txt"
        desktop_failed=$status
        tail -5 "$tmp/desktop.txt" >&2
    fi
    args+=(--desktop "$tmp/desktop.txt")
fi
desktop_peers_failed=
if [ -z "${NO_DESKTOP_PEERS:-}" ]; then
    # Smoke: N = 5, two rounds, lifecycled and the floors only (no xsuspender build). Otherwise 12 rounds per tool
    # and N in 2 repetitions: a median of fewer swings with the scheduler by more than the 3x a target allows.
    if [ "$mode" = smoke ]; then peers_args=(--smoke) limit=180 rounds=2 peers_reps=1; else peers_args=() limit=1800 rounds=12 peers_reps=2; fi
    echo "desktop peers benchmark (lifecycled, xsuspender and the floors on Xvfb with openbox and on sway${peers_args:+: smoke})…" >&2
    status=0
    K=$rounds REPS=$peers_reps DESKTOP_PEERS_JSON="$tmp/desktop-peers.json" \
    LIFECYCLED_BIN_DIR="$bin" LIFECTL_BIN_DIR="$lifectl_dir" TMPDIR="$base" timeout "$limit" bash bench/desktop-peers.sh "${peers_args[@]}" \
        > "$tmp/desktop-peers.txt" 2> "$tmp/desktop-peers.log" || status=$?
    if [ "$status" != 0 ]; then
        { echo "(desktop-peers.sh failed, status $status)"; tail -5 "$tmp/desktop-peers.log"; } >> "$tmp/desktop-peers.txt"
        desktop_peers_failed=$status
        tail -5 "$tmp/desktop-peers.log" >&2
    fi
    args+=(--desktop-peers "$tmp/desktop-peers.txt" --desktop-peers-json "$tmp/desktop-peers.json")
fi
dbus_failed=
if [ -z "${NO_DBUS:-}" ]; then
    # Smoke: 200 calls of each kind instead of 2,000.
    if [ "$mode" = smoke ]; then calls=200; else calls=2000; fi
    echo "D-Bus benchmark ($calls calls of each kind)…" >&2
    status=0
    LIFECYCLED="$bin/lifecycled" timeout 300 bash bench/dbus.sh "$calls" > "$tmp/dbus.txt" 2> "$tmp/dbus.log" || status=$?
    if [ "$status" != 0 ]; then
        { echo "(dbus.sh failed, status $status)"; tail -5 "$tmp/dbus.log"; } >> "$tmp/dbus.txt"
        dbus_failed=$status
        tail -5 "$tmp/dbus.log" >&2
    fi
    args+=(--dbus "$tmp/dbus.txt" --dbus-calls "$calls")
fi
memory_failed=
if [ -z "${NO_MEMORY:-}" ]; then
    # Smoke: 4 apps of 32 MiB instead of 20 of 100 MiB.
    if [ "$mode" = smoke ]; then memory_args=(--smoke) limit=180; else memory_args=() limit=900; fi
    echo "memory benchmark (reclaim of suspended apps on zram${memory_args:+: smoke})…" >&2
    status=0
    LIFECYCLED_BIN_DIR="$bin" LIFECTL_BIN_DIR="$lifectl_dir" TMPDIR="$base" timeout "$limit" bash bench/memory.sh "${memory_args[@]}" \
        > "$tmp/memory.txt" 2> "$tmp/memory.log" || status=$?
    if [ "$status" != 0 ]; then
        { echo "(memory.sh failed, status $status)"; tail -5 "$tmp/memory.log"; } >> "$tmp/memory.txt"
        memory_failed=$status
        tail -5 "$tmp/memory.log" >&2
    fi
    args+=(--memory "$tmp/memory.txt")
fi
if [ "$mode" = smoke ]; then
    timeout --signal=INT --kill-after=30 "${SMOKE_TIMEOUT:-240}" python3 bench/bench.py "${args[@]}" &
else
    python3 bench/bench.py "${args[@]}" &
fi
driver=$!
wait "$driver"
driver=
# The report again from the run's raw results must be the same report: every figure in it comes from them.
if [ "$mode" = smoke ]; then results=$tmp/bench/results.json report=$tmp/BENCHMARKS.md; else results=docs/bench/results.json report=docs/BENCHMARKS.md; fi
python3 bench/bench.py --from-json "$results" --out "$tmp/again.md" --raw-dir "$tmp/again" --svg "$tmp/again.svg" > /dev/null
if ! cmp -s "$report" "$tmp/again.md"; then
    echo "bench/run.sh: the report written again from $results differs from the run's" >&2
    diff "$report" "$tmp/again.md" | head -20 >&2
    exit 1
fi
if [ -n "$notifications_failed" ]; then
    echo "bench/run.sh: the notifications benchmark failed (status $notifications_failed)" >&2
    exit 1
fi
if [ -n "$display_failed" ]; then
    echo "bench/run.sh: the display benchmarks failed (status $display_failed)" >&2
    exit 1
fi
if [ -n "$desktop_failed" ]; then
    echo "bench/run.sh: the desktop benchmark failed (status $desktop_failed)" >&2
    exit 1
fi
if [ -n "$dbus_failed" ]; then
    echo "bench/run.sh: the D-Bus benchmark failed (status $dbus_failed)" >&2
    exit 1
fi
if [ -n "$memory_failed" ]; then
    echo "bench/run.sh: the memory benchmark failed (status $memory_failed)" >&2
    exit 1
fi
if [ -n "$desktop_peers_failed" ]; then
    echo "bench/run.sh: the desktop peers benchmark failed (status $desktop_peers_failed)" >&2
    exit 1
fi
