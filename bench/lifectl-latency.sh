#!/usr/bin/env bash
# How fast does lifectl answer? Medians of 300 runs each, against the floor, in one run:
#   /bin/true                 process start-up alone (the floor of any command)
#   ctl_floor                 a C client: connect, one request, one reply (the floor of a status query)
#   lifectl --help            lifectl's own start-up, in three builds: the dynamic Swift runtime (`swift build`),
#                             --static-swift-stdlib, and a static executable (-Xswiftc -static-executable, what
#                             `make install` builds: no dynamic loader, no relocations to shared libraries)
#   lifectl status app1       a status query through each build
# Run: bash bench/lifectl-latency.sh   (release builds under BENCH_SCRATCH, default /var/tmp/lifecycled-bench-build,
#      and beside it -dynamic and -static-executable; never .build)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-300}
scratch=${BENCH_SCRATCH:-/var/tmp/lifecycled-bench-build}
out=$(mktemp -d "${TMPDIR:-/tmp}/lifecycled-bench.XXXXXX")
daemon=
trap '[ -z "$daemon" ] || kill $daemon 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$out"' EXIT

cc=$(command -v cc || command -v gcc || command -v clang)
"$cc" -O2 -o "$out/repeat" bench/repeat.c
"$cc" -O2 -o "$out/ctl_floor" bench/ctl_floor.c
swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product lifecycled >/dev/null
swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product lifectl >/dev/null
static=$(swift build -c release --static-swift-stdlib --scratch-path "$scratch" --show-bin-path)
swift build -c release --scratch-path "$scratch-dynamic" --product lifectl >/dev/null
dynamic=$(swift build -c release --scratch-path "$scratch-dynamic" --show-bin-path)
swift build -c release --scratch-path "$scratch-static-executable" --product lifectl -Xswiftc -static-executable >/dev/null 2>&1
executable=$(swift build -c release --scratch-path "$scratch-static-executable" -Xswiftc -static-executable --show-bin-path)

# A daemon with 10 apps that speak no protocol, so that status has something to say.
mkdir -p "$out/config/apps"
for i in $(seq 10); do printf '[App]\nExec=sleep 100000\nProtocol=none\nAutoLaunch=yes\n' > "$out/config/apps/app$i.conf"; done
export LIFECYCLED_RUNTIME_DIR="$out/run"
"$static/lifecycled" --config "$out/config" --log-level warning &
daemon=$!
for _ in $(seq 100); do "$static/lifectl" list >/dev/null 2>&1 && break; sleep 0.05; done

printf '%-40s %9s %9s %9s   (µs, %d runs, %s)\n' "command" "median" "min" "max" "$N" "$(nproc) cores, $(date -u +%F)"
"$out/repeat" "$N" "/bin/true (floor: start-up)" /bin/true
"$out/repeat" "$N" "ctl_floor (floor: query in C)" "$out/ctl_floor" "$LIFECYCLED_RUNTIME_DIR/control.sock"
"$out/repeat" "$N" "lifectl --help (dynamic)" "$dynamic/lifectl" --help
"$out/repeat" "$N" "lifectl --help (static stdlib)" "$static/lifectl" --help
"$out/repeat" "$N" "lifectl --help (static executable)" "$executable/lifectl" --help
"$out/repeat" "$N" "lifectl status app1 (dynamic)" "$dynamic/lifectl" status app1
"$out/repeat" "$N" "lifectl status app1 (static stdlib)" "$static/lifectl" status app1
"$out/repeat" "$N" "lifectl status app1 (static executable)" "$executable/lifectl" status app1
