# Sourced by vm-check.sh once its crash checks are done (pass, fail, log, show, app_field, wait_until and scope_of are
# its own): a real memory squeeze on pure cgroup2 with the memory controller, first against lifecycled's jetsam, then
# the same squeeze against earlyoom and against systemd-oomd, with lifecycled's jetsam off.
#
# The squeeze: five real clients (vm-app, liblifecycle) each hold 24 MiB in their scopes in lifecycled.slice: old,
# middle and recent were in front in that order and are suspended, visible is inactive (in the foreground, without
# focus) and front is active. The slice gets a MemoryMax= 16 MiB under what the machine has available, and a
# MemoryHigh= 96 MiB below that (the kernel throttles hard only a few percent over memory.high); vm-squeezer, in a
# scope of the same slice, allocates until the slice's memory.pressure shows a stall and keeps it there, holding at
# most a third of the gap over MemoryHigh= alone, so that it can pass memory.high by itself whatever the apps hold; it
# stops growing at the first stall, well under MemoryMax=. memory.high throttles the squeezer and counts as memory stall in
# PSI, so the pressure is real without swap (the VM has none), and the machine is short too (under earlyoom's 10% of
# MemAvailable).
#
# What is recorded for the comparison (INFO lines, and the killers' own words in the details): which processes each
# one ended, in which order, and how long after the squeeze began (docs/MEMORY.md).

SQ=/run/squeeze
# How long the squeezer may take to bring pressure, and jetsam to act on it, before the check fails with what it saw.
squeeze_bound=300
SLICE=/sys/fs/cgroup/lifecycled.slice
squeeze_apps="old middle recent visible front"
squeeze_t0=0

