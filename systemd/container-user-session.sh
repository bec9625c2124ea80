# The user-session case of systemd/test-in-container.sh, sourced by its check script inside the container after
# the system daemon's checks (it uses their pass/fail/log/wait_for). lifecycled runs as a user's `systemctl --user`
# service, from systemd/user/lifecycled.service installed where `make install` puts it, with no --config: it reads
# ~/.config/lifecycled, finds the session's app.slice from its own cgroup and adopts a `systemd-run --user --scope`
# program that follows the desktop conventions' unit name. Focus comes from GNOME's marks: the test writes
# `user.xdg.inactive-since` on the scope's cgroup as the user, as mutter does, since there is no mutter here. Then
# the daemon starts again with `[Adopt] ScopeTrees=yes` (tree_scope_case), and then the system service does the same
# through the user's manager with `[Adopt] User=` (root_tree_scope_case).
#
# Expects: /check/user-lifecycled.service (the repository's user unit), /usr/local/bin/lifecycled and lifectl.
# Prints SKIP (with the reason) where the container has no user manager or gives the user no cgroup2 subtree of
# its own; in a pure cgroup2 container both are expected, so there their absence is a FAIL.

user_session_case() {
    local user=lcuser uid home base required=no
    log "user session"
    # The cgroup2 mount, as the daemon finds it: /sys/fs/cgroup, or /sys/fs/cgroup/unified in a hybrid container.
    base=$(awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "cgroup2") print $5; break } }' /proc/self/mountinfo | head -1)
    [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] && required=yes
    echo "INFO user session: lifecycled as a systemctl --user service, cgroup2 at ${base:-?}" | tee -a "$R"
    skip_or_fail() {
        if [ $required = yes ]; then fail "user session: $1" "$2"; else echo "SKIP user session: $1 — $2" | tee -a "$R"; fi
    }
    [ -n "$base" ] || { skip_or_fail "no cgroup2 hierarchy" "nothing of type cgroup2 in /proc/self/mountinfo"; return; }

    # The unit where `make install` puts it (PREFIX=/usr/local: USERUNITDIR is /usr/local/lib/systemd/user), with
    # its ExecStart=/ExecReload= rewritten to BINDIR as the Makefile does; before the user manager starts, so that
    # it needs no daemon-reload.
    local bindir=/usr/local/bin userunitdir=/usr/local/lib/systemd/user
    mkdir -p "$userunitdir"
    sed -e "s|^ExecStart=/usr/local/bin/lifecycled |ExecStart=$bindir/lifecycled |" \
        -e "s|^ExecReload=/usr/local/bin/lifectl |ExecReload=$bindir/lifectl |" /check/user-lifecycled.service \
        >"$userunitdir/lifecycled.service"
    chmod 0644 "$userunitdir/lifecycled.service"
    useradd --create-home --shell /bin/bash "$user" >>"$D" 2>&1
    uid=$(id -u "$user") || { fail "user session: useradd $user"; return; }
    home=$(getent passwd "$user" | cut -d: -f6)
    mkdir -p "$home/.config/lifecycled"
    # Short times, so that the case takes seconds: hidden after 1 s without the focus, suspended 2 s later.
    cat >"$home/.config/lifecycled/lifecycled.conf" <<'CONF'
[Adopt]
Scopes=yes
BackgroundTimeSec=2

[Display]
Source=gnome
GnomeGraceSec=1
CONF
    # And one app the daemon launches itself: a user's daemon puts it in a scope of the user's own manager.
    mkdir -p "$home/.config/lifecycled/apps"
    cat >"$home/.config/lifecycled/apps/sleeper.conf" <<'CONF'
[App]
Exec=/bin/sleep 300000
Protocol=none
AutoLaunch=yes

