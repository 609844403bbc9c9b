"""What tests of a kept failure check of its replays: reproduced every time with no
divergence while the bug is there, gone once the fix is switched on."""

from __future__ import annotations

import os
from pathlib import Path

from sandbox.replay import replay
from sandbox.replay.report import ReplayReport
from sandbox.snapshot.store import Store


def reproduced_then_gone(
    run_id: str, store: Store | str | os.PathLike[str], fix: dict[str, bool], times: int = 2
) -> tuple[ReplayReport, ReplayReport]:
    """Replay ``run_id`` ``times`` times: reproduced each time with no divergence; then once
    with ``fix["on"]`` set (unset again after): gone. The two reports, for what else a test
    asserts of them."""
    buggy = replay(run_id, store=store, times=times)
    assert buggy.verdict.reproduced == times, buggy.describe()
    assert buggy.divergences == [None] * times, buggy.describe()
    fix["on"] = True
    try:
        fixed = replay(run_id, store=store, times=1)
    finally:
        fix["on"] = False
    assert fixed.verdict.gone == 1, fixed.describe()
    return buggy, fixed


def bytes_on_disk(root: Path) -> bytes:
    """Every file under ``root``, one after the other (where a planted secret must not be)."""
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())