# The apps and the daemon's configuration; $1: whether lifecycled's jetsam is on (its PSI source).
squeeze_configure() {
    rm -f /etc/lifecycled/apps/*.conf
    for app in $squeeze_apps; do
        printf '[App]\nExec=/usr/local/bin/vm-app 24 %s/%s\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n' "$SQ" "$app" \
            >/etc/lifecycled/apps/$app.conf
    done
    # TerminateAfterSec= short, so that the run takes seconds; the trigger is the default one.
    printf '[Sources]\nMemoryPressure=%s\n\n[Memory]\nTerminateAfterSec=2s\n' "$1" >/etc/lifecycled/lifecycled.conf
}

# A fresh daemon and the five apps in their states; the slice's limits sized from what the machine has now.
squeeze_setup() {
    squeeze_configure "$1"
    mkdir -p $SQ; rm -f $SQ/*
    # A stop and a start, not a restart: a restart hands the running apps over to the next daemon.
    timeout 100 systemctl stop lifecycled >>"$D" 2>&1
    squeeze_since=$(date +%s)
    timeout 60 systemctl start lifecycled >>"$D" 2>&1
    wait_until 'lifectl list >/dev/null 2>&1' 60
    local app
    timeout 60 lifectl focus old >>"$D" 2>&1
    # systemd writes memory.low once it has carried out the daemon's SetUnitProperties.
    wait_until '[ "$(cat "$(scope_of old)/memory.low" 2>/dev/null)" = max ]' 30
    old_low_in_front=$(cat "$(scope_of old)/memory.low" 2>/dev/null)
    for app in middle recent front; do timeout 60 lifectl focus $app >>"$D" 2>&1; done
    for app in old middle recent; do timeout 60 lifectl suspend $app >>"$D" 2>&1; done
    timeout 60 lifectl launch visible >>"$D" 2>&1
    wait_until '[ "$(app_field recent 2)" = suspended ] && [ "$(app_field visible 2)" = inactive ] && [ "$(app_field front 2)" = active ]' 60
    timeout 30 lifectl list >>"$D" 2>&1
    local avail current
    avail=$(( $(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) << 10 ))
    current=$(cat $SLICE/memory.current)
    squeeze_max=$(( (current + avail - (16 << 20)) >> 20 ))
    squeeze_high=$(( squeeze_max - 96 ))
    timeout 30 systemctl set-property --runtime lifecycled.slice MemoryMax=${squeeze_max}M MemoryHigh=${squeeze_high}M >>"$D" 2>&1
    log "squeeze setup (jetsam $1): MemAvailable $((avail >> 20)) MiB, slice $((current >> 20)) MiB -> MemoryHigh ${squeeze_high}M MemoryMax ${squeeze_max}M"
    squeeze_pids=""
    for app in $squeeze_apps; do squeeze_pids+="$app:$(app_field $app 3) "; done
}

# $1: the run's name, which names the squeezer's scope (squeeze-NAME.scope: a scope whose process was killed stays
# failed, and its name taken).
squeeze_start() {
    squeeze_t0=$(date +%s.%N)
    squeeze_unit=squeeze-$1.scope
    systemd-run --quiet --scope --slice=lifecycled.slice --unit=$squeeze_unit -- \
        /usr/local/bin/vm-squeezer $SLICE/memory.pressure 8 $((squeeze_high + 32)) >$SQ/squeezer.log 2>&1 &
    squeezer_pid=""
    wait_until 'squeezer_pid=$(head -1 $SLICE/$squeeze_unit/cgroup.procs 2>/dev/null); [ -n "$squeezer_pid" ]' 30
}

squeeze_stop() {
    timeout 30 systemctl kill --signal=KILL $squeeze_unit >>"$D" 2>&1
    wait_until '! systemctl is-active -q $squeeze_unit' 30
    cat $SQ/squeezer.log >>"$D" 2>/dev/null
    timeout 30 systemctl set-property --runtime lifecycled.slice MemoryMax=infinity MemoryHigh=infinity >>"$D" 2>&1
}

# What the squeeze saw, for a failure: the squeezer's last words and the machine's pressure.
squeeze_seen() { echo "squeezer: $(tail -2 $SQ/squeezer.log 2>/dev/null | tr '\n' ';') $(tr '\n' ' ' </proc/pressure/memory)"; }

# Seconds since the squeeze began.
squeeze_at() { awk -v a="$squeeze_t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# Which of the apps and the squeezer have ended: "name (pid)" words.
squeeze_ended() {
    local entry name pid gone=""
    for entry in $squeeze_pids squeezer:$squeezer_pid; do
        name=${entry%%:*}; pid=${entry#*:}
        [ -n "$pid" ] && [ -d /proc/$pid ] && [ "$(awk '/^State:/ { print $2 }' /proc/$pid/status 2>/dev/null)" != Z ] || gone+="$name "
    done
    echo "${gone% }"
}

# --- 0. an adopted scope gets its own memory.low back -------------------------------------------------------------
# A launcher's scope, as a desktop makes one, with a memory.low of its own (16M); adopted by root's daemon from a slice
# named by AppSlice=.
rm -f /etc/lifecycled/apps/*.conf
printf '[Adopt]\nScopes=yes\nUser=root\nAppSlice=adopt.slice\nBackgroundTimeSec=infinity\n' >/etc/lifecycled/lifecycled.conf
systemd-run --quiet --scope --slice=adopt.slice --unit=app-vm-org.example.Notes-1 -p MemoryLow=16M -- /bin/sleep 100000 &
notes_scope=/sys/fs/cgroup/adopt.slice/app-vm-org.example.Notes-1.scope
wait_until '[ -s $notes_scope/cgroup.procs ]' 30
own=$(cat $notes_scope/memory.low 2>/dev/null)
timeout 60 systemctl start lifecycled >>"$D" 2>&1
wait_until '[ -n "$(app_field org.example.Notes 3)" ]' 60
timeout 30 lifectl list >>"$D" 2>&1
timeout 60 lifectl focus org.example.Notes >>"$D" 2>&1
wait_until '[ "$(cat $notes_scope/memory.low)" = max ]' 30 && front_low=max || front_low=$(cat $notes_scope/memory.low 2>/dev/null)
timeout 60 lifectl background org.example.Notes >>"$D" 2>&1
wait_until '[ "$(cat $notes_scope/memory.low)" = 0 ]' 30 && back_low=0 || back_low=$(cat $notes_scope/memory.low 2>/dev/null)
timeout 60 lifectl focus org.example.Notes >>"$D" 2>&1
wait_until '[ "$(cat $notes_scope/memory.low)" = max ]' 30
timeout 100 systemctl stop lifecycled >>"$D" 2>&1
after=$(cat $notes_scope/memory.low 2>/dev/null)
[ "$own" = 16777216 ] && [ "$front_low" = max ] && [ "$back_low" = 0 ] && [ "$after" = 16777216 ] \
    && pass "an adopted scope is protected in front (max), not in the background (0), and has its own memory.low (16M) back after the daemon's stop" \
    || fail "an adopted scope's memory.low" "own ${own:-?}, in front ${front_low:-?}, in the background ${back_low:-?}, after the stop ${after:-?}"
timeout 30 systemctl stop app-vm-org.example.Notes-1.scope >>"$D" 2>&1

# --- 1. lifecycled's jetsam ---------------------------------------------------------------------------------------
install -m 0755 /check/bin/vm-app /check/bin/vm-squeezer /usr/local/bin/
squeeze_setup yes
ml() { cat "$(scope_of "$1")/memory.low" 2>/dev/null; }
# What the daemon said of the apps' scopes since the set-up began (a scope it gave up takes no more weights).
scope_log() { timeout 60 journalctl -u lifecycled --since "@$squeeze_since" --no-pager -o cat | grep -i 'scope' | tail -${1:-5}; }
wait_until '[ "$(ml front)" = max ] && [ "$(ml visible)" = max ] && [ "$(ml old)" = 0 ] && [ "$(ml recent)" = 0 ]' 30 \
    && pass "memory protection through systemd: memory.low max for the active and the visible app, 0 for the suspended ones" \
    || fail "memory protection through systemd" "memory.low front $(ml front), visible $(ml visible), old $(ml old), recent $(ml recent); $(scope_log | tr '\n' ';')"
scope_log 50 >>"$D"
# Each app writes its 24 MiB as its first act, and runs only once its scope holds it: all of it is charged there.
charged() { echo $(( $(cat "$(scope_of "$1")/memory.current" 2>/dev/null || echo 0) >> 20 )); }
charges=""; uncharged=""
for app in $squeeze_apps; do
    charges+="$app $(charged $app) MiB, "
    [ "$(charged $app)" -ge 24 ] || uncharged+="$app "
done
service_mib=$(( $(cat /sys/fs/cgroup/system.slice/lifecycled.service/memory.current 2>/dev/null || echo 0) >> 20 ))
[ -z "$uncharged" ] && pass "each app's memory is charged to its scope: the 24 MiB it wrote first thing" "${charges%, }; lifecycled.service ${service_mib} MiB" \
    || fail "each app's memory is charged to its scope" "${charges%, }; lifecycled.service ${service_mib} MiB"
[ "$old_low_in_front" = max ] && [ "$(ml old)" = 0 ] \
    && pass "memory protection follows focus: old had memory.low max while active, 0 once focus left it" \
    || fail "memory protection follows focus" "old: ${old_low_in_front:-?} while active, $(ml old) now"

squeeze_start jetsam
wait_until 'grep -q warning $SQ/front && grep -q warning $SQ/visible' $squeeze_bound \
    && pass "the squeeze warns the apps in front: didReceiveMemoryWarning reached front and visible (a real client)" "$(squeeze_at) s into the squeeze; $(grep -m1 pressure $SQ/squeezer.log)" \
    || fail "the squeeze warns the apps in front" "after $(squeeze_at) s; front: $(tr '\n' ';' <$SQ/front); $(squeeze_seen)"
jetsam_log() { timeout 60 journalctl -u lifecycled --since "@${squeeze_t0%.*}" --no-pager -o cat | grep -E 'terminated while suspended to relieve memory pressure|no suspended app is left|Memory pressure: sent'; }
wait_until 'jetsam_log | grep -q "no suspended app is left"' $squeeze_bound
order=$(jetsam_log | sed -n 's/^\([a-z]*\): terminated while suspended.*/\1/p' | tr '\n' ' ')
jetsam_log >>"$D"
[ "$order" = "old middle recent " ] && pass "jetsam ends the suspended apps in LRU order: $order" "all ended by $(squeeze_at) s" \
    || fail "jetsam ends the suspended apps in LRU order" "ended: ${order:-none}; $(jetsam_log | tail -3 | tr '\n' ';')"
# Pressure goes on (the squeezer holds the slice at its limit) with nothing suspended left: two more trigger windows.
sleep 4
ended=$(squeeze_ended)
[ "$ended" = "old middle recent" ] && [ "$(app_field front 2)" = active ] && [ "$(app_field visible 2)" = inactive ] \
    && pass "under pressure with no suspended app left, the active and the visible app are never ended" "ended: $ended" \
    || fail "the active and the visible app are never ended" "ended: $ended; $(timeout 60 lifectl list 2>&1 | tr '\n' ';')"
echo "INFO jetsam: ended $ended (in that order: ${order% }), warned first; $(grep -m1 pressure $SQ/squeezer.log)" | tee -a "$R"
squeeze_stop
timeout 60 lifectl launch old >>"$D" 2>&1
wait_until '[ "$(grep -c "^launch" $SQ/old)" = 2 ]' 60
last=$(grep '^launch' $SQ/old | tail -1)
[ "${last##* }" = 1 ] && pass "the next launch of an app ended by jetsam has terminatedInBackground in its didFinishLaunching" "$last" \
    || fail "terminatedInBackground in the next launch" "$(tr '\n' ';' <$SQ/old)"

# --- 2. the same squeeze under earlyoom and under systemd-oomd, lifecycled's jetsam off -------------------------------
# $1: the killer's name; $2: how its lines are found in the journal. Records what ended within 20 s of the pressure.
squeeze_compare() {
    squeeze_start $1
    # The killer may end the squeezer before it sees pressure: that is a result too.
    if ! wait_until 'grep -q pressure $SQ/squeezer.log || [ ! -d /proc/$squeezer_pid ]' $squeeze_bound; then
        fail "the squeeze under $1 reaches pressure" "not within $(squeeze_at) s; $(squeeze_seen)"
        timeout 60 journalctl --no-pager -o short-monotonic --since "@${squeeze_t0%.*}" $2 >>"$D" 2>&1
        squeeze_stop
        return
    fi
    sleep 20
    # $3: a command whose report is wanted while the squeeze holds.
    [ -n "${3:-}" ] && timeout 60 $3 >>"$D" 2>&1
    local ended; ended=$(squeeze_ended)
    timeout 60 journalctl --no-pager -o short-monotonic --since "@${squeeze_t0%.*}" $2 >$SQ/$1.journal 2>&1
    { echo "### $1"; cat $SQ/$1.journal; } >>"$D"
    echo "INFO $1: ended ${ended:-nothing} within 20 s of the pressure; $(grep -m1 pressure $SQ/squeezer.log)" | tee -a "$R"
    squeeze_stop
}
if command -v earlyoom >/dev/null; then
    squeeze_setup no
    timeout 60 systemctl start earlyoom >>"$D" 2>&1
    squeeze_compare earlyoom "-u earlyoom"
    timeout 60 systemctl stop earlyoom >>"$D" 2>&1
else
    echo "INFO earlyoom: not in the VM's tree" | tee -a "$R"
fi
if [ -x /lib/systemd/systemd-oomd ]; then
    squeeze_setup no
    # oomd acts on the slice's memory.pressure: 10% over avg10 for 2 s (its defaults are 60% for 30 s).
    mkdir -p /etc/systemd/oomd.conf.d
    printf '[OOM]\nDefaultMemoryPressureDurationSec=2s\n' >/etc/systemd/oomd.conf.d/squeeze.conf
    timeout 30 systemctl set-property --runtime lifecycled.slice ManagedOOMMemoryPressure=kill ManagedOOMMemoryPressureLimit=10% >>"$D" 2>&1
    # The earlier squeeze's stall still weighs in the slice's avg10 for a while: oomd would judge that one, and end the
    # next squeezer within seconds of its start.
    wait_until '[ "$(awk '"'"'/^some/ { split($2, a, "="); print int(a[2]) }'"'"' $SLICE/memory.pressure)" -lt 2 ]' 90 \
        || echo "INFO the slice's pressure had not settled: $(head -1 $SLICE/memory.pressure)" | tee -a "$R"
    timeout 60 systemctl start systemd-oomd >>"$D" 2>&1
    squeeze_compare systemd-oomd "-u systemd-oomd" oomctl
    timeout 60 systemctl stop systemd-oomd systemd-oomd.socket >>"$D" 2>&1
else
    echo "INFO systemd-oomd: not in the VM's tree" | tee -a "$R"
fi
timeout 60 journalctl -k --no-pager -o cat | grep -iE 'out of memory|killed process' >>"$D"
timeout 100 systemctl stop lifecycled >>"$D" 2>&1
