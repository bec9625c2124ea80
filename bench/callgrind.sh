#!/usr/bin/env bash
# Instructions per operation of the daemon, counted by callgrind (repeatable, unlike wall time on a shared
# machine): the daemon runs under `valgrind --tool=callgrind` with N apps (2 protocol clients + N-2 plain
# programs, as in bench.py's scaling part), and bench/ctlconn.c drives it over one open control connection:
#   switch   K app switches (focus app1 / focus app2 alternately: 4 callbacks and 4 acks each)
#   status   K `status app1` queries
#   suspend  K suspend/resume pairs of a plain app (until /proc shows T, and back)
#   list     2 `list` queries (every app)
#   launch   (first) everything from the daemon's start until every app runs, divided by N
# Each workload is a separate callgrind dump; the report gives instructions per operation and, with TOP=n,
# the n functions with the most inclusive instructions of each.
#   bash bench/callgrind.sh [BIN_DIR] [N...]       default: bench/run.sh's build, N = 10 and 1000
#   K=50 TOP=25 bash bench/callgrind.sh /var/tmp/lifecycled-bench-build/release 10 1000
# KEEP_CALLGRIND=1 keeps the callgrind files (callgrind_annotate, kcachegrind). Needs valgrind (apt-get install valgrind). valgrind 3.19 cannot read Swift 6's DWARF 5: the binary is
# copied without its debug sections (symbols stay, so functions are named). valgrind 3.19 does not know pidfd_open,
# so under it sd-event watches the children through SIGCHLD and a waitid() per child at each one: the suspend and
# resume counts (each brings a SIGCHLD) grow with N under callgrind alone, not in the daemon as it runs. The runtime directory is on
# tmpfs (/dev/shm), as /run is on a systemd machine.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-${BENCH_SCRATCH:-/var/tmp/lifecycled-bench-build}/release}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10 1000)
K=${K:-50}
export CTLCONN_TIMEOUT=${CTLCONN_TIMEOUT:-600}   # valgrind runs the daemon some 50 times slower
TOP=${TOP:-0}
command -v valgrind >/dev/null || { echo "callgrind.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
base=/dev/shm; [ -d "$base" ] && [ -w "$base" ] || base=/tmp
work=$(mktemp -d "$base/lifecycled-callgrind.XXXXXX")
daemon=
cleanup() {
    if [ -n "$daemon" ]; then
        kill "$daemon" 2>/dev/null || true
        for _ in $(seq 300); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$daemon" 2>/dev/null || true
    fi
    if [ -n "${KEEP_CALLGRIND:-}" ]; then echo "callgrind files kept in $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
for tool in sleeper client ctlconn; do cc -O2 -o "$work/$tool" "bench/$tool.c"; done
objcopy --strip-debug "$bin/lifecycled" "$work/lifecycled"
# lifectl: $LIFECTL, else beside lifecycled, else bench/run.sh's static-executable build.
lifectl=${LIFECTL:-$bin/lifectl}
[ -x "$lifectl" ] || lifectl=${BENCH_SCRATCH:-/var/tmp/lifecycled-bench-build}-static-executable/release/lifectl

instructions() { awk '/^summary:/ {print $2}' "$1"; }

for n in "${sizes[@]}"; do
    conf=$work/config-$n
    rm -rf "$conf"; mkdir -p "$conf/apps"
    printf '[Defaults]\nBackgroundTimeSec=infinity\nLaunchTimeoutSec=300\n' > "$conf/lifecycled.conf"
    for i in $(seq "$n"); do
        if [ "$i" -le 2 ]; then printf '[App]\nExec=%s/client\nAutoLaunch=yes\n' "$work" > "$conf/apps/app$i.conf"
        else printf '[App]\nExec=%s/sleeper\nProtocol=none\nAutoLaunch=yes\n' "$work" > "$conf/apps/app$i.conf"; fi
    done
    export LIFECYCLED_RUNTIME_DIR=$work/run-$n
    out=$work/cg-$n
    mkdir -p "$out"
    (cd "$out" && exec valgrind --tool=callgrind --compress-strings=no --compress-pos=no --callgrind-out-file="$out/callgrind.out" \
        "$work/lifecycled" --config "$conf" --log-level warning >"$out/log" 2>&1) &
    daemon=$!
    ready=
    for _ in $(seq 3000); do
        running=$(pgrep -c -f "^$work/sleeper" || true)
        if [ "${running:-0}" -ge $((n - 2)) ] && "$lifectl" status app1 --json 2>/dev/null | grep -q '"protocol":"lifecycle"' \
           && "$lifectl" status app2 --json 2>/dev/null | grep -q '"state":"inactive"'; then ready=1; break; fi
        sleep 0.2
    done
    [ -n "$ready" ] || { echo "callgrind.sh: the daemon did not start $n apps (log: $out/log)" >&2; tail -5 "$out/log" >&2; exit 1; }
    sock=$LIFECYCLED_RUNTIME_DIR/control.sock
    pid=$("$lifectl" status app3 --json | python3 -c "import json,sys; print(json.load(sys.stdin)['apps'][0]['pid'])")
    vg=$daemon   # valgrind runs the daemon in its own process (exec'd above)
    # Everything from the daemon's start until every app runs (config, the stray scan, N launches, their saves):
    # per app, the launch's own cost; the polling above asked a few status queries meanwhile.
    (cd "$out" && callgrind_control -d launch "$vg" >/dev/null 2>&1)
    "$work/ctlconn" "$sock" 2 '{"verb":"focus","app":"app1"}' '{"verb":"focus","app":"app2"}' >/dev/null   # warm up
    (cd "$out" && callgrind_control -z "$vg" >/dev/null 2>&1)
    "$work/ctlconn" "$sock" "$K" '{"verb":"focus","app":"app1"}' '{"verb":"focus","app":"app2"}' >/dev/null
    (cd "$out" && callgrind_control -d switch "$vg" >/dev/null 2>&1)
    "$work/ctlconn" "$sock" "$K" '{"verb":"status","app":"app1"}' >/dev/null
    (cd "$out" && callgrind_control -d status "$vg" >/dev/null 2>&1)
    "$work/ctlconn" "$sock" "$K" --suspend app3 "$pid" >/dev/null
    (cd "$out" && callgrind_control -d suspend "$vg" >/dev/null 2>&1)
    # A list of thousands of apps is one reply over 1 MiB; the daemon delivers it (Connection bounds only the
    # backlog left unread by earlier replies). Should the connection be dropped anyway, the list is not counted.
    "$work/ctlconn" "$sock" 2 '{"verb":"list"}' >/dev/null || echo "N=$n: list failed (the daemon dropped the connection)" >&2
    (cd "$out" && callgrind_control -d list "$vg" >/dev/null 2>&1)
    kill "$daemon"; wait "$daemon" 2>/dev/null || true; daemon=
    files=("$out"/callgrind.out.*)
    printf 'N=%-6s instructions per operation: launch (start until every app runs, per app) %s, switch %s, status %s, suspend+resume %s, list %s\n' "$n" \
        "$(( $(instructions "${files[0]}") / n ))" \
        "$(( $(instructions "${files[1]}") / (2 * K) ))" "$(( $(instructions "${files[2]}") / K ))" \
        "$(( $(instructions "${files[3]}") / K ))" "$(( $(instructions "${files[4]}") / 2 ))"
    if [ "$TOP" -gt 0 ]; then
        for f in "${files[@]:0:4}"; do
            echo "  -- $(awk '/^desc: Trigger:/ {print $4}' "$f"): top functions by inclusive instructions"
            callgrind_annotate --auto=no --inclusive=yes "$f" 2>/dev/null | sed -n '/file:function/,$p' | sed 1,2d \
                | grep -vE 'libc-start|below main|0x0000|sd_event|lifecycled_main|Daemon.run|closure #1 in EventLoop' \
                | head -"$TOP" | sed -E 's/\?\?\?://; s/ \[[^]]*\]$//' | swift demangle --simplified | cut -c1-160 | sed 's/^/    /' || true   # head closes the pipe early (pipefail)
        done
    fi
done
