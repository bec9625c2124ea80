#!/usr/bin/env bash
# The desktop benchmark: ten CPU-busy apps that lifecycled did not start and has no file for, adopted
# (`[Adopt] Windows=yes Scopes=yes`) on a headless sway run as an unprivileged user, one shown and nine hidden, for
# DURATION seconds: the CPU time of the nine hidden apps without lifecycled and with it once their grace time has
# passed, and the daemon's own CPU time and memory (peak and end RSS) meanwhile.
#
# The apps are made as a desktop makes them, each a foot window running a shell loop (at nice 10, a good
# neighbour on a shared machine):
#  - five in launcher scopes: `app-sway-org.example.BusyN-R.scope` under the session's app.slice, the unit a
#    launcher that follows systemd's desktop conventions (GNOME's, KDE's) makes; the process moves itself into
#    the scope, then drops to the user and execs the app, as `systemd-run --user --scope` does. No user manager
#    runs here (PID 1 is not systemd), so the script makes its cgroup shape, `…/user-UID.slice/user@UID.service/
#    app.slice`, under the cgroup2 hierarchy (`/sys/fs/cgroup/unified` on a hybrid host) and passes it as
#    `[Adopt] AppSlice=`; the cgroups, the freezer and the processes are real. The scope is the app, frozen through
#    its own cgroup.freeze;
#  - five plain windows, started by sway's own `exec` (as a key binding or a launcher menu does), in no unit: the
#    app is the window's process and its descendants, stopped by signals.
# Every app has a window, each on a workspace of its own, and workspace 1 (the first plain window) is shown: what
# is hidden is what sway reports (`[Display] Source=sway`), as on a real desktop, rather than a mark set by hand.
# The "without" phase is the floor: the same apps with nothing managing them. No peer runs: xsuspender,
# sway-freezer and chillscope are not packaged in Debian.
#
# Prints the figures as text (bench/run.sh puts them into docs/bench/ and its summary into docs/BENCHMARKS.md). Installs sway and foot through apt
# when missing. DURATION (default 60) seconds per phase; GRACE (default 1) is `[Adopt] BackgroundTimeSec=`.
# Run: bash bench/desktop.sh   (LIFECYCLED_BIN_DIR=… to skip the build, as bench/display.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-60}
GRACE=${GRACE:-1}
out=$(mktemp -d "${TMPDIR:-/tmp}/lifecycled-desktop.XXXXXX")
chmod 755 "$out"
pids=()
windows=()   # the plain windows' processes (sway's children, not ours)
scopes=()    # the scopes' cgroup directories
mount=
base=
# Every process of the apps, the scopes thawed and removed, sway and the daemon stopped, also on failure.
cleanup() {
    set +e
    for pid in "${pids[@]}"; do [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = lifecycled ] && kill "$pid" 2>/dev/null; done
    for scope in "${scopes[@]}"; do
        echo 0 > "$scope/cgroup.freeze" 2>/dev/null
        for pid in $(cat "$scope/cgroup.procs" 2>/dev/null); do kill -CONT "$pid"; kill -KILL "$pid"; done 2>/dev/null
    done
    for pid in $(tree_pids "${windows[@]}"); do kill -CONT "$pid"; kill -KILL "$pid"; done 2>/dev/null
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
    if [ -n "$base" ]; then
        for _ in $(seq 100); do
            find "$mount/$base" -depth -type d -exec rmdir {} + 2>/dev/null
            [ -d "$mount/$base" ] || break
            sleep 0.05
        done
    fi
    rm -rf "$out"
}
trap cleanup EXIT
# A timeout's or an interrupt's signal ends the script through its exit, so that the cleanup runs.
trap 'exit 130' INT TERM

source bench/lib/sway.sh
# The pids $@ and all their descendants.
tree_pids() {
    [ $# -gt 0 ] || return 0
    python3 - "$@" <<'PY'
import os, sys
parent = {}
for entry in os.listdir("/proc"):
    if entry.isdigit():
        try: parent[entry] = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1]
        except OSError: pass
ours, grew = set(sys.argv[1:]), True
while grew:
    grew = False
    for pid, ppid in parent.items():
        if pid not in ours and ppid in ours: ours.add(pid); grew = True
print(" ".join(sorted(ours & parent.keys())))
PY
}

bench_setup
bench_binaries
sway_start

# The session's cgroups, as a user manager lays them out.
for candidate in /sys/fs/cgroup/unified /sys/fs/cgroup; do
    [ -e "$candidate/cgroup.controllers" ] && { mount=$candidate; break; }
