"""Tests read what the repository ships in ``snapshots/``, never what a user's earlier command
(``make demo``, a capture into the default store) left there."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

SNAPSHOTS = Path(__file__).resolve().parents[2] / "snapshots"


@pytest.fixture
def planted() -> Iterator[str]:
    """A run folder left in the working tree's store, as a capture or ``make demo`` leaves."""
    run_id = f"zz-left-by-a-user-{os.getpid()}"
    folder = SNAPSHOTS / "runs" / run_id
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text("{}")
    try:
        yield run_id
    finally:
        shutil.rmtree(folder)


def test_the_committed_copy_leaves_out_runs_git_does_not_track(
    planted: str, committed_snapshots: Path
) -> None:
    runs = sorted(p.name for p in (committed_snapshots / "runs").iterdir())
    assert planted not in runs
    assert "demo-orders-duplicate" in runs


def test_the_demo_captures_into_a_store_of_its_own() -> None:
    makefile = (SNAPSHOTS.parent / "Makefile").read_text()
    demo = makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "--store $(DEMO_STORE)" in demo and "$(STORE)" not in demo
    assert "DEMO_STORE ?= demo-store" in makefile
    assert "/demo-store/" in (SNAPSHOTS.parent / ".gitignore").read_text().splitlines()
