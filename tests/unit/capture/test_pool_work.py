"""Work handed to a thread pool inside a run is named by the task that handed it over, the
pool and the order that task handed work to the pool in (``Task-2/asyncio#3``), not by the
worker thread that ran it: which idle worker takes a function varies from run to run, so a
replay named the same call's events after another task and diverged; nor by the order of
the run's submissions as a whole, which concurrent tasks vary. A run captured before, which
named them by worker, is replayed naming them so."""

from __future__ import annotations

import asyncio
import importlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest

from sandbox import capture
from sandbox.capture.recorder import Recorder
from sandbox.names import NAMING_LABEL
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
    """The three lookups at once each name the task ``gather`` made for it (named by its
    coroutine, ``to_thread``, numbered as they were created), each its task's first
    submission; the eight after them the agent's own task (``agent-1``), numbered 1 to 8;
    five replays make all eleven recorded calls, reproduce the failure and do not
    diverge."""
    store = DirectoryStore(tmp_path / "store")
    run_id = _capture(store)
    at_once = {i: f"to_thread-{i + 1}/asyncio#1" for i in range(3)}
    in_turn = {10 + n: f"agent-1/asyncio#{n + 1}" for n in range(8)}
    assert _tasks(store, run_id) == at_once | in_turn
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
        1: "main/tools#1",
        2: "main/ThreadPoolExecutor-0#1",
        3: "main/tools#2",
    }


def test_a_run_captured_before_is_replayed_naming_pool_work_by_its_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run captured as before this naming (its pool work named by the worker threads,
    ``asyncio_0`` ..., and no label saying otherwise) is replayed naming them so too, not
    by submission."""
    store = DirectoryStore(tmp_path / "store")
    run_module = importlib.import_module("sandbox.capture.run")  # not capture.run, the class
    with monkeypatch.context() as before:
        before.setattr(Recorder, "names_by_origin", False)
        before.setattr(run_module, "NAMING_BY_ORIGIN", "before")
        run_id = _capture(store)
    recorded = _tasks(store, run_id)
    assert all(task.startswith("asyncio_") for task in recorded.values()), recorded
    assert store.load_manifest(run_id).labels[NAMING_LABEL] == "before"
    report = replay(run_id, store=store, times=1)
    replayed = _tasks(store, report.replays[0])
    assert set(replayed) == set(recorded)
    assert all(task.startswith("asyncio_") for task in replayed.values()), replayed


def test_name_lookups_on_the_pool_are_not_counted(tmp_path: Path) -> None:
    """asyncio's ``loop.getaddrinfo`` runs on its pool for each new connection (a replay
    served from the recording makes none): it takes no number, the lookup after it is
    the first of its task's (``work-1``, the only task)."""

    async def work() -> None:
        loop = asyncio.get_running_loop()
        await loop.getaddrinfo("127.0.0.1", 80)
        await asyncio.to_thread(lookup, 1)

    store = DirectoryStore(tmp_path / "store")
    with capture.run("lookups", store=store, packages=False) as rec:
        asyncio.run(work())
    work_1 = "test_name_lookups_on_the_pool_are_not_counted.work-1"
    assert _tasks(store, rec.run_id) == {1: f"{work_1}/asyncio#1"}


FIRST = ["x"]
"""Which of :func:`pair`'s two tasks hands its lookup over first."""
POOL = ["asyncio"]
"""Which pool :func:`pair` hands its lookups to: asyncio's or anyio's worker threads."""
EXTRA = [False]
"""Whether :func:`pair` first runs a task of another coroutine (as a client's connection
makes at capture and a replay that serves its exchanges does not)."""


