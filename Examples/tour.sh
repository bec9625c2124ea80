#!/usr/bin/env bash
# A short tour of lifecycled on the demo config (Config/): launch, an app switch, background,
# suspension with the processes really stopped, resume, scenes, terminate, and a clean stop.
# Run by `make demo` after the build. Everything lives in a temporary runtime directory.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=$(swift build --show-bin-path)
export PATH="$bin:$PWD/Examples/python:$PATH"
export LIFECYCLED_RUNTIME_DIR=$(mktemp -d /tmp/lifecycled-demo.XXXXXX)
log="$LIFECYCLED_RUNTIME_DIR/daemon.log"
rm -f /tmp/lifecycled-demo-notes.json /tmp/lifecycled-demo-clock.json

bold=$'\e[1m'; dim=$'\e[2m'; off=$'\e[0m'
[ -n "${NO_COLOR:-}" ] || [ ! -t 1 ] && { bold=; dim=; off=; }
shown=0
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$off"; }
run() { printf '%s$ %s%s\n' "$dim" "$*" "$off"; "$@"; }
# What the daemon and the apps said since the last step.
news() {
    sleep "${1:-0.3}"
    local total; total=$(wc -l < "$log")
    tail -n +"$((shown + 1))" "$log" | head -n "$((total - shown))" | sed 's/^/   | /'
    shown=$total
}
pid_of() { lifectl list --json | python3 -c "import json,sys; print(next(a['pid'] for a in json.load(sys.stdin) if a['name']=='$1'))"; }
proc_states() { ps -o pid=,stat=,args= -g "$1" | sed 's/^/   /'; }

step "Starting lifecycled on Config/ (runtime directory $LIFECYCLED_RUNTIME_DIR)"
lifecycled --config Config >"$log" 2>&1 &
daemon=$!
trap 'kill $daemon 2>/dev/null || true; wait $daemon 2>/dev/null || true; rm -rf "$LIFECYCLED_RUNTIME_DIR"' EXIT
for _ in $(seq 100); do lifectl list >/dev/null 2>&1 && break; sleep 0.05; done
news 0.5
run lifectl status

step "Launch: notes (Swift) auto-launched with focus, clock (Python) straight into the background"
run lifectl list

step "App switch: focus clock. notes resigns and goes to the background, clock comes forward"
run lifectl focus clock
news
run lifectl list

step "Background: after BackgroundTimeSec=3 notes is suspended with SIGSTOP (every process in state T)"
sleep 3.5
news 0
run lifectl list
notes=$(pid_of notes)
proc_states "$notes"

step "Background and the cgroup freezer: clock goes to the background and is frozen (SuspendMethod=freezer)"
run lifectl background clock
sleep 3.5
news 0
clock=$(pid_of clock)
proc_states "$clock"
cgroup=$(lifectl status clock --json | python3 -c "import json,sys; print(json.load(sys.stdin)['apps'][0].get('cgroup') or '')")
if [ -n "$cgroup" ] && [ -e "$cgroup/cgroup.events" ]; then
    printf '   %s/cgroup.events: %s\n' "$cgroup" "$(grep frozen "$cgroup/cgroup.events")"
fi

step "Notifications to a frozen app are held and coalesced: three battery levels and a locale change"
run lifectl post batteryLevelDidChange --data '{"level":0.8}'
run lifectl post batteryLevelDidChange --data '{"level":0.7}'
run lifectl post currentLocaleDidChange --data '{"LANG":"de_DE.UTF-8"}'
run lifectl post batteryLevelDidChange --data '{"level":0.6}'
lifectl status clock | grep -E "queued|observing"

step "A program that knows nothing of lifecycled (spinner, Protocol=none) burns CPU; hidden, it stops burning"
run lifectl focus spinner
sleep 1
spinner=$(pid_of spinner)
run lifectl background spinner
sleep 2.5
before=$(awk '{print $14+$15}' "/proc/$spinner/stat"); sleep 1; after=$(awk '{print $14+$15}' "/proc/$spinner/stat")
news 0
printf '   spinner CPU ticks over one second while suspended: %s\n' "$((after - before))"
proc_states "$spinner"

step "Resume and focus: notes is continued (same pid) and becomes active again"
run lifectl resume notes
run lifectl focus notes
news

step "Resume clock: thawed first, then one message per type with the net change (level 0.6, 3 posts)"
run lifectl resume clock
news
run lifectl list

step "Scenes: the scenes app (Swift, two configurations) opens a Document window, then an Inspector beside it"
run lifectl scene open scenes
run lifectl scene open scenes --config Inspector
scenes_pid=$(pid_of scenes)
news
run lifectl scenes scenes

step "Scenes: focus moves back to the document; closing it keeps its session and its saved draft"
run lifectl scene focus scenes s1
run lifectl scene close scenes s1
news
run lifectl scenes scenes

step "Scenes: focus reconnects the document with the state it saved; then another app takes focus"
run lifectl scene focus scenes s1
run lifectl focus notes
news
run lifectl scenes

step "Terminate: clock (in the background) gets willTerminate, acknowledges, and exits on SIGTERM"
run lifectl terminate clock
news

step "Stopping the daemon: willTerminate to the running apps, then SIGTERM; nothing is left behind"
kill -TERM "$daemon"
wait "$daemon" || true
news 0
trap 'rm -rf "$LIFECYCLED_RUNTIME_DIR"' EXIT
left=$( (ps -o pid= -g "$notes" -g "$clock" -g "$spinner" -g "${scenes_pid:-$notes}" 2>/dev/null || true) | wc -l)
printf '\n%sTour done: %s processes left behind.%s\n' "$bold" "$left" "$off"
