#!/usr/bin/env bash
# The Python package's tests and both client libraries against the real daemon, in a virtual environment this
# script makes (clients/python/.venv) with pytest from pip and the package installed from its path.
# Called by `make test-clients` (after `make -C clients/c check`); needs the debug build (`swift build`).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=clients/python/.venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/python" -c 'import pytest' 2>/dev/null || "$venv/bin/pip" install -q pytest
# setuptools leaves build/ and *.egg-info in the source tree; a stale one would be packaged again.
rm -rf clients/python/build clients/python/*.egg-info
"$venv/bin/pip" install -q --force-reinstall --no-deps ./clients/python
rm -rf clients/python/build clients/python/*.egg-info
# From another directory, so that the tests import the installed package, not the source tree.
cd clients
LIFECYCLED_BIN="${LIFECYCLED_BIN:-$(cd .. && swift build --show-bin-path)}" \
    "python/.venv/bin/python" -m pytest -q -p no:cacheprovider python/tests tests "$@"
