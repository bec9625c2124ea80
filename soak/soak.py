#!/usr/bin/env python3
"""The soak test of lifecycled: many real apps, random transitions and notification storms from several
controller processes at once, then a quiet period and the invariants. soak/run.sh builds the binaries and runs it;
soak/README.md says what it does and how to read its report.

  soak.py --bin DIR --tmp DIR [--seconds S] [--apps N] [--workers W] [--rate R] [--seed X] [--keep-log FILE]
  soak.py --cleanup-only --tmp DIR      (run.sh's trap: stop whatever a killed run left behind)

Everything lives in --tmp: the configuration, the runtime directory (LIFECYCLED_RUNTIME_DIR), the daemon's log.
Every app process carries SOAK_RUN=<tmp> in its environment, so that none can hide: the checks and the cleanup
find them by it. The daemon's cgroups are private to the runtime directory (lifecycled names them after it).
Exit status: 0 when every check passed, 1 when one failed, 2 when the run could not be carried out.
"""

import argparse
import collections
import ctypes
import json
import os
import random
import re
import selectors
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLIENT = os.path.join(ROOT, "Examples", "python", "lifecycle_client.py")
RUNNING = ("inactive", "active", "background", "suspended")
TYPES = {"soakLatest": "latest", "soakCount": "count", "soakMerge": "merge", "soakNone": "none"}
# How long one control request may take before it counts as unanswered (a lifecycle verb waits until the app
# settles: a few ack deadlines and a TimeoutStopSec at most).
REQUEST_TIMEOUT = 90.0


def log(text):
    print(f"[soak {time.strftime('%H:%M:%S')}] {text}", flush=True)


# ------------------------------------------------------------------------------------------------ /proc


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def proc_stat(pid):
    """(state, ppid, pgrp, starttime) of a process, or None."""
    text = read(f"/proc/{pid}/stat")
    if not text:
        return None
    try:
        rest = text[text.rindex(")") + 2:].split()
        return rest[0], int(rest[1]), int(rest[2]), int(rest[19])
    except (ValueError, IndexError):
        return None


def process_table():
    """pid -> (state, ppid, pgrp, starttime) of every process."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = proc_stat(int(name))
            if stat:
                table[int(name)] = stat
    return table


def environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return []


def marked(marker, table=None):
    """The pids of the processes started for this run (SOAK_RUN=<tmp> in their environment)."""
    want = f"SOAK_RUN={marker}".encode()
    return sorted(pid for pid in (table or process_table()) if want in environ(pid))


# The daemon keeps the kernel files it writes and reads at every transition open, at most 256 of them (KeptKernelFiles,
# lifecycled(8)), and the two state files of each recently saved app, for at most 64 apps (StateStore). They are
# counted apart from the rest (which must come back to its level) and stay within those bounds.
KEPT_LIMIT = 256 + 2 * 64
KEPT = re.compile(r"^(/proc/\d+/oom_score_adj|/sys/fs/cgroup/.*/(cpu\.weight|io\.weight|cpu\.shares|cgroup\.procs|"
                  r"cgroup\.freeze|cgroup\.events|freezer\.state)|.*/state/[^/]+\.json(\.tmp)?)$")


def daemon_resources(pid):
    """fd count (without the kept ones), fd kinds (the kept ones as "kept"), VmRSS and VmHWM (KiB) of the daemon."""
    kinds = collections.Counter()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        kind = target.split(":", 1)[0] if ":" in target else ("file" if target.startswith("/") else target)
        if target.startswith("anon_inode:"):
            kind = target
        if KEPT.match(target.removesuffix(" (deleted)")):
            kind = "kept"
        kinds[kind] += 1
    fields = {}
    for line in read(f"/proc/{pid}/status").splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()
    rss = int(fields.get("VmRSS", ["0"])[0])
    hwm = int(fields.get("VmHWM", ["0"])[0])
    return len(fds) - kinds["kept"], dict(kinds), rss, hwm


def cpu_seconds(pid):
    text = read(f"/proc/{pid}/stat")
    try:
        rest = text[text.rindex(")") + 2:].split()
        return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")
    except (ValueError, IndexError):
        return 0.0


def cgroup_pids(path):
    text = read(os.path.join(path, "cgroup.procs"), None)
    if text is None:
        return None
    return [int(line) for line in text.split() if line.isdigit()]


# ------------------------------------------------------------------------------------------- control socket


class Control:
    """One request, one reply, on a fresh connection (what lifectl does, without its start-up)."""

    def __init__(self, path):
        self.path = path

    def request(self, message, timeout=60.0):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(self.path)
            sock.sendall(json.dumps(message, separators=(",", ":")).encode() + b"\n")
            data = b""
            while b"\n" not in data:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    raise ConnectionError("lifecycled closed the connection without answering")
                data += chunk
            return json.loads(data[:data.index(b"\n")])
        finally:
            sock.close()

    def list(self, timeout=60.0):
        reply = self.request({"verb": "list"}, timeout)
        if not reply.get("ok"):
            raise RuntimeError(f"list refused: {reply.get('error')}")
        return reply["apps"]


# ----------------------------------------------------------------------------------------------- config


def make_apps(n, rng):
    """The apps: mostly the Python example client, some Protocol=none programs, a few with children, with
    [Scenes], crashing on purpose, holding background tasks; about a tenth suspended by the freezer."""
    apps = []
    for i in range(n):
        slot = i % 50
        app = {"name": f"a{i:03d}", "kind": "client", "freezer": i % 10 == 7, "args": [],
               "grace": rng.choice(["1", "1.5", "2", "3", "4"]), "autolaunch": "background", "extra": []}
        if slot in (0, 1):
            app["kind"] = "scenes"
        elif slot in (2, 3, 4, 5, 6):
            app["kind"] = "none"
        elif slot == 8:
            app["kind"] = "children"
            app["args"] = ["--children", "2"]
        elif slot == 9:
            app["kind"] = "crashy"   # exits with 1 on willEnterForeground: Restart=on-failure takes it back
            app["args"] = ["--exit-on", "willEnterForeground:1"]
            app["extra"] = ["Restart=on-failure"]
        elif slot == 10:
            app["kind"] = "task"     # holds a background task for 1 s after didEnterBackground
            app["args"] = ["--task-on-background", "1"]
        elif slot == 11:
            app["kind"] = "slow"     # acks after 0.3 s
            app["args"] = ["--ack-delay", "0.3"]
        elif slot == 12:
            app["kind"] = "audio"    # BackgroundModes=audio: never suspended by its grace time
        if app["kind"] in ("client", "children", "crashy", "task", "slow", "audio", "scenes"):
            observed = [t for t in TYPES if rng.random() < 0.6] or ["soakLatest"]
            if rng.random() < 0.2:
                observed.append("batteryLevelDidChange")
            app["args"] = ["--observe", ",".join(observed)] + app["args"]
        if i == 20:
            app["kind"] = "flood"    # `yes`: writes its output without pause until a request suspends it
            app["args"] = []
            app["grace"] = "infinity"
        elif i == 21:
            app["kind"] = "burst"    # 15 MB of output at start, then quiet
            app["args"] = []
        if slot in (13, 14, 15, 16, 17):
            app["autolaunch"] = "yes"
        elif slot in (18, 19):
            app["autolaunch"] = "no"     # launched by the setup phase, through the control socket
        apps.append(app)
    if apps:
        apps[len(apps) // 2]["autolaunch"] = "focus"
        if apps[len(apps) // 2]["kind"] == "none":
            apps[len(apps) // 2]["kind"] = "client"
            apps[len(apps) // 2]["args"] = ["--observe", "soakLatest"]
    return apps


def write_config(directory, apps, marker):
    os.makedirs(os.path.join(directory, "apps"))
    with open(os.path.join(directory, "lifecycled.conf"), "w") as f:
        f.write("# Written by soak/soak.py\n[Defaults]\nBackgroundTimeSec=2\nLaunchTimeoutSec=60\nAckTimeoutSec=5\n"
                "TimeoutStopSec=5\nBackgroundTaskTimeSec=8\nExpirationWarningSec=2\nQueueLimit=16\n\n"
                "[NotificationTypes]\n" + "".join(f"{name}={how}\n" for name, how in TYPES.items()))
    python = sys.executable or "/usr/bin/python3"
    burst = os.path.join(directory, "burst.py")
    with open(burst, "w") as f:
        f.write("import sys, time\nsys.stdout.write(('soak-burst ' * 9 + '\\n') * 150000)\nsys.stdout.flush()\n"
                "time.sleep(1000000)\n")
    for app in apps:
        lines = ["[App]", f"Description=soak {app['kind']}"]
        if app["kind"] == "none":
            lines += ["Exec=sleep 1000000", "Protocol=none"]
        elif app["kind"] == "flood":
            lines += ["Exec=yes soak-flood", "Protocol=none"]
        elif app["kind"] == "burst":
            lines += [f"Exec={python} {burst}", "Protocol=none"]
        else:
            lines.append("Exec=" + " ".join([python, CLIENT] + app["args"]))
        lines += [f"Environment=SOAK_RUN={marker}", f"AutoLaunch={app['autolaunch']}"] + app["extra"]
        lines += ["", "[Lifecycle]", f"BackgroundTimeSec={app['grace']}"]
        if app["freezer"]:
            lines.append("SuspendMethod=freezer")
        if app["kind"] == "audio":
            lines.append("BackgroundModes=audio")
        if app["kind"] == "scenes":
            lines += ["", "[Scenes]", "SupportsMultipleScenes=yes",
                      "Configuration=window:Main window:Editor externalDisplay:Slides"]
        with open(os.path.join(directory, "apps", app["name"] + ".conf"), "w") as f:
            f.write("\n".join(lines) + "\n")


# ------------------------------------------------------------------------------------------------ workers


def normalise(message):
    """A refusal's sentence without its names and numbers, to count refusals by kind."""
    text = re.sub(r"'[^']*'", "'…'", (message or "").removeprefix("lifectl: "))
    text = re.sub(r"\b[as]\d+\b", "…", text)
    return re.sub(r"\d+", "N", text)[:140]