[Lifecycle]
SuspendMethod=freezer
CONF
    chown -R "$user:" "$home/.config"

    # The user's manager: lingering (logind starts user@UID.service), else user@UID.service started directly.
    local how
    if loginctl enable-linger "$user" >>"$D" 2>&1; then how="loginctl enable-linger $user"
    else how="systemctl start user@$uid.service"; systemctl start "user@$uid.service" >>"$D" 2>&1; fi
    as_user() { runuser -u "$user" -- env HOME="$home" XDG_RUNTIME_DIR="/run/user/$uid" "$@"; }
    local manager=
    wait_for 'manager=$(as_user systemctl --user is-system-running 2>/dev/null); [ "$manager" = running ] || [ "$manager" = degraded ]'
    log "user manager ($how): ${manager:-none}"; systemctl status "user@$uid.service" --no-pager >>"$D" 2>&1
    case $manager in
        running|degraded) pass "user session: systemd --user runs for $user ($how)" "$manager" ;;
        *) skip_or_fail "no user manager" "$how; systemctl --user is-system-running: '${manager:-no answer}'"; return ;;
    esac
    local mcg owner
    mcg=$(systemctl show -P ControlGroup "user@$uid.service")
    owner=$(stat -c %u "$base$mcg" 2>/dev/null)
    if [ -z "$mcg" ] || [ "$owner" != "$uid" ] || [ ! -e "$base$mcg/app.slice/cgroup.freeze" ]; then
        skip_or_fail "no delegated cgroup2 subtree" "user@$uid.service in '$mcg', owner '${owner:-none}' in $base; the freezer of its app.slice: $(ls "$base$mcg/app.slice/cgroup.freeze" 2>&1)"
        return
    fi
    pass "user session: the user owns its manager's cgroup2 subtree" "$base$mcg"

    # Start: Type=notify, so the start returns once the daemon is READY.
    local t0 t1 dmain
    t0=$(date +%s%N)
    if as_user timeout 30 systemctl --user start lifecycled >>"$D" 2>&1; then
        t1=$(date +%s%N)
        pass "user session: systemctl --user start lifecycled (Type=notify)" "took $(( (t1 - t0) / 1000000 )) ms"
    else
        fail "user session: systemctl --user start lifecycled" "$(as_user systemctl --user status lifecycled --no-pager 2>&1 | tail -5 | tr '\n' ';')"
        return
    fi
    dmain=$(as_user systemctl --user show -P MainPID lifecycled)
    ujournal() { journalctl --no-pager -o cat _UID="$uid" _SYSTEMD_USER_UNIT=lifecycled.service; }
    local watching
    wait_for 'watching=$(ujournal | grep -m1 "^adopt: watching ")'
    [ -n "$watching" ] && echo "$watching" | grep -q "$mcg/app.slice (found by its own cgroup)" \
        && pass "user session: the daemon (pid $dmain, $(grep '^0::' "/proc/$dmain/cgroup" | cut -c4-)) found its app.slice" "$watching" \
        || fail "user session: the daemon found its app.slice" "${watching:-$(ujournal | grep -m1 '^adopt: ')}"
    local config
    config=$(as_user lifectl status 2>&1 | grep -m1 '^ *config: ')
    echo "$config" | grep -q "$home/.config/lifecycled" && pass "user session: config from ~/.config/lifecycled" "$(echo "$config" | tr -s ' ')" \
        || fail "user session: config from ~/.config/lifecycled" "$(as_user lifectl status 2>&1 | head -5 | tr '\n' ';')"

    # The launched app: in a scope of the user's manager where the container is pure cgroup2 (elsewhere systemd
    # has no freezer to offer, and the daemon places it itself).
    local placed sleeper= lcg=$base$mcg/lifecycled.slice/app-lifecycled-sleeper.scope
    placed=$(ujournal | grep -m1 -E '^apps (not )?in systemd scopes: ')
    wait_for 'sleeper=$(pids_of_comm sleep | head -1); [ -n "$sleeper" ]'
    if [ $required = yes ]; then
        if echo "$placed" | grep -q "^apps in systemd scopes: .* on unix:path=/run/user/$uid/systemd/private" \
                && [ -n "$sleeper" ] && grep -qx "$sleeper" "$lcg/cgroup.procs" 2>/dev/null; then
            pass "user session: a launched app is in a scope of the user's manager" "$placed; pid $sleeper in $mcg/lifecycled.slice/app-lifecycled-sleeper.scope"
        else
            fail "user session: a launched app is in a scope of the user's manager" "$placed; pid ${sleeper:-none}: $(grep '^0::' "/proc/$sleeper/cgroup" 2>/dev/null)"
        fi
        as_user lifectl background sleeper >>"$D" 2>&1
        if as_user lifectl suspend sleeper >>"$D" 2>&1 && wait_for 'grep -qx "frozen 1" "$lcg/cgroup.events"' \
                && as_user lifectl resume sleeper >>"$D" 2>&1 && wait_for 'grep -qx "frozen 0" "$lcg/cgroup.events"'; then
            pass "user session: its scope frozen and thawed by the user's manager (FreezeUnit, ThawUnit)"
        else
            fail "user session: its scope frozen and thawed by the user's manager" "$(tr '\n' ' ' <"$lcg/cgroup.events" 2>&1); $(ujournal | grep -m1 'Failed to')"
        fi
    else
        echo "INFO user session: the launched app (pid ${sleeper:-none}): $placed" | tee -a "$R"
    fi

    # A busy program in a launcher's scope, as GNOME starts an app (app-<launcher>-<AppID>-<random>.scope). runuser
    # stays outside: systemd-run moves itself into the scope and then execs the program.
    local unit=app-gnome-org.example.Busy-$$.scope app=org.example.Busy scg busy=
    scg=$base$mcg/app.slice/$unit
    as_user systemd-run --user --scope --quiet --unit="$unit" -- /bin/sh -c 'while :; do :; done' >>"$D" 2>&1 &
    wait_for 'busy=$(head -1 "$scg/cgroup.procs" 2>/dev/null); [ -n "$busy" ]'
    [ -n "$busy" ] && pass "user session: systemd-run --user --scope --unit=$unit" "busy loop pid $busy" \
        || { fail "user session: systemd-run --user --scope" "$(as_user systemctl --user status "$unit" --no-pager 2>&1 | tail -3 | tr '\n' ';')"; return; }
    ustate() { as_user lifectl list 2>/dev/null | awk -v a="$app" '$1 == a { print $2 }'; }
    if wait_for '[ -n "$(ustate)" ]'; then
        pass "user session: lifectl list shows it adopted" "$(as_user lifectl list 2>/dev/null | grep "^$app " | tr -s ' ')"
    else
        fail "user session: lifectl list shows it adopted" "$(as_user lifectl list 2>&1 | tr '\n' ';') $(ujournal | grep -m1 'not adopting')"
        return
    fi

    # The CPU time the busy loop has used, in clock ticks: it grows while it runs, and stands still while frozen.
    ticks() { awk '{ print $14 + $15 }' "/proc/$busy/stat" 2>/dev/null; }
    pstate() { awk '{ print $3 }' "/proc/$busy/stat" 2>/dev/null; }
    frozen() { grep -qx 'frozen 1' "$scg/cgroup.events"; }
    runs() { local a; a=$(ticks); wait_for '[ "$(ticks)" -gt "$a" ]'; }
    stands() { local a; a=$(ticks); sleep 0.5; [ "$(ticks)" = "$a" ]; }
    # mutter's mark, written by the user on the unit's cgroup: -1 while focused, else the CLOCK_MONOTONIC time in
    # microseconds when the focus left (perl-base has no Time::HiRes: both through syscall(2), x86_64 numbers).
    # syscall(2) may write to any string it is given, so each is a variable, never a literal.
    mark() { as_user perl -e '
        my ($path, $what) = @ARGV; my $value = "-1"; my $name = "user.xdg.inactive-since";
        if ($what eq "lost") { my $ts = "\0" x 16; syscall(228, 1, $ts) == 0 or die "clock_gettime: $!\n";
            my ($s, $ns) = unpack("q q", $ts); $value = sprintf("%d", $s * 1000000 + int($ns / 1000)); }
        syscall(188, $path, $name, $value, length($value), 0) == 0 or die "setxattr $path: $!\n";' "$scg" "$1" >>"$D" 2>&1; }

    if mark focused && wait_for '[ "$(ustate)" = active ]'; then
        pass "user session: GNOME's focus mark (-1) makes it active" "frozen $(grep -c 'frozen 1' "$scg/cgroup.events"), /proc $(pstate)"
    else
        fail "user session: GNOME's focus mark makes it active" "state $(ustate); $(ujournal | grep -m2 -E '^display: ' | tr '\n' ';')"
    fi
    if mark lost && wait_for '[ "$(ustate)" = suspended ]' && wait_for frozen; then
        if stands; then
            pass "user session: focus lost, then hidden, background and suspended: the scope is frozen" \
                "cgroup.freeze $(cat "$scg/cgroup.freeze"), cgroup.events frozen 1, /proc $(pstate), no CPU time in 0.5 s"
        else
            fail "user session: the frozen scope uses no CPU" "ticks $(ticks), /proc $(pstate)"
        fi
    else
        fail "user session: focus lost, then suspended and frozen" "state $(ustate), $(tr '\n' ' ' <"$scg/cgroup.events")"
    fi
    if mark focused && wait_for '[ "$(ustate)" = active ]' && wait_for '! frozen' && runs; then
        pass "user session: the focus back thaws it" "cgroup.events frozen 0, /proc $(pstate), CPU time grows"
    else
        fail "user session: the focus back thaws it" "state $(ustate), $(tr '\n' ' ' <"$scg/cgroup.events")"
    fi
    local before=no
    mark lost && wait_for '[ "$(ustate)" = suspended ]' && wait_for frozen && before=yes
    if [ $before = yes ] && as_user lifectl resume --all >>"$D" 2>&1 && wait_for '! frozen' && runs; then
        pass "user session: lifectl resume --all thaws it" "state $(ustate), cgroup.events frozen 0, CPU time grows"
    else
        fail "user session: lifectl resume --all thaws it" "state $(ustate), $(tr '\n' ' ' <"$scg/cgroup.events")"
    fi

    # The grace after the resume ends: suspended again. lifectl focus goes the usual way under GNOME (no request
    # reaches mutter): active, so thawed, until the next mark.
    before=no
    wait_for '[ "$(ustate)" = suspended ]' && wait_for frozen && before=yes
    if [ $before = yes ] && as_user lifectl focus "$app" >>"$D" 2>&1 && wait_for '[ "$(ustate)" = active ]' && wait_for '! frozen' && runs; then
        pass "user session: lifectl focus thaws it" "state active, cgroup.events frozen 0, CPU time grows"
    else
        fail "user session: lifectl focus thaws it" "state $(ustate), $(tr '\n' ' ' <"$scg/cgroup.events")"
    fi

    # Stop with the app frozen again: the daemon thaws what it froze and lets it go; the scope is the desktop's,
    # so the app keeps running.
    mark lost; wait_for '[ "$(ustate)" = suspended ]' && wait_for frozen
    log "user session: before the stop"; as_user lifectl list >>"$D" 2>&1; cat "$scg/cgroup.events" >>"$D"
    t0=$(date +%s%N)
    if frozen && as_user timeout 100 systemctl --user stop lifecycled >>"$D" 2>&1; then
        t1=$(date +%s%N)
        pass "user session: systemctl --user stop lifecycled (the app frozen)" "took $(( (t1 - t0) / 1000000 )) ms"
    else
        fail "user session: systemctl --user stop lifecycled with the app frozen" "frozen: $(grep frozen "$scg/cgroup.events")"
    fi
    if [ -d "/proc/$busy" ] && [ "$(cat "$scg/cgroup.freeze")" = 0 ] && wait_for '! frozen' && runs; then
        pass "user session: after the stop the adopted app runs, thawed" "pid $busy /proc $(pstate), cgroup.events frozen 0, CPU time grows"
    else
        fail "user session: after the stop the adopted app runs, thawed" "pid $busy: $(pstate), $(tr '\n' ' ' <"$scg/cgroup.events" 2>&1)"
    fi
    [ -n "$sleeper" ] && [ ! -d "/proc/$sleeper" ] && pass "user session: the stop terminated the app the daemon launched" \
        || fail "user session: the stop terminated the app the daemon launched" "pid ${sleeper:-none}"
    ujournal >>"$D" 2>&1
    as_user systemctl --user stop "$unit" >>"$D" 2>&1
    tree_scope_case
    root_tree_scope_case
}

