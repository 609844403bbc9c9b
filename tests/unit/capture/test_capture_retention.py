"""``keep``: which captured runs stay in the store. A run not kept leaves nothing behind (no
run folder, no blob, nothing staged); a kept one is complete, with its blobs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from sandbox import capture
from sandbox.errors import CaptureError
from sandbox.snapshot.store import DirectoryStore

BIG = "y" * 100_000  # stored as a blob


@capture.tool
def fetch(n: int) -> str:
    return f"{n}:{BIG}"


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name != ".placeholder-key")


def _run(store: DirectoryStore, i: int, keep: object, fail: bool, **kw: object) -> None:
    try:
        run = capture.run(  # outside a git checkout: no diff blob of the code
            f"r{i}", store=store, services="none", keep=keep, cwd=str(store.root.parent), **kw
        )  # type: ignore[arg-type]
        with run:
            fetch(i)
            if fail:
                raise RuntimeError("boom")
    except RuntimeError:
        pass


def test_keep_failed_keeps_only_the_failed_run(store: DirectoryStore) -> None:
    for i in range(4):
        _run(store, i, "failed", fail=i == 2)
    capture.flush()  # the kept runs are written in the background
    (kept,) = store.list()
    assert (kept.name, kept.status) == ("r2", "complete")
    assert kept.failure is not None and "boom" in kept.failure.reason
    blobs = list(store.iter_blobs())
    assert len(blobs) == 1  # the kept run's output, and none of the others'
    assert store.get_blob(blobs[0]).startswith(b"2:")
    assert not [p for p in (store.root / ".tmp").rglob("*") if p.is_file()]


def test_keep_failed_leaves_nothing_for_runs_that_end_well(store: DirectoryStore) -> None:
    for i in range(3):
        _run(store, i, "failed", fail=False)
    capture.flush()  # the kept runs are written in the background
    assert store.list() == []
    assert _files(store.root) == []


def test_mark_failed_keeps_a_run_that_raised_nothing(store: DirectoryStore) -> None:
    with capture.run("marked", store=store, services="none", keep="failed") as rec:
        fetch(1)
        rec.mark_failed("wrong answer")
    capture.flush()  # the kept runs are written in the background
    (kept,) = store.list()
    assert kept.failure is not None and kept.failure.reason == "wrong answer"


def test_a_rate_keeps_that_share_of_the_runs_that_did_not_fail(store: DirectoryStore) -> None:
    """``keep=0.5`` with a seeded sampler: the runs whose draw is under 0.5 are kept, and
    a failed run whatever the sampler (it draws nothing for it)."""
    rng = random.Random(11)
    draws: list[float] = []

    def sampler() -> float:
        draws.append(rng.random())
        return draws[-1]

    for i in range(8):
        _run(store, i, 0.5, fail=False, sampler=sampler)
    _run(store, 8, 0.5, fail=True, sampler=sampler)
    assert len(draws) == 8
    want = {f"r{i}" for i, v in enumerate(draws) if v < 0.5} | {"r8"}
    assert 2 < len(want) < 9  # the seed keeps some and drops some
    capture.flush()  # the kept runs are written in the background
    assert {m.name for m in store.list()} == want


@pytest.mark.parametrize("keep", ["some", 1.5, -0.1, True])
def test_an_invalid_keep_is_one_clear_error(keep: object) -> None:
    with pytest.raises(CaptureError, match="keep="):
        capture.run("x", keep=keep)  # type: ignore[arg-type]
