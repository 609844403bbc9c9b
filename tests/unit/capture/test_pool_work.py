"""Work handed to a thread pool inside a run is named by the pool and the order it was
submitted in within the run (``asyncio#3``), not by the worker thread that ran it: which
idle worker takes a function varies from run to run, so a replay named the same call's
events after another task and diverged. A run captured before, which named them by worker,
is replayed naming them so."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sandbox import capture
from sandbox.capture.recorder import Recorder
from sandbox.replay import replay
from sandbox.seam import boundary
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.manifest import Entrypoint
from sandbox.snapshot.store import DirectoryStore


@capture.tool
def lookup(i: int) -> int:
    time.sleep(0.002)
    return i * 2


async def agent() -> int:
    """Three lookups at once (asyncio's pool then has three idle workers), then eight one
    after the other, each taken by whichever idle worker wakes first; fails on any total."""
    total = sum(await asyncio.gather(*(asyncio.to_thread(lookup, i) for i in range(3))))
    for i in range(8):
        total += await asyncio.to_thread(lookup, 10 + i)
        await asyncio.sleep(0.001)
    raise ValueError(f"total {total}")


def run_agent() -> None:
    asyncio.run(agent())


def _capture(store: DirectoryStore) -> str:
    entry = Entrypoint(kind="callable", target=f"{__name__}:run_agent")
    with (
        pytest.raises(ValueError, match="total"),
        capture.run("pool", store=store, entrypoint=entry, packages=False) as rec,
    ):
        run_agent()
    return rec.run_id


def _tasks(store: DirectoryStore, run_id: str) -> dict[int, str]:
    """Each lookup's argument -> the task its event names."""
    tools = [e for e in store.load_events(run_id) if isinstance(e, ToolCall)]
    return {int(str(e.args["i"])): e.task for e in tools}


def test_asyncio_pool_work_is_named_by_submission_and_replays_without_divergence(
    tmp_path: Path,
) -> None:
    """The lookups' events name ``asyncio#1`` to ``asyncio#11`` in the order they were
    submitted; five replays make all eleven recorded calls, reproduce the failure and
    do not diverge."""
    store = DirectoryStore(tmp_path / "store")
    run_id = _capture(store)
    expected = [0, 1, 2, *range(10, 18)]
    assert _tasks(store, run_id) == {i: f"asyncio#{n}" for n, i in enumerate(expected, 1)}
    report = replay(run_id, store=store, times=5)
    assert report.verdict.reproduced == 5, report.describe()
    assert report.divergences == [None] * 5, report.describe()
    coverage = report.verdict.coverage
    assert coverage is not None and coverage.made == coverage.recorded == 11, report.describe()


def test_each_pool_is_numbered_on_its_own_and_default_named_executors_per_run(
    tmp_path: Path,
) -> None:
    """A pool whose threads the program named keeps its name; an executor Python numbered
    is numbered from 0 in each run, whatever the process made before it; each pool counts
    its own submissions."""
    ThreadPoolExecutor().shutdown()  # the process's executors are numbered past this one
    store = DirectoryStore(tmp_path / "store")
    with (
        capture.run("pools", store=store, packages=False) as rec,
        ThreadPoolExecutor(max_workers=2, thread_name_prefix="tools") as tools,
        ThreadPoolExecutor(max_workers=2) as plain,
    ):
        for future in [tools.submit(lookup, 1), plain.submit(lookup, 2), tools.submit(lookup, 3)]:
            future.result()
    assert _tasks(store, rec.run_id) == {
        1: "tools#1",
        2: "ThreadPoolExecutor-0#1",
        3: "tools#2",
    }


def test_a_run_captured_before_is_replayed_naming_pool_work_by_its_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run captured as before this naming (its pool work named by the worker threads,
    ``asyncio_0`` ...) is replayed naming them so too, not by submission."""
    store = DirectoryStore(tmp_path / "store")
    with monkeypatch.context() as before:
        before.setattr(Recorder, "names_pool_work", False)
        run_id = _capture(store)
    recorded = _tasks(store, run_id)
    assert all(task.startswith("asyncio_") for task in recorded.values()), recorded
    assert not boundary.names_pool_work(recorded.values())
    report = replay(run_id, store=store, times=1)
    replayed = _tasks(store, report.replays[0])
    assert set(replayed) == set(recorded)
    assert all(task.startswith("asyncio_") for task in replayed.values()), replayed


def test_name_lookups_on_the_pool_are_not_counted(tmp_path: Path) -> None:
    """asyncio's ``loop.getaddrinfo`` runs on its pool for each new connection (a replay
    served from the recording makes none): it takes no number, the lookup after it is
    ``asyncio#1``."""

    async def work() -> None:
        loop = asyncio.get_running_loop()
        await loop.getaddrinfo("127.0.0.1", 80)
        await asyncio.to_thread(lookup, 1)

    store = DirectoryStore(tmp_path / "store")
    with capture.run("lookups", store=store, packages=False) as rec:
        asyncio.run(work())
    assert _tasks(store, rec.run_id) == {1: "asyncio#1"}
