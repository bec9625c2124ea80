#!/usr/bin/env bash
# lifecycled beside xsuspender and beside the floor, on the same desktop, in interleaved rounds, at N = 5, 20 and
# 100 windows:
#  - X11: one Xvfb with openbox; N xterms run as an unprivileged user, as a desktop starts them, each running a
#    CPU-busy program (bench/busy.c); the first shown, the others minimized. The programs run under SCHED_IDLE
#    (`chrt --idle`), the kindest to the machine's other users, and each puts its autogroup (a terminal's shell
#    is a session of its own) at nice 19, without which SCHED_IDLE yields only inside that group; a process's
#    state in /proc, which the figures read, does not depend on either. They are busy while a gate file exists,
#    and the gate is closed while a supervisor starts and stops the hidden ones: on two CPUs a hundred runnable
#    processes of any class delay each wake-up of a supervisor so much that it does not get to stop them.
#    lifecycled adopts them (`[Display] Source=x11`, `[Adopt] Windows=yes`, `BackgroundTimeSec=GRACE`, `Reclaim=no`,
#    since no peer pages memory out and bench/memory.sh measures that); xsuspender
#    suspends the windows that lose the focus (`suspend_delay = GRACE`, a section per WM class); the floor is
#    bench/x11_floor.c, which only sends SIGCONT when _NET_ACTIVE_WINDOW changes.
#  - sway: the same with a headless sway and foot windows, the hidden ones each on a workspace of its own:
#    lifecycled (`Source=sway`) against bench/sway_floor.c (SIGCONT on sway's focus event). xsuspender is X11 only.
# Each round (bench/desktop_switch.c) asks the display server to focus a suspended window, as `xdotool
# windowactivate` (or `swaymsg [con_id=N] focus`) does, polls /proc every 50 µs until its processes run (a driver
# spinning on a CPU would delay the display server's wake-up to the next tick), shows it a while,
# hides it (minimized, or workspace 1 shown again) and times until its processes are stopped again. Figures per N
# and tool: focus to running (median, p90), the supervisor's CPU time per switch and while idle, the /proc files it
# opens per switch (openat and open of paths under /proc, counted by strace in rounds of their own, children
# included), the grace (from the hide until the processes show T, against GRACE), and the hidden apps' CPU time
# over an idle phase with and without a supervisor.
#
# Prints text tables and a verdict line per target (bench/run.sh puts them into docs/bench/ and its summary into docs/BENCHMARKS.md); a missed
# target is a finding, not a failure. Installs Xvfb, openbox, xterm, xdotool, strace, libxcb, sway and foot through
# apt when missing.
#   bash bench/desktop-peers.sh            N = 5, 20 and 100; K rounds per tool and N in REPS interleaved repetitions
#   bash bench/desktop-peers.sh --smoke    N = 5, two rounds, lifecycled and the floors only, no xsuspender build
# Environment: LIFECYCLED_BIN_DIR (else a release build into BENCH_SCRATCH, as bench/display.sh), XSUSPENDER (a
# built xsuspender; else built from XSUSPENDER_ARCHIVE, default /work/shared/peers/xsuspender-8c7d466.tar.gz, in
# XSUSPENDER_BUILD, default /var/tmp/xsuspender-build, kept as a cache), SIZES, K (rounds per tool and N, default
# 6, split over the repetitions), REPS (default 2), GRACE (seconds, default 2), IDLE (seconds of the idle phase,
# default 3), NO_SWAY=1, NO_X11=1 (the sway part alone), DESKTOP_PEERS_JSON (a file to write the figures and
# verdicts to, for bench/bench.py).
set -euo pipefail
cd "$(dirname "$0")/.."
smoke=
[ "${1:-}" = --smoke ] && smoke=1
if [ -n "$smoke" ]; then
    SIZES=${SIZES:-5} K=${K:-2} REPS=${REPS:-1} IDLE=${IDLE:-2}
else
    SIZES=${SIZES:-5 20 100} K=${K:-6} REPS=${REPS:-2} IDLE=${IDLE:-3}
