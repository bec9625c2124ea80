#!/bin/bash
# A test CI runs, not make test: lifecycled under a real systemd (252, Debian bookworm) as PID 1, in a systemd-nspawn container.
#
#   sudo systemd/test-in-container.sh            # from the repository root; needs root
#
# What it does (see docs/SYSTEMD-CONTAINER.md for what was measured and why it is built this way):
#   1. builds lifecycled and lifectl (release, --static-swift-stdlib: the container has no Swift runtime) from a
#      copy of the working tree, in its own scratch path;
#   2. builds a minbase Debian bookworm tree with debootstrap, ONCE, cached in $WORK/root (about 2 min, 240 MB);
#   3. boots it with `systemd-nspawn -b --volatile=overlay` (the cached tree is never modified: every change of a
#      run goes to a tmpfs), the binaries and systemd/lifecycled.service bound read-only at the paths the unit
#      expects, and a check unit pulled in with `systemd.wants=` on the init command line;
#   4. the check unit waits for the boot to finish, then drives `systemctl start/status/reload/restart/stop`, `lifectl`,
#      `journalctl` and looks at the delegated cgroups, writing PASS/FAIL lines to a bound directory; then the
#      user-session case (systemd/container-user-session.sh): a user's `systemctl --user` lifecycled adopts,
#      freezes and thaws a `systemd-run --user --scope` program, then a window's process tree moved into a scope
#      of its own (`[Adopt] ScopeTrees=yes`) with a worker that calls setsid(), by the user's daemon and then by the
#      system service through the user's manager (`[Adopt] User=`); and powers the container off;
#   5. the package case: `make deb` twice from the same binaries (DEB_BUILD=1 and 2, lintian on the first), then
#      one more boot of the tree with nothing of lifecycled in it, where systemd/container-package.sh installs the
#      first build with apt, upgrades to the second, removes and purges (docs/PACKAGING.md);
#   6. prints the results and the cost, removes the container's leftovers, and exits 1 if any check failed
#      (2 if the container could not be built or booted at all).
#
# Environment:
#   LIFECYCLED_NSPAWN_DIR   work directory (default /var/tmp/lifecycled-nspawn): tree cache, build, results
#   LIFECYCLED_NSPAWN_CGROUP
#                           default "auto" on a pure cgroup2 host, "auto unified" on a hybrid or v1 host;
#                           auto: let systemd-nspawn choose, as it does for the host's cgroup mode;
#                           unified: SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1 (pure cgroup2 in the container);
#                           legacy: SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=0 (hybrid/v1, only on a host that is not
#                           pure cgroup2); several may be given, space-separated: "legacy unified"
#   LIFECYCLED_NSPAWN_MIRROR
#                           Debian mirror for debootstrap (default http://deb.debian.org/debian)
#   LIFECYCLED_NSPAWN_REBUILD=1
#                           throw the cached tree away and debootstrap again
#   LIFECYCLED_NSPAWN_TIMEOUT
#                           seconds one boot with its checks may take (default 180)
#   LIFECYCLED_BIN_DIR      use lifecycled and lifectl from this directory instead of building them
#   LIFECYCLED_NSPAWN_PACKAGE=0
#                           leave the package case out
#
# Needs: root, systemd-nspawn (apt-get install systemd-container), debootstrap, swift (unless LIFECYCLED_BIN_DIR),
# dpkg-dev and lintian for the package case (make test-systemd-deps installs them).
# It does not need systemd as the host's init, nor systemd-machined: the container is not registered
# (--register=no) and runs in the cgroup this script is in (--keep-unit).
set -u -o pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
WORK=${LIFECYCLED_NSPAWN_DIR:-/var/tmp/lifecycled-nspawn}
ROOT=$WORK/root
MIRROR=${LIFECYCLED_NSPAWN_MIRROR:-http://deb.debian.org/debian}
TIMEOUT=${LIFECYCLED_NSPAWN_TIMEOUT:-180}
# Default: what nspawn picks for this host; on a host that is not pure cgroup2, also a pure cgroup2 container.
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then MODES=${LIFECYCLED_NSPAWN_CGROUP:-auto}
else MODES=${LIFECYCLED_NSPAWN_CGROUP:-auto unified}; fi
t_start=$(date +%s)

die() { echo "test-in-container: $*" >&2; exit 2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

[ "$(id -u)" = 0 ] || die "must run as root (systemd-nspawn and debootstrap need it)"
command -v systemd-nspawn >/dev/null || die "systemd-nspawn missing: apt-get install systemd-container"
mkdir -p "$WORK" || die "cannot create $WORK"

# --- 1. binaries ------------------------------------------------------------------------------------------------
if [ -n "${LIFECYCLED_BIN_DIR:-}" ]; then
    BIN=$LIFECYCLED_BIN_DIR
else
    command -v swift >/dev/null || die "swift missing (or set LIFECYCLED_BIN_DIR)"
    t=$(now)
    echo "== building lifecycled and lifectl (release, static Swift stdlib) from a copy of $here"
    # A copy: others may edit the working tree while this builds ("input file ... was modified during the build").
    rm -rf "$WORK/src" && mkdir -p "$WORK/src"
    (cd "$here" && tar --exclude=./.build --exclude=./.git -cf - .) | tar -C "$WORK/src" -xf - || die "copying the sources failed"
    for p in lifecycled lifectl; do
        (cd "$WORK/src" && swift build -c release --static-swift-stdlib --scratch-path "$WORK/build" --product "$p") \
            >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; die "swift build --product $p failed ($WORK/build.log)"; }
    done
    BIN=$WORK/build/release
    echo "   built in $(elapsed "$t") s"
fi
for b in lifecycled lifectl; do [ -x "$BIN/$b" ] || die "$BIN/$b missing"; done

# --- 2. the tree, built once ------------------------------------------------------------------------------------
if [ "${LIFECYCLED_NSPAWN_REBUILD:-0}" = 1 ]; then rm -rf "$ROOT"; fi
# The daemon links libxcb for its x11 display source and libpulse for the sound-server rail; the user-session case
# needs pam_systemd (it gives the user's manager its XDG_RUNTIME_DIR) and the user's bus, as a desktop has them, and
# python3 for the double-forking app (Tests/Fixtures/double_forking_app.py). A tree cached before any of those is
# built again.
if ! ls "$ROOT"/usr/lib/*/libxcb-res.so.0 "$ROOT"/usr/lib/*/libpulse.so.0 "$ROOT"/usr/lib/*/security/pam_systemd.so \
        "$ROOT"/usr/lib/systemd/user/dbus.socket "$ROOT"/usr/bin/python3 >/dev/null 2>&1; then rm -f "$ROOT/.lifecycled-tree-complete"; fi
if [ ! -e "$ROOT/.lifecycled-tree-complete" ]; then
    command -v debootstrap >/dev/null || die "debootstrap missing: apt-get install debootstrap"
    rm -rf "$ROOT"
    t=$(now)
    echo "== debootstrap --variant=minbase bookworm $ROOT (once; cached afterwards)"
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus,libxcb1,libxcb-res0,libpulse0,libpam-systemd,dbus-user-session,python3 \
        bookworm "$ROOT" "$MIRROR" \
        >"$WORK/debootstrap.log" 2>&1 || { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed ($WORK/debootstrap.log)"; }
    # The container boots with no login prompt to wait on; an empty machine-id is filled at each boot.
    : >"$ROOT/etc/machine-id"
    echo lifecycled-test >"$ROOT/etc/hostname"
    mkdir -p "$ROOT/check" "$ROOT/out"
    touch "$ROOT/.lifecycled-tree-complete"
    echo "   debootstrap took $(elapsed "$t") s"
fi
echo "== tree: $ROOT, $(du -sm "$ROOT" | cut -f1) MB (cached)"

# --- 3. the check script that runs inside the container ---------------------------------------------------------
CHECK=$WORK/check
mkdir -p "$CHECK"
cat >"$CHECK/lifecycled-check.service" <<'EOF'
[Unit]
Description=lifecycled checks (test-in-container.sh)
# Not Type=oneshot: the boot must be able to finish (is-system-running --wait) while this runs.
[Service]
Type=exec
ExecStart=/bin/bash /check/check.sh
StandardOutput=journal+console
StandardError=journal+console
EOF

cat >"$CHECK/check.sh" <<'EOF'
#!/bin/bash
# Runs inside the container, started by lifecycled-check.service once systemd is up.
set -u
R=/out/results; D=/out/details
: >"$R"; : >"$D"
pass() { echo "PASS $1${2:+ — $2}" | tee -a "$R"; }
fail() { echo "FAIL $1${2:+ — $2}" | tee -a "$R"; }
check() { local name=$1; shift; if "$@" >>"$D" 2>&1; then pass "$name"; else fail "$name"; fi; }
log() { { echo; echo "### $*"; } >>"$D"; }
show() { systemctl show -P "$1" lifecycled.service; }
app_state() { lifectl list 2>/dev/null | awk -v a="$1" '$1 == a { print $2 }'; }
# The condition is a string evaluated at each try: `wait_for test -n "$(f)"` would expand $(f) once, before the wait,
# and then wait its whole 10 s on a result that can no longer change.
wait_for() { local i; for i in $(seq 1 100); do eval "$1" && return 0; sleep 0.1; done; return 1; }
pids_of_comm() { local p; for p in /proc/[0-9]*; do [ "$(cat "$p/comm" 2>/dev/null)" = "$1" ] && echo "${p#/proc/}"; done; }
trap 'systemctl poweroff --no-block' EXIT

state=$(timeout 60 systemctl is-system-running --wait 2>&1)
log "is-system-running: $state"; systemctl --failed --no-pager >>"$D" 2>&1
case $state in
    running) pass "container boots: systemd $(systemctl --version | head -1 | cut -d' ' -f2) is PID 1, system running" ;;
    degraded) pass "container boots (degraded: $(systemctl --failed --plain --no-legend | cut -d' ' -f1 | tr '\n' ' '))" ;;
    *) fail "container boots" "is-system-running: $state" ;;
esac
cgmode=$(stat -fc %T /sys/fs/cgroup)
[ "$cgmode" = cgroup2fs ] && cgmode="unified (cgroup2)" || cgmode="hybrid/legacy ($cgmode at /sys/fs/cgroup)"
echo "INFO cgroup layout in the container: $cgmode" | tee -a "$R"

# One app that speaks no protocol, launched at start; SuspendMethod=freezer to see which freezer is used.
mkdir -p /etc/lifecycled/apps
cat >/etc/lifecycled/apps/sleeper.conf <<'CONF'
[App]
Description=sleep, knowing nothing of lifecycled
Exec=/bin/sleep 100000
Protocol=none
AutoLaunch=yes

[Lifecycle]
SuspendMethod=freezer
CONF

log "systemctl start lifecycled"
t0=$(date +%s%N)
check "systemctl start lifecycled (Type=notify: returns after READY=1)" timeout 30 systemctl start lifecycled
t1=$(date +%s%N)
echo "INFO start took $(( (t1 - t0) / 1000000 )) ms" | tee -a "$R"
[ "$(show ActiveState)/$(show SubState)" = active/running ] && pass "unit active/running" || fail "unit active/running" "$(show ActiveState)/$(show SubState)"
status_text=$(show StatusText)
[ -n "$status_text" ] && pass "STATUS= reaches systemd" "StatusText=$status_text" || fail "STATUS= reaches systemd" "StatusText empty"
st=$(systemctl status lifecycled --no-pager 2>&1); echo "$st" >>"$D"
echo "$st" | grep -q '^ *Status: "' && pass "systemctl status shows the Status: line" "$(echo "$st" | grep '^ *Status:' | sed 's/^ *//')" || fail "systemctl status shows the Status: line"
list=$(lifectl list 2>&1); rc=$?; log "lifectl list (rc $rc)"; echo "$list" >>"$D"
[ $rc = 0 ] && echo "$list" | grep -q '^sleeper' && pass "lifectl list" "$(echo "$list" | grep '^sleeper' | tr -s ' ')" || fail "lifectl list" "rc $rc: $list"
lifectl status >>"$D" 2>&1
wait_for '[ -n "$(pids_of_comm sleep)" ]'
sleep_pid=$(pids_of_comm sleep | head -1)
main_pid=$(show MainPID)

# The delegated subtree: the daemon in supervisor/, the app in app-sleeper/. In a hybrid/legacy container the v1
# controllers are mounted read-only by systemd-nspawn (they belong to the host), and the daemon uses no cgroups.
cg=$(show ControlGroup)
if [ -d /sys/fs/cgroup/unified ]; then base=/sys/fs/cgroup/unified; else base=/sys/fs/cgroup; fi
log "cgroups: ControlGroup=$cg; /proc/$main_pid/cgroup, /proc/$sleep_pid/cgroup"
cat "/proc/$main_pid/cgroup" "/proc/$sleep_pid/cgroup" >>"$D" 2>&1; ls -la "$base$cg" >>"$D" 2>&1
layout=$(journalctl -u lifecycled --no-pager -o cat | grep -m1 -E '^cgroup layout: none')
scopes=$(journalctl -u lifecycled --no-pager -o cat | grep -m1 -E '^apps in systemd scopes')
# Where the app's cgroup files are: its scope under systemd's pure cgroup2, else its group in the delegated subtree.
appcg=$base$cg/app-sleeper
if [ -n "$scopes" ]; then
    appcg=/sys/fs/cgroup/lifecycled.slice/app-lifecycled-sleeper.scope
    procs=$(tr '\n' ' ' <"$base$cg/cgroup.procs" 2>/dev/null)
    [ "$procs" = "$main_pid " ] && pass "daemon alone in its service cgroup $cg" "$scopes" || fail "daemon alone in its service cgroup $cg" "$procs"
    if [ -n "$sleep_pid" ] && grep -qx "$sleep_pid" "$appcg/cgroup.procs" 2>/dev/null; then
        pass "app in its own scope app-lifecycled-sleeper.scope" "$(systemctl is-active app-lifecycled-sleeper.scope)"
    else
        fail "app in its own scope app-lifecycled-sleeper.scope" "sleep pid ${sleep_pid:-none}: $(grep '^0::' "/proc/$sleep_pid/cgroup" 2>/dev/null)"
    fi
elif [ "$base" != /sys/fs/cgroup ] && [ -n "$layout" ]; then
    echo "SKIP delegated cgroups (supervisor/, app-*) — hybrid container, daemon: '$layout' ($(journalctl -u lifecycled --no-pager -o cat | grep -m1 '^cgroups: '))" | tee -a "$R"
else
    if grep -qx "$main_pid" "$base$cg/supervisor/cgroup.procs" 2>/dev/null; then
        pass "daemon in the delegated $cg/supervisor"
    else
        fail "daemon in the delegated $cg/supervisor" "$(grep '^0::' "/proc/$main_pid/cgroup")"
    fi
    if [ -n "$sleep_pid" ] && grep -qx "$sleep_pid" "$base$cg/app-sleeper/cgroup.procs" 2>/dev/null; then
        pass "app in its own cgroup $cg/app-sleeper"
    else
        fail "app in its own cgroup $cg/app-sleeper" "sleep pid ${sleep_pid:-none}: $(grep '^0::' "/proc/$sleep_pid/cgroup" 2>/dev/null)"
    fi
fi

# Suspend with SuspendMethod=freezer and resume: which freezer the daemon can use here.
log "suspend/resume"
lifectl background sleeper >>"$D" 2>&1
if lifectl suspend sleeper >>"$D" 2>&1 && [ "$(app_state sleeper)" = suspended ]; then
    how=$(journalctl -u lifecycled --no-pager -o cat 2>/dev/null | grep -i -m1 -E 'freez|suspend.*method|SIGSTOP' )
    pass "lifectl suspend sleeper" "state: $(awk '{print $3}' "/proc/$sleep_pid/stat" 2>/dev/null) in /proc; $(cat "$appcg/cgroup.freeze" 2>/dev/null | sed 's/^/cgroup.freeze=/')"
else
    fail "lifectl suspend sleeper" "state $(app_state sleeper)"
fi
check "lifectl resume sleeper" lifectl resume sleeper

# Reload: a second app appears, the first is untouched.
cat >/etc/lifecycled/apps/second.conf <<'CONF'
[App]
Exec=/bin/sleep 200000
Protocol=none
AutoLaunch=yes
CONF
log "systemctl reload lifecycled"
if timeout 30 systemctl reload lifecycled >>"$D" 2>&1; then
    pass "systemctl reload lifecycled"
else
    fail "systemctl reload lifecycled" "$(journalctl -u lifecycled --no-pager -o cat | grep -m1 -E 'Failed (to locate|at step)')"
    # Go on with the daemon's own reload path: SIGHUP to the main process, as ExecReload= means to send.
    systemctl kill --kill-who=main --signal=HUP lifecycled >>"$D" 2>&1
    echo "INFO reload continued with: systemctl kill --kill-who=main --signal=HUP lifecycled" | tee -a "$R"
fi
if wait_for '[ -n "$(app_state second)" ]'; then
    pass "reload picked up apps/second.conf" "second: $(app_state second)"
else
    fail "reload picked up apps/second.conf" "$(lifectl list 2>&1 | tr '\n' ';')"
fi
[ "$(lifectl list 2>/dev/null | awk '$1 == "sleeper" { print $3 }')" = "$sleep_pid" ] && [ -d "/proc/$sleep_pid" ] \
    && pass "reload left the unchanged app running (pid $sleep_pid)" || fail "reload left the unchanged app running" "$(lifectl list 2>&1 | tr '\n' ';')"
[ "$(show MainPID)" = "$main_pid" ] && [ "$(show ActiveState)" = active ] && pass "daemon still the same process, unit active after reload" || fail "daemon still the same process after reload" "$(show MainPID) $(show ActiveState)"

# The journal: structured records per app.
sleep 1
log "journalctl -u lifecycled LIFECYCLE_APP=sleeper -o verbose"
j=$(journalctl -u lifecycled LIFECYCLE_APP=sleeper -o verbose --no-pager 2>&1); echo "$j" >>"$D"
n=$(echo "$j" | grep -c 'LIFECYCLE_EVENT=')
[ "$n" -gt 0 ] && pass "journalctl -u lifecycled LIFECYCLE_APP=sleeper: $n structured records" "events: $(echo "$j" | sed -n 's/^ *LIFECYCLE_EVENT=//p' | sort | uniq -c | tr -s ' ' | tr '\n' ',')" \
    || fail "journalctl -u lifecycled LIFECYCLE_APP=sleeper" "no LIFECYCLE_EVENT= fields"
echo "$j" | grep -q 'MESSAGE_ID=5c1a9e0b7f2d4b3c8a6e1d2f3b4c5d0' && pass "records carry the documented MESSAGE_ID=" || fail "records carry the documented MESSAGE_ID="
lifectl logs sleeper --no-pager >>"$D" 2>&1 && pass "lifectl logs sleeper" || fail "lifectl logs sleeper"
wd=$(show WatchdogTimestampMonotonic)
[ "${wd:-0}" != 0 ] && pass "watchdog pings received (WatchdogSec=$(show WatchdogUSec))" || fail "watchdog pings received" "WatchdogTimestampMonotonic=$wd"

# Restart: `systemctl restart` keeps every app running and connected (the daemon asks systemd for its job over
# /run/systemd/private and hands the apps over), while `systemctl stop` below still terminates them. A protocol
# app in bash (no Python in a minbase tree) reads the daemon's lines on its fd 3, acks them, and logs them: it
# would see end-of-file if its connection were not kept in the file-descriptor store.
cat >/etc/lifecycled/shell-client.sh <<'SH'
printf '{"type":"hello","protocol":1,"app":"shell"}\n' >&3
while IFS= read -r line <&3; do
    echo "$line" >>/out/shell.log
    if [[ $line =~ \"id\":([0-9]+) ]]; then printf '{"type":"ack","id":%s}\n' "${BASH_REMATCH[1]}" >&3; fi
done
echo EOF >>/out/shell.log
SH
cat >/etc/lifecycled/apps/shell.conf <<'CONF'
[App]
Exec=/bin/bash /etc/lifecycled/shell-client.sh
AutoLaunch=background

[Lifecycle]
BackgroundTimeSec=infinity
CONF
log "systemctl restart lifecycled"
systemctl kill --kill-who=main --signal=HUP lifecycled >>"$D" 2>&1
wait_for '[ "$(app_state shell)" = background ]'
shell_pid=$(lifectl list 2>/dev/null | awk '$1 == "shell" { print $3 }')
lifectl suspend sleeper >>"$D" 2>&1
main_before=$(show MainPID)
lifectl list >>"$D" 2>&1
check "systemctl restart lifecycled" timeout 60 systemctl restart lifecycled
main_after=$(show MainPID)
lifectl list >>"$D" 2>&1
[ "$main_after" != "$main_before" ] && [ "$(show ActiveState)" = active ] && pass "a new daemon runs after the restart" "MainPID $main_before -> $main_after" \
    || fail "a new daemon runs after the restart" "MainPID $main_before -> $main_after, $(show ActiveState)"
handover=$(journalctl -u lifecycled --no-pager -o cat | grep -m1 '^Restarting: ')
[ -n "$handover" ] && pass "the daemon saw a restart job and handed over" "$handover" \
    || fail "the daemon saw a restart job and handed over" "$(journalctl -u lifecycled --no-pager -o cat | grep -m1 -E '^(Stopping|Failed to ask)')"
[ -d "/proc/$sleep_pid" ] && [ "$(lifectl list 2>/dev/null | awk '$1 == "sleeper" { print $2 "/" $3 }')" = "suspended/$sleep_pid" ] \
    && pass "the suspended app kept its process and stayed suspended" "$(cat "$appcg/cgroup.freeze" 2>/dev/null | sed 's/^/cgroup.freeze=/') state $(awk '{print $3}' "/proc/$sleep_pid/stat" 2>/dev/null)" \
    || fail "the suspended app kept its process and stayed suspended" "$(lifectl list 2>&1 | tr '\n' ';')"
[ -n "$shell_pid" ] && [ -d "/proc/$shell_pid" ] && [ "$(lifectl list 2>/dev/null | awk '$1 == "shell" { print $3 }')" = "$shell_pid" ] \
    && pass "the protocol app kept its process" "pid $shell_pid" || fail "the protocol app kept its process" "pid ${shell_pid:-none}: $(lifectl list 2>&1 | tr '\n' ';')"
took_back() { journalctl -u lifecycled --no-pager -o cat | grep -q '^shell: took back its client connection'; }
wait_for took_back
took_back && ! grep -q '^EOF' /out/shell.log 2>/dev/null \
    && pass "its connection came back from the fd store; the client never saw end-of-file" \
    || fail "its connection came back from the fd store" "$(tail -3 /out/shell.log 2>/dev/null | tr '\n' ';')"
lifectl focus shell >>"$D" 2>&1
grep -q didBecomeActive /out/shell.log 2>/dev/null && pass "lifecycle goes on over the kept connection (focus: didBecomeActive)" \
    || fail "lifecycle goes on over the kept connection" "$(tail -3 /out/shell.log 2>/dev/null | tr '\n' ';')"
lifectl resume sleeper >>"$D" 2>&1
journalctl -u lifecycled --no-pager -o short-monotonic >>"$D" 2>&1
journalctl --no-pager -o cat _PID=1 | grep -E 'lifecycled|remains running' | tail -20 >>"$D" 2>&1

# Stop: the daemon terminates its apps itself, and exits cleanly.
log "systemctl stop lifecycled"
t0=$(date +%s%N)
check "systemctl stop lifecycled" timeout 100 systemctl stop lifecycled
t1=$(date +%s%N)
echo "INFO stop took $(( (t1 - t0) / 1000000 )) ms" | tee -a "$R"
# (systemctl show after the stop is no use: the inactive unit may already be unloaded, its Exec* fields reset.)
inv=$(journalctl -u lifecycled --no-pager -o cat _PID=1 | tail -5 | tr '\n' ' ')
if [ "$(show ActiveState)" = inactive ] && echo "$inv" | grep -q 'Deactivated successfully' && ! echo "$inv" | grep -q 'Failed with result'; then
    pass "stopped cleanly" "$(journalctl -u lifecycled --no-pager -o cat | grep -x -m1 'Stopped'), systemd: Deactivated successfully"
else
    fail "stopped cleanly" "$(show ActiveState): $inv"
fi
[ -z "$(pids_of_comm sleep)" ] && pass "no app process left" || fail "no app process left" "$(pids_of_comm sleep | tr '\n' ' ')"
[ -n "${shell_pid:-}" ] && [ ! -d "/proc/$shell_pid" ] && pass "systemctl stop terminated the protocol app too" "$(journalctl -u lifecycled --no-pager -o cat | grep '^Stopping: ' | tail -1)" \
    || fail "systemctl stop terminated the protocol app too" "$(journalctl -u lifecycled --no-pager -o cat | grep -E '^(Stopping|Restarting|Failed to ask)' | tail -2 | tr '\n' ';')"
journalctl -u lifecycled --no-pager -o short-monotonic >>"$D" 2>&1

# The user-session case: lifecycled as a user's `systemctl --user` service, adopting a scope.
. /check/user-session.sh
echo DONE >>"$R"
EOF
# The user-session case and the user unit it installs, beside the check script.
cp "$here/systemd/container-user-session.sh" "$CHECK/user-session.sh" && cp "$here/systemd/user/lifecycled.service" "$CHECK/user-lifecycled.service" \
    && cp "$here/Tests/Fixtures/double_forking_app.py" "$CHECK/double_forking_app.py" \
    && cp "$here/share/dbus-1/system.d/org.lifecycled.Lifecycle1.conf" "$CHECK/org.lifecycled.Lifecycle1.conf" || die "copying the user-session case to $CHECK failed"

# --- 4. boot, once per cgroup mode -------------------------------------------------------------------------------
# boot NAME CHECK-UNIT [ENV=VALUE…] -- [systemd-nspawn options…]: boots the tree with the check unit pulled in,
# prints its results, and sets failed=1 on a failed check.
failed=0
boot() {
    local name=$1 unit=$2 env=() out=$WORK/out-$1 t dt rc
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do env+=("$1"); shift; done
    shift
    rm -rf "$out"; mkdir -p "$out"
    t=$(now)
    env "${env[@]}" timeout --kill-after=10 "$TIMEOUT" systemd-nspawn \
        --quiet --directory="$ROOT" --boot --volatile=overlay \
        --register=no --keep-unit --console=pipe \
        --machine="lifecycled-test-$name" \
        --bind-ro="$CHECK:/check" \
        --bind-ro="$CHECK/$unit:/etc/systemd/system/$unit" \
        --bind="$out:/out" \
        "$@" \
        systemd.wants="$unit" \
        >"$out/console.log" 2>&1
    rc=$?
    dt=$(elapsed "$t")
    # nspawn refuses to rm -rf its propagation directory when /run is not a tmpfs; remove it ourselves.
    rm -rf "/run/systemd/nspawn/propagate/lifecycled-test-$name" "/run/systemd/nspawn/propagate/root" 2>/dev/null
    echo "   container ran $dt s (boot, checks, poweroff); systemd-nspawn exit status $rc"
    if [ ! -s "$out/results" ]; then
        echo "FAIL container boots ($name): no results; console:"; tail -40 "$out/console.log"
        failed=1; return
    fi
    grep -E '^(PASS|FAIL|SKIP|INFO)' "$out/results" | sed 's/^/   /'
    grep -q '^DONE' "$out/results" || { echo "   FAIL checks did not finish (timeout ${TIMEOUT}s?)"; failed=1; }
    grep -q '^FAIL' "$out/results" && failed=1
    echo "   details: $out/details, console: $out/console.log"
}

for mode in $MODES; do
    env=()
    case $mode in
        auto) ;;
        unified) env=(SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=1) ;;
        legacy|hybrid) env=(SYSTEMD_NSPAWN_UNIFIED_HIERARCHY=0) ;;
        *) die "unknown cgroup mode '$mode' (auto, unified, legacy)" ;;
    esac
    echo "== booting the container (cgroup mode: $mode)"
    boot "$mode" lifecycled-check.service "${env[@]}" -- \
        --bind-ro="$BIN/lifecycled:/usr/local/bin/lifecycled" \
        --bind-ro="$BIN/lifectl:/usr/local/bin/lifectl" \
        --bind-ro="$here/systemd/lifecycled.service:/etc/systemd/system/lifecycled.service"