class Worker:
    """One controller process: keeps up to `concurrency` requests in flight, a random mix of lifecycle verbs,
    scene verbs, notification storms and queries, through the control socket and (a share of them) lifectl."""

    def __init__(self, args, spec):
        self.args = args
        self.index = args.worker
        self.rng = random.Random(f"{spec['seed']}-{self.index}")
        self.control = Control(spec["socket"])
        self.lifectl = spec["lifectl"]
        self.runtime = spec["runtime"]
        self.apps = spec["apps"]
        self.scene_apps = [a["name"] for a in self.apps if a["kind"] == "scenes"]
        self.names = [a["name"] for a in self.apps]
        self.deadline = time.monotonic() + spec["seconds"]
        self.rate = spec["rate"]
        self.concurrency = spec["concurrency"]
        self.lifectl_share = spec["lifectl_share"]
        self.view = {}
        self.view_at = 0.0
        self.selector = selectors.DefaultSelector()
        self.inflight = {}      # socket -> op
        self.processes = []     # (Popen, op)
        self.counts = collections.defaultdict(collections.Counter)   # kind -> outcome -> n
        self.refusals = collections.Counter()
        self.errors = []
        self.slowest = collections.defaultdict(float)
        self.requests = 0
        self.posts = 0
        self.post_seq = 0

    # The view: a list every few seconds, so that most requests make sense (resume a suspended app…).

    def refresh(self):
        try:
            self.view = {a["name"]: a for a in self.control.list(timeout=REQUEST_TIMEOUT)}
            self.counts["list"]["ok"] += 1
        except Exception as error:   # noqa: BLE001 — any failure of the daemon is counted, not fatal
            self.counts["list"]["error"] += 1
            self.note_error("list", error)
        self.view_at = time.monotonic()

    def names_in(self, *states):
        return [n for n, a in self.view.items() if a["state"] in states] or self.names

    def note_error(self, kind, error):
        if len(self.errors) < 30:
            self.errors.append(f"{kind}: {error}")

    # Choosing a request.

    def choose(self):
        r = self.rng
        if r.random() < 0.06:
            return self.burst()
        roll = r.random() * 100
        if roll < 14:
            return "focus", [{"verb": "focus", "app": r.choice(self.names)}]
        if roll < 22:
            return "background", [{"verb": "background", "app": r.choice(self.names_in("active", "inactive"))}]
        if roll < 30:
            return "suspend", [{"verb": "suspend", "app": r.choice(self.names_in("active", "inactive", "background"))}]
        if roll < 38:
            return "resume", [{"verb": "resume", "app": r.choice(self.names_in("suspended"))}]
        if roll < 41:
            return "deactivate", [{"verb": "deactivate", "app": r.choice(self.names_in("active"))}]
        if roll < 46:
            return "terminate", [{"verb": "terminate", "app": r.choice(self.names_in(*RUNNING))}]
        if roll < 52:
            request = {"verb": "launch", "app": r.choice(self.names_in("notRunning", "failed"))}
            if r.random() < 0.5:
                request["background"] = True
            return "launch", [request]
        if roll < 63 and self.scene_apps:
            return self.scene_request()
        if roll < 71:
            return "storm", [self.post() for _ in range(r.randint(20, 200))]
        if roll < 88:
            return "post", [self.post()]
        if roll < 99.7:
            verb = r.choice(["list", "status", "scenes"])
            request = {"verb": verb}
            if verb != "list" and r.random() < 0.5:
                request["app"] = r.choice(self.names)
            return "query", [request]
        return "memory-pressure", [{"verb": "simulate-memory-pressure"}]

    def burst(self):
        """Two to four conflicting requests for one app, pipelined on one connection: the daemon reads them in one
        go and takes each before any client can answer the messages of the one before (focus, discard the scene
        it brings forward, focus again…)."""
        r = self.rng
        app = r.choice(self.scene_apps) if self.scene_apps and r.random() < 0.6 else r.choice(self.names)
        known = [s["scene"] for s in (self.view.get(app, {}).get("scenes") or [])]
        requests = []
        for _ in range(r.randint(2, 4)):
            verb = r.choice(["focus", "focus", "background", "suspend", "resume", "terminate", "launch"]
                            + (["scene-open", "scene-focus", "scene-focus", "scene-close", "scene-discard",
                                "scene-discard"] if app in self.scene_apps else []))
            request = {"verb": verb, "app": app}
            if verb in ("scene-focus", "scene-close", "scene-discard"):
                request["scene"] = r.choice(known or [f"s{n}" for n in range(1, 4)])
            requests.append(request)
        return "burst", requests

    def scene_request(self):
        r = self.rng
        app = r.choice(self.scene_apps)
        scenes = [s["scene"] for s in (self.view.get(app, {}).get("scenes") or [])]
        roll = r.random()
        if not scenes or (roll < 0.25 and len(scenes) < 4):
            request = {"verb": "scene-open", "app": app}
            if r.random() < 0.5:
                request["configuration"] = r.choice(["Main", "Editor"])
            elif r.random() < 0.2:
                request["role"] = "externalDisplay"
            return "scene-open", [request]
        scene = r.choice(scenes)
        if roll < 0.55:
            return "scene-focus", [{"verb": "scene-focus", "app": app, "scene": scene}]
        if roll < 0.7:
            return "scene-background", [{"verb": "scene-background", "app": app, "scene": scene}]
        if roll < 0.85 or len(scenes) < 3:
            return "scene-close", [{"verb": "scene-close", "app": app, "scene": scene}]
        return "scene-discard", [{"verb": "scene-discard", "app": app, "scene": scene}]

    def post(self):
        r = self.rng
        self.post_seq += 1
        kind = r.choice(list(TYPES) + ["batteryLevelDidChange"])
        if kind == "soakLatest":
            data = {"value": self.post_seq, "worker": self.index}
        elif kind == "soakCount":
            data = {}
        elif kind == "soakMerge":
            data = {f"k{r.randint(0, 15)}": self.post_seq}
        elif kind == "soakNone":
            data = {"seq": self.post_seq, "pad": "x" * r.randint(0, 300)}
        else:
            data = {"level": round(r.random(), 2), "supply": "SOAK0"}
        request = {"verb": "post", "name": kind, "data": data}
        if r.random() < 0.3:
            request["app"] = r.choice(self.names)
        self.posts += 1
        return request

    # Carrying requests out.

    def start(self):
        kind, requests = self.choose()
        self.requests += len(requests)
        if kind not in ("storm", "burst") and self.rng.random() < self.lifectl_share:
            self.start_lifectl(kind, requests[0])
            return
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        try:
            sock.connect(self.control.path)
            sock.sendall(b"".join(json.dumps(q, separators=(",", ":")).encode() + b"\n" for q in requests))
        except OSError as error:
            sock.close()
            self.counts[kind]["error"] += len(requests)
            self.note_error(kind, f"connect/send: {error}")
            return
        sock.setblocking(False)
        self.inflight[sock] = {"kind": kind, "expected": len(requests), "buffer": b"", "start": time.monotonic(),
                               "requests": requests}
        self.selector.register(sock, selectors.EVENT_READ)

    def start_lifectl(self, kind, request):
        verb = request["verb"]
        argv = [self.lifectl, "--runtime-dir", self.runtime, "--timeout", str(int(REQUEST_TIMEOUT)), "-q"]
        if verb.startswith("scene-"):
            argv += ["scene", verb[len("scene-"):], request["app"]]
            if "scene" in request:
                argv.append(request["scene"])
            if "role" in request:
                argv += ["--role", request["role"]]
            if "configuration" in request:
                argv += ["--config", request["configuration"]]
        elif verb == "post":
            argv += ["post", request["name"], "--data", json.dumps(request["data"])]
            if "app" in request:
                argv += ["--app", request["app"]]
        elif verb in ("list", "status", "scenes"):
            argv += [verb, "--json"] + ([request["app"]] if "app" in request else [])
        elif verb == "simulate-memory-pressure":
            argv.append(verb)
        else:
            argv += [verb, request["app"]] + (["--background"] if request.get("background") else [])
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.processes.append((process, {"kind": kind, "start": time.monotonic(), "argv": argv}))

    def finish(self, sock, op, outcome_lines, failure=None):
        self.selector.unregister(sock)
        sock.close()
        del self.inflight[sock]
        kind = op["kind"]
        took = time.monotonic() - op["start"]
        self.slowest[kind] = max(self.slowest[kind], took)
        for line in outcome_lines:
            try:
                reply = json.loads(line)
            except ValueError:
                self.counts[kind]["error"] += 1
                self.note_error(kind, f"unreadable reply {line[:100]!r}")
                continue
            if reply.get("ok"):
                self.counts[kind]["ok"] += 1
            else:
                self.counts[kind]["refused"] += 1
                self.refusals[f"{kind}: {normalise(reply.get('error'))}"] += 1
                if "shutting down" in (reply.get("error") or ""):
                    self.note_error(kind, reply.get("error"))
        missing = op["expected"] - len(outcome_lines)
        if missing > 0:
            self.counts[kind]["timeout" if failure == "timeout" else "error"] += missing
            shown = op["requests"] if kind == "burst" else op["requests"][:1]
            self.note_error(kind, f"{missing} of {op['expected']} replies missing ({failure}) after {took:.1f}s: "
                                  + "; ".join(" ".join(str(v) for v in q.values()) for q in shown))

    def pump(self, timeout):
        for key, _ in self.selector.select(timeout):
            sock = key.fileobj
            op = self.inflight[sock]
            try:
                data = sock.recv(1 << 20)
            except BlockingIOError:
                continue
            except OSError as error:
                lines = op["buffer"].split(b"\n")[:-1]
                self.finish(sock, op, lines, f"read: {error}")
                continue
            op["buffer"] += data
            lines = op["buffer"].split(b"\n")[:-1]
            if not data or len(lines) >= op["expected"]:
                self.finish(sock, op, lines, None if data else "closed without answering")
        now = time.monotonic()
        for sock, op in list(self.inflight.items()):
            if now - op["start"] > REQUEST_TIMEOUT:
                self.finish(sock, op, op["buffer"].split(b"\n")[:-1], "timeout")
        for process, op in list(self.processes):
            status = process.poll()
            if status is None:
                if now - op["start"] > REQUEST_TIMEOUT:
                    process.kill()
                    op["killed"] = True
                continue
            self.processes.remove((process, op))
            kind = op["kind"]
            self.slowest[kind] = max(self.slowest[kind], now - op["start"])
            stderr = process.stderr.read().decode(errors="replace").strip()
            process.stderr.close()
            outcome = {0: "ok", 1: "refused"}.get(status, "error")
            if op.get("killed") or (status == 1 and stderr.startswith("no answer from lifecycled")):
                outcome = "timeout"
            self.counts[kind + " (lifectl)"][outcome] += 1
            if outcome == "refused":
                self.refusals[f"{kind}: {normalise(stderr)}"] += 1
            elif outcome != "ok":
                self.note_error(kind, f"lifectl exit {status}: {stderr[:200]} ({' '.join(op['argv'][6:])})")

    def run(self):
        self.refresh()
        next_start = time.monotonic()
        while time.monotonic() < self.deadline:
            now = time.monotonic()
            if now - self.view_at > 3:
                self.refresh()
            while len(self.inflight) + len(self.processes) < self.concurrency and now >= next_start:
                self.start()
                next_start += self.rng.expovariate(self.rate)
                now = time.monotonic()
            if next_start < now - 1:
                next_start = now   # saturated: do not build up a backlog of starts
            self.pump(0.02)
        end = time.monotonic() + REQUEST_TIMEOUT + 5
        while (self.inflight or self.processes) and time.monotonic() < end:
            self.pump(0.1)
        return {"counts": {k: dict(v) for k, v in self.counts.items()}, "refusals": dict(self.refusals),
                "errors": self.errors, "slowest": dict(self.slowest), "requests": self.requests, "posts": self.posts}


