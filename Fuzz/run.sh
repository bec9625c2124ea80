#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz-protocol, fuzz-config, and fuzz-linereader: liblifecycle's reader, in C) with -sanitize=fuzzer,address,
# and fuzz-python (the Python package's reader and dispatch under atheris, libFuzzer for Python, from PyPI into a
# virtual environment in the scratch directory; its seeds are fuzz-linereader's, the same daemon lines), and runs each for
# SECONDS (default 600), starting from the seed corpus in Fuzz/corpus/. New inputs go to a working corpus in the
# scratch directory, never into the repository. A crash (or a broken check: Fuzz/Targets) stops that fuzzer and
# leaves the input in $SCRATCH/artifacts/; add it to Fuzz/regressions/TARGET/ so the normal test suite replays it
# (FuzzRegressionTests), then fix the bug. Exit status: 0 when neither fuzzer found anything.
#
# usage: Fuzz/run.sh [SECONDS]     environment: FUZZ_SCRATCH (default /tmp/lifecycled-fuzz-build), SWIFT,
#                                  FUZZ_TARGETS (default "protocol config linereader python")
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
scratch=${FUZZ_SCRATCH:-/tmp/lifecycled-fuzz-build}
swift=${SWIFT:-swift}
mkdir -p "$scratch/artifacts"

# One build for both: every Swift module instrumented for coverage and AddressSanitizer.
started=$(date +%s)
targets=${FUZZ_TARGETS:-protocol config linereader python}
for product in $targets; do
    product="fuzz-$product"
    if [ "$product" = fuzz-linereader ]; then
        # The C library's own build, with clang from the Swift toolchain (its libFuzzer).
        make -s -C clients/c B="$scratch/c" "$scratch/c/fuzz-linereader" 2>&1 | grep -v "Cannot export local symbol" || true
        mkdir -p "$scratch/debug" && cp "$scratch/c/fuzz-linereader" "$scratch/debug/fuzz-linereader" 2>/dev/null || true
        test -x "$scratch/debug/$product" || { echo "Fuzz/run.sh: building $product failed" >&2; exit 2; }
        continue
    fi
    if [ "$product" = fuzz-python ]; then
        venv="$scratch/python-venv"
        [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
        "$venv/bin/python" -c 'import atheris' 2>/dev/null || "$venv/bin/pip" install -q atheris
        # A copy of the package's source: building in clients/python would leave build/ and *.egg-info there.
        rm -rf "$scratch/python-src" && mkdir -p "$scratch/python-src"
        cp -r clients/python/pyproject.toml clients/python/README.md clients/python/lifecycled_client "$scratch/python-src/"
        "$venv/bin/pip" install -q --force-reinstall --no-deps "$scratch/python-src"
        mkdir -p "$scratch/debug"
        printf '#!/bin/sh\nexec "%s" "%s" "$@"\n' "$venv/bin/python" "$PWD/Fuzz/python/fuzz_dispatch.py" > "$scratch/debug/$product"
        chmod +x "$scratch/debug/$product"
        continue
    fi
    "$swift" build -c debug --scratch-path "$scratch" --product "$product" \
        -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING 2>&1 | grep -v "Cannot export local symbol" || true
    test -x "$scratch/debug/$product" || { echo "Fuzz/run.sh: building $product failed" >&2; exit 2; }
done
echo "Fuzz/run.sh: built in $(( $(date +%s) - started )) s; fuzzing each target for $seconds s"

status=0
for target in $targets; do
    work="$scratch/corpus/$target"
    mkdir -p "$work"
    # The Python target reads what the C reader reads: lines from a daemon, plus its own regressions.
    seeds="Fuzz/corpus/$target" dict="Fuzz/$target.dict"
    if [ "$target" = python ]; then seeds="Fuzz/corpus/linereader Fuzz/regressions/python" dict=Fuzz/linereader.dict; fi
    # -detect_leaks=0: the Swift runtime's metadata caches look like leaks at exit; memory errors still stop it.
    # -rss_limit_mb: a single input that makes a decoder balloon is a finding too.
    if ! SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=0 "$scratch/debug/fuzz-$target" "$work" $seeds \
            -dict="$dict" -max_total_time="$seconds" -max_len=70000 -rss_limit_mb=2048 -timeout=10 \
            -artifact_prefix="$scratch/artifacts/$target-" -print_final_stats=1 2> "$scratch/$target.log"; then
        status=1
        echo "Fuzz/run.sh: fuzz-$target FOUND A FAILURE:" >&2
        grep -E "fuzz check failed|Uncaught Python exception|AssertionError|ERROR: AddressSanitizer|Fatal error|deadly signal|Test unit written|==ERROR" "$scratch/$target.log" | head -20 >&2
        echo "  Copy the input into Fuzz/regressions/$target/ (it becomes a test), then fix. Full log: $scratch/$target.log" >&2
    fi
    grep -E "stat::number_of_executed_runs|stat::peak_rss_mb|cov: " "$scratch/$target.log" | tail -3 | sed "s/^/fuzz-$target: /"
    echo "fuzz-$target: working corpus $(ls "$work" | wc -l) inputs ($(find $seeds -type f | wc -l) seeds)"
done
exit $status
