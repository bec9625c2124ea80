#!/bin/bash
# Runs inside the VM of test-in-vm.sh, started by lifecycled-check.service once systemd is up: crash recovery of
# lifecycled on pure cgroup2 with real controllers, then a memory squeeze (squeeze.sh, systemd/vm-squeeze.sh).
# Writes PASS/FAIL lines to /check/out/results.
set -u
R=/check/out/results; D=/check/out/details
: >"$R"; : >"$D"
# Each line reaches the disk at once: a VM stopped by the script's timeout keeps what it had found.
pass() { echo "PASS $1${2:+ — $2}" | tee -a "$R"; sync "$R"; }
fail() { echo "FAIL $1${2:+ — $2}" | tee -a "$R"; sync "$R"; }
log() { { echo; echo "### $*"; } >>"$D"; }
show() { systemctl show -P "$1" lifecycled.service; }
app_field() { timeout 30 lifectl list 2>/dev/null | awk -v a="$1" -v f="$2" '$1 == a { print $f }'; }
# The condition is a string evaluated at each try (not once, before the wait).
wait_for() { local i; for i in $(seq 1 "${2:-100}"); do eval "$1" && return 0; sleep 0.1; done; return 1; }
# The same, bounded in seconds rather than tries: under memory pressure one try can take seconds.
wait_until() { local until=$((SECONDS + $2)); until eval "$1"; do [ $SECONDS -lt $until ] || return 1; sleep 0.2; done; }
trap 'sync; systemctl poweroff --no-block' EXIT

state=$(timeout 90 systemctl is-system-running --wait 2>&1)
log "is-system-running: $state"; systemctl --failed --no-pager >>"$D" 2>&1
case $state in
    running|degraded) pass "VM boots: kernel $(uname -r), systemd $(systemctl --version | head -1 | cut -d' ' -f2) is PID 1 ($state)" ;;
    *) fail "VM boots" "is-system-running: $state" ;;
esac
[ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] && pass "pure cgroup2, controllers: $(cat /sys/fs/cgroup/cgroup.controllers)" \
    || fail "pure cgroup2" "$(stat -fc %T /sys/fs/cgroup)"

install -m 0755 /check/bin/lifecycled /check/bin/lifectl /usr/local/bin/
cp /check/lifecycled.service /etc/systemd/system/
mkdir -p /etc/systemd/system/lifecycled.service.d
# A shorter watchdog and abort timeout, so that the watchdog case below takes seconds (but not so short that a
# daemon starting under TCG misses its first ping); no start limit for the test's three crashes in a row.
cat >/etc/systemd/system/lifecycled.service.d/test.conf <<'CONF'
[Unit]
StartLimitIntervalSec=0
[Service]
WatchdogSec=15s
TimeoutAbortSec=5s
RestartSec=500ms
CONF
if [ "$(cat /check/placement 2>/dev/null)" = cgroupfs ]; then
    printf '[Service]\nEnvironment=LIFECYCLED_PLACEMENT=cgroupfs\n' >/etc/systemd/system/lifecycled.service.d/placement.conf
    echo "INFO placement forced to cgroupfs (the delegated subtree)" | tee -a "$R"
fi
systemctl daemon-reload

mkdir -p /etc/lifecycled/apps
# frozen: suspended with the freezer; stopped: suspended with SIGSTOP; forker: two processes; plain: stays background.
for app in frozen stopped forker plain; do
    method=signal; [ $app = frozen ] && method=freezer
    exec_line="/bin/sleep 100000"
    [ $app = forker ] && exec_line="/bin/sh -c 'sleep 100001 & exec sleep 100002'"
    cat >/etc/lifecycled/apps/$app.conf <<CONF
[App]
Exec=$exec_line
Protocol=none
AutoLaunch=background

[Lifecycle]
SuspendMethod=$method
BackgroundTimeSec=infinity
CONF
done

# memhog: 64 MiB of its own anonymous memory (a shell variable), reclaimed through its scope's memory.reclaim.
cat >/etc/lifecycled/apps/memhog.conf <<'CONF'
[App]
Exec=/bin/sh -c 's=$(head -c 67108864 /dev/zero | tr -c x x); while :; do sleep 100000; done'
Protocol=none

[Lifecycle]
BackgroundTimeSec=infinity
Reclaim=yes
ReclaimAfterSec=1
CONF