# What both tree cases check after the move: SIGUSR1 makes the app double-fork a worker that calls setsid(), which
# is in the scope by cgroup membership; hidden, the app is suspended by freezing the scope, the worker with it.
# $1: the checks' prefix; $2, $3, $4: the case's functions that name the display, read the app's state and test the
# scope's freeze. Uses the case's main, out, sdir and in_scope; sets its late.
setsid_worker_checks() {
    local prefix=$1 show=$2 state=$3 frozen=$4
    kill -USR1 "$main"
    wait_for 'late=$(awk "/^LATE/ { print \$2 }" "$out"); [ -n "$late" ]'
    if [ -n "$late" ] && [ "$(awk '{ print $6 }' "/proc/$late/stat")" = "$late" ] && in_scope "$late"; then
        pass "$prefix: a worker double-forked later that calls setsid() is in the scope" "pid $late leads session $late"
    else
        fail "$prefix: a worker double-forked later that calls setsid() is in the scope" "pid ${late:-none}: $(grep '^0::' "/proc/$late/cgroup" 2>&1)"
    fi
    if $show 0 0 && wait_for "[ \"\$($state)\" = suspended ]" && wait_for "$frozen" && in_scope "$late"; then
        pass "$prefix: hidden, the app is suspended: its scope frozen, the setsid() worker with it" \
            "cgroup.events frozen 1; $(tr '\n' ' ' <"$sdir/cgroup.procs")"
    else
        fail "$prefix: hidden, the app is suspended with its scope frozen" "state $($state), $(tr '\n' ' ' <"$sdir/cgroup.events" 2>&1)"
    fi
}

