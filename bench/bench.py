#!/usr/bin/env python3
"""The comparison benchmark of lifecycled against supervisord, s6 and runit (bench/run.sh drives it).

Every peer runs the same tiny program (bench/sleeper.c, copied to TMP/bsleep) under a private directory in
TMP; nothing is installed as a boot service and no system supervisor is touched. Peers alternate within
every repetition (the order rotates), and each figure is the median of the repetitions with min-max.
Every process started is found again by its pid (the supervisor's tree, and the sleepers by their
executable inside TMP, which is ours alone) and killed at the end, also on failure.

  bench.py --bin DIR --tools DIR --tmp DIR [--smoke] [--large] [--reps R] [--out docs/BENCHMARKS.md] [--raw-dir docs/bench]
  bench.py --from-json docs/bench/results.json      the report again from a run's raw results, without measuring
"""

import argparse
import contextlib
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLK = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024

# ---------------------------------------------------------------------------------------------- /proc


def procs():
    """pid -> (ppid, exe) of every process."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        try:
            exe = os.readlink(f"/proc/{pid}/exe")
        except OSError:
            exe = ""
        table[pid] = (ppid, exe)
    return table


def tree(root):
    """The pids of root and all its descendants."""
    table = procs()
    children = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            out.append(pid)
            todo.extend(children.get(pid, []))
    return out, table


def status_fields(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields[key] = value.split()
    except OSError:
        pass
    return fields


def pss_kib(pid):
    """The process's proportional set size (/proc/PID/smaps_rollup): each page shared with n processes counts 1/n."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def cpu_ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        rest = stat[stat.rindex(")") + 2:].split()
        return int(rest[11]) + int(rest[12])  # utime + stime
    except (OSError, ValueError):
        return 0


# ------------------------------------------------------------------------------------------- peers


class Peer:
    """One supervisor instance at N services. Subclasses say how to configure, start, and control it."""

    name = "?"
    ack_file = None

    def __init__(self, ctx, n):
        self.ctx, self.n = ctx, n
        ctx.instances += 1
        self.dir = os.path.join(ctx.tmp, f"{self.key}-{n}-{ctx.instances}")
        os.makedirs(self.dir)
        self.pid = None
        self.launch_us = None

    def supervisor_pids(self):
        """The supervisor's own processes: its tree without the supervised programs."""
        pids, table = tree(self.pid)
        return [p for p in pids if table[p][1] not in (self.ctx.sleeper, self.ctx.client)]

    def rss_kib(self):
        return sum(int(status_fields(p).get("VmRSS", ["0"])[0]) for p in self.supervisor_pids())

    def pss_kib(self):
        """The memory the supervisor's processes cost together: summed RSS counts every page the processes share
        (their binary, libc) once per process, which inflates a supervisor with a process per service."""
        return sum(pss_kib(p) for p in self.supervisor_pids())

    def idle(self, seconds):
        pids = self.supervisor_pids()

        def sample():
            ticks = sum(cpu_ticks(p) for p in pids)
            switches = 0
            for p in pids:
                fields = status_fields(p)
                switches += int(fields.get("voluntary_ctxt_switches", ["0"])[0])
                switches += int(fields.get("nonvoluntary_ctxt_switches", ["0"])[0])
            return ticks, switches

        t0, s0 = sample()
        time.sleep(seconds)
        t1, s1 = sample()
        return (t1 - t0) * 1000 / CLK, s1 - s0, len(pids)

    def start(self):
        what = f"file:{self.ack_file}" if self.ack_file else self.ctx.sleeper
        log = os.path.join(self.dir, "log")
        expected = self.n - getattr(self, "clients", 0)
        timeout = max(self.ctx.launch_timeout, self.n // 50)  # 10,000 apps take longer than 60 s to start
        out = subprocess.run([self.ctx.tool("launchwait"), what, str(expected), str(timeout), log]
                             + self.command(), capture_output=True, text=True, env=self.env())
        fields = out.stdout.split()
        if len(fields) == 2:
            self.pid = int(fields[1])
            self.ctx.started.append(self)
        if out.returncode != 0 or not fields:
            raise RuntimeError(f"{self.name} N={self.n}: launch failed: {out.stderr.strip()} (log {log})")
        self.launch_us = float(fields[0])
        return self.launch_us

    def env(self):
        return os.environ

    def stop(self):
        """Stop the supervisor, then every process left of its tree and every sleeper of ours, by pid."""
        if self.pid is None:
            return
        pids, _ = tree(self.pid)
        self.stopped_pids = pids
        self.graceful()
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        self.ctx.kill_ours()
        try:
            os.waitpid(self.pid, os.WNOHANG)
        except OSError:
            pass
        self.pid = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def graceful(self):
        pass

    def sample_pid(self):
        """The pid of the sleeper of service 1."""
        raise NotImplementedError


class Lifecycled(Peer):
    name, key = "lifecycled", "lifecycled"
    protocol = False

    def __init__(self, ctx, n, clients=0):
        super().__init__(ctx, n)
        conf = os.path.join(self.dir, "config")
        os.makedirs(os.path.join(conf, "apps"))
        with open(os.path.join(conf, "lifecycled.conf"), "w") as f:
            f.write("[Defaults]\nBackgroundTimeSec=infinity\nLaunchTimeoutSec=300\n")
        self.ack_file = os.path.join(self.dir, "acks") if self.protocol else None
        for i in range(1, n + 1):
            if self.protocol or i <= clients:
                body = (f"[App]\nExec={ctx.client}\nAutoLaunch=yes\n"
                        + (f"Environment=BENCH_ACKS={self.ack_file}\n" if self.ack_file else ""))
            else:
                body = f"[App]\nExec={ctx.sleeper} 100000\nProtocol=none\nAutoLaunch=yes\n"
            with open(os.path.join(conf, "apps", f"app{i}.conf"), "w") as f:
                f.write(body)
        self.conf = conf
        self.clients = 0 if self.protocol else clients
        self.runtime = os.path.join(self.dir, "run")
        if clients and not self.protocol:
            self.ack_file = None  # wait for the plain processes only; the clients are checked after

    def env(self):
        return dict(os.environ, LIFECYCLED_RUNTIME_DIR=self.runtime)

    def command(self):
        return [self.ctx.lifecycled, "--config", self.conf, "--log-level", "warning"]

    def lifectl(self, *args):
        return [self.ctx.lifectl, "--runtime-dir", self.runtime, *args]

    def graceful(self):
        # lifecycled removes its cgroups on SIGTERM: give it the time to stop its apps (bounded).
        try:
            os.kill(self.pid, signal.SIGTERM)
        except OSError:
            return
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    return
            except ChildProcessError:
                if not os.path.exists(f"/proc/{self.pid}"):
                    return
            time.sleep(0.05)

    def apps(self, *names):
        """Every app (`list`), or only the named ones (`status APP` each: a list of thousands of apps is
        more than one reply the daemon will buffer, see the scaling section)."""
        if not names:
            out = subprocess.run(self.lifectl("list", "--json"), capture_output=True, text=True, timeout=60)
            return json.loads(out.stdout) if out.returncode == 0 else []
        found = []
        for name in names:
            out = subprocess.run(self.lifectl("status", name, "--json"), capture_output=True, text=True, timeout=60)
            if out.returncode == 0:
                found += json.loads(out.stdout).get("apps", [])
        return found

    def sample_pid(self):
        return next(a["pid"] for a in self.apps("app1"))

    def status_cmd(self):
        return self.lifectl("status", "app1")

    def restart_cmds(self):
        return self.lifectl("-q", "terminate", "app1"), self.lifectl("-q", "launch", "app1")

    def suspend_cmds(self):
        return self.lifectl("-q", "suspend", "app1"), self.lifectl("-q", "resume", "app1")


class LifecycledProtocol(Lifecycled):
    name, key = "lifecycled (protocol clients)", "lifecycled-protocol"
    protocol = True


class Supervisord(Peer):
    name, key = "supervisord", "supervisord"

    def __init__(self, ctx, n):
        super().__init__(ctx, n)
        self.conf = os.path.join(self.dir, "supervisord.conf")
        sock = os.path.join(self.dir, "supervisor.sock")
        lines = [f"[unix_http_server]\nfile={sock}\n",
                 f"[supervisord]\nnodaemon=true\nlogfile={self.dir}/supervisord.log\npidfile={self.dir}/pid\n"
                 f"childlogdir={self.dir}\nminfds={4 * n + 1024}\nminprocs={n + 200}\nloglevel=warn\n",
                 "[rpcinterface:supervisor]\nsupervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface\n",
                 f"[supervisorctl]\nserverurl=unix://{sock}\n"]
        for i in range(1, n + 1):
            lines.append(f"[program:app{i}]\ncommand={ctx.sleeper} 100000\nautostart=true\nstartsecs=0\n"
                         "stdout_logfile=NONE\nstderr_logfile=NONE\nstopwaitsecs=2\n")
        with open(self.conf, "w") as f:
            f.write("\n".join(lines))

    def command(self):
        return ["supervisord", "-n", "-c", self.conf]

    def ctl(self, *args):
        return ["supervisorctl", "-c", self.conf, *args]

    def sample_pid(self):
        out = subprocess.run(self.ctl("pid", "app1"), capture_output=True, text=True, timeout=60)
        return int(out.stdout.strip())

    def status_cmd(self):
        return self.ctl("status", "app1")

    def restart_cmds(self):
        return self.ctl("stop", "app1"), self.ctl("start", "app1")

    def suspend_cmds(self):
        return self.ctl("signal", "STOP", "app1"), self.ctl("signal", "CONT", "app1")


class ServiceDirs(Peer):
    """s6 and runit: one directory per service whose ./run is a symlink to the sleeper (no shell)."""

    def __init__(self, ctx, n):
        super().__init__(ctx, n)
        self.scan = os.path.join(self.dir, "scan")
        os.makedirs(self.scan)
        for i in range(1, n + 1):
            service = os.path.join(self.scan, f"app{i}")
            os.makedirs(service)
            os.symlink(ctx.sleeper, os.path.join(service, "run"))

    def service(self):
        return os.path.join(self.scan, "app1")


class S6(ServiceDirs):
    name, key = "s6", "s6"

    def command(self):
        return ["s6-svscan", "-c", str(self.n + 100), self.scan]

    def sample_pid(self):
        out = subprocess.run(["s6-svstat", "-p", self.service()], capture_output=True, text=True, timeout=60)
        return int(out.stdout.strip())

    def status_cmd(self):
        return ["s6-svstat", self.service()]

    def restart_cmds(self):
        return ["s6-svc", "-wd", "-d", self.service()], ["s6-svc", "-wu", "-u", self.service()]

    def suspend_cmds(self):
        return ["s6-svc", "-p", self.service()], ["s6-svc", "-c", self.service()]


class Runit(ServiceDirs):
    name, key = "runit", "runit"

    def command(self):
        return ["runsvdir", "-P", self.scan]

    def sample_pid(self):
        for _ in range(200):
            try:
                with open(os.path.join(self.service(), "supervise", "pid")) as f:
                    text = f.read().strip()
                if text:
                    return int(text)
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("runit: no pid for app1")

    def status_cmd(self):
        return ["sv", "status", self.service()]

    def restart_cmds(self):
        return ["sv", "-w", "7", "down", self.service()], ["sv", "-w", "7", "up", self.service()]

    def suspend_cmds(self):
        return ["sv", "pause", self.service()], ["sv", "cont", self.service()]


PEERS = [Lifecycled, Supervisord, S6, Runit]
ONE_CONNECTION = "lifecycled, one open control connection (bench/ctlconn.c, no lifectl)"
# The messages of one app switch as measured (bench/ctlconn.c: request until reply): the focus request, the 4 callbacks
# (willResignActive, didEnterBackground to the app leaving; willEnterForeground, didBecomeActive to the one coming),
# their 4 acks, and the reply. The ping-pong floor of the switch is that many half round trips: the floor times the
# number of messages exchanged. The 8 callbacks and acks alone are reported beside it.
SWITCH_MESSAGES = 10
# The allowance for the switch: at most this many times its ping-pong floor (clarity over microseconds).
SWITCH_TARGET = 3
ONE_CONNECTION_PINNED = "lifecycled, one open control connection, daemon + app + ctlconn on one CPU"
RELAY_SUSPEND = "floor with a control message: C relay, kill() + reply (bench/relay_floor.c)"
RELAY_SUSPEND_WORK = ("floor with the required work: the C relay + oom_score_adj, /proc confirmation, state file"
                      " (bench/relay_floor.c --work)")
LIFECTL_STATIC_EXE = "lifecycled, lifectl as a static executable (proposed build)"

# ------------------------------------------------------------------------------------------ context


class Context:
    def __init__(self, args):
        self.tmp = args.tmp
        self.tools = args.tools
        self.lifecycled = os.path.join(args.bin, "lifecycled")
        self.lifectl = os.path.join(args.lifectl_dir or args.bin, "lifectl")
        self.sleeper = os.path.join(self.tmp, "bsleep")
        self.client = os.path.join(self.tmp, "bclient")
        shutil.copy(os.path.join(self.tools, "sleeper"), self.sleeper)
        shutil.copy(os.path.join(self.tools, "client"), self.client)
        # lifectl as make install builds it (--static-swift-stdlib), and, when given, the same lifectl linked as a
        # static executable (no dynamic loader): the proposed build, shown beside it.
        self.lifectl_static_exe = os.path.join(args.lifectl_static_exe, "lifectl") if args.lifectl_static_exe else None
        self.started = []
        self.instances = 0
        self.samples = {}  # label -> the fewest samples a measurement got
        self.relay_notes = set()  # what relay_floor said on stderr (no cgroup for the weights, say)
        self.launch_timeout = 60

    def tool(self, name):
        return os.path.join(self.tools, name)

    def kill_ours(self):
        """Every sleeper and client of this run, by pid (their executables are in our temp dir only)."""
        for _ in range(3):
            found = [p for p, (_, exe) in procs().items() if exe in (self.sleeper, self.client)]
            if not found:
                return
            for p in found:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.1)

    def cleanup(self):
        for peer in self.started:
            try:
                peer.stop()
            except Exception as error:  # keep cleaning
                print(f"cleanup {peer.name}: {error}", file=sys.stderr)
        self.kill_ours()


