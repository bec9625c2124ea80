"""The fuzz target's inputs replayed without the fuzzer (Fuzz/python/dispatch_target.py, `make fuzz`): its
regressions (Fuzz/regressions/python) and its seeds (Fuzz/corpus/linereader), each a stream a daemon could send."""
from __future__ import annotations

import pathlib
import sys

import pytest

FUZZ = pathlib.Path(__file__).resolve().parents[3] / "Fuzz"
sys.path.insert(0, str(FUZZ / "python"))
import dispatch_target

INPUTS = sorted((FUZZ / "regressions" / "python").iterdir()) + sorted((FUZZ / "corpus" / "linereader").iterdir())


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fuzz_input(path: pathlib.Path) -> None:
    dispatch_target.one_input(path.read_bytes())


def test_the_target_finds_an_exception_the_checks_did_not_foresee(monkeypatch: pytest.MonkeyPatch) -> None:
    from lifecycled_client import dispatch

    def broken(app: object, message: object, problems: object) -> None:
        raise TypeError("a check is missing")

    monkeypatch.setattr(dispatch, "dispatch", broken)
    with pytest.raises(AssertionError, match="did not foresee"):
        dispatch_target.one_input(b'{"app":"notes","protocol":1,"state":"active","token":"t","type":"hello"}\n')