def worker_main(args):
    with open(args.spec) as f:
        spec = json.load(f)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(3))
    result = Worker(args, spec).run()
    with open(args.result, "w") as f:
        json.dump(result, f)
    return 0


# ------------------------------------------------------------------------------------------------ the run


class Check:
    def __init__(self):
        self.results = []

    def add(self, name, ok, figures, details=()):
        self.results.append((name, ok, figures, list(details)))

    def report(self):
        print("\n==== soak test: invariants ====")
        for name, ok, figures, details in self.results:
            print(f"{'PASS' if ok else 'FAIL'}  {name}: {figures}")
            for line in details[:15]:
                print(f"        {line}")
            if len(details) > 15:
                print(f"        … and {len(details) - 15} more")
        failed = [name for name, ok, _, _ in self.results if not ok]
        print(f"==== {len(self.results) - len(failed)} passed, {len(failed)} failed"
              + (f": {', '.join(failed)}" if failed else "") + " ====")
        return not failed


class Soak:
    def __init__(self, args):
        self.args = args
        self.tmp = os.path.abspath(args.tmp)
        self.config = os.path.join(self.tmp, "config")
        self.runtime = os.path.join(self.tmp, "run")
        self.log_path = os.path.join(self.tmp, "daemon.log")
        self.lifecycled = os.path.join(args.bin, "lifecycled")
        self.lifectl = os.path.join(args.bin, "lifectl")
        self.control = Control(os.path.join(self.runtime, "control.sock"))
        self.seed = args.seed if args.seed is not None else random.randrange(1 << 30)
        self.rng = random.Random(self.seed)
        self.apps = make_apps(args.apps, self.rng)
        self.by_name = {a["name"]: a for a in self.apps}
        self.daemon = None
        self.started = time.monotonic()
        self.workers = []
        self.check = Check()
        self.figures = {}
        self.parents = []

    def mark(self, text):
        """A line in the daemon's log, to find the phases in it."""
        with open(self.log_path, "a") as f:
            f.write(f"==== soak {time.strftime('%H:%M:%S')}: {text}\n")
        log(text)

    # Daemon.

    def start_daemon(self):
        write_config(self.config, self.apps, self.tmp)
        env = dict(os.environ, LIFECYCLED_RUNTIME_DIR=self.runtime)
        env.pop("NOTIFY_SOCKET", None)
        env.pop("LISTEN_FDS", None)
        env.pop("LISTEN_PID", None)
        env.pop("INVOCATION_ID", None)
        env.pop("JOURNAL_STREAM", None)
        with open(self.log_path, "a") as out:
            self.daemon = subprocess.Popen(
                [self.lifecycled, "--config", self.config, "--runtime-dir", self.runtime, "--log-level", "debug"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env)
        with open(os.path.join(self.tmp, "daemon.pid"), "w") as f:
            f.write(str(self.daemon.pid))
        # The daemon answers once it has started every AutoLaunch= app: about 30 s for 500 on 2 busy cores.
        end = time.monotonic() + 300
        while time.monotonic() < end:
            if self.daemon.poll() is not None:
                raise RuntimeError(f"lifecycled exited at start with status {self.daemon.returncode}")
            try:
                reply = self.control.request({"verb": "status"}, timeout=10)
                if reply.get("ok"):
                    return reply
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError("lifecycled did not answer within 300 s")

    def find_parents(self, status):
        """The parent cgroups of the app groups, from `status`' mechanisms line (app cgroups under: …)."""
        for line in status["daemon"].get("mechanisms", []):
            if line.startswith("app cgroups under:"):
                for part in line[len("app cgroups under:"):].split(","):
                    words = part.split()
                    paths = [w for w in words if w.startswith("/")]
                    if paths:
                        self.parents.append(paths[0])
        with open(os.path.join(self.tmp, "cgroups"), "w") as f:
            f.write("\n".join(self.parents) + "\n")

    # Waiting for quiet.

    def settle(self, what, timeout, all_running=False):
        """Waits until every app is settled: nothing awaits an ack, (optionally) every app runs, no app is past its
        grace time in the background (unless it may be: audio, a background task), and three lists 1.5 s apart
        agree. Returns (ok, last list, seconds, problems)."""
        start = time.monotonic()
        end = start + timeout
        previous, same, apps, problems = None, 0, [], ["no list yet"]
        while time.monotonic() < end:
            try:
                apps = self.control.list(timeout=60)
            except Exception as error:   # noqa: BLE001
                problems = [f"list failed: {error}"]
                time.sleep(1.5)
                continue
            problems = []
            for a in apps:
                spec = self.by_name[a["name"]]
                if a.get("awaiting") is not None:
                    problems.append(f"{a['name']} {a['state']} awaits the ack of {a.get('awaiting')}")
                if a.get("protocol") == "waiting":
                    problems.append(f"{a['name']} {a['state']}: its client has not said hello yet")
                if all_running and a["state"] not in RUNNING:
                    problems.append(f"{a['name']} is {a['state']}")
                if (a["state"] == "background" and spec["kind"] != "audio" and not a.get("backgroundTasks")
                        and a["sinceSeconds"] > float(spec["grace"]) + 3):
                    problems.append(f"{a['name']} background for {a['sinceSeconds']:.1f}s, past its grace time "
                                    f"{spec['grace']}s")
            signature = [(a["name"], a["state"], a.get("pid"), a.get("awaiting"), a.get("queuedPosts")) for a in apps]
            same = same + 1 if signature == previous and not problems else 0
            previous = signature
            if same >= 2:
                return True, apps, time.monotonic() - start, []
            time.sleep(1.5)
        return False, apps, time.monotonic() - start, problems

    def requests_in_parallel(self, requests, parallel=24):
        """Lifecycle requests on their own connections, `parallel` at a time. Returns the replies."""
        replies = []
        pending = list(requests)
        selector = selectors.DefaultSelector()
        inflight = {}
        while pending or inflight:
            while pending and len(inflight) < parallel:
                request = pending.pop()
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(10)
                sock.connect(self.control.path)
                sock.sendall(json.dumps(request).encode() + b"\n")
                sock.setblocking(False)
                inflight[sock] = [request, b"", time.monotonic()]
                selector.register(sock, selectors.EVENT_READ)
            for key, _ in selector.select(0.5):
                sock = key.fileobj
                entry = inflight[sock]
                data = sock.recv(1 << 20)
                entry[1] += data
                if not data or b"\n" in entry[1]:
                    reply = json.loads(entry[1].split(b"\n")[0]) if b"\n" in entry[1] else {"ok": False, "error": "closed"}
                    replies.append((entry[0], reply))
                    selector.unregister(sock)
                    sock.close()
                    del inflight[sock]
            for sock, entry in list(inflight.items()):
                if time.monotonic() - entry[2] > REQUEST_TIMEOUT:
                    replies.append((entry[0], {"ok": False, "error": "timeout"}))
                    selector.unregister(sock)
                    sock.close()
                    del inflight[sock]
        return replies

    # Phases.

    def launch_all(self):
        self.mark(f"setup: {len(self.apps)} apps, waiting for the auto-launched ones")
        names = [a["name"] for a in self.apps if a["autolaunch"] == "no"]
        replies = self.requests_in_parallel([{"verb": "launch", "app": n, "background": True} for n in names])
        refused = [f"{q['app']}: {r.get('error')}" for q, r in replies if not r.get("ok")]
        if refused:
            log(f"launch refused: {refused[:5]}")
        ok, apps, seconds, problems = self.settle("launch", timeout=max(120, 0.5 * len(self.apps)), all_running=True)
        self.figures["launch_settle_s"] = seconds
        if not ok:
            raise RuntimeError("the apps did not all launch and settle: " + "; ".join(problems[:10]))
        return apps

    def monitor(self, deadline):
        """While the workers run: a list every 2 s (how many apps are active at once), the daemon's fds and RSS."""
        samples, max_active, over = 0, 0, []
        fds, rss = [], []
        list_failures = []
        while time.monotonic() < deadline:
            t = time.monotonic()
            try:
                apps = self.control.list(timeout=REQUEST_TIMEOUT)
                samples += 1
                active = [a["name"] for a in apps if a["state"] == "active"]
                max_active = max(max_active, len(active))
                if len(active) > 1:
                    over.append(f"{time.strftime('%H:%M:%S')}: {len(active)} active: {', '.join(active)}")
            except Exception as error:   # noqa: BLE001
                list_failures.append(str(error))
            n, _, r, _ = daemon_resources(self.daemon.pid)
            fds.append(n)
            rss.append(r)
            time.sleep(max(0.0, 2 - (time.monotonic() - t)))
        return {"samples": samples, "max_active": max_active, "over": over, "fds": fds, "rss": rss,
                "list_failures": list_failures}

    def storm(self, seconds):
        spec = {"seed": self.seed, "socket": self.control.path, "lifectl": self.lifectl, "runtime": self.runtime,
                "apps": self.apps, "seconds": seconds, "rate": self.args.rate, "concurrency": self.args.concurrency,
                "lifectl_share": self.args.lifectl_share}
        spec_path = os.path.join(self.tmp, "storm.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        self.mark(f"storm: {self.args.workers} controller processes for {seconds:.0f} s (seed {self.seed})")
        cpu_before = cpu_seconds(self.daemon.pid)
        for i in range(self.args.workers):
            result = os.path.join(self.tmp, f"worker{i}.json")
            self.workers.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--worker", str(i), "--spec", spec_path, "--result", result],
                stdin=subprocess.DEVNULL))
        reloads = self.start_reload_storm(seconds)
        self.second_daemon_attempt()
        monitor = self.monitor(time.monotonic() + seconds)
        self.figures["reload_storm"] = self.finish_reload_storm(reloads)
        for w in self.workers:
            try:
                w.wait(timeout=REQUEST_TIMEOUT + 60)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        self.figures["storm_cpu_s"] = cpu_seconds(self.daemon.pid) - cpu_before
        results = []
        for i, w in enumerate(self.workers):
            path = os.path.join(self.tmp, f"worker{i}.json")
            if w.returncode != 0 or not os.path.exists(path):
                raise RuntimeError(f"controller {i} failed (exit {w.returncode})")
            with open(path) as f:
                results.append(json.load(f))
        self.workers = []
        self.mark("storm over: quiet period")
        return monitor, results

    def start_reload_storm(self, seconds):
        """soak/reload_storm.py beside the controllers: reloads, some with a broken file, for the storm's length."""
        spec = {"seed": self.seed, "lifectl": self.lifectl, "runtime": self.runtime, "config": self.config,
                "apps": [a["name"] for a in self.apps], "seconds": max(1.0, seconds - 5), "daemon_pid": self.daemon.pid}
        spec_path = os.path.join(self.tmp, "reload-storm.json")
        with open(spec_path, "w") as f:
            json.dump(spec, f)
        result = os.path.join(self.tmp, "reload-storm-result.json")
        return result, subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reload_storm.py"),
                                         "--spec", spec_path, "--result", result], stdin=subprocess.DEVNULL)

    def finish_reload_storm(self, started):
        result, process = started
        try:
            process.wait(timeout=REQUEST_TIMEOUT + 60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.returncode != 0 or not os.path.exists(result):
            return {"counts": {}, "failures": [f"the reload storm failed (exit {process.returncode})"]}
        with open(result) as f:
            return json.load(f)

    def second_daemon_attempt(self):
        """In the storm, a second lifecycled on the same runtime directory: it must refuse to start (its lock), and
        leave the first one's sockets and apps alone (the invariants checked after the storm)."""
        env = dict(os.environ, LIFECYCLED_RUNTIME_DIR=self.runtime)
        for name in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "INVOCATION_ID", "JOURNAL_STREAM"):
            env.pop(name, None)
        try:
            second = subprocess.run([self.lifecycled, "--config", self.config, "--runtime-dir", self.runtime],
                                    stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=30)
        except subprocess.TimeoutExpired:
            raise RuntimeError("a second lifecycled on the same runtime directory did not refuse to start")
        if second.returncode == 0 or "already serves the runtime directory" not in second.stderr:
            raise RuntimeError(f"a second lifecycled: exit {second.returncode}, {second.stderr.strip()[-300:]}")
        self.mark("storm: a second lifecycled on the same runtime directory refused to start")

    def restore(self):
        """After the storm: every app running again, held notifications delivered (so that the daemon holds what
        it held at the baseline), then settle."""
        for round_ in range(3):
            apps = self.control.list(timeout=REQUEST_TIMEOUT)
            requests = []
            for a in apps:
                if a["state"] in ("notRunning", "failed"):
                    requests.append({"verb": "launch", "app": a["name"], "background": True})
                elif a["state"] == "suspended" and a.get("queuedNotifications"):
                    requests.append({"verb": "resume", "app": a["name"]})
            if not requests:
                break
            self.mark(f"restore, round {round_ + 1}: {len(requests)} launches and resumes")
            self.requests_in_parallel(requests)
        return self.settle("after", timeout=120, all_running=True)

    # Checks.

    def app_processes(self, app, table, pgroups):
        """Every process of a running app: its cgroups' members, and its process group."""
        pids = set()
        for parent in self.parents:
            pids.update(cgroup_pids(os.path.join(parent, "app-" + app["name"])) or [])
        if app.get("pid"):
            pids.update(pgroups.get(app.get("pid"), []))
        return {p for p in pids if p in table}

    def freezer_state(self, app):
        method = app.get("suspendMethod")
        if "cgroup2" in method:
            events = read(os.path.join(app.get("cgroup") or "/nonexistent", "cgroup.events"))
            return "frozen 1" in events.splitlines(), "cgroup.events " + " ".join(events.split())
        v1 = [p for p in self.parents if "/freezer/" in p]
        state = read(os.path.join(v1[0], "app-" + app["name"], "freezer.state")).strip() if v1 else ""
        return state == "FROZEN", f"freezer.state {state or '?'}"

    def check_invariants(self, apps, baseline, after, monitor):
        pid = self.daemon.pid
        table = process_table()
        pgroups = collections.defaultdict(list)
        for p, (_, _, pgrp, _) in table.items():
            pgroups[pgrp].append(p)

        # 1. At most one active app; scenes agree.
        active = [a["name"] for a in apps if a["state"] == "active"]
        scene_active = [(a["name"], s["scene"]) for a in apps for s in (a.get("scenes") or [])
                        if s["state"] == "foregroundActive"]
        details = [f"active now: {', '.join(active) or 'none'}"] + monitor["over"]
        bad_scenes = [f"{n}/{s} foregroundActive in an app that is not active" for n, s in scene_active if n not in active]
        ok = len(active) <= 1 and monitor["max_active"] <= 1 and len(scene_active) <= 1 and not bad_scenes
        self.check.add("1. at most one active app", ok,
                       f"{len(active)} active after settling; at most {monitor['max_active']} in "
                       f"{monitor['samples']} lists during the storm; {len(scene_active)} foregroundActive scene(s)",
                       details + bad_scenes)

        # 2. Suspended apps are stopped.
        suspended = [a for a in apps if a["state"] == "suspended"]
        problems, n_signal, n_frozen, n_procs = [], 0, 0, 0
        for a in suspended:
            procs = self.app_processes(a, table, pgroups)
            n_procs += len(procs)
            if not procs:
                problems.append(f"{a['name']}: suspended, but no process (pid {a.get('pid')})")
                continue
            if a.get("suspendMethod").startswith("freezer"):
                n_frozen += 1
                frozen, text = self.freezer_state(a)
                cgroup_members = set()
                for parent in self.parents:
                    cgroup_members.update(cgroup_pids(os.path.join(parent, "app-" + a["name"])) or [])
                outside = sorted(procs - cgroup_members)
                if not frozen or outside:
                    problems.append(f"{a['name']}: {a.get('suspendMethod')}, {text}"
                                    + (f"; processes outside its cgroup: {outside}" if outside else ""))
            else:
                n_signal += 1
                running = sorted(f"{p}:{table[p][0]}" for p in procs if table[p][0] != "T")
                if running:
                    problems.append(f"{a['name']}: suspended by signal, but processes not in state T: {running}")
        self.check.add("2. suspended apps are stopped", not problems,
                       f"{len(suspended)} suspended ({n_signal} by SIGSTOP, {n_frozen} by the freezer), "
                       f"{n_procs} processes checked, {len(problems)} not stopped", problems)

        # 3. No zombie left for the daemon to reap (two looks 2 s apart: one that lasts).
        def zombies():
            return {p for p, (state, ppid, _, _) in process_table().items() if state == "Z" and ppid == pid}
        first = zombies()
        time.sleep(2)
        second = zombies()
        lasting = sorted(first & second)
        self.check.add("3. no zombie child of the daemon", not lasting,
                       f"{len(first)} then {len(second)} zombie(s) 2 s apart, {len(lasting)} lasting",
                       [f"pid {p}: {read(f'/proc/{p}/comm').strip()}" for p in lasting])

        # 4. fds and RSS back to their level.
        kept = after["kinds"].get("kept", 0)
        fd_ok = after["fds"] <= baseline["fds"] + self.args.fd_tolerance and kept <= KEPT_LIMIT
        rss_limit = baseline["rss"] + max(self.args.rss_tolerance_kib, baseline["rss"] * self.args.rss_tolerance_pct / 100)
        rss_ok = after["rss"] <= rss_limit
        kinds = sorted(set(baseline["kinds"]) | set(after["kinds"]))
        self.check.add("4. daemon fds and RSS back to their level", fd_ok and rss_ok,
                       f"fds {baseline['fds']} before the storm, {after['fds']} after (tolerance +{self.args.fd_tolerance}), "
                       f"besides {kept} left open on kernel or state files (at most {KEPT_LIMIT}); "
                       f"RSS {baseline['rss'] / 1024:.1f} MiB before, {after['rss'] / 1024:.1f} MiB after "
                       f"(limit {rss_limit / 1024:.1f} MiB: +max({self.args.rss_tolerance_kib // 1024} MiB, "
                       f"{self.args.rss_tolerance_pct:g}%)); peak during the storm {max(monitor['rss'] or [0]) / 1024:.1f} MiB, "
                       f"{max(monitor['fds'] or [0])} fds; VmHWM {after['hwm'] / 1024:.1f} MiB",
                       [f"fd kinds before/after: " + ", ".join(f"{k} {baseline['kinds'].get(k, 0)}/{after['kinds'].get(k, 0)}"
                                                               for k in kinds)])

        # 5. Every running app has its process; no process in the daemon's cgroups, or started for this run, that
        # the daemon does not know.
        running = {a["name"]: a for a in apps if a["state"] in RUNNING}
        problems = []
        accounted = set()
        for name, a in running.items():
            p = a.get("pid")
            if not p or p not in table:
                problems.append(f"{name}: {a['state']} with pid {p}, which does not exist")
                continue
            if table[p][0] == "Z":
                problems.append(f"{name}: pid {p} is a zombie")
            env = environ(p)
            if f"LIFECYCLE_APP={name}".encode() not in env:
                problems.append(f"{name}: pid {p} is not this app's process (no LIFECYCLE_APP={name})")
            if a.get("cgroup") and p not in (cgroup_pids(a.get("cgroup")) or []):
                problems.append(f"{name}: pid {p} is not in its cgroup {a.get('cgroup')}")
            accounted.update(self.app_processes(a, table, pgroups))
        groups_seen = 0
        for parent in self.parents:
            own = cgroup_pids(parent) or []
            if own:
                problems.append(f"{parent}: holds processes itself: {own}")
            try:
                entries = sorted(os.listdir(parent))
            except OSError as error:
                problems.append(f"{parent}: {error}")
                continue
            for entry in entries:
                path = os.path.join(parent, entry)
                if not os.path.isdir(path):
                    continue
                groups_seen += 1
                members = [m for m in (cgroup_pids(path) or []) if m in table]
                name = entry[4:] if entry.startswith("app-") else None
                if name not in self.by_name:
                    if members:
                        problems.append(f"{path}: a group the daemon has no app for, with processes {members}")
                    continue
                for m in members:
                    if name not in running:
                        problems.append(f"{path}: pid {m} ({read(f'/proc/{m}/comm').strip()}) but {name} is "
                                        f"{next((a['state'] for a in apps if a['name'] == name), '?')}")
                    elif m not in accounted:
                        problems.append(f"{path}: pid {m} is not {name}'s process (pid {running[name]['pid']}) nor in "
                                        f"its process group")
        ours = marked(self.tmp, table)
        strays = [p for p in ours if p not in accounted]
        for p in strays:
            state, ppid, pgrp, _ = table[p]
            problems.append(f"pid {p} ({read(f'/proc/{p}/comm').strip()}, state {state}, parent {ppid}, group {pgrp}) "
                            f"was started for an app but belongs to no running app")
        children = [p for p, (state, ppid, _, _) in table.items() if ppid == pid and state != "Z"]
        known_pids = {a.get("pid") for a in running.values()}
        for p in children:
            if p not in known_pids:
                problems.append(f"pid {p} ({read(f'/proc/{p}/comm').strip()}) is the daemon's child but no app's process")
        self.check.add("5. running apps have their processes, no unknown process", not problems,
                       f"{len(running)} running apps, {len(ours)} app processes on the machine, "
                       f"{len(accounted)} accounted for, {groups_seen} cgroups scanned, {len(problems)} problems", problems)

        # 6. The daemon runs and answers, and answered everything during the storm.
        alive = self.daemon.poll() is None and (proc_stat(pid) or ("?",))[0] not in ("Z", "X")
        answer = subprocess.run([self.lifectl, "--runtime-dir", self.runtime, "status", "--json"], capture_output=True,
                                text=True, timeout=60)
        answered = answer.returncode == 0 and json.loads(answer.stdout or "{}").get("daemon", {}).get("pid") == pid
        unanswered = self.figures.get("unanswered", 0)
        self.check.add("6. the daemon runs and answers", alive and answered and unanswered == 0,
                       f"pid {pid} {'running' if alive else 'GONE'}; lifectl status exit {answer.returncode}; "
                       f"{unanswered} request(s) of the storm unanswered (connection error or timeout)",
                       self.figures.get("error_samples", []) + ([answer.stderr.strip()] if answer.returncode else []))

        # 9. Apps' output floods are rate-limited: each flooding app wrote at most its burst per interval begun
        # since the daemon started, and the rest was counted.
        flooders = [a["name"] for a in self.apps if a["kind"] in ("flood", "burst")]
        if flooders:
            written, dropped = collections.Counter(), collections.Counter()
            with open(self.log_path, errors="replace") as f:
                for line in f:
                    name, _, rest = line.partition(": ")
                    if name in flooders:
                        if rest.startswith("soak-"):
                            written[name] += 1
                        else:
                            m = re.match(r"(\d+) lines? of output dropped", rest)
                            if m:
                                dropped[name] += int(m.group(1))
            intervals = 1 + int((time.monotonic() - self.started) // 30)
            bound = OUTPUT_BURST_LINES * intervals
            over = [f"{n}: {written[n]} lines written, more than {bound}" for n in flooders if written[n] > bound]
            flood = [n for n in flooders if self.by_name[n]["kind"] == "flood"]
            # The flood writes for as long as it is not suspended: at most one interval into the run, it has gone over.
            silent = [f"{n}: no drop reported" for n in flood if dropped[n] == 0 and written[n] >= OUTPUT_BURST_LINES]
            self.check.add("9. output floods are rate-limited", not over and not silent,
                           "; ".join(f"{n}: {written[n]} lines written, {dropped[n]} dropped (reported so far)"
                                     for n in flooders) + f"; at most {bound} each in {intervals} interval(s)",
                           over + silent)

    # Cleanup.

    def stop(self):
        """SIGTERM to the daemon (it terminates its apps), then make sure nothing of the run is left."""
        for w in self.workers:
            if w.poll() is None:
                w.kill()
                w.wait()
        if self.daemon is not None and self.daemon.poll() is None:
            self.mark("stopping lifecycled with SIGTERM")
            self.daemon.send_signal(signal.SIGTERM)
            start = time.monotonic()
            # What the app processes are doing while the daemon stops them: states, and where sleeping ones wait.
            samples, next_sample = [], 1.0
            try:
                while self.daemon.poll() is None and time.monotonic() - start < 120:
                    if time.monotonic() - start >= next_sample and len(samples) < 8:
                        table = process_table()
                        ours = marked(self.tmp, table)
                        states = collections.Counter(table[p][0] for p in ours if p in table)
                        waits = collections.Counter(read(f"/proc/{p}/wchan").strip() or "-" for p in ours
                                                    if p in table and table[p][0] in "SD")
                        samples.append(f"{time.monotonic() - start:4.1f} s after SIGTERM: {len(ours)} app processes, "
                                       + " ".join(f"{k}:{n}" for k, n in sorted(states.items()))
                                       + ("; sleeping in " + ", ".join(f"{w} {n}" for w, n in waits.most_common(3))
                                          if waits else ""))
                        next_sample += 1.0
                    time.sleep(0.05)
                self.daemon.wait(timeout=max(1, 120 - (time.monotonic() - start)))
                self.figures["stop_s"] = time.monotonic() - start
                self.figures["stop_status"] = self.daemon.returncode
                self.figures["stop_samples"] = samples
            except subprocess.TimeoutExpired:
                self.figures["stop_status"] = "still running after 120 s: SIGKILL"
                self.daemon.kill()
                self.daemon.wait()
        leftover = sweep(self.tmp, self.parents)
        self.figures["leftover"] = leftover
        try:
            with open(self.log_path, errors="replace") as f:
                tail = f.read().rpartition("stopping lifecycled with SIGTERM")[2]
            self.figures["stop_terminated"] = len(re.findall(r"→ notRunning \(terminated", tail))
            self.figures["stop_killed"] = len(re.findall(r"did not exit within .* sending SIGKILL", tail))
        except OSError:
            pass
        return leftover


def sweep(marker, parents):
    """Kills every process of the run still there (thawing frozen groups first), reaps what comes to us, removes
    the cgroups. Returns what was found left behind."""
    found = {"processes": [], "cgroups": []}
    for _ in range(3):
        pids = marked(marker)
        if not pids:
            break
        found["processes"] = sorted(set(found["processes"]) | {f"{p} {read(f'/proc/{p}/comm').strip()}" for p in pids})
        for parent in parents:
            for path in [parent] + [os.path.join(parent, e) for e in (os.listdir(parent) if os.path.isdir(parent) else [])]:
                for name, value in (("cgroup.freeze", "0"), ("freezer.state", "THAWED")):
                    if os.path.exists(os.path.join(path, name)):
                        try:
                            with open(os.path.join(path, name), "w") as f:
                                f.write(value)
                        except OSError:
                            pass
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.5)
        reap()
    for parent in parents:
        if not os.path.isdir(parent):
            continue
        for entry in os.listdir(parent):
            path = os.path.join(parent, entry)
            if os.path.isdir(path):
                found["cgroups"].append(path)
                try:
                    os.rmdir(path)
                except OSError:
                    pass
        found["cgroups"].append(parent)
        try:
            os.rmdir(parent)
        except OSError:
            pass
    reap()
    return found


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def become_subreaper():
    """Orphans of the run (if the daemon dies) come to us, not to a PID 1 that does not reap."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def summarise_storm(results, monitor, seconds):
    counts = collections.defaultdict(collections.Counter)
    refusals = collections.Counter()
    slowest = collections.defaultdict(float)
    errors = []
    for r in results:
        for kind, c in r["counts"].items():
            counts[kind].update(c)
        refusals.update(r["refusals"])
        for kind, s in r["slowest"].items():
            slowest[kind] = max(slowest[kind], s)
        errors += r["errors"]
    total = sum(sum(c.values()) for c in counts.values())
    print("\n==== storm ====")
    print(f"{len(results)} controllers, {seconds:.0f} s: {total} requests answered or failed "
          f"({total / max(seconds, 1):.0f}/s), {sum(r['posts'] for r in results)} posts")
    print(f"{'request':28} {'ok':>7} {'refused':>8} {'error':>6} {'timeout':>8} {'slowest':>8}")
    for kind in sorted(counts):
        c = counts[kind]
        base = kind.replace(" (lifectl)", "")
        print(f"{kind:28} {c['ok']:7} {c['refused']:8} {c['error']:6} {c['timeout']:8} {slowest.get(base, 0):7.1f}s")
    print("refusals (expected: requests that do not fit the state the app is in by then), most frequent:")
    for text, n in refusals.most_common(12):
        print(f"  {n:6}  {text}")
    unanswered = sum(c["error"] + c["timeout"] for c in counts.values())
    return unanswered, errors


def interrupted(signum, frame):
    raise KeyboardInterrupt()


# The daemon's rate limit on an app's output (docs/JOURNAL.md): lines per 30 s interval.
OUTPUT_BURST_LINES = 10_000

LOG_EVENTS = [
    ("launches", r"→ inactive \(launched by"),
    ("suspensions by the grace timer", r"→ suspended \(background time over\)"),
    ("suspensions asked for", r"→ suspended \(suspend requested\)"),
    ("stops confirmed (SIGSTOP)", r": suspended with signal:"),
    ("stops confirmed (freezer)", r": suspended with freezer"),
    ("resumes", r"suspended → background \(resumed\)"),
    ("app switches (didBecomeActive)", r"→ active \(didBecomeActive\)"),
    ("process exits", r": process \d+ (exited|killed)"),
    ("restarts by Restart=", r": restarting in "),
    ("SIGKILLs", r": sent SIGKILL"),
    ("memory-pressure terminations", r"jetsam"),
    ("notification deliveries to running apps", r"^a\d+: \[a\d+\] notification "),
    ("flood lines written", r"^a\d+: soak-(flood|burst)"),
    ("reports of dropped output", r": \d+ lines? of output dropped"),
]
PROBLEMS = re.compile(r"Failed|was not acknowledged|did not exit within|Dropping connection|still open when|"
                      r"Ignoring|persists|error", re.IGNORECASE)


def summarise_log(path):
    """Counts of the daemon's events, and its warnings by kind (names and numbers folded)."""
    counts = collections.Counter()
    problems = collections.Counter()
    patterns = [(name, re.compile(pattern)) for name, pattern in LOG_EVENTS]
    lines = 0
    with open(path, errors="replace") as f:
        for line in f:
            lines += 1
            if line.startswith("===="):
                continue
            for name, pattern in patterns:
                if pattern.search(line):
                    counts[name] += 1
            if PROBLEMS.search(line) and not re.match(r"^a\d+: \[a\d+\] ", line):
                problems[re.sub(r"\d+", "N", re.sub(r"\ba\d+\b", "APP", line.strip()))[:160]] += 1
    print(f"\n==== daemon log ({lines} lines) ====")
    print("; ".join(f"{name} {counts[name]}" for name, _ in LOG_EVENTS))
    if problems:
        print("warnings and errors, by kind:")
        for text, n in problems.most_common(15):
            print(f"  {n:6}  {text}")