log "systemctl start lifecycled"
timeout 30 systemctl start lifecycled >>"$D" 2>&1 && pass "systemctl start lifecycled" || fail "systemctl start lifecycled" "$(show ActiveState)"
wait_for '[ -n "$(app_field plain 3)" ] && [ -n "$(app_field forker 3)" ]'
lifectl list >>"$D" 2>&1
journalctl -u lifecycled --no-pager -o cat | head -20 >>"$D"
cg=$(show ControlGroup)
main=$(show MainPID)
procs=$(tr '\n' ' ' <"/sys/fs/cgroup$cg/cgroup.procs" 2>/dev/null)
[ "$procs" = "$main " ] && pass "the daemon is alone in its service cgroup $cg" || fail "the daemon is alone in its service cgroup" "$cg: $procs (main $main)"
sub=$(cat "/sys/fs/cgroup$cg/cgroup.subtree_control" 2>/dev/null)
[ -z "$sub" ] && pass "the service cgroup enables no controllers for children" || fail "the service cgroup enables no controllers" "subtree_control: $sub"

scope_of() { echo "/sys/fs/cgroup/lifecycled.slice/app-lifecycled-$1.scope"; }
for app in frozen stopped forker plain; do
    pid=$(app_field $app 3)
    if [ -n "$pid" ] && grep -qx "$pid" "$(scope_of $app)/cgroup.procs" 2>/dev/null \
        && [ "$(systemctl is-active "app-lifecycled-$app.scope")" = active ]; then
        pass "$app (pid $pid) in its scope app-lifecycled-$app.scope" "$(cat "$(scope_of $app)/cgroup.controllers" 2>/dev/null | tr '\n' ' ')"
    else
        fail "$app in its scope" "pid ${pid:-none}: $(grep '^0::' "/proc/$pid/cgroup" 2>/dev/null)"
    fi
done
n=$(wc -l <"$(scope_of forker)/cgroup.procs" 2>/dev/null)
[ "${n:-0}" = 2 ] && pass "both processes of forker in its scope" || fail "both processes of forker in its scope" "${n:-0} in it"
systemctl status app-lifecycled-forker.scope --no-pager >>"$D" 2>&1
w=$(cat "$(scope_of plain)/cpu.weight" 2>/dev/null)
[ -n "$w" ] && [ "$w" != 100 ] && pass "background weight through systemd: cpu.weight $w" || fail "background weight through systemd" "cpu.weight ${w:-missing}"

lifectl suspend frozen >>"$D" 2>&1; lifectl suspend stopped >>"$D" 2>&1
wait_for 'grep -q "frozen 1" "$(scope_of frozen)/cgroup.events"' 30 \
    && pass "suspend by FreezeUnit: frozen 1 in the scope's cgroup.events" || fail "suspend by FreezeUnit" "$(cat "$(scope_of frozen)/cgroup.events" 2>/dev/null | tr '\n' ' ')"
[ "$(app_field frozen 2)" = suspended ] && [ "$(app_field stopped 2)" = suspended ] && pass "two apps suspended" || fail "two apps suspended" "$(lifectl list 2>&1 | tr '\n' ';')"

# Every app as the daemon reports it: suspended ones stopped or frozen, the others running.
consistent() {
    local app pid st frozen ok=0
    for app in frozen stopped forker plain; do
        pid=$(app_field $app 3); st=$(app_field $app 2)
        [ -n "$pid" ] && [ -d /proc/$pid ] || { echo "$app: no process (${pid:-none})"; ok=1; continue; }
        frozen=$(awk '$1 == "frozen" { print $2 }' "$(scope_of $app)/cgroup.events" 2>/dev/null)
        local pstate; pstate=$(awk '/^State:/ { print $2 }' /proc/$pid/status)
        if [ "$st" = suspended ]; then
            [ "$pstate" = T ] || [ "$frozen" = 1 ] || { echo "$app: reported suspended but running ($pstate, frozen $frozen)"; ok=1; }
        else
            [ "$pstate" != T ] && [ "$frozen" != 1 ] || { echo "$app: reported $st but stopped ($pstate, frozen $frozen)"; ok=1; }
        fi
    done
    return $ok
}
pids_before=$(for a in frozen stopped forker plain; do app_field $a 3; done | tr '\n' ' ')

