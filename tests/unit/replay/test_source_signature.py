"""A function's parameters read from its module's source without running the module: what
decides whether an entrypoint whose module raises at import gets the recorded arguments."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from replay_modules import written_module

from sandbox.replay.source_signature import signature_in_source

SOURCE = """
import os
raise RuntimeError("reads a variable the replay sets: " + os.environ["NOT_SET_HERE"])

def job(order_id, cents=0, *rest, dry_run, note=None, **extra): ...

def rebound(x): ...
rebound = make_task(rebound)

def imported(x): ...
from elsewhere import imported

def versioned(x): ...
if VERSION > 2:
    def versioned(x, y): ...

class Jobs:
    def method(self, order_id): ...

    @classmethod
    def build(cls, order_id, cents): ...

    @staticmethod
    def plain(order_id): ...

def job(order_id, cents): ...  # the later def is the one in force
"""


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    yield from written_module(tmp_path, monkeypatch, "raising", SOURCE)


def _params(module: str, attr: str) -> str | None:
    signature = signature_in_source(module, attr)
    return None if signature is None else ", ".join(signature.parameters)


def test_the_last_def_bound_to_the_name_is_read_without_running_the_module(module: str) -> None:
    signature = signature_in_source(module, "job")
    assert signature is not None and list(signature.parameters) == ["order_id", "cents"]
    assert module not in sys.modules  # the module's code never ran
    signature.bind("o-7", 250)
    with pytest.raises(TypeError):
        signature.bind()


def test_parameter_kinds_and_defaults_bind_as_python_would(tmp_path: Path) -> None:
    (tmp_path / "kinds.py").write_text(
        "raise SystemExit\ndef job(order_id, cents=0, *rest, dry_run, note=None, **extra): ...\n"
        "async def pos_only(a, b, /, c): ...\n"
    )
    sys.path.insert(0, str(tmp_path))
    try:
        job = signature_in_source("kinds", "job")
        pos_only = signature_in_source("kinds", "pos_only")
    finally:
        sys.path.remove(str(tmp_path))
    assert job is not None and pos_only is not None
    job.bind("o-7", dry_run=True)
    job.bind("o-7", 1, 2, 3, dry_run=False, note="x", other=4)
    with pytest.raises(TypeError):
        job.bind("o-7")  # dry_run is keyword-only with no default
    pos_only.bind(1, 2, c=3)
    with pytest.raises(TypeError):
        pos_only.bind(a=1, b=2, c=3)


def test_methods_are_read_through_their_class(module: str) -> None:
    assert _params(module, "Jobs.method") == "self, order_id"  # as the class attribute is
    assert _params(module, "Jobs.build") == "order_id, cents"  # the class is passed for it
    assert _params(module, "Jobs.plain") == "order_id"


def test_what_the_source_cannot_tell_is_none(module: str, tmp_path: Path) -> None:
    assert _params(module, "rebound") is None  # rebound by an assignment
    assert _params(module, "imported") is None  # rebound by an import
    assert _params(module, "versioned") is None  # maybe rebound inside an if
    assert _params(module, "missing") is None
    assert _params(module, "job.inner") is None  # a function has no attributes to walk
    assert _params(module, "Jobs") is None  # a class: its call is its __init__, not read
    assert _params("no_such_module_anywhere", "job") is None
    package = tmp_path / "raising_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('the package raises')\n")
    (package / "jobs.py").write_text("def job(x): ...\n")
    assert _params("raising_pkg.jobs", "job") is None  # finding it would run the package
