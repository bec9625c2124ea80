#!/usr/bin/env bash
# How fast does lifectl answer? Medians of 300 runs each, against the floor, in one run:
#   /bin/true                 process start-up alone (the floor of any command)
#   ctl_floor                 a C client: connect, one request, one reply (the floor of a status query)
#   lifectl --help            lifectl's own start-up (dynamic Swift runtime)
#   lifectl list              a status query through lifectl (dynamic, then --static-swift-stdlib)
# Run: bash bench/lifectl-latency.sh   (builds release binaries under .build/)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-300}
out=$(mktemp -d /tmp/lifecycled-bench.XXXXXX)
trap 'kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true; rm -rf "$out"' EXIT

cc -O2 -o "$out/repeat" bench/repeat.c
cc -O2 -o "$out/ctl_floor" bench/ctl_floor.c
swift build -c release --product lifecycled >/dev/null
swift build -c release --product lifectl >/dev/null
dynamic=$(swift build -c release --show-bin-path)
swift build -c release --product lifectl --static-swift-stdlib --scratch-path .build/static >/dev/null
static=$(swift build -c release --static-swift-stdlib --scratch-path .build/static --show-bin-path)

# A daemon with 10 apps that speak no protocol, so that list has something to say.
mkdir -p "$out/config/apps"
for i in $(seq 10); do printf '[App]\nExec=sleep 100000\nProtocol=none\nAutoLaunch=yes\n' > "$out/config/apps/app$i.conf"; done
export LIFECYCLED_RUNTIME_DIR="$out/run"
"$dynamic/lifecycled" --config "$out/config" --log-level warning &
daemon=$!
for _ in $(seq 100); do "$dynamic/lifectl" list >/dev/null 2>&1 && break; sleep 0.05; done

printf '%-34s %9s %9s %9s   (µs, %d runs, %s)\n' "command" "median" "min" "max" "$N" "$(nproc) cores, $(date -u +%F)"
"$out/repeat" "$N" "/bin/true (floor: start-up)" /bin/true
"$out/repeat" "$N" "ctl_floor (floor: query in C)" "$out/ctl_floor" "$LIFECYCLED_RUNTIME_DIR/control.sock"
"$out/repeat" "$N" "lifectl --help (dynamic)" "$dynamic/lifectl" --help
"$out/repeat" "$N" "lifectl --help (static stdlib)" "$static/lifectl" --help
"$out/repeat" "$N" "lifectl list (dynamic)" "$dynamic/lifectl" list
"$out/repeat" "$N" "lifectl list (static stdlib)" "$static/lifectl" list
