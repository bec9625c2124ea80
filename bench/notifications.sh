#!/usr/bin/env bash
# The coalescing benchmark: 1,000,000 posts of three `latest` types to 100 suspended apps.
# Prints posts per second, the daemon's peak resident memory before and after, and what each
# suspended app holds afterwards (3 entries each, whatever the number of posts), beside the floor:
# the same bytes through a pipe to a reader that only finds the line ends.
# Run: bash bench/notifications.sh   (POSTS=… and APPS=… to change the size; LIFECYCLED_BIN_DIR=… to skip the build,
#      which otherwise goes to BENCH_SCRATCH, default /var/tmp/lifecycled-bench-build, never to .build)
set -euo pipefail
cd "$(dirname "$0")/.."
POSTS=${POSTS:-1000000}
APPS=${APPS:-100}
out=$(mktemp -d "${TMPDIR:-/tmp}/lifecycled-bench.XXXXXX")
daemon=
trap '[ -n "$daemon" ] && kill $daemon 2>/dev/null; wait 2>/dev/null; rm -rf "$out"' EXIT

cc=$(command -v cc || command -v gcc || command -v clang)
"$cc" -O2 -o "$out/line_floor" bench/line_floor.c
if [ -n "${LIFECYCLED_BIN_DIR:-}" ]; then
    bin=$LIFECYCLED_BIN_DIR   # already built (bench/run.sh builds into its own scratch path)
else
    scratch=${BENCH_SCRATCH:-/var/tmp/lifecycled-bench-build}
    swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product lifecycled >/dev/null
    swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product lifectl >/dev/null
    bin=$(swift build -c release --static-swift-stdlib --scratch-path "$scratch" --show-bin-path)
fi
# LIFECTL_BIN_DIR: where lifectl is, when not beside lifecycled (bench/run.sh builds it as a static executable apart).
export PATH="${LIFECTL_BIN_DIR:-$bin}:$bin:$PWD/Examples/python:$PATH" LIFECYCLED_RUNTIME_DIR="$out/run"

mkdir -p "$out/config/apps"
# Apps may post only the types declared for them (the system types are the daemon's): three `latest` ones, and the
# poster's end marker.
printf '[NotificationTypes]\nlevelDidChange=latest\nstateDidChange=latest\nlocaleDidChange=latest\nbenchDone=none\n' > "$out/config/lifecycled.conf"
for i in $(seq "$APPS"); do
    printf '[App]\nExec=lifecycle_client.py --observe levelDidChange,stateDidChange,localeDidChange\nAutoLaunch=background\n[Lifecycle]\nBackgroundTimeSec=0\nLaunchTimeoutSec=300\n' \
        > "$out/config/apps/sub$i.conf"
done
printf '[App]\nExec=%s/bench/poster.py\nEnvironment=POSTS=%s BENCH_RESULT=%s/result.json\n[Lifecycle]\nBackgroundTimeSec=infinity\n' \
    "$PWD" "$POSTS" "$out" > "$out/config/apps/poster.conf"

lifecycled --config "$out/config" --log-level warning >"$out/daemon.log" 2>&1 &
daemon=$!
for _ in $(seq 200); do lifectl list >/dev/null 2>&1 && break; sleep 0.05; done
echo "waiting for $APPS subscribers to launch and be suspended…"
for _ in $(seq 1200); do
    [ "$(lifectl list --json | python3 -c "import json,sys; print(sum(a['state']=='suspended' for a in json.load(sys.stdin)))")" = "$APPS" ] && break
    sleep 0.1
done
lifectl launch poster >/dev/null
[ -n "${DEBUG_BENCH:-}" ] && lifectl list
hwm() { awk '/VmHWM/ {print $2}' "/proc/$daemon/status"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$daemon/status"; }
before_hwm=$(hwm); before_rss=$(rss)
lifectl post userDefaultsDidChange --app poster --data '{"go":true}' >/dev/null
for _ in $(seq 6000); do [ -s "$out/result.json" ] && break; sleep 0.1; done
after_hwm=$(hwm); after_rss=$(rss)
floor=$(LINE_FLOOR="$out/line_floor" python3 bench/poster.py --floor 2>/dev/null)

held=$(lifectl list >/dev/null; lifectl status --json | python3 -c "
import json,sys
apps=[a for a in json.load(sys.stdin)['apps'] if a['name'].startswith('sub')]
print(sorted({a['queuedNotifications'] for a in apps}), sorted({a['queuedPosts'] for a in apps}), sum(a['state']=='suspended' for a in apps))")
python3 - "$out/result.json" "$floor" "$before_hwm" "$after_hwm" "$before_rss" "$after_rss" "$held" "$APPS" <<'PY'
import json, sys
result = json.load(open(sys.argv[1])); floor = json.loads(sys.argv[2])
before_hwm, after_hwm, before_rss, after_rss = map(int, sys.argv[3:7])
rate, floor_rate = result["posts"] / result["seconds"], floor["posts"] / floor["seconds"]
print(f"{'':38} {'posts/s':>12} {'seconds':>9}")
print(f"{'lifecycled (to ' + sys.argv[8] + ' suspended apps)':38} {rate:12,.0f} {result['seconds']:9.2f}")
print(f"{'floor: pipe + line split (C)':38} {floor_rate:12,.0f} {floor['seconds']:9.2f}   ratio {floor_rate / rate:.1f}x")
print(f"daemon resident memory: {before_rss / 1024:.1f} MiB before, {after_rss / 1024:.1f} MiB after; peak {after_hwm / 1024:.1f} MiB (peak before the posts: {before_hwm / 1024:.1f} MiB)")
print(f"held per suspended app afterwards (entries, posts, suspended apps): {sys.argv[7]}")
PY