def stats(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return statistics.median(values), min(values), max(values)


def budget(k, probe_seconds, seconds=4.0):
    """How many samples fit in about `seconds` (at least 3, at most k): keeps the slow peers (supervisorctl
    takes over a second at N=1000) inside the 10-minute run, with fewer samples, said in the report."""
    return max(3, min(k, int(seconds / max(probe_seconds, 1e-6))))


def repeat(ctx, k, label, *commands, seconds=4.0):
    started = time.time()
    for command in commands:  # one probe run, also a warm-up
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
    k = budget(k, time.time() - started, seconds)
    ctx.samples[label] = min(ctx.samples.get(label, k), k)
    argv = [ctx.tool("repeat"), str(k), label]
    for i, command in enumerate(commands):
        argv += (["+"] if i else []) + list(command)
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{label}: {out.stderr.strip()}")
    median, low, high = out.stdout.split()[-3:]
    return float(median), float(low), float(high)


def suspend_resume(ctx, k, pid, commands=None, label=None):
    if commands:
        started = time.time()
        for command in commands:  # probe (and leave it running)
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)
        k = budget(k, time.time() - started)
        if label:
            ctx.samples[label] = min(ctx.samples.get(label, k), k)
    argv = [ctx.tool("suspend_floor"), str(k), str(pid)]
    if commands:
        argv += list(commands[0]) + ["+"] + list(commands[1])
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"suspend_floor: {out.stderr.strip()}")
    rows = {line.split()[0]: tuple(map(float, line.split()[1:4])) for line in out.stdout.splitlines()}
    return rows["suspend"], rows["resume"]


def ctlbench(ctx, sock, k, *requests):
    out = subprocess.run([ctx.tool("ctlbench"), sock, str(k), *requests], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"ctlbench: {out.stderr.strip()}")
    median, low, high, errors = out.stdout.split()
    return (float(median), float(low), float(high)), int(errors)


def ctlconn(ctx, sock, k, *requests, cpu=None):
    """The daemon's own share on one open control connection (bench/ctlconn.c): median, min, max, refusals.
    `cpu`: ctlconn runs on that CPU alone (see `on_one_cpu`)."""
    prefix = ["taskset", "-c", str(cpu)] if cpu is not None else []
    out = subprocess.run(prefix + [ctx.tool("ctlconn"), sock, str(k), *requests], capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"ctlconn: {out.stderr.strip()}")
    median, low, high, errors = out.stdout.split()
    return (float(median), float(low), float(high)), int(errors)


def ctlconn_suspend(ctx, sock, k, app, pid, cpu=None):
    """suspend/resume of APP over one open connection until the reply and /proc agree; rows by label."""
    prefix = ["taskset", "-c", str(cpu)] if cpu is not None else []
    out = subprocess.run(prefix + [ctx.tool("ctlconn"), sock, str(k), "--suspend", app, str(pid)], capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"ctlconn --suspend: {out.stderr.strip()}")
    rows = {}
    for line in out.stdout.splitlines():
        fields = line.split()
        rows[fields[0]] = tuple(map(float, fields[1:4])) if len(fields) == 4 else int(fields[1])
    return rows