crash() {  # $1: what, $2: how
    local what=$1 before after restarts
    wait_for '[ "$(show MainPID)" != 0 ]' 100
    before=$(show MainPID); restarts=$(show NRestarts)
    log "crash: $what (MainPID $before)"
    # `kill 0` would signal this script's own process group.
    [ "$before" != 0 ] || { fail "$what: no daemon running to kill" "$(show ActiveState)/$(show SubState)"; return; }
    eval "$2"
    # Bounded in time, not in tries: under TCG one try of three systemctl calls takes most of a second.
    local until=$((SECONDS + 90)) up=1
    while [ $SECONDS -lt $until ]; do
        [ "$(show MainPID)" != "$before" ] && [ "$(show MainPID)" != 0 ] && [ "$(show ActiveState)" = active ] && { up=0; break; }
        [ "$(show ActiveState)" = failed ] && break
        sleep 0.5
    done
    if [ $up = 0 ]; then
        pass "after $what, systemd started the daemon again" "MainPID $before -> $(show MainPID), NRestarts $restarts -> $(show NRestarts)"
    else
        fail "after $what, systemd started the daemon again" "$(show ActiveState)/$(show SubState) $(show Result); $(journalctl -u lifecycled --no-pager -o cat _PID=1 | grep -v 'Consumed' | tail -4 | tr '\n' ';')"
        # No daemon to ask: every app process that was there, as the kernel shows it.
        local pid stopped=""
        for pid in $pids_before; do
            [ -d /proc/$pid ] || continue
            [ "$(awk '/^State:/ { print $2 }' /proc/$pid/status)" = T ] && stopped+="$pid (T) "
            grep -qs "frozen 1" "/sys/fs/cgroup$(sed -n 's/^0:://p' /proc/$pid/cgroup)/cgroup.events" && stopped+="$pid (frozen) "
        done
        [ -z "$stopped" ] && pass "after $what, no app process left stopped" || fail "after $what, app processes left stopped without a daemon" "$stopped"
        systemctl reset-failed lifecycled >>"$D" 2>&1; systemctl start --no-block lifecycled >>"$D" 2>&1
        return
    fi
    wait_for 'lifectl list >/dev/null 2>&1' 50
    lifectl list >>"$D" 2>&1
    after=$(for a in frozen stopped forker plain; do app_field $a 3; done | tr '\n' ' ')
    [ "$after" = "$pids_before" ] && pass "after $what, every app re-adopted with its process" "$after" \
        || fail "after $what, every app re-adopted with its process" "before: $pids_before, after: $after"
    local why; why=$(consistent)
    [ -z "$why" ] && pass "after $what, no app left stopped or running against its state" || fail "after $what, apps consistent" "$why"
}
crash "SIGKILL" 'kill -KILL $(show MainPID)'
crash "SIGSEGV" 'kill -SEGV $(show MainPID)'
crash "a watchdog timeout (the daemon stopped with SIGSTOP)" 'kill -STOP $(show MainPID)'

j=$(journalctl --no-pager -o cat _PID=1 2>/dev/null)
echo "$j" | grep -E 'lifecycled|219|left-over' | tail -30 >>"$D"
echo "$j" | grep -q '219/CGROUP' && fail "systemd never failed a start with 219/CGROUP" "$(echo "$j" | grep -m1 '219/CGROUP')" \
    || pass "systemd never failed a start with 219/CGROUP"
echo "$j" | grep -q 'Found left-over process' && fail "no left-over process warnings" "$(echo "$j" | grep -c 'Found left-over process') of them" \
    || pass "no left-over process warnings on restart"

lifectl resume frozen >>"$D" 2>&1; lifectl resume stopped >>"$D" 2>&1
wait_for 'grep -q "frozen 0" "$(scope_of frozen)/cgroup.events"' 30 \
    && pass "resume by ThawUnit after the crashes" || fail "resume by ThawUnit after the crashes" "$(cat "$(scope_of frozen)/cgroup.events" 2>/dev/null | tr '\n' ' ')"