done

# --- 5. the package case ----------------------------------------------------------------------------------------
# The packages of the binaries tested above, built the way a user builds them (make deb), the second one a build
# later. gzip instead of xz, and lintian once: the two builds differ in their version only.
if [ "${LIFECYCLED_NSPAWN_PACKAGE:-1}" = 1 ]; then
    DEBS=$WORK/debs
    rm -rf "$DEBS"
    t=$(now)
    echo "== make deb DEB_BUILD=1 and DEB_BUILD=2 (BINDIR_SOURCE=$BIN)"
    if make -s -C "$here" deb BINDIR_SOURCE="$BIN" DEB_BUILD=1 DEB_OUTDIR="$DEBS/1" DEB_COMPRESS=gzip >"$WORK/deb.log" 2>&1 \
        && make -s -C "$here" deb BINDIR_SOURCE="$BIN" DEB_BUILD=2 DEB_OUTDIR="$DEBS/2" DEB_COMPRESS=gzip LINTIAN=0 >>"$WORK/deb.log" 2>&1; then
        echo "   built in $(elapsed "$t") s; lintian on the first build:"
        grep -E '^ +[EWI]: ' "$WORK/deb.log" | sed 's/^ */   /'
        if grep -qE '^ +E: ' "$WORK/deb.log"; then echo "   FAIL lintian reports errors"; failed=1; else echo "   PASS lintian: no error"; fi
        cp "$here/systemd/container-package.sh" "$CHECK/package.sh" || die "copying the package case to $CHECK failed"
        cat >"$CHECK/lifecycled-package.service" <<'EOF'
[Unit]
Description=lifecycled package checks (test-in-container.sh)
[Service]
Type=exec
ExecStart=/bin/bash /check/package.sh
StandardOutput=journal+console
StandardError=journal+console
EOF
        echo "== booting the container for the package case (cgroup mode: auto)"
        boot package lifecycled-package.service -- --bind-ro="$DEBS:/debs"
    else
        tail -30 "$WORK/deb.log" | sed 's/^/   /'
        echo "   FAIL make deb ($WORK/deb.log)"
        failed=1
    fi
fi

echo "== cost: $(( $(date +%s) - t_start )) s wall in total; disk: tree $(du -sm "$ROOT" | cut -f1) MB, build $(du -sm "$WORK/build" 2>/dev/null | cut -f1) MB, all of $WORK $(du -sm "$WORK" | cut -f1) MB"
if [ $failed = 0 ]; then echo "== PASS"; else echo "== FAIL"; fi
exit $failed
