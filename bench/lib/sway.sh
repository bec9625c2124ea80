# The part bench/display.sh and bench/desktop.sh share, sourced (never run): the unprivileged user sway runs as
# (sway refuses root), the release build of lifecycled and lifectl, a headless sway with its own runtime directory,
# the windows it shows, and the daemon under test.
# The caller sets `out` (its temporary directory, mode 755, which holds the config, the logs and the runtime
# directory) and `pids` (an array: each process started here is appended to it, for the caller's cleanup), and runs
# from the checkout's root.

bench_user=lifecycled-test
bench_name=${0##*/}

# sway and foot through apt when missing, and the user, made when missing.
bench_setup() {
    build-aux/apt-need "the display benchmarks" sway=sway foot=foot
    id "$bench_user" >/dev/null 2>&1 || useradd -r -M -s /usr/sbin/nologin "$bench_user"
    bench_uid=$(id -u "$bench_user")
    bench_gid=$(id -g "$bench_user")
}

# lifecycled and lifectl: LIFECYCLED_BIN_DIR's (bench/run.sh passes its own build), else a release build with the
# Swift runtime linked statically, as `make install` builds, into a scratch path of its own (BENCH_SCRATCH) so that
# it never waits on .build's lock. Puts them first in PATH; the runtime directory is under `out`.
bench_binaries() {
    if [ -n "${LIFECYCLED_BIN_DIR:-}" ]; then
        bin=$LIFECYCLED_BIN_DIR
    else
        local scratch=${BENCH_SCRATCH:-/var/tmp/lifecycled-bench-build}
        swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product lifecycled >/dev/null
        swift build -c release --static-swift-stdlib --scratch-path "$scratch" --product lifectl >/dev/null
        bin=$(swift build -c release --static-swift-stdlib --scratch-path "$scratch" --show-bin-path)
    fi
    export PATH="${LIFECTL_BIN_DIR:-$bin}:$bin:$PWD/Examples/python:$PATH" LIFECYCLED_RUNTIME_DIR="$out/run"
}

# A headless sway as the user, with its own runtime directory `xdg` (root reaches its sockets). Sets `xdg`, `sock`
# and SWAYSOCK, `wayland_display` (its Wayland socket's name in `xdg`), and `wayland`: the [App] line that lets an
# app of the daemon open a window on it.
sway_start() {
    xdg=$out/xdg
    mkdir -p "$xdg" && chown "$bench_user" "$xdg" && chmod 700 "$xdg"
    printf 'output HEADLESS-1 resolution 1280x720\n' > "$out/sway.conf"
    (cd / && exec setpriv --reuid="$bench_uid" --regid="$bench_gid" --init-groups env -i PATH=/usr/bin:/bin HOME="$xdg" \
        XDG_RUNTIME_DIR="$xdg" WLR_BACKENDS=headless WLR_RENDERER=pixman WLR_LIBINPUT_NO_DEVICES=1 \
        sway -c "$out/sway.conf") >"$out/sway.log" 2>&1 &
    pids+=($!)
    sock=
    for _ in $(seq 200); do sock=$(ls "$xdg"/sway-ipc.*.sock 2>/dev/null | head -1 || true); [ -n "$sock" ] && break; sleep 0.05; done
    [ -n "$sock" ] || { echo "$bench_name: sway did not start" >&2; tail "$out/sway.log" >&2; exit 1; }
    export SWAYSOCK=$sock
    wayland_display=wayland-1
    wayland="Environment=XDG_RUNTIME_DIR=$xdg WAYLAND_DISPLAY=$wayland_display"
}

# The con_id and pid of the view whose app_id is $1, once it shows.
sway_view() {
    local found
    for _ in $(seq 200); do
        found=$(swaymsg -t get_tree | python3 -c "
import json, sys
stack = [json.load(sys.stdin)]
while stack:
    node = stack.pop()
    if node.get('app_id') == '$1': print(node['id'], node['pid']); break
    stack += node.get('nodes', []) + node.get('floating_nodes', [])")
        [ -n "$found" ] && { echo "$found"; return; }
        sleep 0.05
    done
    echo "$bench_name: no window $1" >&2; exit 1
}

# lifecycled with `out/config`, logging to `out/daemon.log`, once it answers; its pid is the last of `pids`.
lifecycled_start() {
    lifecycled --config "$out/config" --log-level warning >"$out/daemon.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 200); do lifectl list >/dev/null 2>&1 && return; sleep 0.05; done
    echo "$bench_name: lifecycled did not start" >&2; cat "$out/daemon.log" >&2; exit 1
}
lifecycled_stop() { kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'; }

# The pid of app $1 as `lifectl list` gives it.
app_pid() { lifectl list --json | python3 -c "import json,sys; print(next(a['pid'] for a in json.load(sys.stdin) if a['name'] == '$1'))"; }

# The CPU seconds (utime + stime, /proc/PID/stat) of the processes $@ and all their descendants, together: a
# terminal's shell runs in a session of its own, and a scope's processes are listed one by one. Groups separated
# by `--` are summed apart from one reading of /proc and printed on one line; with `--clock` first, the monotonic
# clock's seconds at that reading follow, so that figures read together are of one moment.
tree_cpu() {
    python3 - "$@" <<'PY'
import os, sys, time
args = sys.argv[1:]
clock = args[:1] == ["--clock"]
args = args[1:] if clock else args
stats = {}
for entry in os.listdir("/proc"):
    if not entry.isdigit(): continue
    try: stats[entry] = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
    except OSError: continue
now = time.monotonic()
groups, figures = [[]], []
for arg in args:
    if arg == "--": groups.append([])
    else: groups[-1].append(arg)
for group in groups:
    ours, grew = set(group), True
    while grew:
        grew = False
        for pid, fields in stats.items():
            if pid not in ours and fields[1] in ours: ours.add(pid); grew = True
    figures.append(sum(int(stats[p][11]) + int(stats[p][12]) for p in ours if p in stats) / os.sysconf("SC_CLK_TCK"))
print(" ".join(str(f) for f in figures + ([f"{now:.3f}"] if clock else [])))
PY
}
