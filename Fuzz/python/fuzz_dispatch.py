"""atheris (libFuzzer for Python) on Fuzz/python/dispatch_target.py: the package is instrumented for coverage, and
libFuzzer's own flags (corpus directories, -max_total_time, -dict, -artifact_prefix) pass through. Fuzz/run.sh runs
it as the target ``python``."""
import os
import sys

import atheris

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
with atheris.instrument_imports(include=["lifecycled_client", "dispatch_target"]):
    import dispatch_target

    # dispatch is imported on first use; instrumented only if it is imported here.
    import lifecycled_client.dispatch  # noqa: F401


def test_one_input(data: bytes) -> None:
    dispatch_target.one_input(data)


if __name__ == "__main__":
    # The package recurses only as deep as the JSON it parses; libFuzzer's inputs stay under -max_len.
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
