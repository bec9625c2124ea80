#!/usr/bin/env python3
"""The soak's reload storm: while the controllers run, reload the configuration every few seconds, through
`lifectl reload` and now and then SIGHUP, with some reloads made while an app file is broken (a stray quote in
Exec=, a file half written) or lifecycled.conf is (a stray quote in [Defaults]), and some that change an app's
Description=. soak.py starts it beside the controllers and reads its result.

What must hold at every reload: `lifectl reload` answers, 0 when every file is good and 1 when one is broken; a
broken file never removes its app (every app is still listed) nor deletes its saved state; a fixed file is applied.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import time


def list_names(lifectl, env):
    result = subprocess.run([lifectl, "list", "--json"], env=env, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"lifectl list failed ({result.returncode}): {result.stderr.strip()}")
    return {app["name"] for app in json.loads(result.stdout)}


def replace(path, text):
    """Write `text` to `path` the way editors do: a new file renamed over the old one."""
    with open(path + ".soak-tmp", "w") as f:
        f.write(text)
    os.rename(path + ".soak-tmp", path)


def broken(text, rng):
    """A broken version of an app file: a stray quote in Exec=, or the file cut before its Exec= line."""
    if rng.random() < 0.5:
        return text.replace("Exec=", "Exec=\"", 1), "stray quote in Exec="
    return text[:text.index("Exec=") - rng.randrange(1, 8)], "half written"


def run(spec, result_path):
    rng = random.Random(spec["seed"] ^ 0x5EED)
    env = dict(os.environ, LIFECYCLED_RUNTIME_DIR=spec["runtime"], NO_COLOR="1")
    lifectl, config, names = spec["lifectl"], spec["config"], sorted(spec["apps"])
    daemon_file = os.path.join(config, "lifecycled.conf")
    with open(daemon_file) as f:
        daemon_text = f.read()
    counts = {"reloads": 0, "broken app file": 0, "broken lifecycled.conf": 0, "sighup": 0, "changed": 0}
    failures = []
    deadline = time.monotonic() + spec["seconds"]
    while time.monotonic() < deadline:
        time.sleep(rng.uniform(1.5, 4.0))
        name = rng.choice(names)
        path = os.path.join(config, "apps", name + ".conf")
        with open(path) as f:
            good = f.read()
        state_file = os.path.join(spec["runtime"], "state", name + ".json")
        roll = rng.random()
        if roll < 0.1:
            # SIGHUP, as before lifectl reload existed: no answer, so only the app set is checked after it.
            os.kill(spec["daemon_pid"], signal.SIGHUP)
            counts["sighup"] += 1
            time.sleep(1)
            expect, what = None, "SIGHUP"
        elif roll < 0.5:
            text, what = broken(good, rng)
            replace(path, text)
            counts["broken app file"] += 1
            expect = 1
        elif roll < 0.6:
            replace(daemon_file, daemon_text.replace("BackgroundTimeSec=2", "BackgroundTimeSec=\"2", 1))
            counts["broken lifecycled.conf"] += 1
            expect, what = 1, "stray quote in lifecycled.conf"
        else:
            # A change that applies to the running app at once, without a relaunch.
            replace(path, good.replace("Description=soak", f"Description=soak (reload {counts['reloads']})", 1)
                    if "Description=soak (" not in good else good.replace("Description=soak (", "Description=soak [", 1))
            counts["changed"] += 1
            expect, what = 0, "changed Description="
        had_state = os.path.exists(state_file)
        try:
            if expect is not None:
                result = subprocess.run([lifectl, "reload"], env=env, capture_output=True, text=True, timeout=120)
                counts["reloads"] += 1
                if result.returncode != expect:
                    failures.append(f"lifectl reload with {what} ({name}): exit {result.returncode}, expected {expect}: "
                                    f"{(result.stderr or result.stdout).strip()[:300]}")
                elif expect == 1 and what != "stray quote in lifecycled.conf" and f"apps/{name}.conf" not in result.stderr:
                    failures.append(f"lifectl reload with {what} ({name}) does not name the file: {result.stderr.strip()[:300]}")
            listed = list_names(lifectl, env)
            if listed != set(names):
                failures.append(f"after a reload with {what} ({name}): apps missing {sorted(set(names) - listed)[:5]}, "
                                f"unexpected {sorted(listed - set(names))[:5]}")
            if had_state and not os.path.exists(state_file):
                failures.append(f"after a reload with {what}: the state file of {name} was deleted")
        except (subprocess.TimeoutExpired, RuntimeError, ValueError) as error:
            failures.append(f"reload with {what} ({name}): {error}")
        finally:
            # Fixed again, and the fix applied, before the next round.
            replace(path, good)
            replace(daemon_file, daemon_text)
            if expect == 1:
                fixed = subprocess.run([lifectl, "reload"], env=env, capture_output=True, text=True, timeout=120)
                counts["reloads"] += 1
                if fixed.returncode != 0:
                    failures.append(f"lifectl reload after fixing {name}: exit {fixed.returncode}: {fixed.stderr.strip()[:300]}")
    with open(result_path, "w") as f:
        json.dump({"counts": counts, "failures": failures}, f)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--result", required=True)
    args = parser.parse_args()
    with open(args.spec) as f:
        run(json.load(f), args.result)


if __name__ == "__main__":
    main()
