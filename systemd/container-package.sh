#!/bin/bash
# The package case of test-in-container.sh, run inside a container of its own (a clean tree: nothing of lifecycled
# bound in) by lifecycled-package.service: /debs/1 and /debs/2 hold two builds of the packages (DEB_BUILD=1 and 2).
#   apt install ./lifecycled_*.deb       the service and the socket run; lifectl status as root and as a member
#                                        of [Control] Group=, whose changing verbs work while a stranger's do not
#   apt install the next build           a changed conffile kept, the daemon restarted and the apps not: the same
#                                        pids, the suspended app suspended, a scene's saved state kept
#   apt remove, then apt purge           the daemon stopped and its apps terminated; after the purge the file list
#                                        is the one from before the install
set -u
R=/out/results; D=/out/details
: >"$R"; : >"$D"
pass() { echo "PASS package: $1${2:+ — $2}" | tee -a "$R"; }
fail() { echo "FAIL package: $1${2:+ — $2}" | tee -a "$R"; }
log() { { echo; echo "### $*"; } >>"$D"; }
show() { systemctl show -P "$1" lifecycled.service; }
app_field() { lifectl list 2>/dev/null | awk -v a="$1" -v f="$2" '$1 == a { print $f }'; }
wait_for() { local i; for i in $(seq 1 100); do eval "$1" && return 0; sleep 0.1; done; return 1; }
pids_of_comm() { local p; for p in /proc/[0-9]*; do [ "$(cat "$p/comm" 2>/dev/null)" = "$1" ] && echo "${p#/proc/}"; done; }
apt_get() { log "apt-get $*"; DEBIAN_FRONTEND=noninteractive timeout 120 apt-get -y -q "$@" </dev/null >>"$D" 2>&1; }
# Every file and directory outside the kernel's, apt's and dpkg's own bookkeeping, the logs and this test's mounts.
# The package's dpkg records are checked on their own (dpkg -s, /var/lib/dpkg/info).
snapshot() {
    find / -xdev \( -path /out -o -path /check -o -path /debs -o -path /tmp -o -path /var/tmp -o -path /var/log \
        -o -path /var/cache -o -path /var/lib/apt -o -path /var/lib/dpkg \) -prune -o -print
    find /run -xdev \( -path /run/systemd -o -path /run/user -o -path /run/log -o -path /run/dbus -o -path /run/lock \) -prune -o -print
}
trap 'systemctl poweroff --no-block' EXIT

state=$(timeout 60 systemctl is-system-running --wait 2>&1)
case $state in running|degraded) ;; *) fail "container boots" "is-system-running: $state" ;; esac
debs() { ls /debs/"$1"/lifecycled_*.deb /debs/"$1"/liblifecycle1_*.deb /debs/"$1"/liblifecycle-dev_*.deb; }
echo "INFO package: $(cd /debs/1 && ls | sed 's/_.*//' | tr '\n' ' ')in two builds: $(dpkg-deb -f /debs/1/lifecycled_*.deb Version), $(dpkg-deb -f /debs/2/lifecycled_*.deb Version)" | tee -a "$R"

# The operator and the stranger, made before the first file list: useradd's files are not the package's.
groupadd --system lcctl && useradd --no-create-home --groups lcctl lcop && useradd --no-create-home lcstranger
as() { runuser -u "$1" -- "${@:2}"; }
snapshot | sort >/out/files-before

# --- install ----------------------------------------------------------------------------------------------------
t0=$(date +%s%N)
if apt_get install $(debs 1); then pass "apt install ./lifecycled_*.deb ./liblifecycle1_*.deb ./liblifecycle-dev_*.deb" "$(( ($(date +%s%N) - t0) / 1000000 )) ms"
else fail "apt install of the first build" "$(tail -3 "$D" | tr '\n' ' ')"; fi
version1=$(dpkg-query -W -f '${Version}' lifecycled 2>/dev/null)
enabled=$(systemctl is-enabled lifecycled.service lifecycled.socket 2>&1 | tr '\n' ' ')
active=$(systemctl is-active lifecycled.service lifecycled.socket 2>&1 | tr '\n' ' ')
[ "$enabled" = "enabled enabled " ] && [ "$active" = "active active " ] && [ "$(readlink "/proc/$(show MainPID)/exe")" = /usr/bin/lifecycled ] \
    && pass "the install enabled and started lifecycled.service and lifecycled.socket" "version $version1, /usr/bin/lifecycled pid $(show MainPID)" \
    || fail "the install enabled and started the units" "is-enabled: $enabled, is-active: $active, exe $(readlink "/proc/$(show MainPID)/exe")"
