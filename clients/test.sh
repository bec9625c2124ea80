#!/usr/bin/env bash
# The Python package's checks (mypy --strict, ruff) and tests, and both client libraries against the real daemon,
# in a virtual environment this script makes (clients/python/.venv) with pytest, mypy and ruff from pip and the
# package installed from its path.
# Called by `make test-clients` (after `make -C clients/c check`); needs the debug build (`swift build`).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=clients/python/.venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
for tool in pytest mypy ruff; do
    "$venv/bin/python" -c "import $tool" 2>/dev/null || "$venv/bin/pip" install -q "$tool"
done
# The package as its users' type checker sees it (py.typed), and its code, tests and fuzz target as ruff does
# (settings in pyproject.toml). No caches: they would be left in the source tree.
(cd clients/python && .venv/bin/mypy --strict --cache-dir=/dev/null lifecycled_client)
(cd clients/python && .venv/bin/ruff check --no-cache lifecycled_client tests ../tests ../../Fuzz/python)
# setuptools leaves build/ and *.egg-info in the source tree; a stale one would be packaged again.
rm -rf clients/python/build clients/python/*.egg-info
"$venv/bin/pip" install -q --force-reinstall --no-deps ./clients/python
rm -rf clients/python/build clients/python/*.egg-info
# From another directory, so that the tests import the installed package, not the source tree.
cd clients
LIFECYCLED_BIN="${LIFECYCLED_BIN:-$(cd .. && swift build --show-bin-path)}" \
    "python/.venv/bin/python" -m pytest -q -p no:cacheprovider python/tests tests "$@"