done
[ -n "$mount" ] || { echo "desktop.sh: no cgroup2 hierarchy is mounted (launcher scopes need one)" >&2; exit 1; }
base=lifecycled-bench-desktop-$$.slice
session=$base/user-$bench_uid.slice/user@$bench_uid.service
slice=$session/app.slice
mkdir -p "$mount/$slice" "$mount/$session/session.slice"

printf '#!/bin/sh\nexec nice -n 10 sh -c "while :; do :; done"\n' > "$out/busy.sh"
chmod 755 "$out/busy.sh"
for i in $(seq 5); do
    scope=$mount/$slice/app-sway-org.example.Busy$i-$((RANDOM + 1000)).scope
    mkdir "$scope"
    scopes+=("$scope")
    sh -c 'cd / && echo $$ > "$1/cgroup.procs" && shift && exec "$@"' launcher "$scope" \
        setpriv --reuid="$bench_uid" --regid="$bench_gid" --init-groups env -i PATH=/usr/bin:/bin HOME="$xdg" \
        XDG_RUNTIME_DIR="$xdg" WAYLAND_DISPLAY="$wayland_display" foot --app-id "org.example.Busy$i" "$out/busy.sh" \
        >/dev/null 2>&1 &
    pids+=($!)
    read -r con _ < <(sway_view "org.example.Busy$i")
    swaymsg "[con_id=$con] move container to workspace $((i + 5))" >/dev/null
    swaymsg "exec foot --app-id org.example.Window$i $out/busy.sh" >/dev/null
    read -r con pid < <(sway_view "org.example.Window$i")
    windows+=("$pid")
    [ "$i" = 1 ] || swaymsg "[con_id=$con] move container to workspace $i" >/dev/null
done
swaymsg workspace 1 >/dev/null
for scope in "${scopes[@]}"; do
    [ -n "$(cat "$scope/cgroup.procs")" ] || { echo "desktop.sh: $scope holds no process" >&2; exit 1; }
done

# CPU seconds of the hidden apps in scopes, of the hidden plain windows, of the shown one and of the daemon (when
# it runs), then the clock, from one reading.
daemon=
cpu() { tree_cpu --clock $(cat "${scopes[@]/%//cgroup.procs}") -- "${windows[@]:1}" -- "${windows[0]}" -- $daemon; }
# Whether every process of the ten apps runs (none stopped, no scope frozen): the rail after the daemon's stop.
none_stopped() {
    grep -q 'frozen 1' "${scopes[@]/%//cgroup.events}" && return 1
    for pid in $(tree_pids $(cat "${scopes[@]/%//cgroup.procs}") "${windows[@]}"); do
        [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = T ] && return 1
    done
    return 0
}
hidden="org.example.Busy1 org.example.Busy2 org.example.Busy3 org.example.Busy4 org.example.Busy5 org.example.Window2 org.example.Window3 org.example.Window4 org.example.Window5"
# The states of the ten apps: "hidden-states shown-state adopted-count".
states() {
    lifectl list --json | python3 -c "
import json, sys
apps = {a['name']: a for a in json.load(sys.stdin) if a.get('adopted')}
hidden = '$hidden'.split()
print(','.join(sorted({apps[n]['state'] if n in apps else 'not-adopted' for n in hidden})),
      apps['org.example.Window1']['state'] if 'org.example.Window1' in apps else 'not-adopted', len(apps))"
}

# --- without lifecycled: nothing manages them -------------------------------------------------------------------
sleep 3
read -r s0 w0 v0 _ t0 < <(cpu)
sleep "$DURATION"
read -r s1 w1 v1 _ t1 < <(cpu)

# --- with lifecycled adopting them ------------------------------------------------------------------------------
mkdir -p "$out/config"
printf '[Display]\nSource=sway\nSwaySocket=%s\n\n[Adopt]\nWindows=yes\nScopes=yes\nUser=%s\nAppSlice=%s\nBackgroundTimeSec=%s\n' \
    "$sock" "$bench_user" "$slice" "$GRACE" > "$out/config/lifecycled.conf"
started=$(date +%s.%N)
lifecycled_start
daemon=${pids[-1]}
settled= hs=none ss=none count=0
for _ in $(seq 600); do
    read -r hs ss count < <(states) || true
    if [ "$hs" = suspended ] && [ "$count" = 10 ]; then settled=$(python3 -c "import time; print(f'{time.time() - $started:.1f}')"); break; fi
    sleep 0.05