@contextlib.contextmanager
def on_one_cpu(pids, cpu=0):
    """Every thread of each process in `pids` on CPU `cpu` for the block (taskset -a -p), then on every CPU again.
    The floors are the faster of this placement and the scheduler's (relay_floor --pin, pingpong under taskset):
    lifecycled's own figures against them get the same two placements, so that a ratio compares like with like.
    Yields False (and pins nothing) where taskset is missing."""
    if not shutil.which("taskset"):
        yield False
        return
    every = f"0-{(os.cpu_count() or 1) - 1}"
    for pid in pids:
        subprocess.run(["taskset", "-a", "-p", "-c", str(cpu), str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield True
    finally:
        for pid in pids:
            subprocess.run(["taskset", "-a", "-p", "-c", every, str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def faster(*samples):
    """The sample (median, min, max) with the lowest median, of those measured."""
    return min((x for x in samples if x), key=lambda sample: sample[0])


def relay_floor(ctx, *args, work=False):
    """The C relay in the daemon's place (bench/relay_floor.c), at the faster of two placements, as the ping-pong
    floor: every process of the floor pinned to one CPU (--pin 0; in suspend mode the target too, its affinity put
    back after), and left to the scheduler. Each row (switch, suspend, resume) is the faster placement's median,
    min and max. `work`: the floor with the kernel work the daemon must do per transition (--work: state files in a
    tmpfs directory, oom_score_adj, the CPU weight of a foreground/background change, the /proc confirmation)."""
    options = []
    if work:
        directory = os.path.join(ctx.tmp, "relay-floor-state")
        os.makedirs(directory, exist_ok=True)
        options = ["--work", directory]

    def run(pin):
        out = subprocess.run([ctx.tool("relay_floor"), *pin, *options, *map(str, args)], capture_output=True,
                             text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError(f"relay_floor: {out.stderr.strip()}")
        if out.stderr.strip():
            ctx.relay_notes.add(out.stderr.strip())
        return {line.split()[0]: tuple(map(float, line.split()[1:4])) for line in out.stdout.splitlines()}
    free = run([])
    pinned = run(["--pin", "0"])
    return {label: min(free[label], pinned[label], key=lambda sample: sample[0]) for label in free}


def pingpong(ctx, k=20000):
    """The physical floor of one message: the lower of two placements. Left to the scheduler, the two processes
    often land on two vCPUs, and a wakeup across vCPUs costs several times one on the same CPU; pinned to one CPU
    (taskset, inherited by its forked child) it is the best case. Both are run, and the faster one's median is the floor."""
    def run(prefix):
        out = subprocess.run(prefix + [ctx.tool("pingpong"), str(k)], capture_output=True, text=True, check=True, timeout=600)
        return tuple(map(float, out.stdout.split()[1:4]))
    free = run([])
    pinned = run(["taskset", "-c", "0"]) if shutil.which("taskset") else free
    return min(free, pinned, key=lambda sample: sample[0])


def round_ratios(row):
    """Of `switch_rounds`: the median, min and max of switch / (SWITCH_MESSAGES x floor) over the rounds, and the
    medians of the switch and of the floor; None without rounds."""
    rounds = row.get("switch_rounds")
    if not rounds:
        return None
    ratios = sorted(switch / (SWITCH_MESSAGES * floor) for switch, floor, _ in rounds)
    return (statistics.median(ratios), ratios[0], ratios[-1], statistics.median(r[0] for r in rounds),
            statistics.median(r[1] for r in rounds))


def pingpong_pinned(ctx, k):
    """The ping-pong floor on CPU 0 alone (its median, µs): the half of a round of `switch_rounds`."""
    out = subprocess.run(["taskset", "-c", "0", ctx.tool("pingpong"), str(k)], capture_output=True, text=True, check=True,
                         timeout=600)
    return float(out.stdout.split()[1])


def switch_rounds(ctx, sock, rounds, k):
    """The switch on one CPU and its ping-pong floor in turn, in short rounds (about 30 ms each): the floor right
    before and right after each batch of `k` pairs of switches. The host's load moves every figure from one second to
    the next, so a ratio of figures taken seconds apart carries that noise; each round's ratio is of the same moment. Returns [(switch median, floor median, refused)] per round. The caller has
    pinned the daemon and its clients to CPU 0."""
    out = []
    for _ in range(rounds):
        before = pingpong_pinned(ctx, 2000)
        # A few switches first, untimed: the floor's two processes have just run on this CPU, and the daemon's first
        # switches after them pay for the caches they took.
        ctlconn(ctx, sock, 5, '{"verb":"focus","app":"app1"}', '{"verb":"focus","app":"app2"}', cpu=0)
        switch, errors = ctlconn(ctx, sock, k, '{"verb":"focus","app":"app1"}', '{"verb":"focus","app":"app2"}', cpu=0)
        after = pingpong_pinned(ctx, 2000)
        out.append((switch[0], (before + after) / 2, errors))
    return out


def settle(pids=(), limit=15.0, window=0.2, idle_share=0.9):
    """Waits until none of `pids` is left in /proc (not even as a zombie) and the machine is idle (at least
    `idle_share` of every CPU idle over `window` seconds), at most `limit` seconds, and returns the seconds waited.
    Run after a supervisor is stopped, so that what its stop leaves behind does not land in the next peer's launch.
    Where PID 1 reaps orphans only now and then, a stopped peer's processes stay zombies for a while, and the next
    peer's launch would run among them (launchwait's scans reading their /proc entries too)."""
    start = time.time()
    pending = [p for p in pids if os.path.exists(f"/proc/{p}")]
    while pending and time.time() - start < limit:
        time.sleep(0.05)
        pending = [p for p in pending if os.path.exists(f"/proc/{p}")]
    def sample():
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        return fields[3] + fields[4], sum(fields)  # idle + iowait, total (jiffies, all CPUs)
    idle0, total0 = sample()
    while time.time() - start < limit:
        time.sleep(window)
        idle1, total1 = sample()
        if total1 > total0 and (idle1 - idle0) / (total1 - total0) >= idle_share:
            break
        idle0, total0 = idle1, total1
    return time.time() - start


def cpu_ns(pid):
    """Time the process has run on a CPU, in ns (/proc/PID/schedstat: exact, unlike stat's clock ticks)."""
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def fd_limit():
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def log(text):
    print(text, file=sys.stderr, flush=True)

# ------------------------------------------------------------------------------------------ the run


def run(args):
    ctx = Context(args)
    smoke = args.smoke
    sizes = [10] if smoke else [100, 1000]
    big = sizes[-1]
    reps = 1 if smoke else args.reps
    k_status = 5 if smoke else 20
    k_restart = 3 if smoke else 10
    k_suspend = 5 if smoke else 20
    results = {"launch": {}, "rss": {}, "pss": {}, "idle": {}, "status": {}, "restart": {}, "suspend": {}, "resume": {},
               "sizes": sizes, "reps": reps}
    variants = [cls for cls in PEERS if cls is Lifecycled or cls.key in args.peers] + [LifecycledProtocol]
    try:
        t_start = time.time()
        for rep in range(reps):
            for n in sizes:
                order = variants[rep % len(variants):] + variants[:rep % len(variants)]
                for cls in order:
                    peer = cls(ctx, n)
                    log(f"rep {rep + 1}/{reps} N={n} {peer.name}: launch")
                    try:
                        us = peer.start()
                        results["launch"].setdefault(peer.name, {}).setdefault(n, []).append(us)
                        time.sleep(0.5)  # settle (supervisord's startsecs, s6's readiness files) before memory
                        results["rss"].setdefault(peer.name, {}).setdefault(n, []).append(peer.rss_kib())
                        results["pss"].setdefault(peer.name, {}).setdefault(n, []).append(peer.pss_kib())
                        if n == big and cls is not LifecycledProtocol:
                            log(f"  idle {args.idle} s")
                            ms, switches, count = peer.idle(args.idle)
                            results["idle"].setdefault(peer.name, []).append((ms, switches, count))
                            log("  control latency")
                            results["status"].setdefault(peer.name, []).append(
                                repeat(ctx, k_status, f"status: {peer.name}", peer.status_cmd()))
                            if cls is Lifecycled and ctx.lifectl_static_exe:
                                command = [ctx.lifectl_static_exe] + peer.status_cmd()[1:]
                                results["status"].setdefault(LIFECTL_STATIC_EXE, []).append(
                                    repeat(ctx, k_status, f"status: {LIFECTL_STATIC_EXE}", command))
                            results["restart"].setdefault(peer.name, []).append(
                                repeat(ctx, k_restart, f"stop+start: {peer.name}", *peer.restart_cmds()))
                            time.sleep(0.3)
                            pid = peer.sample_pid()
                            suspend, resume = suspend_resume(ctx, k_suspend, pid, peer.suspend_cmds(),
                                                             label=f"suspend+resume: {peer.name}")
                            results["suspend"].setdefault(peer.name, []).append(suspend)
                            results["resume"].setdefault(peer.name, []).append(resume)
                            if cls is Lifecycled:
                                suspend, resume = suspend_resume(ctx, 200, pid)
                                results["suspend"].setdefault("floor: kill() + /proc", []).append(suspend)
                                results["resume"].setdefault("floor: kill() + /proc", []).append(resume)
                                kill = (["/bin/kill", "-STOP", str(pid)], ["/bin/kill", "-CONT", str(pid)])
                                suspend, resume = suspend_resume(ctx, k_suspend, pid, kill)
                                results["suspend"].setdefault("floor with a command: /bin/kill + /proc", []).append(suspend)
                                results["resume"].setdefault("floor with a command: /bin/kill + /proc", []).append(resume)
                                sock = os.path.join(peer.runtime, "control.sock")
                                rows = ctlconn_suspend(ctx, sock, 200 if not smoke else 20, "app1", pid)
                                results["suspend"].setdefault(ONE_CONNECTION, []).append(rows["suspend"])
                                results["resume"].setdefault(ONE_CONNECTION, []).append(rows["resume"])
                                results.setdefault("suspend_refused", []).append(rows["refused"])
                                with on_one_cpu([peer.pid, pid]) as pinned:
                                    if pinned:
                                        rows = ctlconn_suspend(ctx, sock, 200 if not smoke else 20, "app1", pid, cpu=0)
                                        results["suspend"].setdefault(ONE_CONNECTION_PINNED, []).append(rows["suspend"])
                                        results["resume"].setdefault(ONE_CONNECTION_PINNED, []).append(rows["resume"])
                                        results["suspend_refused"][-1] += rows["refused"]
                                relay = relay_floor(ctx, "suspend", 200 if not smoke else 20, pid)
                                results["suspend"].setdefault(RELAY_SUSPEND, []).append(relay["suspend"])
                                results["resume"].setdefault(RELAY_SUSPEND, []).append(relay["resume"])
                                relay = relay_floor(ctx, "suspend", 200 if not smoke else 20, pid, work=True)
                                results["suspend"].setdefault(RELAY_SUSPEND_WORK, []).append(relay["suspend"])
                                results["resume"].setdefault(RELAY_SUSPEND_WORK, []).append(relay["resume"])
                    finally:
                        peer.stop()
                        ctx.started.remove(peer) if peer in ctx.started else None
                        waited = settle(getattr(peer, "stopped_pids", ()))
                        if waited > 1:
                            log(f"  settled after {waited:.1f} s")
            log(f"  ({time.time() - t_start:.0f} s so far)")

        # 6 and 7: the switch round trip and status at N apps (2 protocol clients + N-2 plain programs), each
        # beside the floors measured right before it (the machine's load changes over the run).
        results["scaling"] = {}
        results["pingpong_samples"] = []
        results["relay_samples"] = []
        results["relay_work_samples"] = []
        scale_sizes = [10] if smoke else [10, 100, 1000]
        if args.large:
            # Each running app holds two of the daemon's descriptors (pidfd, output pipe): 10,000 apps need a
            # descriptor limit above 20,000. As root the harness raises its own hard limit for its children, as a
            # unit's LimitNOFILE= would (systemd's default for services is 1024:524288; lifecycled raises its soft
            # limit to the hard one itself). Where the limit stays lower, the largest N that fits, said in the report.
            if os.geteuid() == 0 and fd_limit() < 65536:
                try:
                    resource.setrlimit(resource.RLIMIT_NOFILE, (65536, 65536))
                except (ValueError, OSError) as error:
                    log(f"  could not raise the descriptor limit: {error}")
            fits = (fd_limit() - 300) // 2 // 1000 * 1000
            results["large_limit"] = None if fits >= 10000 else (fd_limit(), fits)
            scale_sizes.append(min(10000, fits))
        for n in scale_sizes:
            log(f"scaling N={n}")
            k = 20 if smoke else 200
            results["pingpong_samples"].append(pingpong(ctx))
            results["relay_samples"].append(relay_floor(ctx, "switch", k * 2)["switch"])
            results["relay_work_samples"].append(relay_floor(ctx, "switch", k * 2, work=True)["switch"])
            peer = Lifecycled(ctx, n, clients=2)
            try:
                peer.start()
                deadline = time.time() + 60 + n / 100
                while time.time() < deadline:
                    apps = peer.apps("app1", "app2")
                    if sum(a["protocol"] == "lifecycle" and a["state"] == "inactive" for a in apps) == 2:
                        break
                    time.sleep(0.1)
                # Every app running and the machine idle before anything is timed: the two clients are up long before
                # the last of 1,000 plain apps, and a launch still going on (spawns, first state saves) would land in
                # the figures.
                while time.time() < deadline:
                    listed = peer.apps()  # empty where the list is too long for one reply: then the idle wait alone
                    if not listed or sum(1 for a in listed if a.get("pid")) >= n:
                        break
                    time.sleep(0.2)
                settle()
                sock = os.path.join(peer.runtime, "control.sock")
                row = {}
                ctlconn(ctx, sock, 2, '{"verb":"focus","app":"app1"}', '{"verb":"focus","app":"app2"}')  # warm up
                before = cpu_ns(peer.pid)
                row["switch_conn"], errors = ctlconn(ctx, sock, k, '{"verb":"focus","app":"app1"}',
                                                     '{"verb":"focus","app":"app2"}')
                after = cpu_ns(peer.pid)
                row["switch_cpu"] = (after - before) / 1000 / (2 * k) if before is not None and after is not None else None
                row["switch_errors"] = errors
                # The same, with the daemon and both clients on one CPU, as the floors' pinned placement.
                clients = [a["pid"] for a in peer.apps("app1", "app2") if a.get("pid")]
                row["switch_pinned"] = None
                with on_one_cpu([peer.pid] + clients) as pinned:
                    if pinned:
                        row["switch_pinned"], errors = ctlconn(ctx, sock, k, '{"verb":"focus","app":"app1"}',
                                                               '{"verb":"focus","app":"app2"}', cpu=0)
                        row["switch_errors"] += errors
                        row["switch_rounds"] = switch_rounds(ctx, sock, 3 if smoke else 15, 10 if smoke else 50)
                        row["switch_errors"] += sum(r[2] for r in row["switch_rounds"])
                row["switch_best"] = faster(row["switch_conn"], row["switch_pinned"])
                row["switch_raw"], _ = ctlbench(ctx, sock, k // 2, '{"verb":"focus","app":"app1"}',
                                                '{"verb":"focus","app":"app2"}')
                before = cpu_ns(peer.pid)
                row["status_conn"], _ = ctlconn(ctx, sock, k, '{"verb":"status","app":"app1"}')
                after = cpu_ns(peer.pid)
                row["status_cpu"] = (after - before) / 1000 / k if before is not None and after is not None else None
                try:
                    row["list_conn"], _ = ctlconn(ctx, sock, max(5, k // 20), '{"verb":"list"}')
                except RuntimeError as error:
                    # A list of thousands of apps is one reply over 1 MiB, which the daemon delivers (its bound is on
                    # the backlog a peer left unread); should it fail anyway, that is a finding, reported as such.
                    log(f"  list at N={n}: {error}")
                    row["list_conn"] = None
                kk = 5 if smoke else 30
                median, low, high = repeat(ctx, kk, f"lifectl focus N={n}", peer.lifectl("-q", "focus", "app1"),
                                           peer.lifectl("-q", "focus", "app2"))
                row["switch_lifectl"] = (median / 2, low / 2, high / 2)
                row["status_lifectl"] = repeat(ctx, kk, f"lifectl status N={n}", peer.lifectl("status", "app1"))
                row["rss"] = peer.rss_kib()
                row["pss"] = peer.pss_kib()
                results["scaling"][n] = row
            finally:
                peer.stop()
                ctx.started.remove(peer) if peer in ctx.started else None
        results["pingpong"] = stats([x[0] for x in results["pingpong_samples"]])
        results["relay"] = stats([x[0] for x in results["relay_samples"]])
        results["relay_work"] = stats([x[0] for x in results["relay_work_samples"]])
    finally:
        ctx.cleanup()
    results["samples"] = ctx.samples
    results["relay_notes"] = sorted(ctx.relay_notes)
    return results

# ------------------------------------------------------------------------------------------ report


def fmt(triple, unit=1.0, digits=1):
    if triple is None:
        return "n/a"
    m, lo, hi = (v / unit for v in triple)
    return f"{m:,.{digits}f} ({lo:,.{digits}f}–{hi:,.{digits}f})"


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    def output(*command):
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    free = output("free", "-h") or "(free not available)"
    nproc = output("nproc") or str(os.cpu_count())
    versions = []
    for package in ("supervisor", "s6", "runit"):
        versions.append(f"{package} {output('dpkg-query', '-W', '-f', '${Version}', package) or 'not installed'}")
    return model, nproc, free, ", ".join(versions), platform.release()


def section(heading, *paragraphs):
    """The lines of a report section that starts with `heading` and `paragraphs`, each followed by a blank line, and
    the function that appends a line to it."""
    lines = [heading, ""]
    for paragraph in paragraphs:
        lines += [paragraph, ""]
    return lines, lines.append


def core_tables(results, args):
    """Sections 1 to 7 (the supervisors and the switch), whole: docs/bench/core.md."""
    L, p = section("# Raw figures: the supervisors and the app switch",
                   "Written by `bench/run.sh` with docs/BENCHMARKS.md, from the same run; the verdicts and the analysis are there.")
    p("Figures are the median of the repetitions, then (min–max) over the repetitions; each repetition's")
    p("own figure is itself a median where several samples were taken (control, suspend, switch).")
    p("")
    sizes = results["sizes"]
    names = [c.name for c in PEERS if c is Lifecycled or c.key in args.peers] + [LifecycledProtocol.name]

    def best_peer(table, n=None, lower=True):
        cands = {k: v for k, v in table.items() if k not in (Lifecycled.name, LifecycledProtocol.name)
                 and not k.startswith("floor")}
        vals = {k: stats(v[n] if n is not None else [x[0] for x in v]) for k, v in cands.items()
                if (n is None or n in v)}
        vals = {k: v for k, v in vals.items() if v}
        if not vals:
            return None, None
        k = min(vals, key=lambda x: vals[x][0])
        return k, vals[k]

    p("### 1. Launch: start command until N processes run (ms)")
    p("")
    p("| supervisor | " + " | ".join(f"N={n}" for n in sizes) + " | ratio to best peer at N=" + str(sizes[-1]) + " |")
    p("|---|" + "---|" * (len(sizes) + 1))
    bestname, best = best_peer(results["launch"], sizes[-1])
    for name in names:
        row = results["launch"].get(name, {})
        cells = [fmt(stats(row.get(n, [])), 1000) for n in sizes]
        s = stats(row.get(sizes[-1], []))
        ratio = f"{s[0] / best[0]:.2f}x ({bestname})" if s and best else "n/a"
        p(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")
    p("")
    p("Plain processes: every peer runs the same sleeper, exec'd directly (no shell); \"running\" = N processes")
    p("with that executable in /proc, polled every 2 ms by bench/launchwait.c, which also starts the supervisor.")
    p("lifecycled (protocol clients): N bench/client.c apps, until every one has acked didFinishLaunching.")
    p("")
    p(f"### 2. Memory of the supervisor's own processes (MiB)")
    p("")
    p("| supervisor | " + " | ".join(f"PSS, N={n}" for n in sizes) + " | "
      + " | ".join(f"summed RSS, N={n}" for n in sizes) + " | processes counted |")
    p("|---|" + "---|" * (2 * len(sizes) + 1))
    counts = {name: v[0][2] for name, v in results["idle"].items()}
    for name in names:
        pss = results["pss"].get(name, {})
        rss = results["rss"].get(name, {})
        cells = [fmt(stats(pss.get(n, [])), 1024) for n in sizes] + [fmt(stats(rss.get(n, [])), 1024) for n in sizes]
        p(f"| {name} | " + " | ".join(cells) + f" | {counts.get(name, '—')} |")
    p("")
    p("Over the supervisor's process tree without the supervised programs: supervisord alone, s6-svscan + every")
    p("s6-supervise, runsvdir + every runsv, lifecycled's daemon process. PSS (the sum of `Pss:` from")
    p("/proc/PID/smaps_rollup) counts a page shared by n processes as 1/n in each, so the sum is what the processes")
    p("cost together; summed VmRSS counts a shared page once per process. The comparisons use PSS.")
    p("")
    p(f"### 3. Idle cost over {args.idle} s at N={sizes[-1]}")
    p("")
    p("| supervisor | CPU time (ms) | context switches | wakeups per second |")
    p("|---|---|---|---|")
    for name, v in results["idle"].items():
        cpu = stats([x[0] for x in v]); sw = stats([x[1] for x in v])
        p(f"| {name} | {fmt(cpu, 1, 0)} | {fmt(sw, 1, 0)} | {sw[0] / args.idle:,.1f} |")
    p("")
    p("utime+stime and voluntary+nonvoluntary context switches from /proc, summed over the supervisor's processes.")
    p("")
    p(f"### 4. Control latency at N={sizes[-1]} (ms, whole command including its start-up)")
    p("")
    p("| supervisor | status of one service | stop + start of one service |")
    p("|---|---|---|")
    for name, v in results["status"].items():
        restart = results["restart"].get(name)
        p(f"| {name} | {fmt(stats([x[0] for x in v]), 1000, 2)} | "
          f"{fmt(stats([x[0] for x in restart]), 1000, 2) if restart else '—'} |")
    p("")
    p("`lifectl status app1` / `terminate`+`launch` (each waits until the app settled); `supervisorctl status`/")
    p("`stop`+`start`; `s6-svstat` / `s6-svc -wd -d` + `s6-svc -wu -u`; `sv status` / `sv -w 7 down` + `up`")
    p("(sv without -w returns without waiting). bench/repeat.c, posix_spawn + waitpid, after one warm-up run;")
    p("samples per repetition: 20 (status), 10 (stop+start), 20 (suspend), fewer where a command is slow")
    p("(about 4 s per measurement): " + ", ".join(f"{k} {v}" for k, v in results["samples"].items()
                                                 if not k.startswith("lifectl ")) + ".")
    p(f"lifectl is built as {args.lifectl_build}"
      + ("; the proposed build links it as a static executable (`-Xswiftc -static-executable`: no dynamic loader)."
         if LIFECTL_STATIC_EXE in results["status"] else "."))
    p("")
    p(f"### 5. Suspend and resume at N={sizes[-1]} (µs): request until the process is in state T, and back")
    p("")
    p("| method | suspend | resume | suspend / floor | resume / floor |")
    p("|---|---|---|---|---|")
    floor = "floor: kill() + /proc"
    fs = stats([x[0] for x in results["suspend"].get(floor, [])])
    fr = stats([x[0] for x in results["resume"].get(floor, [])])
    for name, v in results["suspend"].items():
        s = stats([x[0] for x in v]); r = stats([x[0] for x in results["resume"][name]])
        p(f"| {name} | {fmt(s, 1, 0)} | {fmt(r, 1, 0)} | {s[0] / fs[0]:.0f}x | {r[0] / fr[0]:.0f}x |")
    p("")
    p("Commands (`lifectl suspend`/`resume`, `supervisorctl signal STOP`/`CONT`, `s6-svc -p`/`-c`, `sv pause`/`cont`,")
    p("`/bin/kill`) are run by bench/suspend_floor.c, which then polls /proc/PID/stat; the floor is its own kill() of")
    p("the process group. One open control connection: bench/ctlconn.c sends `{\"verb\":\"suspend\",…}` on a")
    p("connection kept open (no process start-up, no connect) and waits for the reply and for state T in /proc")
    p("(resume: the reply and no T); median of 200 pairs; \"on one CPU\": the same with the daemon (every thread), the app")
    p("and ctlconn on CPU 0, the floors' pinned placement (the verdict takes the faster of the two placements).")
    p("The relay floor is the same exchange with a C process in")
    p("the daemon's place: request, kill(), reply, /proc; with the required work, the relay also writes the app's")
    p("oom_score_adj (900, then 500), polls /proc until T before it replies, and writes a state file the daemon's way in a")
    p("tmpfs directory after the reply, as the daemon does (no CPU weight: a suspended app keeps its background one).")
    p("Both relay floors are the faster of two placements, as the ping-pong floor: every process of the floor (and the")
    p("app's process) pinned to one CPU, and left to the scheduler. Pairs the daemon refused (left out of the figures): "
      + ", ".join(str(x) for x in results.get("suspend_refused", [])) + ".")
    for note in results.get("relay_notes", []):
        p(f"relay_floor said: {note}")
    p("")
    pp = results["pingpong"]
    relay = results["relay"]
    relay_work = results.get("relay_work")
    p("### 6. App switch round trip, and 7. scaling (lifecycled, 2 protocol clients + N-2 plain programs)")
    p("")
    p(f"Floors, measured right before each N (median of those medians, and their range): one AF_UNIX message between")
    p(f"two processes (bench/pingpong.c, half a round trip; the faster of the two on one CPU and left to the scheduler): {fmt(pp, 1, 1)} µs, so the "
      f"{SWITCH_MESSAGES} messages of the measured exchange (the request, 4 callbacks, 4 acks, the reply) = **{SWITCH_MESSAGES * pp[0]:.0f} µs**, the floor of the verdict "
      f"(the 4 callbacks and 4 acks alone: {8 * pp[0]:.0f} µs); the same app switch between four C processes (bench/relay_floor.c:")
    p(f"controller, a relay in the daemon's place, two clients; 10 messages, no JSON): **{fmt(relay, 1, 0)} µs**;")
    p(f"the same with the required work (`--work`: 4 state files written the daemon's way in a tmpfs directory, the CPU weight")
    p(f"and oom_score_adj of the app leaving and of the app taking the foreground): **{fmt(relay_work, 1, 0)} µs**. Both")
    p("relay floors are, as the ping-pong floor, the faster of all four processes on one CPU and left to the scheduler.")
    p("\"The daemon's way\": each state file written under NAME.json.tmp, kept open since the previous save, and swapped")
    p("with NAME.json (renameat2, RENAME_EXCHANGE); the floor writes the kernel files the cheapest way, through")
    p("descriptors kept open (one pwrite each).")
    if results.get("large_limit"):
        limit, fits = results["large_limit"]
        p(f"The largest N here is {fits:,}, not 10,000: the descriptor limit is {limit:,} (`ulimit -Hn`), and the daemon")
        p("holds two descriptors per running app (its pidfd and its output pipe).")
    p("")
    p(f"| N apps | switch, one connection (µs) | the same on one CPU (µs) | faster / ping-pong floor ({SWITCH_MESSAGES} messages; 8) "
      f"| in rounds with the floor: switch / {SWITCH_MESSAGES} x floor, median (min–max) | / relay floor "
      "| / relay floor with the work | daemon CPU per switch (µs) "
      "| switch, lifectl focus (ms) | status APP, one connection (µs) | daemon CPU per status (µs) "
      "| status APP, lifectl (ms) | list, one connection (µs) | daemon PSS (MiB) | daemon RSS (MiB) |")
    p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, row in results["scaling"].items():
        cpu = lambda x: f"{x:,.0f}" if x is not None else "n/a"
        fastest = row.get("switch_best") or row["switch_conn"]  # (not `best`: the launch's, returned below)
        work = f"{fastest[0] / relay_work[0]:.1f}x" if relay_work else "n/a"
        pinned = fmt(row["switch_pinned"], 1, 0) if row.get("switch_pinned") else "n/a"
        interleaved = round_ratios(row)
        interleaved = (f"{interleaved[0]:.2f}x ({interleaved[1]:.2f}–{interleaved[2]:.2f}); switch {interleaved[3]:.0f} µs, floor {interleaved[4]:.1f} µs"
                       if interleaved else "n/a")
        p(f"| {n:,} | {fmt(row['switch_conn'], 1, 0)} | {pinned} | {fastest[0] / (SWITCH_MESSAGES * pp[0]):.1f}x ({fastest[0] / (8 * pp[0]):.1f}x) | "
          f"{interleaved} | "
          f"{fastest[0] / relay[0]:.1f}x | {work} | {cpu(row['switch_cpu'])} | {fmt(row['switch_lifectl'], 1000, 2)} | "
          f"{fmt(row['status_conn'], 1, 0)} | {cpu(row['status_cpu'])} | {fmt(row['status_lifectl'], 1000, 2)} | "
          f"{fmt(row['list_conn'], 1, 0) if row['list_conn'] else 'failed'} | {row['pss'] / 1024:.1f} | {row['rss'] / 1024:.1f} |")
    p("")
    p("One connection: bench/ctlconn.c sends `{\"verb\":\"focus\",\"app\":…}` (alternating two apps) or")
    p("`{\"verb\":\"status\",\"app\":\"app1\"}` on one open connection and reads the reply (sent when the app")
    p("settled, i.e. after both clients acked); median of 200 (min–max over those samples). Daemon CPU: its")
    p("/proc/PID/schedstat run time over those requests, divided by their number (left to the scheduler). On one CPU:")
    p("the same requests with the daemon (every thread), both clients and ctlconn on CPU 0 (taskset), the floors'")
    p("pinned placement; the ratios take the faster of the two, as the floors do. With a new connection per request")
    p("(bench/ctlbench.c) the switch took " + ", ".join(f"N={n:,}: {row['switch_raw'][0]:,.0f} µs" for n, row in results['scaling'].items())
      + f". In rounds with the floor: on one CPU, {'3' if args.smoke else '15'} rounds, each the ping-pong floor (2,000 round trips),"
      + f" 5 pairs of switches untimed, {'10' if args.smoke else '50'} pairs of switches, the floor again; each round's ratio is its switch median over 10 times the mean of its two floors, so"
      + " that both figures of a ratio are of the same moment (the host's load moves them by 10-25% from one second to the"
      + " next); the verdict takes the median of the rounds' ratios. lifectl: the whole command, median of 30. Refused switches: "
      + ", ".join(f"N={n:,}: {r['switch_errors']}" for n, r in results['scaling'].items()) + ".")
    p("")
    return L, {"fs": fs, "fr": fr, "pp": pp, "relay": relay, "relay_work": relay_work, "launch_best": (bestname, best)}


def verdicts(results, extra, args):
    sizes = results["sizes"]
    big = sizes[-1]
    out = []
    lc = stats(results["launch"].get(Lifecycled.name, {}).get(big, []))
    s6 = stats(results["launch"].get("s6", {}).get(big, []))
    bestname, best = extra["launch_best"]
    if lc and (s6 or best):
        versus, theirs = ("s6", s6) if s6 else (bestname, best)
        out.append((f"launch of {big:,} apps ahead of {versus}", lc[0] < theirs[0],
                    f"lifecycled {lc[0] / 1000:,.0f} ms vs {versus} {theirs[0] / 1000:,.0f} ms ({lc[0] / theirs[0]:.2f}x)"
                    + (f"; the fastest peer: {bestname} {best[0] / 1000:,.0f} ms" if best else "")))
    pss = {k: stats(v.get(big, [])) for k, v in results["pss"].items()}
    peers = {k: v for k, v in pss.items() if v and k not in (Lifecycled.name, LifecycledProtocol.name)}
    if pss.get(Lifecycled.name) and peers:
        mine = pss[Lifecycled.name][0]
        lowest = min(peers, key=lambda k: peers[k][0])
        others = ", ".join(f"{k} {v[0] / 1024:.1f} MiB" for k, v in peers.items())
        # The target is supervisord's memory; every peer's figure is shown beside it.
        versus = "supervisord" if "supervisord" in peers else lowest
        theirs = peers[versus][0]
        out.append((f"daemon memory (PSS) at {big} below {versus}'s", mine < theirs,
                    f"lifecycled {mine / 1024:.1f} MiB vs {versus} {theirs / 1024:.1f} MiB ({mine / theirs:.2f}x); "
                    f"every peer: {others}"))
    idle = results["idle"].get(Lifecycled.name)
    if idle:
        sw = stats([x[1] for x in idle])
        out.append((f"idle wakeups at {big:,} apps: none", sw[2] == 0,
                    f"{sw[0]:.0f} context switches in {args.idle:g} s (median of the repetitions; max {sw[2]:.0f}); no watchdog in this run"))
    st = {k: stats([x[0] for x in v]) for k, v in results["status"].items()}
    if Lifecycled.name in st and "s6" in st:
        l, s6 = st[Lifecycled.name][0], st["s6"][0]
        text = f"{l / 1000:.1f} ms vs {s6 / 1000:.1f} ms ({l / s6:.1f}x), lifectl as `make install` builds it"
        if LIFECTL_STATIC_EXE in st:
            e = st[LIFECTL_STATIC_EXE][0]
            text += f"; as a static executable (proposed): {e / 1000:.1f} ms ({e / s6:.1f}x{', met' if e <= 2 * s6 else ''})"
        out.append(("lifectl status within 2x of s6-svstat", l <= 2 * s6, text))
    if Lifecycled.name in st and "supervisord" in st:
        l, sup = st[Lifecycled.name][0], st["supervisord"][0]
        out.append(("lifectl status 10x faster than supervisorctl", sup >= 10 * l,
                    f"{l / 1000:.1f} ms vs {sup / 1000:.1f} ms ({sup / l:.1f}x faster)"))
    s = stats([x[0] for x in results["suspend"].get(Lifecycled.name, [])])
    r = stats([x[0] for x in results["resume"].get(Lifecycled.name, [])])
    if s and extra["fs"]:
        ok = s[0] <= 2 * extra["fs"][0] and r[0] <= 2 * extra["fr"][0]
        out.append(("suspend/resume within 2x of the floor: the lifectl command", ok,
                    f"suspend {s[0]:,.0f} µs vs {extra['fs'][0]:.0f} µs ({s[0] / extra['fs'][0]:.0f}x), "
                    f"resume {r[0]:,.0f} µs vs {extra['fr'][0]:.0f} µs ({r[0] / extra['fr'][0]:.0f}x)"))
    cs = stats([x[0] for x in results["suspend"].get(ONE_CONNECTION, [])])
    cr = stats([x[0] for x in results["resume"].get(ONE_CONNECTION, [])])
    ps = stats([x[0] for x in results["suspend"].get(ONE_CONNECTION_PINNED, [])])
    pr = stats([x[0] for x in results["resume"].get(ONE_CONNECTION_PINNED, [])])
    placement = "left to the scheduler"
    if cs and ps and ps[0] + pr[0] < cs[0] + cr[0]:
        # The faster placement of the pair, as for the floors (one placement for both directions).
        cs, cr, placement = ps, pr, "on one CPU"
    rs = stats([x[0] for x in results["suspend"].get(RELAY_SUSPEND, [])])
    rr = stats([x[0] for x in results["resume"].get(RELAY_SUSPEND, [])])
    ws = stats([x[0] for x in results["suspend"].get(RELAY_SUSPEND_WORK, [])])
    wr = stats([x[0] for x in results["resume"].get(RELAY_SUSPEND_WORK, [])])
    if cs and extra["fs"]:
        ok = cs[0] <= 2 * extra["fs"][0] and cr[0] <= 2 * extra["fr"][0]
        text = (f"suspend {cs[0]:.0f} µs ({cs[0] / extra['fs'][0]:.1f}x), resume {cr[0]:.0f} µs ({cr[0] / extra['fr'][0]:.1f}x),"
                f" the faster placement ({placement})")
        if rs:
            text += (f"; the C relay with the same message: {rs[0]:.0f} / {rr[0]:.0f} µs "
                     f"(lifecycled {cs[0] / rs[0]:.1f}x / {cr[0] / rr[0]:.1f}x of it)")
        if ws:
            text += (f"; with the required work (oom_score_adj, /proc confirmation, state file): {ws[0]:.0f} / {wr[0]:.0f} µs "
                     f"(lifecycled {cs[0] / ws[0]:.1f}x / {cr[0] / wr[0]:.1f}x of it)")
        out.append(("suspend/resume within 2x of the floor: the daemon's share (one open connection)", ok, text))
    sc = results["scaling"]
    if sc:
        first = min(sc); row = sc[first]
        floor = SWITCH_MESSAGES * extra["pp"][0]
        relay = extra["relay"][0]
        work = extra.get("relay_work")
        best = row.get("switch_best") or row["switch_conn"]
        where = "on one CPU" if row.get("switch_pinned") == best else "left to the scheduler"
        rounds = round_ratios(row)
        ok = rounds[0] <= SWITCH_TARGET if rounds else best[0] <= SWITCH_TARGET * floor
        out.append((f"switch round trip within {SWITCH_TARGET:g}x of the ping-pong floor", ok,
                    (f"in rounds with the floor (one CPU, N={first}): {rounds[0]:.2f}x, median of {len(row['switch_rounds'])} rounds"
                     f" ({rounds[1]:.2f}–{rounds[2]:.2f}x; switch {rounds[3]:.0f} µs, {SWITCH_MESSAGES} x floor {SWITCH_MESSAGES * rounds[4]:.0f} µs);"
                     f" measured apart: " if rounds else "")
                    + f"{best[0]:.0f} µs (one connection, N={first}, the faster placement: {where}) vs {floor:.0f} µs, {SWITCH_MESSAGES} messages"
                    f" ({best[0] / floor:.1f}x; against the 8 of the callbacks and acks alone, {8 * extra['pp'][0]:.0f} µs: {best[0] / (8 * extra['pp'][0]):.1f}x);"
                    f" vs the same switch between four C processes {relay:.0f} µs ({best[0] / relay:.1f}x)"
                    + (f", and with the required work (state files, weights, oom_score_adj) {work[0]:.0f} µs"
                       f" ({best[0] / work[0]:.1f}x)" if work else "")
                    + f"; through lifectl {row['switch_lifectl'][0] / 1000:.1f} ms"))
        last = max(sc)
        sw = sc[last]["switch_conn"][0] / sc[first]["switch_conn"][0]
        stt = sc[last]["status_conn"][0] / sc[first]["status_conn"][0]
        cpu = (sc[last]["switch_cpu"] / sc[first]["switch_cpu"]) if sc[last]["switch_cpu"] and sc[first]["switch_cpu"] else None
        out.append((f"flat scaling: switch and status APP at N={last:,} within 2x of N={first}",
                    sw <= 2 and stt <= 2,
                    f"switch x{sw:.2f} (daemon CPU per switch x{cpu:.2f}), status APP x{stt:.2f}"
                    + (f"; list x{sc[last]['list_conn'][0] / sc[first]['list_conn'][0]:.0f} (it lists every app)"
                       if sc[last]["list_conn"] and sc[first]["list_conn"] else "; list at the largest N: failed (see above)")
                    if cpu else f"switch x{sw:.2f}, status APP x{stt:.2f}"))
    return out


def desktop_verdicts(text):
    """The desktop benchmark's verdict, from the line bench/desktop.sh prints (none when it did not run)."""
    found = re.search(r"^Saved: ([0-9.]+)% .*target at least 95%: (met|missed)", text, re.M)
    if not found:
        return [("hidden adopted apps' CPU time at least 95% less (desktop)", False, "desktop.sh printed no result")] if text else []
    daemon = re.search(r"^lifecycled itself over those .*?: ([0-9.]+) ms of CPU time.*peak RSS ([0-9.]+) MiB", text, re.M)
    return [("hidden adopted apps' CPU time at least 95% less (desktop)", found.group(2) == "met",
             f"{found.group(1)}% less after the grace time"
             + (f"; the daemon meanwhile {daemon.group(1)} ms of CPU time, peak RSS {daemon.group(2)} MiB" if daemon else ""))]


def desktop_peers_verdicts(summary, text):
    """bench/desktop-peers.sh's verdicts, one row per target: those it gives per N are met when met at every N, with the
    figures of each N. From its JSON summary; from its "Target: …" lines where there is none."""
    found = [tuple(v) for v in summary.get("verdicts", [])] if summary else [
        (target, verdict == "met", figures) for target, verdict, figures in
        re.findall(r"^Target: (.*): (met|missed) \((.*)\)\.$", text, re.M)]
    if not found:
        return [("desktop beside xsuspender: the benchmark ran", False, "desktop-peers.sh printed no verdict")] if text else []
    grouped = {}
    for target, ok, figures in found:
        per_n = re.match(r"^(x11|sway) N=(\d+): (.*)$", target)
        if per_n:
            key = (per_n.group(1), per_n.group(3))
            figures = (per_n.group(2), figures)
        else:
            where, _, rest = target.partition(": ")
            key = (where, rest)
            figures = (None, figures)
        entry = grouped.setdefault(key, [True, []])
        entry[0] = entry[0] and ok
        entry[1].append(figures)
    out = []
    for (where, target), (ok, figures) in grouped.items():
        sizes = [n for n, _ in figures if n]
        if len(sizes) > 1:
            target += ", at every N"
        elif sizes:
            target += f", at N={sizes[0]}"
        text = "; ".join(f"N={n}: {f}" if n and len(sizes) > 1 else f for n, f in figures)
        out.append((f"desktop, {'X11' if where == 'x11' else where}: {target}", ok, text))
    return out


def display_verdicts(text):
    """bench/display.sh's verdicts: the focus latency against one frame and the floor, and the CPU saved."""
    out = []
    found = re.search(r"^Target: runs again well within one frame \(16 ms\): median ([0-9.]+) ms, (met|missed); "
                      r"within 3x of the floor: ([0-9.]+)x, (met|missed)", text, re.M)
    if found:
        out.append(("display (sway): a focused suspended app runs within one frame (16 ms)", found.group(2) == "met",
                    f"median {found.group(1)} ms"))
        out.append(("display (sway): focus to running within 3x of its floor", found.group(4) == "met",
                    f"{found.group(3)}x the floor"))
    elif text:
        out.append(("display (sway): focus latency measured", False, "display.sh printed no result"))
    saved = re.search(r"^Saved: ([0-9.]+)% .*target at least 95%: (met|missed)", text, re.M)
    if saved:
        out.append(("display (sway): hidden apps' CPU time at least 95% less", saved.group(2) == "met", f"{saved.group(1)}% less"))
    return out


def memory_figures(text):
    """bench/memory.sh's lines: name -> list of numbers (the first line's words as pairs under "run")."""
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "apps":
            out["run"] = dict(zip(fields[0::2], fields[1::2]))
            continue
        try:
            out[fields[0]] = [float(x) for x in fields[1:]]
        except ValueError:
            pass
    return out


def memory_verdicts(text):
    """The memory benchmark's targets: reclaim within 2 s, twice the apps in the same budget, the resume cost."""
    m = memory_figures(text)
    out = []
    if "reclaim-within" not in m:
        return [("memory: reclaim of suspended apps measured", False, "memory.sh printed no result")] if text.strip() else []
    within, total = m["reclaim-within"]
    out.append(("memory: at least 90% of each suspended app's anonymous memory out of RAM within 2 s of ReclaimAfterSec",
                within == total,
                f"{within:.0f} of {total:.0f} apps; out of RAM {m['reclaim-out-pct'][1]:.1f}–{m['reclaim-out-pct'][2]:.1f}%,"
                f" over {m['reclaim-late-ms'][1]:,.0f}–{m['reclaim-late-ms'][2]:,.0f} ms after it was due (all {m['reclaim-all-ms'][0]:,.0f} ms);"
                f" resume {m['resume-reclaimed-ms'][0]:,.1f} ms after reclaim against {m['resume-kept-ms'][0]:,.1f} ms without"
                + (f"; the kernel alone on {m['floor-threads'][0]:.0f} threads (the floor): all in {m['floor-all-ms'][0]:,.0f} ms,"
                   f" {m['floor-within'][0]:.0f} of {m['floor-within'][1]:.0f} within 2 s" if "floor-all-ms" in m else "")))
    if "budget-resumable" in m:
        reclaimed, kept, apps = m["budget-resumable"]
        out.append((f"memory: at least 2x the apps kept resumable in a {m['budget-mib'][0]:,.0f} MiB budget with reclaim",
                    kept > 0 and reclaimed >= 2 * kept if kept else reclaimed > 0,
                    f"{reclaimed:.0f} of {apps:.0f} with reclaim, {kept:.0f} with termination alone"
                    + (f" ({reclaimed / kept:.1f}x)" if kept else "")))
    return out


def dbus_figures(text):
    """bench/dbus.sh's lines: measure -> (median, min, max) in µs."""
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 5 and fields[0] in ("ping", "get", "focus", "socket-focus", "socket-status"):
            try:
                out[fields[0]] = tuple(float(x) for x in fields[1:4])
            except ValueError:
                pass
    return out


def svg(results, path):
    """Launch time and memory against N, one line per supervisor, drawn by hand."""
    sizes = results["sizes"]
    colors = {Lifecycled.name: "#d62728", LifecycledProtocol.name: "#ff7f0e", "supervisord": "#1f77b4",
              "s6": "#2ca02c", "runit": "#9467bd"}
    W, H, M = 900, 380, 60
    pw = (W - 3 * M) / 2
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H + 90}" font-family="sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H + 90}" fill="white"/>']

    def panel(x0, title, table, unit, label):
        ys = [statistics.median(v[n]) / unit for v in table.values() for n in sizes if n in v]
        ymax = max(ys) * 1.1 if ys else 1
        top, bottom = M, H - M / 2
        parts.append(f'<text x="{x0 + pw / 2}" y="{top - 20}" text-anchor="middle" font-size="14">{title}</text>')
        parts.append(f'<line x1="{x0}" y1="{bottom}" x2="{x0 + pw}" y2="{bottom}" stroke="black"/>')
        parts.append(f'<line x1="{x0}" y1="{top}" x2="{x0}" y2="{bottom}" stroke="black"/>')
        parts.append(f'<text x="{x0 - 45}" y="{(top + bottom) / 2}" transform="rotate(-90 {x0 - 45} {(top + bottom) / 2})" text-anchor="middle">{label}</text>')
        for i in range(5):
            v = ymax * i / 4; y = bottom - (bottom - top) * i / 4
            parts.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + pw}" y2="{y}" stroke="#ddd"/>')
            parts.append(f'<text x="{x0 - 5}" y="{y + 4}" text-anchor="end">{v:,.0f}</text>')

        def xpos(i):
            return x0 + (pw * (i + 0.5) / len(sizes))
        for i, n in enumerate(sizes):
            parts.append(f'<text x="{xpos(i)}" y="{bottom + 16}" text-anchor="middle">N={n}</text>')
        for name, v in table.items():
            pts = [(xpos(i), bottom - (bottom - top) * (statistics.median(v[n]) / unit) / ymax)
                   for i, n in enumerate(sizes) if n in v]
            color = colors.get(name, "black")
            if len(pts) > 1:
                parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="'
                             + " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
            for x, y in pts:
                parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{color}"/>')

    panel(M, "Launch: start until N processes run", results["launch"], 1000, "ms")
    panel(2 * M + pw, "Supervisor's own memory (PSS)", results["pss"], 1024, "MiB")
    for i, (name, color) in enumerate(colors.items()):
        x = M + (i % 3) * 280; y = H + 20 + (i // 3) * 22
        parts.append(f'<rect x="{x}" y="{y - 10}" width="14" height="10" fill="{color}"/>')
        parts.append(f'<text x="{x + 20}" y="{y}">{name}</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


INTRO = """# Benchmarks: lifecycled against supervisord, s6 and runit, and on the desktop beside xsuspender

Generated whole by one run of `bench/run.sh` (`make bench`): every figure, verdict and sentence with a figure below
comes from the run described under "This run". The raw tables are in the files of [docs/bench/](bench/), written
by the same run, and its raw results in [docs/bench/results.json](bench/results.json), from which
`python3 bench/bench.py --from-json docs/bench/results.json` writes this report again. `make bench-smoke`
(`--smoke`, for CI) runs every part small and writes under a temporary directory only. The peers come from
Debian's packages and run under a private directory, never as the system's init or boot services; every
supervisor runs the same program (bench/sleeper.c: `pause()` forever), exec'd directly, and the peers alternate
within each repetition. The chart [bench-launch-memory.svg](bench-launch-memory.svg) is drawn by the same run.
"""

# The report stays readable whole; the raw tables go to docs/bench/.
REPORT_LINES = 300

RAW_FILES = {
    "core": ("core.md", "the supervisors and the app switch (sections 1 to 7)"),
    "notifications": ("notifications.md", "notifications (bench/notifications.sh)"),
    "display": ("display.md", "display: focus latency and what hiding saves (bench/display.sh)"),
    "desktop": ("desktop.md", "the desktop: adopted apps (bench/desktop.sh)"),
    "desktop_peers": ("desktop-peers.md", "the desktop beside xsuspender and the floor (bench/desktop-peers.sh)"),
    "dbus": ("dbus.md", "the D-Bus API against the control socket (bench/dbus.sh)"),
    "memory": ("memory.md", "memory: a suspended app gives its memory back (bench/memory.sh)"),
}


def restore(value):
    """JSON's string keys back to the ints the results use for N."""
    if isinstance(value, dict):
        return {int(k) if isinstance(k, str) and k.isdigit() else k: restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [restore(v) for v in value]
    return value


class Figures:
    """The run's figures for the prose: each accessor gives a number or None where that part did not run."""

    def __init__(self, raw):
        self.raw = raw
        self.r = raw["results"]
        self.texts = raw["texts"]
        self.peers = raw.get("desktop_peers") or {}

    def launch(self, name, n):
        return stats(self.r["launch"].get(name, {}).get(n, []))

    def pss(self, name, n):
        return stats(self.r["pss"].get(name, {}).get(n, []))

    def status(self, name):
        return stats([x[0] for x in self.r["status"].get(name, [])])

    def suspend(self, name):
        return (stats([x[0] for x in self.r["suspend"].get(name, [])]),
                stats([x[0] for x in self.r["resume"].get(name, [])]))

    def peer_row(self, where, n, tool):
        for row in self.peers.get("rows", []):
            if row["display"] == where and row["n"] == n and row["tool"] == tool:
                return row
        return {}

    def peer_range(self, where, tool, key):
        values = [row[key] for row in self.peers.get("rows", [])
                  if row["display"] == where and row["tool"] == tool and row.get(key) is not None]
        return (min(values), max(values)) if values else None


def num(value, digits=0, unit=""):
    return "n/a" if value is None else f"{value:,.{digits}f}{unit}"


def span(pair, digits=1, unit=" ms"):
    if not pair:
        return "n/a"
    low, high = pair
    return f"{low:,.{digits}f}{unit}" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else f"{low:,.{digits}f}–{high:,.{digits}f}{unit}"


def analysis(raw, extra, args):
    """The prose: each figure in it is of this run."""
    f = Figures(raw)
    r = f.r
    sizes = r["sizes"]
    big = sizes[-1]
    L, p = section("## Analysis", "Where the time and memory go, with this run's figures (medians; the raw tables have the ranges).")
    lc, s6, sup = f.launch(Lifecycled.name, big), f.launch("s6", big), f.launch("supervisord", big)
    text = f"**Launch.** {big:,} apps ran {num(lc and lc[0] / 1000)} ms after lifecycled's start"
    if s6:
        text += f", against {num(s6[0] / 1000)} ms for s6 ({lc[0] / s6[0]:.2f}x)" if lc else ""
    if sup:
        text += f" and {num(sup[0] / 1000)} ms for supervisord"
    p(text + ". Each child is cloned sharing the daemon's descriptor table and makes its own small copy, so a spawn")
    p("does not copy every descriptor the daemon holds (two per running app); the start-up's spawns run on worker")
    p("threads, one per CPU, while the loop prepares the next ones. s6 and runit start a supervisor process per")
    p("service, and supervisord paces its starts.")
    p("")
    mine = f.pss(Lifecycled.name, big)
    others = ", ".join(f"{name} {num(f.pss(name, big)[0] / 1024, 1)} MiB" for name in ("supervisord", "s6", "runit")
                       if f.pss(name, big))
    p(f"**Memory.** At {big:,} apps the daemon's PSS is {num(mine and mine[0] / 1024, 1)} MiB ({others}). lifecycled is one")
    p("process whose memory grows by the apps' records and open connections; s6 and runit run a process per service,")
    p("small on PSS (most pages shared) but adding up with N; supervisord is one larger Python process.")
    p("")
    idle = r["idle"].get(Lifecycled.name)
    sw = stats([x[1] for x in idle]) if idle else None
    p(f"**Idle.** Over {args.idle:g} s at {big:,} apps the daemon had {num(sw and sw[0])} context switches (max"
      f" {num(sw and sw[2])} over the repetitions): it arms no periodic timer, and an absent bus is watched through its")
    p("socket's directory rather than retried on a timer. Under a service manager the watchdog is the only periodic wakeup.")
    p("")
    st, s6st, exe = f.status(Lifecycled.name), f.status("s6"), f.status(LIFECTL_STATIC_EXE)
    conn = r["scaling"].get(min(r["scaling"])) if r.get("scaling") else None
    p(f"**`lifectl status`.** The whole command takes {num(st and st[0] / 1000, 2)} ms against `s6-svstat`'s"
      f" {num(s6st and s6st[0] / 1000, 2)} ms; lifectl is built as {args.lifectl_build}. Most of it is process start-up:")
    p(f"the daemon's share of a status query on an open connection is {num(conn and conn['status_conn'][0])} µs"
      f" ({num(conn and conn['status_cpu'])} µs of its CPU time).")
    p("")
    pp, relay, work = r.get("pingpong"), r.get("relay"), r.get("relay_work")
    if conn:
        first = min(r["scaling"])
        rounds = round_ratios(conn)
        p(f"**The app switch.** Ten messages cross the kernel: the request, four callbacks, four acks and the reply. One")
        p(f"message between two processes takes {num(pp and pp[0], 1)} µs here, so the switch's floor is"
          f" {num(pp and SWITCH_MESSAGES * pp[0])} µs; at N={first} the switch took {num(rounds and rounds[3])} µs in rounds with")
        p(f"the floor ({num(rounds and rounds[0], 2)}x, target {SWITCH_TARGET}x). The same exchange between four C processes takes"
          f" {num(relay and relay[0])} µs, and {num(work and work[0])} µs")
        p("with the daemon's required work (state files, CPU weights, `oom_score_adj`); the rest is the daemon's own:")
        p(f"decoding each ack, the model's step, encoding each callback and the reply ({num(conn['switch_cpu'])} µs of its"
          " CPU time per switch).")
        p("")
        last = max(r["scaling"])
        hi = r["scaling"][last]
        p(f"**Scaling.** A switch, a suspend and `status APP` touch one or two apps, found by name: from N={first} to"
          f" N={last:,} the switch went from {num(conn['switch_conn'][0])} to {num(hi['switch_conn'][0])} µs and `status APP` from"
          f" {num(conn['status_conn'][0])} to {num(hi['status_conn'][0])} µs.")
        p(f"`list` answers with every app and grows with N, as it must"
          + (f" ({num(conn['list_conn'][0])} to {num(hi['list_conn'][0])} µs)." if conn.get("list_conn") and hi.get("list_conn") else "."))
        p("")
    (cs, cr), (ls, lr) = f.suspend(ONE_CONNECTION), f.suspend(Lifecycled.name)
    (ws, wr), (fs, fr) = f.suspend(RELAY_SUSPEND_WORK), f.suspend("floor: kill() + /proc")
    p(f"**Suspend and resume.** Through `lifectl` a suspend takes {num(ls and ls[0])} µs, mostly the command's start-up,")
    p(f"as for `s6-svc` and `sv`. On one open connection the daemon's share is {num(cs and cs[0])} µs to suspend and"
      f" {num(cr and cr[0])} µs to resume, against the bare kill() and /proc's {num(fs and fs[0])} / {num(fr and fr[0])} µs and a C relay")
    p(f"doing the same required work (`oom_score_adj`, the confirmation from /proc, the state file) in"
      f" {num(ws and ws[0])} / {num(wr and wr[0])} µs.")
    p("")
    notif = re.search(r"^lifecycled \(to (\d+) suspended apps\)\s+([0-9,]+)", f.texts.get("notifications", ""), re.M)
    if notif:
        p(f"**Notifications.** {notif.group(2)} posts/s to {notif.group(1)} suspended apps: each post is decoded once and")
        p("fanned out to every observer of its type, each app's queue coalescing per type, so memory is bounded by the")
        p("number of types, not of posts.")
        p("")
    display = f.texts.get("display", "")
    found = re.search(r"^Target: runs again well within one frame \(16 ms\): median ([0-9.]+) ms, \w+; within 3x of the floor: ([0-9.]+)x", display, re.M)
    if found:
        p(f"**Display (sway).** A suspended app's focused window runs again {found.group(1)} ms after the focus"
          f" ({found.group(2)}x the bare event-to-SIGCONT floor): one")
        p("sway event, one tree read, the thaw and the message.")
        p("")
    desktop = f.texts.get("desktop", "")
    saved = re.search(r"^Saved: ([0-9.]+)% ", desktop, re.M)
    daemon = re.search(r"^lifecycled itself over those ([0-9.]+) s: ([0-9.]+) ms of CPU time.*woken (\d+) times", desktop, re.M)
    if saved:
        p(f"**The desktop: adopted apps.** With nothing configured per app, the nine hidden apps of ten used {saved.group(1)}%"
          " less CPU time once their grace had passed"
          + (f", while the daemon used {daemon.group(2)} ms of CPU time over {daemon.group(1)} s, woken {daemon.group(3)} times." if daemon else "."))
        p("A frozen or stopped process is never scheduled, so the saving depends neither on how many apps are hidden nor")
        p("on the grace.")
        p("")
    if f.peers.get("rows"):
        grace = f.peers.get("grace_s")
        p("**The desktop beside xsuspender.** Focus to running (median per N, the range over N):")
        for where, title in (("x11", "X11"), ("sway", "sway")):
            ours = f.peer_range(where, "lifecycled", "focus_median")
            if not ours:
                continue
            text = f"on {title} lifecycled {span(ours, 2)}"
            theirs = f.peer_range(where, "xsuspender", "focus_median")
            if theirs:
                text += f", xsuspender {span(theirs, 2)}"
            text += f", the floor (a bare SIGCONT on the focus event) {span(f.peer_range(where, 'floor', 'focus_median'), 2)}"
            cpu = f.peer_range(where, "lifecycled", "cpu_per_switch_ms")
            text += f"; CPU per switch lifecycled {span(cpu, 2)}"
            their_cpu = f.peer_range(where, "xsuspender", "cpu_per_switch_ms")
            if their_cpu:
                text += f", xsuspender {span(their_cpu, 2)}"
            opens = f.peer_range(where, "lifecycled", "opens_per_switch")
            their_opens = f.peer_range(where, "xsuspender", "opens_per_switch")
            text += f"; /proc files opened per switch {span(opens, 0, '')}" + (f" against {span(their_opens, 0, '')}" if their_opens else "")
            g = f.peer_row(where, f.peers["sizes"][-1], "lifecycled")
            if g.get("grace_median") is not None:
                text += (f"; a {grace:g} s grace ended {g['grace_min']:,.0f}–{g['grace_max']:,.0f} ms after the hide at"
                         f" N={f.peers['sizes'][-1]}")
            p(f"- {text}.")
        p("A window event costs what it touched: the X11 source asks for the one property or window an event changed,")
        p("sway's focus event carries its window, and a window's process is mapped to its app once. xsuspender runs")
        p("pgrep per window, which reads every process on the machine, and stops the windows hidden at its start only")
        p("once it decides it is on battery.")
        p("")
    bus = dbus_figures(f.texts.get("dbus", ""))
    if {"ping", "focus", "socket-focus", "socket-status"} <= bus.keys():
        switch = bus["socket-focus"][0] - bus["socket-status"][0]
        p(f"**The D-Bus API.** A `Peer.Ping` to the daemon (the bus's round trip) takes {bus['ping'][0]:,.0f} µs, reading an")
        p(f"app's `State` {num(bus.get('get', (None,))[0])} µs, and `Manager.Focus` {bus['focus'][0]:,.0f} µs: the bus floor plus the switch itself"
          f" (the control socket's `focus` less its `status`, {switch:,.0f} µs), {bus['focus'][0] / (bus['ping'][0] + switch):.2f}x their")
        p("sum. A changing call asks the bus daemon for the caller's credentials before it acts; a read needs none.")
        p("")
    mem = memory_figures(f.texts.get("memory", ""))
    if "reclaim-out-pct" in mem and "run" in mem:
        run_ = mem["run"]
        p(f"**Memory.** {run_['apps']} apps each touched {run_['size_mib']} MiB of their own memory and {run_['suspended']} were suspended,"
          f" with `ReclaimAfterSec={run_['reclaim_after_s']}` ({run_['method']}, swap: {run_['swap']}): their anonymous memory in RAM fell by"
          f" {mem['reclaim-out-pct'][0]:.1f}% (median), {mem['reclaim-resident-mib'][0]:,.0f} MiB to {mem['reclaim-resident-mib'][1]:,.0f} MiB in all;")
        p(f"one app's reclaim took {mem['reclaim-took-ms'][0]:,.0f} ms (median, from its start to its end), the apps taken in order by the daemon's"
          f" reclaim threads, all of them over {mem['reclaim-all-ms'][0]:,.0f} ms after the first was due,"
          f" {mem['reclaim-within'][0]:.0f} of {mem['reclaim-within'][1]:.0f} within 2 s.")
        if "floor-all-ms" in mem:
            p(f"The floor, the same apps paged out by the kernel alone ({mem['floor-threads'][0]:.0f} threads, one per CPU, no daemon): all in"
              f" {mem['floor-all-ms'][0]:,.0f} ms, {mem['floor-within'][0]:.0f} of {mem['floor-within'][1]:.0f} within 2 s.")
        p("A resume (`lifectl focus` until the app has touched its whole")
        p(f"working set again) took {mem['resume-reclaimed-ms'][0]:,.1f} ms after reclaim against {mem['resume-kept-ms'][0]:,.1f} ms with its memory"
          " resident: the price of the pages faulted back from compressed swap.")
        if "budget-resumable" in mem:
            reclaimed, kept, apps = mem["budget-resumable"]
            p(f"In a {mem['budget-mib'][0]:,.0f} MiB budget, {reclaimed:.0f} of {apps:.0f} apps stayed resumable with reclaim against {kept:.0f} with"
              " termination alone.")
        p("")
    p("**Method.** The host's load moves every figure, the floors included, from one second to the next: ratios within")
    p("one run, and the switch measured in rounds with its floor, are the honest summary, and the load average before")
    p("and after the run is given above. Temporary directories are on tmpfs, as `/run` is on a systemd machine.")
    p("`bench/callgrind.sh` (instructions per operation) and `bench/profile.sh` (`perf record`) compare two builds")
    p("with figures the load does not move.")
    return L


def glance(raw, extra, args):
    """Short tables of the main figures; the whole tables are in docs/bench/."""
    f = Figures(raw)
    r = f.r
    sizes = r["sizes"]
    L, p = section("## Figures at a glance")
    names = [c.name for c in PEERS if c is Lifecycled or c.key in args.peers]
    p("| supervisor | " + " | ".join(f"launch, N={n:,} (ms)" for n in sizes) + " | "
      + " | ".join(f"PSS, N={n:,} (MiB)" for n in sizes) + f" | idle wakeups, {args.idle:g} s | `status` (ms) |")
    p("|---|" + "---:|" * (2 * len(sizes) + 2))
    for name in names:
        idle = r["idle"].get(name)
        st = f.status(name)
        p(f"| {name} | " + " | ".join(num(f.launch(name, n) and f.launch(name, n)[0] / 1000) for n in sizes) + " | "
          + " | ".join(num(f.pss(name, n) and f.pss(name, n)[0] / 1024, 1) for n in sizes)
          + f" | {num(idle and stats([x[1] for x in idle])[0])} | {num(st and st[0] / 1000, 2)} |")
    p("")
    if r.get("scaling"):
        p("| N apps (lifecycled) | switch, one connection (µs) | daemon CPU per switch (µs) | `status APP` (µs) | `list` (µs) | daemon PSS (MiB) |")
        p("|---:|---:|---:|---:|---:|---:|")
        for n, row in r["scaling"].items():
            p(f"| {n:,} | {num(row['switch_conn'][0])} | {num(row['switch_cpu'])} | {num(row['status_conn'][0])} | "
              f"{num(row['list_conn'] and row['list_conn'][0])} | {row['pss'] / 1024:.1f} |")
        p("")
    if f.peers.get("rows"):
        p("| desktop | N | focus to running, ms: lifecycled / xsuspender / floor | CPU per switch, ms: lifecycled / xsuspender | grace, ms (lifecycled) |")
        p("|---|---:|---|---|---|")
        for where in ("x11", "sway"):
            for n in f.peers["sizes"]:
                ours = f.peer_row(where, n, "lifecycled")
                if not ours:
                    continue
                theirs, floor = f.peer_row(where, n, "xsuspender"), f.peer_row(where, n, "floor")
                p(f"| {where} | {n} | {num(ours.get('focus_median'), 2)} / {num(theirs.get('focus_median'), 2) if theirs else '—'} / "
                  f"{num(floor.get('focus_median'), 2)} | {num(ours.get('cpu_per_switch_ms'), 2)} / "
                  f"{num(theirs.get('cpu_per_switch_ms'), 2) if theirs else '—'} | "
                  f"{num(ours.get('grace_median'))} ({num(ours.get('grace_min'))}–{num(ours.get('grace_max'))}) |")
        p("")
    return L


def this_run(raw, args):
    meta = raw["meta"]
    L, p = section("## This run")
    kind = "smoke (every part small)" if meta["smoke"] else f"{raw['results']['reps']} repetitions of sections 1 to 5"
    p(f"- When: {meta['when']}; {kind}{', --large' if meta.get('large') else ''}; {meta['total_seconds']:,.0f} s in all"
      f" ({meta['core_seconds']:,.0f} s for the supervisors and the switch).")
    p(f"- Machine: {meta['model']}, {meta['nproc']} CPUs, {meta['memory']} of memory, Linux {meta['kernel']}; peers from Debian:"
      f" {meta['versions']}.")
    p(f"- Load average (1, 5, 15 min): {meta['load_before']} before the run, {meta['load_after']} after it.")
    peers = raw.get("desktop_peers") or {}
    parts = [f"the supervisors at N = {', '.join(f'{n:,}' for n in raw['results']['sizes'])}, the switch at N ="
             f" {', '.join(f'{n:,}' for n in raw['results'].get('scaling', {}))}"]
    if meta.get("display_duration"):
        parts.append(f"display and desktop {meta['display_duration']} s per phase")
    if peers:
        parts.append(f"the desktop beside xsuspender at N = {', '.join(str(n) for n in peers['sizes'])}, {peers['rounds']} rounds per"
                     f" tool and N in {peers['reps']} repetition{'s' if peers['reps'] != 1 else ''} (load average {peers['load_before']} before it,"
                     f" {peers['load_after']} after, its busy apps included; {peers['seconds']} s)")
    if meta.get("dbus_calls"):
        parts.append(f"D-Bus {meta['dbus_calls']:,} calls of each kind")
    p("- Sizes and repetitions: " + "; ".join(parts) + "."
      + ("" if meta["smoke"] else " They are chosen so that the whole run takes about 20 minutes on 2 cores."))
    if meta.get("runtime_note"):
        p(f"- {meta['runtime_note']}")
    p("- Raw tables: " + ", ".join(f"[{label}](bench/{name})" for key, (name, label) in RAW_FILES.items()
                                   if key == "core" or raw["texts"].get(key)) + ".")
    return L


def render(raw, args):
    """The report from a run's raw results: (the main document's text, {raw file name: text})."""
    results = raw["results"]
    core, extra = core_tables(results, args)
    checks = (verdicts(results, extra, args) + display_verdicts(raw["texts"].get("display", ""))
              + desktop_verdicts(raw["texts"].get("desktop", ""))
              + desktop_peers_verdicts(raw.get("desktop_peers"), raw["texts"].get("desktop_peers", ""))
              + memory_verdicts(raw["texts"].get("memory", "")))
    L = [INTRO.rstrip("\n"), ""] + this_run(raw, args) + ["", "## Verdicts against the targets", "",
                                                          "| target | verdict | figures |", "|---|---|---|"]
    for target, ok, text in checks:
        L.append(f"| {target} | **{'met' if ok else 'missed'}** | {text} |")
    L += [""] + glance(raw, extra, args) + analysis(raw, extra, args)
    files = {RAW_FILES["core"][0]: "\n".join(core) + "\n"}
    titles = {"notifications": "```\n{}\n```", "display": "{}", "desktop": "{}", "desktop_peers": "{}", "dbus": "```\n{}\n```",
              "memory": "```\n{}\n```"}
    for key, template in titles.items():
        text = raw["texts"].get(key, "").strip()
        if text:
            name, label = RAW_FILES[key]
            files[name] = (f"# Raw figures: {label}\n\nWritten by `bench/run.sh` with docs/BENCHMARKS.md, from the same run.\n\n"
                           + template.format(text) + "\n")
    return "\n".join(L) + "\n", files, checks


def machine_meta():
    model, nproc, free, versions, kernel = machine()
    memory = next((line.split()[1] for line in free.splitlines() if line.startswith("Mem:")), "?")
    return {"model": model, "nproc": nproc, "memory": memory, "versions": versions, "kernel": kernel}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin")
    parser.add_argument("--tools")
    parser.add_argument("--tmp")
    parser.add_argument("--from-json", default="", help="write the report from a run's raw results instead of measuring")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--large", action="store_true")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--idle", type=float, default=10)
    parser.add_argument("--notifications", default="", help="file with notifications.sh's output")
    parser.add_argument("--display", default="", help="file with display.sh's output")
    parser.add_argument("--display-duration", type=int, default=0, help="display.sh's and desktop.sh's seconds per phase")
    parser.add_argument("--desktop", default="", help="file with desktop.sh's output")
    parser.add_argument("--desktop-peers", default="", help="file with desktop-peers.sh's output")
    parser.add_argument("--desktop-peers-json", default="", help="file with desktop-peers.sh's figures (DESKTOP_PEERS_JSON)")
    parser.add_argument("--dbus", default="", help="file with dbus.sh's output")
    parser.add_argument("--dbus-calls", type=int, default=0)
    parser.add_argument("--memory", default="", help="file with memory.sh's output")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "BENCHMARKS.md"))
    parser.add_argument("--raw-dir", default=os.path.join(ROOT, "docs", "bench"), help="where the raw tables go")
    parser.add_argument("--svg", default=os.path.join(ROOT, "docs", "bench-launch-memory.svg"))
    parser.add_argument("--peers", default="supervisord,s6,runit",
                        help="the peers installed here (run.sh leaves out what apt could not install)")
    parser.add_argument("--lifectl-static-exe", default="", help="directory of a lifectl linked as a static executable")
    parser.add_argument("--lifectl-dir", default="", help="directory of the lifectl to measure (default: --bin)")
    parser.add_argument("--lifectl-build", default="release, `--static-swift-stdlib`",
                        help="how that lifectl was built, for the report")
    parser.add_argument("--runtime-note", default="", help="where the temporary directories are (tmpfs or not)")
    parser.add_argument("--load-before", default="", help="the load average at the run's start (bench/run.sh)")
    parser.add_argument("--started", type=float, default=0, help="the run's start, seconds since the epoch (bench/run.sh)")
    args = parser.parse_args()
    args.peers = [p for p in args.peers.split(",") if p]
    if args.from_json:
        with open(args.from_json) as f:
            raw = restore(json.load(f))
        saved = raw["meta"]
        args.smoke, args.large, args.idle = saved["smoke"], saved.get("large", False), saved["idle"]
        args.peers, args.lifectl_build = saved["peers"], saved["lifectl_build"]
    else:
        if not (args.bin and args.tools and args.tmp):
            parser.error("--bin, --tools and --tmp are needed to measure (or --from-json FILE)")
        if args.smoke:
            args.idle = min(args.idle, 2)
        t0 = time.time()
        results = run(args)

        def read(path):
            return open(path).read() if path and os.path.exists(path) else ""
        peers = read(args.desktop_peers_json)
        started = args.started or t0
        raw = {"results": results,
               "texts": {"notifications": read(args.notifications), "display": read(args.display),
                         "desktop": read(args.desktop), "desktop_peers": read(args.desktop_peers), "dbus": read(args.dbus),
                         "memory": read(args.memory)},
               "desktop_peers": json.loads(peers) if peers.strip() else None,
               "meta": dict(machine_meta(), when=datetime.datetime.fromtimestamp(started, datetime.timezone.utc)
                            .strftime("%Y-%m-%d %H:%M UTC"),
                            smoke=args.smoke, large=args.large, idle=args.idle, peers=args.peers,
                            lifectl_build=args.lifectl_build, runtime_note=args.runtime_note,
                            load_before=args.load_before or "n/a",
                            load_after=" ".join(f"{x:.2f}" for x in os.getloadavg()),
                            core_seconds=time.time() - t0, total_seconds=time.time() - started,
                            display_duration=args.display_duration, dbus_calls=args.dbus_calls)}
        # Tuples and int keys the way JSON keeps them, so that a report from the file is the report of the run.
        raw = restore(json.loads(json.dumps(raw, default=str)))
    text, files, checks = render(raw, args)
    print(text)
    if text.count("\n") > REPORT_LINES:
        log(f"bench.py: the report has {text.count(chr(10))} lines, more than {REPORT_LINES}: shorten its tables or prose")
    os.makedirs(args.raw_dir, exist_ok=True)
    for name, body in files.items():
        with open(os.path.join(args.raw_dir, name), "w") as f:
            f.write(body)
    if not args.from_json:
        with open(os.path.join(args.raw_dir, "results.json"), "w") as f:
            json.dump(raw, f, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if args.svg:
        svg(raw["results"], args.svg)


if __name__ == "__main__":
    main()
