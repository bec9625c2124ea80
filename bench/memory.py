#!/usr/bin/env python3
"""The memory benchmark's driver (bench/memory.sh sets up the zram swap device and the memory budget's cgroup, and
removes them): N apps (Tests/Fixtures/memory_toucher.py) each touch SIZE MiB of their own memory, one is in front
and the others are suspended. It measures

1. reclaim: each suspended app's anonymous memory before and after its reclaim (RssAnon of /proc/PID/status), how
   long the reclaim took, and when it was over counted from the moment it was due (suspension + ReclaimAfterSec);
2. resume: the time from `lifectl focus` until the app has touched its whole working set again (the toucher's
   marker file, CLOCK_MONOTONIC), for reclaimed apps and, with Reclaim=no, for apps whose memory stayed;
3. floor: the same apps, not supervised, stopped and paged out directly (process_madvise MADV_PAGEOUT over each one's
   writable private mappings, one thread per CPU taking the next app, no daemon): how soon the kernel alone, on all
   CPUs, takes the suspended apps' memory out of RAM, the physical floor of figure 1;
4. budget: the apps moved one after the other into a memory-limited cgroup (BUDGET), each launched, touched and
   suspended in turn: how many are still there, resumable, at the end, with reclaim and without it (termination
   alone: the cgroup does not swap on its own, memory.swappiness 0, so only an end frees memory).

It prints one line per figure (see bench/bench.py's memory_figures) and the verdicts against the targets."""
import argparse
import ctypes
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOUCHER = os.path.join(ROOT, "Tests", "Fixtures", "memory_toucher.py")


def log(text):
    print(text, file=sys.stderr, flush=True)


