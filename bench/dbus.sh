#!/bin/bash
# The D-Bus API against the control socket and the bus's own floor (docs/bench/dbus.md; bench/run.sh runs it with the release build): a
# private dbus-daemon, the debug or release lifecycled given as $LIFECYCLED (default: the debug build), two apps
# that speak no protocol (the switch is the daemon's own work), K calls of each kind (default 2000).
#   bash bench/dbus.sh [K]
set -euo pipefail
K=${1:-2000}
REPO=$(cd "$(dirname "$0")/.." && pwd)
LIFECYCLED=${LIFECYCLED:-$REPO/.build/debug/lifecycled}
WORK=$(mktemp -d /tmp/lifecycled-busbench.XXXXXX)
cleanup() {
    [ -n "${DAEMON:-}" ] && kill "$DAEMON" 2>/dev/null && wait "$DAEMON" 2>/dev/null || true
    [ -n "${BUS:-}" ] && kill "$BUS" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
cc -O2 -o "$WORK/busbench" "$REPO/bench/busbench.c" -lsystemd
cc -O2 -o "$WORK/ctlbench" "$REPO/bench/ctlbench.c"
mkdir -p "$WORK/config/apps" "$WORK/run"
cat > "$WORK/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>unix:path=$WORK/bus.sock</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*"/><allow receive_sender="*"/><allow own="*"/></policy></busconfig>
CONF
printf '[Sources]\nTimeChange=no\nLocaleChange=no\nBattery=no\nMemoryPressure=no\n' > "$WORK/config/lifecycled.conf"
for app in a b; do
    printf '[App]\nExec=sleep 100000\nProtocol=none\n[Lifecycle]\nBackgroundTimeSec=infinity\n' > "$WORK/config/apps/$app.conf"
done
dbus-daemon --config-file="$WORK/bus.conf" --nofork --print-address > "$WORK/address" & BUS=$!
for _ in $(seq 100); do [ -S "$WORK/bus.sock" ] && break; sleep 0.05; done
LIFECYCLED_RUNTIME_DIR="$WORK/run" LIFECYCLED_BUS_ADDRESS="unix:path=$WORK/bus.sock" \
    "$LIFECYCLED" --config "$WORK/config" --log-level warning > "$WORK/daemon.log" 2>&1 & DAEMON=$!
for _ in $(seq 200); do busctl --address="unix:path=$WORK/bus.sock" status org.lifecycled.Lifecycle1 >/dev/null 2>&1 && break; sleep 0.05; done
"$WORK/ctlbench" "$WORK/run/control.sock" 10 '{"verb":"focus","app":"a"}' '{"verb":"focus","app":"b"}' > /dev/null
echo "# what median_us min_us max_us errors"
"$WORK/busbench" "unix:path=$WORK/bus.sock" "$K" a b
echo "socket-focus $("$WORK/ctlbench" "$WORK/run/control.sock" $((K / 2)) '{"verb":"focus","app":"a"}' '{"verb":"focus","app":"b"}')"
echo "socket-status $("$WORK/ctlbench" "$WORK/run/control.sock" "$K" '{"verb":"status","app":"a"}')"
