#!/usr/bin/env bash
# Where lifecycled spends its time in two of the benchmarks (docs/BENCHMARKS.md):
# the launch of N plain apps, and suspend/resume of one app among N. perf record with call graphs on the
# daemon alone; prints the top of perf report for each. Needs perf (apt-get install linux-perf).
#   bash bench/profile.sh [N]      (default 1000; binaries from /var/tmp/lifecycled-bench-build, as run.sh builds)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000}
bin=$(swift build -c release --scratch-path "${BENCH_SCRATCH:-/var/tmp/lifecycled-bench-build}" --show-bin-path)
tmp=$(mktemp -d /tmp/lifecycled-profile.XXXXXX)
daemon=
cleanup() {
    if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true
        for _ in $(seq 300); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$daemon" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
for tool in sleeper ctlbench launchwait; do cc -O2 -o "$tmp/$tool" "bench/$tool.c"; done
mkdir -p "$tmp/config/apps"
printf '[Defaults]\nBackgroundTimeSec=infinity\n' > "$tmp/config/lifecycled.conf"
for i in $(seq "$N"); do printf '[App]\nExec=%s/sleeper\nProtocol=none\nAutoLaunch=yes\n' "$tmp" > "$tmp/config/apps/app$i.conf"; done
export LIFECYCLED_RUNTIME_DIR=$tmp/run
# Launch, recorded from the first instruction.
perf record -q -g -o "$tmp/launch.data" -- "$bin/lifecycled" --config "$tmp/config" --log-level warning >"$tmp/log" 2>&1 &
perf=$!
daemon=
for _ in $(seq 600); do
    [ -n "$daemon" ] || daemon=$(pgrep -P $perf | head -1 || true)
    if [ -n "$daemon" ]; then count=$(pgrep -c -P "$daemon" || true); [ "${count:-0}" -ge "$N" ] && break; fi
    sleep 0.1
done
sleep 1
# Suspend and resume of app1, recorded on the running daemon.
perf record -q -g -o "$tmp/suspend.data" -p "$daemon" -- sleep 4 &
rec=$!
sleep 0.3
"$tmp/ctlbench" "$tmp/run/control.sock" 100 '{"verb":"suspend","app":"app1"}' '{"verb":"resume","app":"app1"}'
wait $rec || true
kill "$daemon"; wait $perf 2>/dev/null || true; daemon=
echo "== launch of $N apps: lifecycled's own time (perf report, self time, top)"
perf report -q -i "$tmp/launch.data" --no-children --percent-limit 2 --stdio -g none 2>/dev/null | head -30
echo "-- with callees (lifecycled's own functions):"
perf report -q -i "$tmp/launch.data" --children --percent-limit 5 --stdio -g none 2>/dev/null | grep -E 'lifecycled +\[' | head -15
echo "== suspend/resume of one app among $N (median µs of one request, min, max, errors above)"
perf report -q -i "$tmp/suspend.data" --no-children --percent-limit 2 --stdio -g none 2>/dev/null | head -30
echo "-- with callees (lifecycled's own functions):"
perf report -q -i "$tmp/suspend.data" --children --percent-limit 5 --stdio -g none 2>/dev/null | grep -E 'lifecycled +\[' | head -15
