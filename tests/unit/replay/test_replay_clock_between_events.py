"""What a replayed program reads of the clock between two recorded calls is the time it read
at the capture just before the second: the clock stands at the start of the event after the
one last answered, not at that one's time. A UUIDv7 made as pydantic-ai makes its run ids
(Python < 3.14) draws 10 random bytes, or 4 when it falls in the millisecond of the one
before it; read at the previous event's time, the replay drew otherwise and diverged."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sandbox import capture
from sandbox.replay import replay
from sandbox.snapshot.events import RandomDraw
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore

_last_ms: list[int] = []
ALIGN = [False]
"""Whether :func:`ids` waits for the start of a millisecond first (at the capture only: the
replay's clock stands still)."""


def uuid7_like() -> int:
    """The random part of a UUIDv7 as CPython 3.14 makes it: 10 bytes, 4 in the same
    millisecond as the one before."""
    ms = time.time_ns() // 1_000_000
    same = bool(_last_ms) and _last_ms[-1] == ms
    _last_ms.append(ms)
    return int.from_bytes(os.urandom(4 if same else 10), "big")


def ids() -> None:
    """Two ids one after the other, after a pause (the program doing something else);
    fails."""
    _last_ms.clear()
    time.sleep(0.01)
    while ALIGN[0] and time.time_ns() % 1_000_000 > 200_000:
        pass  # both ids then fall in one millisecond, whatever the capture costs them
    first, second = uuid7_like(), uuid7_like()
    raise ValueError(f"ids {first} {second}")


def _sizes(store: DirectoryStore, run_id: str) -> list[int]:
    """The byte counts of the run's ``os.urandom`` draws, in order."""
    draws = [e for e in store.load_events(run_id) if isinstance(e, RandomDraw)]
    return [len(str(e.value)) // 2 for e in draws if e.source == "os.urandom"]


def test_reads_between_recorded_calls_see_the_next_calls_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capture makes both ids in one millisecond (10 random bytes, then 4), 10 ms after
    the run's first event; three replays draw the same byte counts, reproduce the failure
    and do not diverge (read at the previous event's time, the first id fell in another
    millisecond and the second drew 10)."""
    monkeypatch.setattr(__name__ + ".ALIGN", [True])
    store = DirectoryStore(tmp_path / "store")
    entry = Entrypoint(kind="callable", target=f"{__name__}:ids")
    with (
        pytest.raises(ValueError, match="ids"),
        capture.run("ids", store=store, entrypoint=entry, packages=False) as rec,
    ):
        ids()
    recorded = _sizes(store, rec.run_id)
    assert recorded == [10, 4], recorded
    monkeypatch.setattr(__name__ + ".ALIGN", [False])
    report = replay(rec.run_id, store=store, times=3)
    assert report.verdict.reproduced == 3, report.describe()
    assert report.divergences == [None] * 3, report.describe()
    assert [_sizes(store, run) for run in report.replays] == [recorded] * 3