fi
GRACE=${GRACE:-2}
out=$(mktemp -d "${TMPDIR:-/tmp}/lifecycled-desktop-peers.XXXXXX")
chmod 755 "$out"
pids=()       # every process started here: tools, the floors, the servers
apps=()       # the apps' first processes (xterm, foot): continued and killed with their descendants at the end
display=
# Every app continued and killed, every tool, server and the X display's files gone, also on failure or Ctrl-C.
cleanup() {
    set +e
    for pid in "${pids[@]}"; do [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = lifecycled ] && kill "$pid" 2>/dev/null; done
    for pid in $(tree_pids "${apps[@]}"); do kill -CONT "$pid"; kill -KILL "$pid"; done 2>/dev/null
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null; done
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && { sleep 0.5; kill -KILL "$pid" 2>/dev/null; }; done
    wait 2>/dev/null
    if [ -n "$display" ]; then rm -f "/tmp/.X11-unix/X$display" "/tmp/.X$display-lock"; fi
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

# --- tools -------------------------------------------------------------------------------------------------------
bench_setup
build-aux/apt-need --no-recommends "the desktop peers benchmark" Xvfb=xvfb openbox=openbox xterm=xterm xdotool=xdotool \
    xprop=x11-utils strace=strace pc:xcb=libxcb1-dev
cc=$(command -v cc || command -v gcc || command -v clang)
"$cc" -O2 -Wall -o "$out/desktop_switch" bench/desktop_switch.c -lxcb
"$cc" -O2 -Wall -o "$out/x11_floor" bench/x11_floor.c -lxcb
"$cc" -O2 -Wall -o "$out/sway_floor" bench/sway_floor.c
"$cc" -O2 -Wall -o "$out/busy" bench/busy.c
gate=$out/busy.gate
touch "$gate"
switch=$out/desktop_switch
bench_binaries

# xsuspender: XSUSPENDER's, else built from the archive in a scratch folder of its own, kept for the next run.
xsuspender=
xsuspender_from=
if [ -n "$smoke" ]; then
    xsuspender_from="not run (smoke)"
elif [ -n "${XSUSPENDER:-}" ]; then
    xsuspender=$XSUSPENDER xsuspender_from="XSUSPENDER=$XSUSPENDER"
else
    archive=${XSUSPENDER_ARCHIVE:-/work/shared/peers/xsuspender-8c7d466.tar.gz}
    build=${XSUSPENDER_BUILD:-/var/tmp/xsuspender-build}
    if [ -x "$build/build/src/xsuspender" ] && [ "$(cat "$build/archive" 2>/dev/null)" = "$(sha256sum < "$archive" 2>/dev/null)" ]; then
        xsuspender=$build/build/src/xsuspender xsuspender_from="built from $(basename "$archive") in $build (cached)"
    elif [ -f "$archive" ]; then
        echo "desktop-peers.sh: building xsuspender from $archive in $build…" >&2
        if { pkg-config --exists libwnck-3.0 2>/dev/null && command -v cmake >/dev/null \
                || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                    cmake pkg-config libglib2.0-dev libwnck-3-dev libx11-dev >/dev/null; } \
            && rm -rf "$build" && mkdir -p "$build" && tar -xzf "$archive" -C "$build" \
            && cmake -S "$build/xsuspender" -B "$build/build" -DCMAKE_BUILD_TYPE=Release >"$build/cmake.log" 2>&1 \
            && cmake --build "$build/build" >>"$build/cmake.log" 2>&1; then
            sha256sum < "$archive" > "$build/archive"
            xsuspender=$build/build/src/xsuspender xsuspender_from="built from $(basename "$archive") in $build"
        else
            xsuspender_from="skipped: the build from $archive failed (see $build/cmake.log)"
        fi
    else
        xsuspender_from="skipped: no XSUSPENDER and no archive at $archive"
    fi
fi
if [ -n "$xsuspender" ] && ! command -v pgrep >/dev/null; then
    xsuspender= xsuspender_from="skipped: no pgrep (procps), which xsuspender runs"
fi
echo "desktop-peers.sh: xsuspender: $xsuspender_from" >&2

results=$out/results   # "DISPLAY N TOOL what figures…" lines, read by the report at the end
: > "$results"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
# Both supervisors read /proc for every process on the machine (lifecycled to find a window's tree, xsuspender's
# pgrep): their cost follows this count, which other users of the machine change.
processes=$(ls /proc | grep -c '^[0-9]')
started=$(date +%s)

# As the user, in a clean environment: what a session's launcher gives an app. Only run in the background (`&`):
# the exec replaces that subshell, so that `$!` is the program's pid.
as_user() { cd / && exec setpriv --reuid="$bench_uid" --regid="$bench_gid" --init-groups env -i PATH=/usr/bin:/bin HOME=/ "$@"; }

# The windows file of desktop_switch from "WINDOW PID" lines on stdin, in that order: each window with its process
# and that process's descendants, once the process has one (the shell loop it runs).
windows_file() {
    python3 -c '
import os, sys, time
def children(pid):
    try: found = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError: return []
    return found + [c for f in found for c in children(f)]
deadline = time.time() + 30
for line in sys.stdin:
    window, pid = line.split()[:2]
    while not children(pid) and time.time() < deadline: time.sleep(0.02)
    print(window, pid, *children(pid))'
}

# Runs TOOL's rounds on WINDOWS (display $1, N $2, tool $3, rep $4, windows file $5, supervisor pid $6), with the
# idle phase and the strace rounds in the first repetition.
measure() {
    local where=$1 n=$2 tool=$3 rep=$4 windows=$5 supervisor=$6 mode=supervised line settled
    local target=x11
    [ "$tool" = floor ] && mode=floor
    [ "$where" = sway ] && target=sway:$sock
    if [ "$mode" = supervised ]; then
        # xsuspender suspends the windows that lose the focus, and those it finds unfocused once it decides it is
        # on battery (about 10 s after its start where /sys/class/power_supply is empty): the hidden windows of a
        # fresh start are stopped then.
        settled=$("$switch" settle 40 "$windows") || { touch "$gate"; echo "desktop-peers.sh: $tool did not suspend the hidden windows at N=$n ($where)" >&2; return 1; }
        echo "$where $n $tool settled $settled" >> "$results"
    fi
    touch "$gate"
    # Called in a condition, this function runs without errexit: each step says itself when it failed.
    "$switch" rounds "$target" "$(( (K + REPS - 1) / REPS ))" "$windows" "$supervisor" "$mode" > "$out/rounds" \
        || { echo "desktop-peers.sh: the rounds of $tool at N=$n ($where) failed" >&2; return 1; }
    while read -r line; do echo "$where $n $tool $line" >> "$results"; done < "$out/rounds"
    if [ "$rep" = 1 ] && [ "$mode" = supervised ]; then
        line=$("$switch" idle "$IDLE" "$windows" "$supervisor") || return 1
        echo "$where $n $tool $line $IDLE" >> "$results"
        # The /proc files the supervisor (every thread, and children: xsuspender's pgrep) opens over two switches,
        # traced in rounds of their own: strace slows what it traces.
        local switches=2
        [ -n "$smoke" ] && switches=1
        strace -f -qq -e trace=openat,open -o "$out/strace" -p "$supervisor" 2>/dev/null &
        local tracer=$!
        pids+=("$tracer")
        sleep 0.5
        "$switch" rounds "$target" "$switches" "$windows" 0 supervised > /dev/null || { kill "$tracer"; return 1; }
        kill -INT "$tracer"; wait "$tracer" 2>/dev/null || true; unset 'pids[-1]'
        echo "$where $n $tool opens $(grep -c '"/proc/' "$out/strace" || true) $switches" >> "$results"
    fi
}

# A follower that did not do its part (no suspension, no continuation) is a finding, not the harness's failure: it is
# recorded for the report, with the end of lifecycled's log, and the run goes on.
failed() {
    echo "$1 $2 $3 failed" >> "$results"
    if [ "$3" = lifecycled ]; then echo "desktop-peers.sh: the end of lifecycled's log:" >&2; tail -5 "$out/daemon.log" >&2; fi
}

# Stops the last process of `pids` (a follower): SIGTERM, and SIGKILL after 10 s. xsuspender continues each window
# it stopped on SIGTERM, running pgrep for each, which takes minutes on a busy machine; the apps are continued after
# this anyway.
stop_last() {
    local pid=${pids[-1]}
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    unset 'pids[-1]'
}

# Continues every process of the apps (after a tool's stop: a killed xsuspender leaves its windows stopped).
continue_apps() { for pid in $(awk '{ for (i = 2; i <= NF; i++) print $i }' "$1"); do kill -CONT "$pid" 2>/dev/null || true; done; }

# lifecycled adopting the windows of display $1 (x11 or sway) with the grace time; its pid is the last of `pids`.
lifecycled_adopting() {
    mkdir -p "$out/config"
    if [ "$1" = x11 ]; then
        printf '[Display]\nSource=x11\nX11Display=:%s\n\n' "$display"
    else
        printf '[Display]\nSource=sway\nSwaySocket=%s\n\n' "$sock"
    fi > "$out/config/lifecycled.conf"
    # Reclaim=no: neither xsuspender nor the floors page out memory, and the figures compare following the display;
    # what reclaim costs is bench/memory.sh's to measure.
    printf '[Adopt]\nWindows=yes\nUser=%s\nBackgroundTimeSec=%s\nReclaim=no\n' "$bench_user" "$GRACE" >> "$out/config/lifecycled.conf"
    lifecycled_start
}

# --- X11: Xvfb, openbox, N xterms ---------------------------------------------------------------------------------
Xvfb -displayfd 1 -screen 0 1280x1024x24 -nolisten tcp > "$out/x.display" 2> "$out/xvfb.log" &
pids+=($!)
for _ in $(seq 200); do [ -s "$out/x.display" ] && break; sleep 0.05; done
display=$(cat "$out/x.display")
[ -n "$display" ] || { echo "desktop-peers.sh: Xvfb did not start" >&2; cat "$out/xvfb.log" >&2; exit 1; }
export DISPLAY=:$display
# One desktop; a window that appears takes the focus.
cat > "$out/openbox.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<openbox_config xmlns="http://openbox.org/3.4/rc">
  <focus><focusNew>yes</focusNew><followMouse>no</followMouse></focus>
  <desktops><number>1</number><firstdesk>1</firstdesk></desktops>
</openbox_config>
XML
openbox --config-file "$out/openbox.xml" >"$out/openbox.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do xprop -root _NET_SUPPORTING_WM_CHECK 2>/dev/null | grep -q 'window id' && break; sleep 0.05; done

# xsuspender's configuration: the grace time, signals to the window's process and every descendant, no periodic
# wake-up (lifecycled's default), on AC or on battery alike, a section per WM class.
xsuspender_config() {
    mkdir -p "$out/xsuspender"
    {
        printf '[Default]\nsuspend_delay = %s\nresume_every = 0\nresume_for = 1\nsend_signals = true\n' "$GRACE"
        printf 'only_on_battery = false\nauto_suspend_on_battery = true\ndownclock_on_battery = 0\nsuspend_subtree_pattern = .\n\n'
        for i in $(seq "$1"); do printf '[Busy%03d]\nmatch_wm_class_group_contains = Busy%03d\n\n' "$i" "$i"; done
    } > "$out/xsuspender/xsuspender.conf"
}

tools=(lifecycled)
[ -n "$xsuspender" ] && tools+=(xsuspender)
tools+=(floor)
for n in $([ -z "${NO_X11:-}" ] && echo "$SIZES"); do
    echo "desktop-peers.sh: X11, N=$n…" >&2
    first=${#apps[@]}
    for i in $(seq "$n"); do
        name=$(printf Busy%03d "$i")
        as_user DISPLAY="$DISPLAY" xterm -class "$name" -T "$name" -e chrt --idle 0 "$out/busy" "$gate" >/dev/null 2>&1 &
        apps+=($!)
    done
    for _ in $(seq 600); do [ "$("$switch" list | grep -c ' Busy')" -ge "$n" ] && break; sleep 0.05; done
    "$switch" list | awk '$3 ~ /^Busy/ {print $3, $1, $2}' | sort | cut -d' ' -f2- | windows_file > "$out/windows"
    [ "$(wc -l < "$out/windows")" = "$n" ] || { echo "desktop-peers.sh: $n xterms did not all show" >&2; exit 1; }
    tail -n +2 "$out/windows" | while read -r window _; do xdotool windowminimize "$window"; done
    xdotool windowactivate --sync "$(head -1 "$out/windows" | cut -d' ' -f1)" 2>/dev/null || true
    sleep 1
    echo "x11 $n none $("$switch" idle "$IDLE" "$out/windows" 0) $IDLE" >> "$results"
    xsuspender_config "$n"
    for rep in $(seq "$REPS"); do
        # The order rotates between repetitions.
        for t in $(seq 0 $((${#tools[@]} - 1))); do
            tool=${tools[$(( (t + rep - 1) % ${#tools[@]} ))]}
            rm -f "$gate"
            case $tool in
                lifecycled) lifecycled_adopting x11 ;;
                xsuspender)
                    as_user DISPLAY="$DISPLAY" XDG_CONFIG_HOME="$out/xsuspender" "$xsuspender" >"$out/xsuspender.log" 2>&1 &
                    pids+=($!) ;;
                floor)
                    "$out/x11_floor" > "$out/floor.out" &
                    pids+=($!)
                    for _ in $(seq 100); do grep -q ready "$out/floor.out" && break; sleep 0.05; done ;;
            esac
            measure x11 "$n" "$tool" "$rep" "$out/windows" "${pids[-1]}" || failed x11 "$n" "$tool"
            stop_last
            sleep 0.3
            continue_apps "$out/windows"
            "$switch" reset x11 "$out/windows"
        done
    done
    for pid in $(tree_pids "${apps[@]:$first}"); do kill -CONT "$pid"; kill -KILL "$pid"; done 2>/dev/null || true
    for pid in "${apps[@]:$first}"; do wait "$pid" 2>/dev/null || true; done
    apps=("${apps[@]:0:$first}")
done

# --- sway: headless sway, N foot windows -------------------------------------------------------------------------
if [ -z "${NO_SWAY:-}" ]; then
    sway_start
    for n in $SIZES; do
        echo "desktop-peers.sh: sway, N=$n…" >&2
        for i in $(seq "$n"); do swaymsg "exec foot --app-id $(printf busy%03d "$i") chrt --idle 0 $out/busy $gate" >/dev/null; done
        # Every view's con_id and pid once all show, in app_id order.
        for _ in $(seq 600); do
            swaymsg -t get_tree | python3 -c '
import json, sys
stack, found = [json.load(sys.stdin)], []
while stack:
    node = stack.pop()
    if (node.get("app_id") or "").startswith("busy"): found.append((node["app_id"], node["id"], node["pid"]))
    stack += node.get("nodes", []) + node.get("floating_nodes", [])
for _, con, pid in sorted(found): print(con, pid)' > "$out/views"
            [ "$(wc -l < "$out/views")" -ge "$n" ] && break
            sleep 0.1
        done
        [ "$(wc -l < "$out/views")" = "$n" ] || { echo "desktop-peers.sh: $n foot windows did not all show" >&2; exit 1; }
        windows_file < "$out/views" > "$out/windows"
        while read -r _ pid _; do apps+=("$pid"); done < "$out/windows"
        # The first on workspace 1, shown; each other on a workspace of its own.
        i=1
        tail -n +2 "$out/windows" | while read -r con _; do i=$((i + 1)); swaymsg "[con_id=$con] move container to workspace $i" >/dev/null; done
        swaymsg workspace 1 >/dev/null
        sleep 1
        echo "sway $n none $("$switch" idle "$IDLE" "$out/windows" 0) $IDLE" >> "$results"
        for rep in $(seq "$REPS"); do
            for tool in $( [ $((rep % 2)) = 1 ] && echo lifecycled floor || echo floor lifecycled); do
                rm -f "$gate"
                if [ "$tool" = lifecycled ]; then
                    lifecycled_adopting sway
                else
                    "$out/sway_floor" "$sock" > "$out/floor.out" &
                    pids+=($!)
                    for _ in $(seq 100); do grep -q ready "$out/floor.out" && break; sleep 0.05; done
                fi
                measure sway "$n" "$tool" "$rep" "$out/windows" "${pids[-1]}" || failed sway "$n" "$tool"
                stop_last
                sleep 0.3
                continue_apps "$out/windows"
                "$switch" reset "sway:$sock" "$out/windows"
            done
        done
        for pid in $(tree_pids $(cut -d' ' -f2 "$out/windows")); do kill -CONT "$pid"; kill -KILL "$pid"; done 2>/dev/null || true
        apps=()
        for _ in $(seq 100); do swaymsg -t get_tree | grep -q '"app_id": "busy' || break; sleep 0.05; done
    done
fi

# --- the report --------------------------------------------------------------------------------------------------
python3 - "$results" "$GRACE" "$(( (K + REPS - 1) / REPS * REPS ))" "$REPS" "$IDLE" "$xsuspender_from" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" \
    "$(( $(date +%s) - started ))" "$(nproc)" "$processes" "${smoke:+smoke}" <<'PY'
import json, os, statistics, sys
path, grace, k, reps, idle, xsus_from, load0, load1, seconds, cpus, processes, smoke = sys.argv[1:13]
grace_ms = float(grace) * 1000
rows = {}   # (display, n, tool) -> {"focus": [], "grace": [], "cpu": ns, "rounds": n, "idle": (sup, hidden, s), "opens": (c, s)}
for line in open(path):
    f = line.split()
    where, n, tool, what = f[0], int(f[1]), f[2], f[3]
    r = rows.setdefault((where, n, tool), {"focus": [], "grace": [], "cpu": 0, "rounds": 0, "rounds_cpu": 0})
    if what == "round":
        r["focus"].append(float(f[4]) / 1000)
        if float(f[5]) >= 0: r["grace"].append(float(f[5]) / 1000)
        r["rounds"] += 1
    elif what == "cpu":
        r["cpu"] += int(f[4]); r["rounds_cpu"] = r["rounds"]
    elif what == "idle":
        r["idle"] = (int(f[4]), int(f[5]), float(f[6]))
    elif what == "opens":
        r["opens"] = (int(f[4]), int(f[5]))
    elif what == "failed":
        r["failed"] = r.get("failed", 0) + 1
    elif what == "settled":
        r.setdefault("settled", []).append(float(f[4]))

def p90(values):
    s = sorted(values)
    return s[max(0, -(-9 * len(s) // 10) - 1)] if s else float("nan")

def med(values):
    return statistics.median(values) if values else float("nan")

names = {"lifecycled": "lifecycled", "xsuspender": "xsuspender", "floor": None}
sizes = sorted({key[1] for key in rows})
print(f"Adopted CPU-busy windows (bench/busy.c under SCHED_IDLE each, run as an unprivileged user), one shown, the others hidden; "
      f"grace {grace} s for every supervisor (lifecycled `[Adopt] BackgroundTimeSec={grace}` and `Reclaim=no`, as no peer pages memory out, xsuspender `suspend_delay = {grace}`); "
      f"{k} rounds per tool and N in {reps} interleaved repetition{'s' if reps != '1' else ''} (the order rotates); "
      f"idle phase {idle} s; {cpus} CPUs; load average {load0} before, {load1} after; {processes} processes on the machine "
      f"at the start (before the apps); {seconds} s in all. "
      f"xsuspender: {xsus_from}.")
print()
print("A round asks the display server to focus a suspended window (X11: the `_NET_ACTIVE_WINDOW` client message "
      "`xdotool windowactivate` sends, to openbox; sway: `[con_id=N] focus`), polls /proc/PID/stat every 50 µs until none of the "
      "app's processes (the terminal and its busy program) is in state T, shows it 0.3 s, hides it (X11: minimized, "
      "`WM_CHANGE_STATE`; sway: workspace 1 shown again) and polls /proc every millisecond until they are all stopped again. "
      "The floors only continue (X11: bench/x11_floor.c sends SIGCONT to the window's `_NET_WM_PID` and its descendants "
      "when `_NET_ACTIVE_WINDOW` changes; sway: bench/sway_floor.c on sway's focus event); the driver stops their apps itself. "
      "The apps are busy during the rounds and the idle phases, and idle while a supervisor starts and stops the hidden ones; "
      "each runs under SCHED_IDLE with its autogroup at nice 19, so that it takes only CPU time nothing else wants. "
      "The load average counts the apps' own busy processes.")
print()
print("CPU per switch: the supervisor's run time (its threads' schedstat, plus its reaped children's utime and stime) over the "
      "rounds, divided by their number; a round is one focus and one hide (and the suspension after the grace). /proc opens: "
      "`openat`/`open` calls on paths under /proc by the supervisor, its threads and its children (strace -f), over separate "
      "rounds, per round. Times in ms; p90 is the nearest rank.")
for where, title in (("x11", "X11 (Xvfb, openbox, xterm)"), ("sway", "sway (headless, foot)")):
    keys = [key for key in rows if key[0] == where]
    if not keys: continue
    print()
    print(f"#### {title}")
    print()
    print("| N | tool | focus to running: median | p90 | min–max | CPU per switch (ms) | CPU while idle (ms/s) | /proc opens per switch | grace: median | min–max | hidden apps' CPU while idle (s/s) |")
    print("| ---: | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: |")
    for n in sizes:
        for tool in ("none", "lifecycled", "xsuspender", "floor"):
            r = rows.get((where, n, tool))
            if not r: continue
            label = {"none": "nothing", "floor": "the floor"}.get(tool, tool)
            if r.get("failed"): label += f" (failed in {r['failed']} of {reps} repetitions: see below)"
            focus = r["focus"]
            idle_row = r.get("idle")
            cells = [str(n), label,
                     f"{med(focus):.2f}" if focus else "—", f"{p90(focus):.2f}" if focus else "—",
                     f"{min(focus):.2f}–{max(focus):.2f}" if focus else "—",
                     f"{r['cpu'] / 1e6 / r['rounds_cpu']:.2f}" if r["rounds_cpu"] and tool != "none" else "—",
                     f"{idle_row[0] / 1e6 / idle_row[2]:.3f}" if idle_row and tool != "none" else "—",
                     f"{r['opens'][0] / r['opens'][1]:.0f}" if r.get("opens") else "—",
                     f"{med(r['grace']):.0f}" if r["grace"] else "—",
                     f"{min(r['grace']):.0f}–{max(r['grace']):.0f}" if r["grace"] else "—",
                     f"{idle_row[1] / 1e9 / idle_row[2]:.3f}" if idle_row else "—"]
            print("| " + " | ".join(cells) + " |")
    saved = []
    for n in sizes:
        base = rows.get((where, n, "none"), {}).get("idle")
        for tool in ("lifecycled", "xsuspender"):
            ours = rows.get((where, n, tool), {}).get("idle")
            if base and ours and base[1] > 0:
                saved.append(f"N={n} {tool} {100 * (1 - (ours[1] / ours[2]) / (base[1] / base[2])):.1f}%")
    if saved:
        print()
        print("CPU saved (the hidden apps' CPU time while idle, against nothing managing them): " + ", ".join(saved) + ".")
    settled = [f"N={n} {tool} {max(rows[(where, n, tool)]['settled']):.1f} s" for n in sizes for tool in ("lifecycled", "xsuspender")
               if rows.get((where, n, tool), {}).get("settled")]
    if settled:
        print()
        print("From a supervisor's start (lifecycled: its first answer to `lifectl list`) until every hidden window's processes "
              "were stopped (slowest repetition): " + ", ".join(settled) + "."
              + (" xsuspender stops the windows that were hidden at its start only once it decides it is on battery."
                 if any(key[2] == "xsuspender" for key in keys) else ""))

failures = [f"{tool} at N={n} ({where})" for (where, n, tool), r in sorted(rows.items()) if r.get("failed")]
if failures:
    print()
    print("Failed (a follower did not stop the hidden windows' processes within 40 s of its start, or did not stop or continue a "
          "window's within 30 s of the request; the repetition's remaining rounds were left out): " + ", ".join(failures) + ".")

# The targets: a miss is a finding.
print()
verdicts = []
for where in ("x11", "sway"):
    for n in sizes:
        ours, peer, floor = (rows.get((where, n, tool)) for tool in ("lifecycled", "xsuspender", "floor"))
        if ours and ours.get("failed"):
            verdicts.append((f"{where} N={n}: lifecycled did its part in every repetition", False, f"failed in {ours['failed']}"))
        if not ours or not ours["focus"]: continue
        if peer and peer["focus"]:
            a, b = med(ours["focus"]), med(peer["focus"])
            verdicts.append((f"{where} N={n}: focus to running at most half of xsuspender's", a <= b / 2, f"{a:.2f} ms vs {b:.2f} ms ({a / b:.2f}x)"))
        if floor and floor["focus"]:
            a, b = med(ours["focus"]), med(floor["focus"])
            verdicts.append((f"{where} N={n}: focus to running within 3x of the floor", a <= 3 * b, f"{a:.2f} ms vs {b:.2f} ms ({a / b:.1f}x)"))
        if peer and peer["rounds_cpu"] and ours["rounds_cpu"]:
            a, b = ours["cpu"] / 1e6 / ours["rounds_cpu"], peer["cpu"] / 1e6 / peer["rounds_cpu"]
            verdicts.append((f"{where} N={n}: CPU per switch at most xsuspender's", a <= b, f"{a:.2f} ms vs {b:.2f} ms"))
    first, last = (rows.get((where, n, "lifecycled")) for n in (sizes[0], sizes[-1]))
    if len(sizes) > 1 and first and last and first["rounds_cpu"] and last["rounds_cpu"] and first["cpu"]:
        a, b = first["cpu"] / first["rounds_cpu"], last["cpu"] / last["rounds_cpu"]
        verdicts.append((f"{where}: CPU per switch flat from N={sizes[0]} to N={sizes[-1]} (at most 1.5x)", b <= 1.5 * a,
                         f"{a / 1e6:.2f} ms to {b / 1e6:.2f} ms ({b / a:.2f}x)"))
    if last is not None and not last["grace"]:
        verdicts.append((f"{where} N={sizes[-1]}: grace within ±50 ms of {grace} s in every round", False, "no figures"))
    if last and last["grace"]:
        worst = max(abs(g - grace_ms) for g in last["grace"])
        verdicts.append((f"{where} N={sizes[-1]}: grace within ±50 ms of {grace} s in every round", worst <= 50,
                         f"median {med(last['grace']):.0f} ms, {min(last['grace']):.0f}–{max(last['grace']):.0f} ms"))
if not any(key[2] == "xsuspender" for key in rows):
    print(f"The comparison with xsuspender was skipped ({xsus_from}).")
for target, ok, figures in verdicts:
    print(f"Target: {target}: {'met' if ok else 'missed'} ({figures}).")

# The same figures for bench/bench.py, which writes the report's prose and verdicts from them.
if os.environ.get("DESKTOP_PEERS_JSON"):
    summary = []
    for (where, n, tool), r in sorted(rows.items()):
        idle_row, base = r.get("idle"), rows.get((where, n, "none"), {}).get("idle")
        summary.append({
            "display": where, "n": n, "tool": tool, "failed": r.get("failed", 0),
            "focus_median": med(r["focus"]) if r["focus"] else None, "focus_p90": p90(r["focus"]) if r["focus"] else None,
            "cpu_per_switch_ms": r["cpu"] / 1e6 / r["rounds_cpu"] if r["rounds_cpu"] and tool != "none" else None,
            "opens_per_switch": r["opens"][0] / r["opens"][1] if r.get("opens") else None,
            "grace_median": med(r["grace"]) if r["grace"] else None,
            "grace_min": min(r["grace"]) if r["grace"] else None, "grace_max": max(r["grace"]) if r["grace"] else None,
            "saved_percent": 100 * (1 - (idle_row[1] / idle_row[2]) / (base[1] / base[2]))
                             if idle_row and base and base[1] > 0 and tool != "none" else None,
            "settled_s": max(r["settled"]) if r.get("settled") else None})
    with open(os.environ["DESKTOP_PEERS_JSON"], "w") as out:
        json.dump({"grace_s": float(grace), "rounds": int(k), "reps": int(reps), "idle_s": float(idle), "cpus": int(cpus),
                   "load_before": load0, "load_after": load1, "seconds": int(seconds), "processes": processes,
                   "xsuspender": xsus_from, "sizes": sizes, "rows": summary,
                   "verdicts": [[target, ok, figures] for target, ok, figures in verdicts]}, out, indent=1)
PY
