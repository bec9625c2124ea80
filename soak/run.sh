#!/usr/bin/env bash
# The soak test (make soak, make soak-smoke): builds lifecycled and lifectl into their own scratch path, then runs
# soak/soak.py in a private temporary directory (configuration, LIFECYCLED_RUNTIME_DIR, log), and removes it at the
# end, also on failure or Ctrl-C. soak/README.md says what it does.
#
#   bash soak/run.sh            the full soak: 500 apps, 4 controllers, an 8-minute storm (about 10 min in all)
#   bash soak/run.sh --smoke    the CI version: 60 apps, 3 controllers, a 40-second storm (about 75 s)
#
# Environment: SOAK_SECONDS (length of the storm), SOAK_APPS, SOAK_WORKERS, SOAK_SEED, SOAK_LOG=FILE (keep the
# daemon's debug log), SOAK_SCRATCH (default /tmp/soak-build), SOAK_BIN=DIR (use these binaries, build nothing),
# SOAK_BUILD_CONFIG (debug, the default, or release).
set -euo pipefail
cd "$(dirname "$0")/.."

smoke=
for argument in "$@"; do
    case "$argument" in
        --smoke) smoke=1 ;;
        *) echo "usage: soak/run.sh [--smoke]" >&2; exit 2 ;;
    esac
done
if [ -n "$smoke" ]; then
    seconds=${SOAK_SECONDS:-40} apps=${SOAK_APPS:-60} workers=${SOAK_WORKERS:-3}
else
    seconds=${SOAK_SECONDS:-480} apps=${SOAK_APPS:-500} workers=${SOAK_WORKERS:-4}
fi

if [ "$(id -u)" != 0 ]; then
    echo "soak: needs root (cgroups, and the freezer apps)" >&2
    exit 2
fi

if [ -n "${SOAK_BIN:-}" ]; then
    bin=$SOAK_BIN
else
    swift=${SWIFT:-swift}
    scratch=${SOAK_SCRATCH:-/tmp/soak-build}
    config=${SOAK_BUILD_CONFIG:-debug}
    # Others may be editing the sources while this builds ("modified during the build"): try again.
    for attempt in 1 2 3; do
        if "$swift" build -c "$config" --scratch-path "$scratch" --product lifecycled >"$scratch.log" 2>&1 \
            && "$swift" build -c "$config" --scratch-path "$scratch" --product lifectl >>"$scratch.log" 2>&1; then
            break
        fi
        if [ "$attempt" = 3 ]; then
            tail -30 "$scratch.log" >&2
            echo "soak: the build failed (log: $scratch.log)" >&2
            exit 2
        fi
        echo "soak: the build failed (attempt $attempt), trying again" >&2
        sleep 5
    done
    bin=$("$swift" build -c "$config" --scratch-path "$scratch" --show-bin-path)
fi

tmp=$(mktemp -d /tmp/lifecycled-soak.XXXXXX)
cleanup() {
    # soak.py stops the daemon and every app itself; this is for a run that was killed before it could.
    python3 soak/soak.py --cleanup-only --tmp "$tmp" || true
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "soak: lifecycled from $bin ($(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo ', with uncommitted changes'))"
status=0
python3 soak/soak.py --bin "$bin" --tmp "$tmp" --seconds "$seconds" --apps "$apps" --workers "$workers" \
    ${SOAK_SEED:+--seed "$SOAK_SEED"} ${SOAK_LOG:+--keep-log "$SOAK_LOG"} || status=$?
exit "$status"