done
[ -n "$settled" ] || echo "desktop.sh: the hidden apps were not all suspended within 30 s (states: $hs; adopted: $count); measuring anyway" >&2
# The daemon's run time in nanoseconds and the times it was put on a CPU, summed over its threads (schedstat): an
# idle daemon's CPU time over a phase is below the clock tick that /proc/PID/stat counts in.
daemon_ns() { cat "/proc/$daemon"/task/*/schedstat | awk '{ns += $1; runs += $3} END {print ns, runs}'; }
read -r s2 w2 v2 d2 t2 < <(cpu)
read -r n2 r2 < <(daemon_ns)
sleep "$DURATION"
read -r s3 w3 v3 d3 t3 < <(cpu)
read -r n3 r3 < <(daemon_ns)
read -r hs ss count < <(states) || true
memory=$(awk '/^VmHWM:|^VmRSS:/ {printf "%s ", $2}' "/proc/$daemon/status")
lifecycled_stop
released=no
for _ in $(seq 100); do none_stopped && { released=yes; break; }; sleep 0.05; done

python3 - "$GRACE" "$(nproc)" "$s0" "$w0" "$v0" "$t0" "$s1" "$w1" "$v1" "$t1" "$s2" "$w2" "$v2" "$d2" "$t2" \
    "$s3" "$w3" "$v3" "$d3" "$t3" "$n2" "$n3" "$r2" "$r3" "$hs" "$ss" "$count" "${settled:-none}" "$released" $memory <<'PY'
import sys
a = sys.argv[1:]
grace, cpus = a[0], a[1]
s0, w0, v0, t0, s1, w1, v1, t1, s2, w2, v2, d2, t2, s3, w3, v3, d3, t3 = map(float, a[2:20])
n2, n3, r2, r3 = map(int, a[20:24])
hidden_states, shown_state, adopted, settled, released = a[24:29]
hwm, rss = (int(x) / 1024 for x in a[29:31])
without = (s1 - s0, w1 - w0, v1 - v0)
with_ = (s3 - s2, w3 - w2, v3 - v2)
saved = 100 * (1 - (with_[0] + with_[1]) / (without[0] + without[1])) if without[0] + without[1] > 0 else 0
daemon, duration = (n3 - n2) / 1e6, t3 - t2
print(f"Ten adopted CPU-busy apps on a headless sway (`[Adopt] Windows=yes Scopes=yes`, `[Display] Source=sway`), "
      f"each a foot window running a shell loop at nice 10: five in launcher scopes (frozen through their cgroup.freeze), "
      f"five plain windows (stopped by signals); one shown (a plain window), nine hidden (each on a workspace of its own); "
      f"{t1 - t0:.1f} s and {t3 - t2:.1f} s measured (without, with) on {cpus} CPUs; grace time `[Adopt] BackgroundTimeSec={grace}`, "
      + (f"every hidden app suspended {settled} s after the daemon started, the measurement after that."
         if settled != "none" else "not every hidden app was suspended within 30 s of the daemon's start."))
print()
print("| | the nine hidden apps, CPU seconds | the five in scopes | the four plain windows | the shown app | states: hidden, shown |")
print("| --- | ---: | ---: | ---: | ---: | --- |")
print(f"| without lifecycled (nothing manages them) | {without[0] + without[1]:.2f} | {without[0]:.2f} | {without[1]:.2f} | {without[2]:.2f} | — |")
print(f"| with lifecycled, after the grace time | {with_[0] + with_[1]:.2f} | {with_[0]:.2f} | {with_[1]:.2f} | {with_[2]:.2f} | "
      f"{hidden_states}, {shown_state} ({adopted} adopted) |")
print()
print(f"lifecycled itself over those {duration:.1f} s: {daemon:.2f} ms of CPU time ({100 * daemon / 1000 / duration:.4f}% of one CPU), "
      f"woken {r3 - r2} time{'' if r3 - r2 == 1 else 's'}; "
      f"since its start (the adoption included): {d3:.2f} CPU seconds; memory: peak RSS {hwm:.1f} MiB, "
      f"RSS at the end {rss:.1f} MiB.")
print()
print(f"After the daemon's stop (SIGTERM): {'every process of the ten runs, no scope frozen' if released == 'yes' else 'some process was left stopped or a scope frozen'}.")
print()
print(f"Saved: {saved:.1f}% of the hidden apps' CPU time after the grace time; target at least 95%: {'met' if saved >= 95 else 'missed'}.")
PY