# How both tree cases end: the daemon stops with the scope frozen; the scope is thawed, the app let go, and its
# processes run on in the scope. $1: the checks' prefix; $2, $3, $4: the case's functions that stop the daemon, test
# the scope's freeze and print the daemon's journal. Uses the case's main, late, name, sdir and in_scope.
stop_lets_tree_go() {
    local prefix=$1 stop=$2 frozen=$3 journal=$4
    if $frozen && $stop && wait_for "! $frozen" \
            && [ "$(awk '{ print $3 }' "/proc/$late/stat")" != T ] && in_scope "$main" && in_scope "$late"; then
        pass "$prefix: the stop thaws the tree's scope and lets it go; its processes stay in the scope" \
            "cgroup.events frozen 0, $($journal | grep -m1 "^$name: let go" | cut -c1-160)"
    else
        fail "$prefix: the stop thaws the tree's scope and lets it go" "$(tr '\n' ' ' <"$sdir/cgroup.events" 2>&1); $($journal | grep "^$name: " | tail -2 | tr '\n' ';')"
    fi
}

# `[Adopt] ScopeTrees=yes`: a window's process, started as the user outside the user's manager (here in this check's
# own service, as a session's launcher leaves an app in the session's scope), goes with its tree into a scope of its
# own that the user's manager makes. A worker the app double-forks afterwards, and that calls setsid(), is in that
# scope by cgroup membership, and frozen with it. Called from user_session_case, whose variables it uses; the window
# is named over the user's bus (`[Display] Source=dbus`, SetDisplayPids), as a homescreen names it.
tree_scope_case() {
    log "user session: a window's process tree in a scope of its own"
    cat >"$home/.config/lifecycled/lifecycled.conf" <<'CONF'
[Adopt]
Windows=yes
ScopeTrees=yes
BackgroundTimeSec=1

[Display]
Source=dbus
CONF
    rm -f "$home/.config/lifecycled/apps/sleeper.conf"
    local out=/out/worker-app.out main worker elder late= sdir= line name=worker-app
    : >"$out"
    as_user python3 /check/double_forking_app.py --setsid-worker-on-usr1 >"$out" 2>>"$D" &
    wait_for '[ -n "$(head -1 "$out")" ]'
    read -r main worker elder <"$out"
    [ -n "${elder:-}" ] || { fail "user session: the double-forking app runs" "$(cat "$out")"; return; }
    if ! as_user timeout 30 systemctl --user start lifecycled >>"$D" 2>&1; then
        fail "user session: systemctl --user start lifecycled (ScopeTrees=yes)" "$(ujournal | tail -3 | tr '\n' ';')"; return
    fi
    display() { as_user busctl --user call org.lifecycled.Lifecycle1 /org/lifecycled/Lifecycle1 org.lifecycled.Lifecycle1.Manager \
        SetDisplayPids auu "$@" >>"$D" 2>&1; }
    tstate() { as_user lifectl list 2>/dev/null | awk -v a="$name" '$1 == a { print $2 }'; }
    in_scope() { [ -n "$sdir" ] && grep -qx "$1" "$sdir/cgroup.procs" 2>/dev/null; }
    tfrozen() { grep -qx 'frozen 1' "$sdir/cgroup.events" 2>/dev/null; }
    wait_for "display 1 $main $main" && wait_for '[ "$(tstate)" = active ]'
    wait_for 'sdir=$(ls -d "$base$mcg"/lifecycled.slice/lifecycled-adopted-*.scope 2>/dev/null | head -1); in_scope "$main"'
    line=$(as_user lifectl list 2>/dev/null | grep "^$name ")
    if in_scope "$main" && in_scope "$worker" && ! in_scope "$elder" && echo "$line" | grep -q "adopted: process $main in lifecycled-adopted-"; then
        pass "user session: an adopted window's tree is moved into a scope of its own (ScopeTrees=yes)" \
            "${sdir#$base}: app $main and its first worker $worker, not the older $elder; $(echo "$line" | tr -s ' ')"
    else
        fail "user session: an adopted window's tree is moved into a scope of its own" \
            "state $(tstate); ${sdir:-no scope}: $(tr '\n' ' ' <"$sdir/cgroup.procs" 2>&1); $(ujournal | grep -m2 -E 'scope|ScopeTrees' | tr '\n' ';')"
        return
    fi
    setsid_worker_checks "user session" display tstate tfrozen
    as_user lifectl status >>"$D" 2>&1

    # A crash with the scope frozen: systemd starts the daemon again (Restart=on-failure), which thaws it first.
    local before
    before=$(as_user systemctl --user show -P MainPID lifecycled)
    as_user systemctl --user kill --signal=KILL lifecycled >>"$D" 2>&1
    if wait_for '! tfrozen' && wait_for '[ "$(as_user systemctl --user show -P MainPID lifecycled)" != "$before" ]' \
            && ujournal | grep -qF "adopt: thawed $sdir, which a previous lifecycled left frozen"; then
        pass "user session: after kill -9 the next daemon thaws the tree's scope" "cgroup.events frozen 0, $(ujournal | grep -m1 '^adopt: thawed ')"
    else
        fail "user session: after kill -9 the next daemon thaws the tree's scope" "$(tr '\n' ' ' <"$sdir/cgroup.events" 2>&1); $(ujournal | grep -m1 '^adopt: ')"
    fi

    # Adopted again (its process is in its scope already, which it keeps), suspended, then the daemon stops: thawed,
    # the processes run on, and stay in the scope, which is the one change the daemon cannot give back.
    wait_for "display 1 $main $main" && wait_for '[ "$(tstate)" = active ]'
    display 0 0; wait_for '[ "$(tstate)" = suspended ]' && wait_for tfrozen
    ustop() { as_user timeout 100 systemctl --user stop lifecycled >>"$D" 2>&1; }
    stop_lets_tree_go "user session" ustop tfrozen ujournal
    ujournal | tail -40 >>"$D" 2>&1
    kill -KILL "$main" "$worker" "$elder" ${late:+"$late"} 2>/dev/null
}