# Memory reclaim through the scope's memory.reclaim (the cgroup2 memory controller), into a zram swap device.
rss_anon() { awk '/^RssAnon:/ { print $2 }' /proc/$1/status 2>/dev/null; }
modprobe zram 2>>"$D"
if [ -e /sys/block/zram0 ] && echo 256M >/sys/block/zram0/disksize 2>>"$D" && mkswap /dev/zram0 >>"$D" 2>&1 && swapon /dev/zram0 2>>"$D"; then
    lifectl launch memhog --background >>"$D" 2>&1
    wait_for '[ -n "$(app_field memhog 3)" ]' 100
    hog=$(app_field memhog 3)
    wait_for '[ "$(rss_anon $hog)" -gt 60000 ] 2>/dev/null' 300
    before=$(rss_anon $hog)
    [ -f "$(scope_of memhog)/memory.reclaim" ] && pass "memhog's scope has the memory controller" \
        || fail "memhog's scope has the memory controller" "$(cat "$(scope_of memhog)/cgroup.controllers" 2>/dev/null)"
    lifectl suspend memhog >>"$D" 2>&1
    wait_for 'lifectl status memhog 2>/dev/null | grep -q "reclaim: *done"' 300
    lifectl status memhog >>"$D" 2>&1
    after=$(rss_anon $hog)
    if lifectl status memhog 2>/dev/null | grep -q "reclaim: *done with memory.reclaim"; then
        pass "a suspended app's memory reclaimed with memory.reclaim on its scope" "RssAnon ${before} kB -> ${after} kB"
    else
        fail "reclaim with memory.reclaim" "$(lifectl status memhog 2>&1 | grep reclaim)"
    fi
    [ -n "$after" ] && [ "$after" -le $((before / 10)) ] && pass "at least 90% of its anonymous memory left RAM" "${before} kB -> ${after} kB" \
        || fail "at least 90% of its anonymous memory left RAM" "${before} kB -> ${after:-?} kB"
    lifectl terminate memhog >>"$D" 2>&1
    swapoff /dev/zram0 2>>"$D"
else
    fail "a zram swap device in the VM" "$(ls /sys/block | tr '\n' ' ')"
fi

# A suspended app whose state file is lost, then a crash: the next daemon cannot re-adopt the process left in the
# scope, so it continues and terminates it (a stray); nothing stays stopped.
lifectl suspend stopped >>"$D" 2>&1
stray=$(app_field stopped 3)
wait_for '[ "$(awk "/^State:/ { print \$2 }" /proc/$stray/status 2>/dev/null)" = T ]' 50
rm -f /run/lifecycled/state/stopped.json /run/lifecycled/state/stopped.json.tmp
crashed=$(show MainPID); kill -KILL "$crashed"
wait_for '[ "$(show MainPID)" != "$crashed" ] && [ "$(show MainPID)" != 0 ] && lifectl list >/dev/null 2>&1' 600
wait_for '! grep -qs "^State:.*T" /proc/$stray/status' 300 \
    && pass "a stopped process in a scope no state file accounts for is continued and terminated after a crash" \
    || fail "a stray left stopped in its scope" "pid $stray: $(awk '/^State:/ { print $2 }' /proc/$stray/status 2>/dev/null)"
journalctl -u lifecycled --no-pager -o cat | grep -m1 "no saved state accounts for them" >>"$D" 2>&1

# An app whose scope is stopped from outside has exited.
systemctl stop app-lifecycled-plain.scope >>"$D" 2>&1
wait_for '[ "$(app_field plain 2)" = notRunning ]' 50 && pass "systemctl stop of an app's scope is the app's exit" \
    || fail "systemctl stop of an app's scope is the app's exit" "plain: $(app_field plain 2)"

log "systemctl stop lifecycled"
timeout 100 systemctl stop lifecycled >>"$D" 2>&1 && pass "systemctl stop lifecycled" || fail "systemctl stop lifecycled"
left=$(cat /sys/fs/cgroup/lifecycled.slice/app-lifecycled-*.scope/cgroup.procs 2>/dev/null | tr '\n' ' ')
[ -z "$left" ] && pass "no app process left after the stop" || fail "no app process left after the stop" "$left"
journalctl -u lifecycled --no-pager -o short-monotonic >>"$D" 2>&1

# The memory squeeze: protection of the apps in front, jetsam, and earlyoom and systemd-oomd on the same squeeze
# (docs/MEMORY.md). test-in-vm.sh puts it on the check disk unless SQUEEZE=0.
if [ -f /check/squeeze.sh ]; then
    . /check/squeeze.sh
else
    echo "INFO the memory squeeze was not run (SQUEEZE=0)" | tee -a "$R"
fi
echo DONE >>"$R"