out=$(lifectl status 2>&1) && pass "lifectl status as root" "$(echo "$out" | head -1)" || fail "lifectl status as root" "$out"

# The administrator's changes: a conffile edited ([Control] Group=), apps added.
cat >>/etc/lifecycled/lifecycled.conf <<'CONF'

[Control]
Group=lcctl
CONF
cp /etc/lifecycled/lifecycled.conf /out/lifecycled.conf.edited
cat >/etc/lifecycled/apps/sleeper.conf <<'CONF'
[App]
Exec=/bin/sleep 100000
Protocol=none
AutoLaunch=yes

[Lifecycle]
BackgroundTimeSec=infinity
CONF
# A scene app in bash (no Python in the tree): it acks every message on fd 3, and hands a state over with the ack
# of sceneDidEnterBackground, which the daemon keeps with the scene's session.
cat >/etc/lifecycled/shell-client.sh <<'SH'
printf '{"type":"hello","protocol":1,"app":"shell"}\n' >&3
while IFS= read -r line <&3; do
    echo "$line" >>/out/shell.log
    [[ $line =~ \"id\":([0-9]+) ]] || continue
    if [[ $line == *'"type":"sceneDidEnterBackground"'* ]]; then
        printf '{"type":"ack","id":%s,"state":{"draft":"kept across the upgrade"}}\n' "${BASH_REMATCH[1]}" >&3
    else
        printf '{"type":"ack","id":%s}\n' "${BASH_REMATCH[1]}" >&3
    fi
done
echo EOF >>/out/shell.log
SH
cat >/etc/lifecycled/apps/shell.conf <<'CONF'
[App]
Exec=/bin/bash /etc/lifecycled/shell-client.sh
AutoLaunch=background

[Lifecycle]
BackgroundTimeSec=infinity

[Scenes]
CONF
log "systemctl reload lifecycled"
timeout 30 systemctl reload lifecycled >>"$D" 2>&1 || fail "systemctl reload lifecycled" "$(journalctl -u lifecycled --no-pager -o cat | tail -3 | tr '\n' ' ')"
wait_for '[ -n "$(app_field sleeper 3)" ] && [ "$(app_field shell 2)" = background ]'
lifectl scene open shell >>"$D" 2>&1; lifectl background shell >>"$D" 2>&1
scenes_before=$(lifectl scenes shell 2>&1); echo "$scenes_before" >>"$D"
echo "$scenes_before" | grep -q 'kept across the upgrade' && pass "the scene app saved a state with its session" "$(echo "$scenes_before" | sed -n 2p | tr -s ' ')" \
    || fail "the scene app saved a state with its session" "$scenes_before"

out=$(as lcop lifectl status 2>&1) && pass "lifectl status as lcop, a member of [Control] Group=lcctl" || fail "lifectl status as lcop" "$out"
as lcstranger lifectl suspend sleeper >>"$D" 2>&1; rc=$?
[ $rc = 1 ] && [ "$(app_field sleeper 2)" != suspended ] && pass "a user outside the group may not suspend (exit 1)" || fail "a user outside the group may not suspend" "exit $rc, state $(app_field sleeper 2)"
if as lcop lifectl suspend sleeper >>"$D" 2>&1 && [ "$(app_field sleeper 2)" = suspended ]; then pass "lcop suspends sleeper: Group= took effect"
else fail "lcop suspends sleeper" "state $(app_field sleeper 2)"; fi

# --- upgrade ----------------------------------------------------------------------------------------------------
sleep_pid=$(app_field sleeper 3); shell_pid=$(app_field shell 3); main_before=$(show MainPID)
lifectl list >>"$D" 2>&1
since=$(date '+%Y-%m-%d %H:%M:%S')
t0=$(date +%s%N)
if apt_get install $(debs 2); then pass "apt install of the next build" "$version1 -> $(dpkg-query -W -f '${Version}' lifecycled) in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
else fail "apt install of the next build" "$(tail -3 "$D" | tr '\n' ' ')"; fi
lifectl list >>"$D" 2>&1
cmp -s /etc/lifecycled/lifecycled.conf /out/lifecycled.conf.edited && [ -z "$(ls /etc/lifecycled/*.dpkg-* 2>/dev/null)" ] \
    && pass "the edited conffile was kept, with no .dpkg-new or .dpkg-dist beside it" || fail "the edited conffile was kept" "$(ls /etc/lifecycled; diff /out/lifecycled.conf.edited /etc/lifecycled/lifecycled.conf | head -5)"
main_after=$(show MainPID)
handover=$(journalctl -u lifecycled --since "$since" --no-pager -o cat | grep -m1 '^Restarting: ')
[ "$main_after" != "$main_before" ] && [ "$(show ActiveState)" = active ] && [ -n "$handover" ] \
    && pass "the upgrade restarted the daemon, which handed its apps over" "MainPID $main_before -> $main_after; $handover" \
    || fail "the upgrade restarted the daemon with a hand-over" "MainPID $main_before -> $main_after, $(show ActiveState); $(journalctl -u lifecycled --since "$since" --no-pager -o cat | grep -m2 -E '^(Stopping|Restarting|Failed)' | tr '\n' ' ')"
[ -n "$sleep_pid" ] && [ "$(app_field sleeper 3)" = "$sleep_pid" ] && [ "$(app_field sleeper 2)" = suspended ] && [ -d "/proc/$sleep_pid" ] \
    && pass "the suspended app kept its pid and stayed suspended" "pid $sleep_pid" || fail "the suspended app kept its pid and state" "before ${sleep_pid:-none}, now $(app_field sleeper 3) $(app_field sleeper 2)"
[ -n "$shell_pid" ] && [ "$(app_field shell 3)" = "$shell_pid" ] && [ -d "/proc/$shell_pid" ] && ! grep -q '^EOF' /out/shell.log \
    && pass "the scene app kept its pid and its connection" "pid $shell_pid" || fail "the scene app kept its pid and connection" "before ${shell_pid:-none}, now $(app_field shell 3); $(tail -2 /out/shell.log | tr '\n' ' ')"
scenes_after=$(lifectl scenes shell 2>&1); echo "$scenes_after" >>"$D"
[ "$scenes_after" = "$scenes_before" ] && pass "the scene's saved state is the same after the upgrade" || fail "the scene's saved state after the upgrade" "$scenes_after"
out=$(as lcop lifectl resume sleeper 2>&1) && pass "lcop still controls the daemon after the upgrade (resume)" || fail "lcop after the upgrade" "$out"

# --- remove and purge -------------------------------------------------------------------------------------------
if apt_get remove lifecycled; then pass "apt remove lifecycled"; else fail "apt remove lifecycled" "$(tail -3 "$D" | tr '\n' ' ')"; fi
active=$(systemctl is-active lifecycled.service lifecycled.socket 2>&1 | tr '\n' ' ')
left=$(pids_of_comm sleep | tr '\n' ' ')
[ "$active" = "inactive inactive " ] && [ -z "$left" ] && [ ! -d "/proc/$shell_pid" ] && [ -e /etc/lifecycled/lifecycled.conf ] \
    && pass "the remove stopped the service and the socket, terminated the apps, kept /etc/lifecycled" \
    || fail "the remove stopped everything and kept the configuration" "is-active: $active, sleep pids: $left, $(ls /etc/lifecycled 2>&1 | tr '\n' ' ')"
if apt_get purge lifecycled liblifecycle1 liblifecycle-dev; then pass "apt purge lifecycled liblifecycle1 liblifecycle-dev"; else fail "apt purge" "$(tail -3 "$D" | tr '\n' ' ')"; fi
snapshot | sort >/out/files-after
diff /out/files-before /out/files-after >/out/files-diff; log "file list diff"; cat /out/files-diff >>"$D"
[ ! -s /out/files-diff ] && pass "after the purge the file list is the one from before the install" "$(wc -l </out/files-before) paths" \
    || fail "the purge left the file list as it was" "$(grep -c '^[<>]' /out/files-diff) differences: $(grep '^[<>]' /out/files-diff | head -8 | tr '\n' ' ')"
records=$(ls /var/lib/dpkg/info/lifecycled.* /var/lib/dpkg/info/liblifecycle* 2>/dev/null | tr '\n' ' ')
status=$(dpkg-query -W -f '${db:Status-Abbrev}' lifecycled 2>/dev/null)
[ -z "$records" ] && { [ -z "$status" ] || [ "$status" = "un " ]; } && pass "dpkg knows nothing of the packages any more" \
    || fail "dpkg forgot the packages" "status '$status', $records"
echo DONE >>"$R"