async def pair() -> None:
    """Two tasks each hand a lookup to the :data:`POOL`, in the order :data:`FIRST` says
    (the other waits until the first's lookup has begun); fails."""
    loop = asyncio.get_running_loop()
    turn = {"x": asyncio.Event(), "y": asyncio.Event()}

    async def hand_over(me: str, other: str, i: int) -> int:
        await turn[me].wait()

        def work() -> int:
            loop.call_soon_threadsafe(turn[other].set)
            return lookup(i)

        if POOL[0] == "anyio":
            return await anyio.to_thread.run_sync(work)
        return await loop.run_in_executor(None, work)

    if EXTRA[0]:
        await asyncio.create_task(asyncio.sleep(0))
    turn[FIRST[0]].set()
    if NAMED[0]:  # as pydantic-ai names each tool call's task by its tool
        both = [asyncio.create_task(hand_over(*args), name="hand") for args in PAIR]
        x, y = [await task for task in both]
    else:
        x, y = await asyncio.gather(*(hand_over(*args) for args in PAIR))
    raise ValueError(f"total {x + y}")


PAIR = [("x", "y", 100), ("y", "x", 200)]
NAMED = [False]
"""Whether :func:`pair` gives its two tasks one name."""


def run_pair() -> None:
    asyncio.run(pair())


@pytest.mark.parametrize(
    ("pool", "named", "tasks"),
    [
        ("asyncio", False, ("pair.hand_over-1", "pair.hand_over-2")),
        ("anyio", False, ("pair.hand_over-1", "pair.hand_over-2")),
        ("asyncio", True, ("hand", "hand-2")),
    ],
)
def test_pool_work_keeps_its_name_when_concurrent_tasks_hand_work_over_in_another_order(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pool: str,
    named: bool,
    tasks: tuple[str, str],
) -> None:
    """Captured with task x handing its lookup to the pool (asyncio's, anyio's) first and
    a task of another coroutine run before them, replayed with task y first and no such
    task: each lookup's events name the same task in the replay as in the capture (each
    the first submission of the task ``gather`` made for it, named by its coroutine and
    the order it was created in; two tasks given one name told apart by that order), and
    the replay reproduces without divergence."""
    monkeypatch.setattr(__name__ + ".POOL", [pool])
    monkeypatch.setattr(__name__ + ".NAMED", [named])
    monkeypatch.setattr(__name__ + ".EXTRA", [True])
    store = DirectoryStore(tmp_path / "store")
    entry = Entrypoint(kind="callable", target=f"{__name__}:run_pair")
    with (
        pytest.raises(ValueError, match="total 600"),
        capture.run("pair", store=store, entrypoint=entry, packages=False) as rec,
    ):
        run_pair()
    recorded = _tasks(store, rec.run_id)
    assert recorded == {100: f"{tasks[0]}/{pool}#1", 200: f"{tasks[1]}/{pool}#1"}
    monkeypatch.setattr(__name__ + ".FIRST", ["y"])
    monkeypatch.setattr(__name__ + ".EXTRA", [False])
    report = replay(rec.run_id, store=store, times=1)
    assert report.verdict.reproduced == 1, report.describe()
    assert report.divergences == [None], report.describe()
    assert _tasks(store, report.replays[0]) == recorded


def test_a_task_created_while_a_task_is_being_named_is_named_too(tmp_path: Path) -> None:
    """A task created while another is being named (by a finalizer the garbage collector
    runs then: an SDK client's ``__del__`` closes it in a task) is named in turn, rather
    than wait forever on the naming's lock (the replay then hung until its timeout)."""
    named: list[str] = []

    async def agent() -> None:
        async def child() -> None:
            named.append(boundary.task_id())

        with boundary._numbers_lock:  # as while the garbage collector interrupts a naming
            task = asyncio.create_task(child())
        await task

    store = DirectoryStore(tmp_path / "store")

    def run() -> None:
        with capture.run("finalizer", store=store, packages=False):
            asyncio.run(agent())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    assert not thread.is_alive(), "the task's naming waited on its own lock"
    assert [name.rsplit(".", 2)[-2:] for name in named] == [["agent", "child-1"]]