def main_run(args):
    become_subreaper()
    soak = Soak(args)
    os.makedirs(soak.tmp, exist_ok=True)
    storm_ok = False
    signal.signal(signal.SIGTERM, interrupted)
    kinds = collections.Counter(a["kind"] for a in soak.apps)
    log(f"{len(soak.apps)} apps ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}; "
        f"{sum(a['freezer'] for a in soak.apps)} with SuspendMethod=freezer), {args.workers} controllers, "
        f"storm {args.seconds:.0f} s, seed {soak.seed}; everything in {soak.tmp}")
    try:
        status_reply = soak.start_daemon()
        soak.find_parents(status_reply)
        log(f"lifecycled pid {soak.daemon.pid}, cgroups {status_reply['daemon']['cgroupLayout']}: "
            f"{'; '.join(soak.parents) or 'none'}")
        soak.launch_all()
        time.sleep(1)   # the daemon closes the last list's connection
        fds, kinds_before, rss, hwm = daemon_resources(soak.daemon.pid)
        baseline = {"fds": fds, "kinds": kinds_before, "rss": rss, "hwm": hwm}
        soak.mark(f"baseline after {soak.figures['launch_settle_s']:.0f} s: {fds} fds, RSS {rss / 1024:.1f} MiB")
        monitor, results = soak.storm(args.seconds)
        unanswered, errors = summarise_storm(results, monitor, args.seconds)
        soak.figures["unanswered"] = unanswered
        soak.figures["error_samples"] = errors[:20]
        print(f"daemon during the storm: {soak.figures['storm_cpu_s']:.0f} s of CPU "
              f"({100 * soak.figures['storm_cpu_s'] / args.seconds:.0f}%), RSS "
              f"{min(monitor['rss'] or [0]) / 1024:.1f}–{max(monitor['rss'] or [0]) / 1024:.1f} MiB, "
              f"fds {min(monitor['fds'] or [0])}–{max(monitor['fds'] or [0])}", flush=True)
        if monitor["rss"]:
            step = max(1, len(monitor["rss"]) // 8)
            print("daemon RSS (MiB) and fds through the storm, every "
                  f"{2 * step} s: " + ", ".join(f"{monitor['rss'][i] / 1024:.1f}/{monitor['fds'][i]}"
                                               for i in range(0, len(monitor["rss"]), step)), flush=True)
        storm_ok = True
        ok, apps, seconds, problems = soak.restore()
        soak.check.add("0. every app settles after the storm", ok,
                       f"{'settled' if ok else 'not settled'} in {seconds:.0f} s; states: "
                       + ", ".join(f"{n} {s}" for s, n in sorted(collections.Counter(a['state'] for a in apps).items()))
                       + "; protocols: "
                       + ", ".join(f"{n} {s}" for s, n in sorted(collections.Counter(a.get('protocol') for a in apps).items())),
                       problems)
        soak.mark("settled: checking the invariants")
        time.sleep(1)
        fds, kinds_after, rss, hwm = daemon_resources(soak.daemon.pid)
        after = {"fds": fds, "kinds": kinds_after, "rss": rss, "hwm": hwm}
        misses = sum(a.get("deadlineMisses") for a in apps)
        launches = sum(a.get("launches") for a in apps)
        print(f"\nafter settling: {launches} launches in all, {misses} missed ack deadlines, "
              f"{sum(a.get('memoryTerminations') for a in apps)} memory terminations, "
              f"{sum(a.get('queuedNotifications') for a in apps)} notifications still held", flush=True)
        soak.check_invariants(apps, baseline, after, monitor)
        reloads = soak.figures.get("reload_storm", {"counts": {}, "failures": ["no result"]})
        soak.check.add("8. reloads keep every app", not reloads["failures"],
                       ", ".join(f"{n} {kind}" for kind, n in reloads["counts"].items()), reloads["failures"])
    except KeyboardInterrupt:
        log("interrupted")
        soak.check.add("run completed", False, "interrupted")
    except Exception as error:   # noqa: BLE001 — report it, clean up, exit 2
        log(f"the run could not be completed: {error!r}")
        soak.check.add("run completed", False, f"{type(error).__name__}: {error}")
    finally:
        leftover = soak.stop()
        stop_status = soak.figures.get("stop_status")
        clean = not leftover["processes"] and stop_status == 0
        soak.check.add("7. clean stop (SIGTERM)", clean,
                       f"lifecycled exited with {stop_status} after {soak.figures.get('stop_s', 0):.1f} s, "
                       f"{soak.figures.get('stop_terminated', '?')} apps terminated, "
                       f"{soak.figures.get('stop_killed', '?')} of them by SIGKILL after TimeoutStopSec; "
                       f"{len(leftover['processes'])} app process(es) left behind and killed",
                       leftover["processes"] + soak.figures.get("stop_samples", []))
        if args.keep_log:
            try:
                subprocess.run(["cp", soak.log_path, args.keep_log], check=False)
                log(f"daemon log kept in {args.keep_log}")
            except OSError:
                pass
    try:
        summarise_log(soak.log_path)
    except OSError:
        pass
    passed = soak.check.report()
    if not passed and not args.keep_log:
        print("(set SOAK_LOG=FILE to keep the daemon's debug log)")
    status = 0 if passed else (1 if storm_ok else 2)
    return status


def cleanup_only(args):
    """run.sh's trap, after a run that could not clean up itself (killed): the daemon, then every marked process."""
    tmp = os.path.abspath(args.tmp)
    pid_text = read(os.path.join(tmp, "daemon.pid")).strip()
    parents = [line for line in read(os.path.join(tmp, "cgroups")).split("\n") if line]
    if pid_text.isdigit() and proc_stat(int(pid_text)) and read(f"/proc/{pid_text}/cmdline").find(tmp) >= 0:
        pid = int(pid_text)
        os.kill(pid, signal.SIGTERM)
        for _ in range(600):
            if not proc_stat(pid) or proc_stat(pid)[0] == "Z":
                break
            time.sleep(0.2)
        else:
            os.kill(pid, signal.SIGKILL)
    found = sweep(tmp, parents)
    if found["processes"]:
        print(f"soak cleanup: killed {len(found['processes'])} leftover app processes", file=sys.stderr)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", help="the directory of lifecycled and lifectl")
    parser.add_argument("--tmp", help="the run's private directory")
    parser.add_argument("--seconds", type=float, default=480, help="length of the storm (default 480)")
    parser.add_argument("--apps", type=int, default=500)
    parser.add_argument("--workers", type=int, default=4, help="controller processes")
    parser.add_argument("--rate", type=float, default=8.0, help="requests started per second per controller")
    parser.add_argument("--concurrency", type=int, default=6, help="requests in flight per controller")
    parser.add_argument("--lifectl-share", type=float, default=0.15, help="share of requests made through lifectl")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--fd-tolerance", type=int, default=2)
    parser.add_argument("--rss-tolerance-kib", type=int, default=4096)
    parser.add_argument("--rss-tolerance-pct", type=float, default=10.0)
    parser.add_argument("--keep-log", help="copy the daemon's debug log here at the end")
    parser.add_argument("--cleanup-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        return worker_main(args)
    if not args.tmp:
        parser.error("--tmp is required")
    if args.cleanup_only:
        return cleanup_only(args)
    if not args.bin:
        parser.error("--bin is required")
    return main_run(args)


if __name__ == "__main__":
    sys.exit(main())