def wall(rfc3339):
    """Seconds since the epoch of the daemon's RFC 3339 times (`since`, `began`)."""
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def rss_anon(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return 0


def alive(pid):
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def spread(values, scale=1, digits=0):
    if not values:
        return "n/a n/a n/a"
    return " ".join(f"{v * scale:.{digits}f}" for v in (statistics.median(values), min(values), max(values)))


class Daemon:
    """A lifecycled of its own, in a work directory, with N toucher apps."""

    def __init__(self, args, name, apps, lifecycle, procs=None):
        self.args = args
        self.dir = os.path.join(args.work, name)
        self.apps = apps
        config = os.path.join(self.dir, "config")
        os.makedirs(os.path.join(config, "apps"), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "run"), exist_ok=True)
        with open(os.path.join(config, "lifecycled.conf"), "w") as f:
            f.write("[Sources]\nTimeChange=no\nLocaleChange=no\nBattery=no\nMemoryPressure=no\nAudio=no\n")
        self.markers = {}
        for app in apps:
            marker = os.path.join(self.dir, f"{app}.marker")
            self.markers[app] = marker
            command = f"/usr/bin/python3 {TOUCHER} {args.size} {marker}" + (f" {procs}" if procs else "")
            with open(os.path.join(config, "apps", f"{app}.conf"), "w") as f:
                f.write(f"[App]\nExec={command}\nProtocol=none\n\n[Lifecycle]\nBackgroundTimeSec=infinity\n{lifecycle}\n")
        self.env = dict(os.environ, LIFECYCLED_RUNTIME_DIR=os.path.join(self.dir, "run"), NO_COLOR="1")
        self.log = open(os.path.join(self.dir, "daemon.log"), "w")
        self.process = subprocess.Popen([args.lifecycled, "--config", config, "--log-level", "info"], env=self.env,
                                        stdout=self.log, stderr=subprocess.STDOUT)
        self.wait("the daemon answers", lambda: self.ctl("list", check=False).returncode == 0, 30)

    def ctl(self, *words, check=True):
        result = subprocess.run([self.args.lifectl, *words], env=self.env, capture_output=True, text=True)
        if check and result.returncode != 0:
            raise RuntimeError(f"lifectl {' '.join(words)}: {result.stderr.strip()}")
        return result

    def statuses(self):
        return {s["name"]: s for s in json.loads(self.ctl("list", "--json").stdout)}

    def passes(self, app):
        try:
            with open(self.markers[app]) as f:
                count, at = f.read().split()
                return int(count), float(at)
        except (OSError, ValueError):
            return 0, 0.0

    @staticmethod
    def wait(what, condition, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return True
            time.sleep(0.02)
        raise RuntimeError(f"timed out waiting until {what}")

    def resume_cost(self, app):
        """Seconds from `lifectl focus` to the end of the app's next pass over its whole working set."""
        before, _ = self.passes(app)
        start = time.monotonic()
        self.ctl("focus", app)
        self.wait(f"{app} touched its memory again", lambda: self.passes(app)[0] > before, 120)
        return self.passes(app)[1] - start

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


def reclaim_phase(args):
    """Figures 1 and 2 with reclaim, 2 again without."""
    apps = [f"app{i:02d}" for i in range(1, args.apps + 1)]
    front, suspended = apps[0], apps[1:]
    out = {}
    for reclaim in (True, False):
        lifecycle = f"Reclaim={'yes' if reclaim else 'no'}\nReclaimAfterSec={args.reclaim_after}"
        daemon = Daemon(args, "reclaim" if reclaim else "kept", apps, lifecycle)
        try:
            for app in suspended:
                daemon.ctl("launch", app, "--background")
            daemon.ctl("focus", front)
            daemon.wait("every app touched its memory", lambda: all(daemon.passes(a)[0] >= 1 for a in apps), 300)
            pids = {s["name"]: s["pid"] for s in daemon.statuses().values()}
            before = {a: rss_anon(pids[a]) for a in suspended}
            for app in suspended:
                daemon.ctl("suspend", app)
            if reclaim:
                daemon.wait("every reclaim is over", lambda: all(
                    (s.get("reclaim") or {}).get("outcome") in ("done", "failed", "stopped")
                    for n, s in daemon.statuses().items() if n in suspended), 300 + args.reclaim_after)
                statuses = daemon.statuses()
                after = {a: rss_anon(pids[a]) for a in suspended}
                out["out_pct"] = [100 * (1 - after[a] / before[a]) for a in suspended if before[a]]
                out["resident_before"] = sum(before.values())
                out["resident_after"] = sum(after.values())
                due, done, took = [], [], []
                for app in suspended:
                    s = statuses[app]
                    r = s["reclaim"]
                    due.append(wall(s["since"]) + args.reclaim_after)
                    done.append(wall(r["began"]) + (r.get("seconds") or 0))
                    took.append(r.get("seconds") or 0)
                out["latency"] = [d - u for d, u in zip(done, due)]
                out["within"] = sum(1 for pct, lat in zip(out["out_pct"], out["latency"]) if pct >= 90 and lat <= 2)
                out["took"] = took
                out["all"] = max(done) - min(due)
                out["methods"] = sorted({statuses[a]["reclaim"]["method"] for a in suspended})
                out["swap"] = all(statuses[a]["reclaim"]["swap"] for a in suspended)
            else:
                time.sleep(args.reclaim_after + 2)
                after = {a: rss_anon(pids[a]) for a in suspended}
                out["kept_out_pct"] = [100 * (1 - after[a] / before[a]) for a in suspended if before[a]]
            costs = [daemon.resume_cost(app) for app in suspended[:args.resumes]]
            out["resume_reclaimed" if reclaim else "resume_kept"] = costs
        finally:
            daemon.stop()
    return out


class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
SYS_PIDFD_OPEN, SYS_PROCESS_MADVISE, MADV_PAGEOUT = 434, 440, 21


def private_mappings(pid):
    """The writable private mappings of /proc/PID/maps, as the daemon chooses them (PageOut.privateMappings)."""
    ranges = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            if len(fields) < 2 or not fields[1].startswith("rw") or not fields[1].endswith("p"):
                continue
            if len(fields) == 6 and fields[5].startswith("[v"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            ranges.append((start, end - start))
    return ranges


def page_out(pid):
    """process_madvise(MADV_PAGEOUT) over every writable private mapping of the stopped process, a call per mapping.
    ctypes lets go of the GIL during the call, so that threads page out side by side."""
    pidfd = LIBC.syscall(ctypes.c_long(SYS_PIDFD_OPEN), ctypes.c_long(pid), ctypes.c_long(0))
    if pidfd < 0:
        raise OSError(ctypes.get_errno(), f"pidfd_open {pid}")
    try:
        for start, length in private_mappings(pid):
            vec = Iovec(start, length)
            LIBC.syscall(ctypes.c_long(SYS_PROCESS_MADVISE), ctypes.c_long(pidfd), ctypes.byref(vec), ctypes.c_long(1),
                         ctypes.c_long(MADV_PAGEOUT), ctypes.c_long(0))
    finally:
        os.close(pidfd)


def floor_phase(args):
    """The physical floor of the reclaim: the suspended apps' count of the same toucher apps, started here (no daemon),
    stopped with SIGSTOP, and paged out directly by one thread per CPU, each taking the next app: when each app's
    memory was out, counted from the moment all were due at once."""
    count = args.apps - 1
    folder = os.path.join(args.work, "floor")
    os.makedirs(folder, exist_ok=True)
    markers = [os.path.join(folder, f"app{i:02d}.marker") for i in range(count)]
    apps = [subprocess.Popen(["/usr/bin/python3", TOUCHER, str(args.size), marker]) for marker in markers]
    try:
        Daemon.wait("every floor app touched its memory", lambda: all(os.path.exists(m) for m in markers), 300)
        for app in apps:
            os.kill(app.pid, signal.SIGSTOP)

        def stopped(pid):
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "T"
        Daemon.wait("every floor app is stopped", lambda: all(stopped(a.pid) for a in apps), 30)
        before = [rss_anon(a.pid) for a in apps]
        waiting = list(range(count))
        lock = threading.Lock()
        done = [0.0] * count
        start = time.monotonic()

        def worker():
            while True:
                with lock:
                    if not waiting:
                        return
                    index = waiting.pop(0)
                page_out(apps[index].pid)
                done[index] = time.monotonic() - start
        threads = [threading.Thread(target=worker) for _ in range(os.cpu_count() or 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        after = [rss_anon(a.pid) for a in apps]
        out_pct = [100 * (1 - a / b) for a, b in zip(after, before) if b]
        return {"floor_threads": len(threads), "floor_done": done, "floor_all": max(done), "floor_out_pct": out_pct,
                "floor_within": sum(1 for b, a, t in zip(before, after, done) if b and 1 - a / b >= 0.9 and t <= 2)}
    finally:
        for app in apps:
            app.kill()
            app.wait()


def budget_phase(args, reclaim):
    """How many apps stay resumable in the budget's cgroup, launched and suspended one after the other."""
    apps = [f"app{i:02d}" for i in range(1, args.apps + 1)]
    name = "budget-reclaim" if reclaim else "budget-kept"
    procs = os.path.join(args.budget_cgroup, "cgroup.procs")
    lifecycle = f"Reclaim={'yes' if reclaim else 'no'}\nReclaimAfterSec=0"
    # cgroup2: termination alone is a group that may not swap (the cgroup2 counterpart of swappiness 0); with
    # reclaim, swap is open to it, as a phone's compressed memory is.
    swap_max = os.path.join(args.budget_cgroup, "memory.swap.max")
    if os.path.exists(swap_max):
        with open(swap_max, "w") as f:
            f.write("max" if reclaim else "0")
    daemon = Daemon(args, name, apps, lifecycle, procs=procs)
    try:
        for app in apps:
            daemon.ctl("launch", app, "--background")
            daemon.wait(f"{app} touched its memory or ended", lambda: daemon.passes(app)[0] >= 1
                        or daemon.statuses()[app]["state"] == "notRunning", 120)
            if daemon.statuses()[app]["state"] == "notRunning":
                continue
            daemon.ctl("suspend", app)
            if reclaim:
                daemon.wait(f"{app}'s reclaim is over", lambda: daemon.statuses()[app]["state"] == "notRunning"
                            or (daemon.statuses()[app].get("reclaim") or {}).get("outcome") in ("done", "failed", "stopped"), 120)
        time.sleep(1)
        statuses = daemon.statuses()
        alive_apps = [a for a in apps if statuses[a]["state"] == "suspended" and statuses[a].get("pid") and alive(statuses[a]["pid"])]
        # Resumable: each one still there is focused in turn and touches its whole working set again.
        resumable = 0
        for app in alive_apps:
            try:
                daemon.resume_cost(app)
                resumable += 1
                daemon.ctl("suspend", app)
                if reclaim:
                    time.sleep(0.05)
            except RuntimeError:
                pass
        return resumable
    finally:
        daemon.stop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lifecycled", required=True)
    parser.add_argument("--lifectl", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--apps", type=int, default=20)
    parser.add_argument("--size", type=int, default=100, help="MiB each app touches")
    parser.add_argument("--reclaim-after", type=float, default=1)
    parser.add_argument("--resumes", type=int, default=5, help="apps focused again to time the resume")
    parser.add_argument("--budget-cgroup", default="", help="a memory cgroup with its limit set (memory.sh)")
    parser.add_argument("--budget-mib", type=int, default=0)
    args = parser.parse_args()

    figures = reclaim_phase(args)
    print(f"apps {args.apps} size_mib {args.size} suspended {args.apps - 1} reclaim_after_s {args.reclaim_after:g}"
          f" method {','.join(figures['methods'])} swap {'yes' if figures['swap'] else 'no'}")
    print(f"reclaim-out-pct {spread(figures['out_pct'], digits=1)}")
    print(f"reclaim-resident-mib {figures['resident_before'] / 2**20:.0f} {figures['resident_after'] / 2**20:.0f}")
    print(f"reclaim-took-ms {spread(figures['took'], 1000)}")
    print(f"reclaim-late-ms {spread(figures['latency'], 1000)}")
    print(f"reclaim-all-ms {figures['all'] * 1000:.0f}")
    print(f"reclaim-within {figures['within']} {args.apps - 1}")
    print(f"kept-out-pct {spread(figures['kept_out_pct'], digits=1)}")
    print(f"resume-reclaimed-ms {spread(figures['resume_reclaimed'], 1000, 1)}")
    print(f"resume-kept-ms {spread(figures['resume_kept'], 1000, 1)}")
    floor = floor_phase(args)
    print(f"floor-threads {floor['floor_threads']}")
    print(f"floor-out-pct {spread(floor['floor_out_pct'], digits=1)}")
    print(f"floor-done-ms {spread(floor['floor_done'], 1000)}")
    print(f"floor-all-ms {floor['floor_all'] * 1000:.0f}")
    print(f"floor-within {floor['floor_within']} {args.apps - 1}")
    if args.budget_cgroup:
        with_reclaim = budget_phase(args, True)
        without = budget_phase(args, False)
        print(f"budget-mib {args.budget_mib}")
        print(f"budget-resumable {with_reclaim} {without} {args.apps}")


if __name__ == "__main__":
    main()