# `[Adopt] ScopeTrees=yes` for the system service: lifecycled runs as root with `[Adopt] User=` naming the user, and
# reaches that user's manager over its private socket (/run/user/UID/systemd/private), which moves the user's window
# process and its tree into a scope in the user's own `lifecycled.slice`. The window is named over the system bus, as
# a homescreen that runs as root names it. Called from user_session_case after tree_scope_case (the user's daemon is
# stopped), whose variables it uses.
root_tree_scope_case() {
    log "system service: a window's process tree in a scope of the user's manager"
    # The bus policy that lets root own the daemon's name on the system bus, as the package installs it.
    cp /check/org.lifecycled.Lifecycle1.conf /etc/dbus-1/system.d/ && busctl call org.freedesktop.DBus /org/freedesktop/DBus \
        org.freedesktop.DBus ReloadConfig >>"$D" 2>&1
    mkdir -p /etc/lifecycled/apps.off && mv /etc/lifecycled/apps/*.conf /etc/lifecycled/apps.off/ 2>/dev/null
    cat >/etc/lifecycled/lifecycled.conf <<CONF
[Adopt]
Windows=yes
ScopeTrees=yes
User=$user
BackgroundTimeSec=1

[Display]
Source=dbus
CONF
    local out=/out/root-worker-app.out main worker elder late= sdir= line name=worker-app status
    : >"$out"
    as_user python3 /check/double_forking_app.py --setsid-worker-on-usr1 >"$out" 2>>"$D" &
    wait_for '[ -n "$(head -1 "$out")" ]'
    read -r main worker elder <"$out"
    [ -n "${elder:-}" ] || { fail "system service: the double-forking app runs" "$(cat "$out")"; return; }
    local since
    since=$(date +%s)
    sjournal() { journalctl --no-pager -o cat -u lifecycled.service --since "@$since"; }
    if ! timeout 30 systemctl start lifecycled >>"$D" 2>&1; then
        fail "system service: systemctl start lifecycled ([Adopt] User=$user, ScopeTrees=yes)" "$(sjournal | tail -3 | tr '\n' ';')"; return
    fi
    rdisplay() { busctl --system call org.lifecycled.Lifecycle1 /org/lifecycled/Lifecycle1 org.lifecycled.Lifecycle1.Manager \
        SetDisplayPids auu "$@" >>"$D" 2>&1; }
    rstate() { lifectl list 2>/dev/null | awk -v a="$name" '$1 == a { print $2 }'; }
    in_scope() { [ -n "$sdir" ] && grep -qx "$1" "$sdir/cgroup.procs" 2>/dev/null; }
    rfrozen() { grep -qx 'frozen 1' "$sdir/cgroup.events" 2>/dev/null; }
    wait_for "rdisplay 1 $main $main" && wait_for '[ "$(rstate)" = active ]'
    # The scope that holds the app: the user's case left its own scope in the same slice.
    wait_for 'sdir=$(grep -lx "$main" "$base$mcg"/lifecycled.slice/lifecycled-adopted-*.scope/cgroup.procs 2>/dev/null | head -1); [ -n "$sdir" ]'
    sdir=${sdir%/cgroup.procs}
    line=$(lifectl list 2>/dev/null | grep "^$name ")
    if in_scope "$main" && in_scope "$worker" && ! in_scope "$elder" && echo "$line" | grep -q "adopted: process $main in lifecycled-adopted-"; then
        pass "system service: with [Adopt] User=, the user's manager moves an adopted window's tree into a scope (ScopeTrees=yes)" \
            "${sdir#$base}: app $main and its first worker $worker, not the older $elder; $(echo "$line" | tr -s ' ')"
    else
        fail "system service: with [Adopt] User=, an adopted window's tree is moved into a scope of the user's manager" \
            "state $(rstate); ${sdir:-no scope}; $(sjournal | grep -m3 -E 'scope|ScopeTrees' | tr '\n' ';')"
        { sjournal | tail -30; echo "# the user's manager:"; journalctl --no-pager -o cat _UID="$uid" --since "@$since" | tail -30; } >>"$D" 2>&1
        systemctl stop lifecycled >>"$D" 2>&1; kill -KILL "$main" "$worker" "$elder" 2>/dev/null; return
    fi
    status=$(lifectl status 2>&1)
    if echo "$status" | grep -q 'each in a scope of its own (ScopeTrees=yes)' && ! echo "$status" | grep -q 'no scopes'; then
        pass "system service: lifectl status says the trees go into scopes" "$(echo "$status" | grep -m1 -o 'windows ([^)]*)')"
    else
        fail "system service: lifectl status says the trees go into scopes" "$(echo "$status" | tr '\n' ';')"
    fi
    setsid_worker_checks "system service" rdisplay rstate rfrozen
    if rdisplay 1 "$main" "$main" && wait_for '[ "$(rstate)" = active ]' && wait_for '! rfrozen' \
            && [ "$(awk '{ print $3 }' "/proc/$late/stat")" != T ]; then
        pass "system service: shown again, the app is active and its scope thawed" "cgroup.events frozen 0"
    else
        fail "system service: shown again, the app is active and its scope thawed" "state $(rstate), $(tr '\n' ' ' <"$sdir/cgroup.events" 2>&1)"
    fi
    rdisplay 0 0; wait_for '[ "$(rstate)" = suspended ]' && wait_for rfrozen
    rstop() { timeout 100 systemctl stop lifecycled >>"$D" 2>&1; }
    stop_lets_tree_go "system service" rstop rfrozen sjournal
    sjournal | tail -40 >>"$D" 2>&1
    kill -KILL "$main" "$worker" "$elder" ${late:+"$late"} 2>/dev/null
    rm -f /etc/lifecycled/lifecycled.conf
}

user_session_case
