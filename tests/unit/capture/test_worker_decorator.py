"""``@capture.run(name, keep="failed")`` on task-worker functions (arq-style ``async def
job(ctx, ...)`` run concurrently, Celery/RQ-style sync tasks in worker threads): each call is
its own run holding its own calls, and only the failing calls are kept."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from celery import Celery

from sandbox import capture
from sandbox.replay import replay
from sandbox.snapshot import DirectoryStore


@capture.tool
def charge(order_id: str) -> str:
    return f"charged {order_id}"


def _charged(store: DirectoryStore, run_id: str) -> list[str]:
    lines = (store.run_dir(run_id) / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    return [e["args"]["order_id"] for e in events if e.get("kind") == "tool"]


def test_async_jobs_run_concurrently_keep_only_the_failing(tmp_path: Path) -> None:
    @capture.run("refund-job", store=str(tmp_path), services="none", keep="failed")
    async def job(ctx: dict[str, Any], order_id: str) -> str:
        await asyncio.sleep(0.01)
        done = charge(order_id)
        await asyncio.sleep(0.01)
        if order_id.endswith("3"):
            raise RuntimeError(f"gateway refused {order_id}")
        return done

    async def worker() -> list[object]:
        ctx: dict[str, Any] = {"job_try": 1}
        return await asyncio.gather(*(job(ctx, f"o-{i}") for i in range(8)), return_exceptions=True)

    outcomes = asyncio.run(worker())
    assert [isinstance(o, RuntimeError) for o in outcomes] == [i == 3 for i in range(8)]
    store = DirectoryStore(tmp_path)
    capture.flush()  # the kept runs are written in the background
    (kept,) = store.list()
    assert kept.name == "refund-job" and kept.status == "complete"
    assert kept.failure is not None and kept.failure.error is not None
    assert _charged(store, kept.run_id) == ["o-3"]


@pytest.mark.parametrize("workers", [4])
def test_sync_tasks_in_worker_threads_keep_only_the_failing(tmp_path: Path, workers: int) -> None:
    @capture.run("refund-task", store=str(tmp_path), services="none", keep="failed")
    def task(order_id: str) -> str:
        done = charge(order_id)
        if order_id in {"o-1", "o-6"}:
            capture.mark_failed(f"refund {order_id} was declined")
        return done

    barrier = threading.Barrier(workers)

    def worker(first: int) -> None:
        barrier.wait()
        for i in range(first, 8, workers):
            task(f"o-{i}")

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    store = DirectoryStore(tmp_path)
    capture.flush()  # the kept runs are written in the background
    kept = store.list()
    assert sorted(_charged(store, m.run_id)[0] for m in kept) == ["o-1", "o-6"]
    assert all(len(_charged(store, m.run_id)) == 1 for m in kept)
    assert all(m.failure is not None and "declined" in m.failure.reason for m in kept)


class _Order:
    """An argument that is not JSON."""


@capture.run("refund-call", services="none", keep="failed", packages=False)
def refund_call(order_id: str, *, cents: int, note: object = None) -> str:
    done = charge(order_id)
    if cents > 100:
        raise RuntimeError(f"refund of {cents} for {order_id} refused")
    return done


@capture.run("refund-await", services="none", keep="failed", packages=False)
async def refund_await(order_id: str, cents: int) -> str:
    await asyncio.sleep(0)
    done = charge(order_id)
    if cents > 100:
        raise RuntimeError(f"refund of {cents} for {order_id} refused")
    return done


def test_a_decorated_call_records_its_json_arguments_and_replays_with_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The failing call's arguments are in its manifest's entrypoint; ``replay`` calls the
    function with them again (the same tool call, the same error: reproduced, 2 of 2), and
    each replay's manifest says so. A call with an argument that is not JSON records none."""
    monkeypatch.setenv("SANDBOX_STORE", str(tmp_path))
    with pytest.raises(RuntimeError):
        refund_call("o-7", cents=250)
    with pytest.raises(RuntimeError):
        refund_call("o-8", cents=300, note=_Order())
    capture.flush()
    store = DirectoryStore(tmp_path)
    by_order = {_charged(store, m.run_id)[0]: m for m in store.list()}
    entry = by_order["o-7"].entrypoint
    assert entry is not None and entry.target.endswith(":refund_call")
    assert (entry.args, entry.kwargs) == (["o-7"], {"cents": 250})
    other = by_order["o-8"].entrypoint
    assert other is not None and (other.args, other.kwargs) == ([], {})

    report = replay(by_order["o-7"].run_id, store=store, times=2)
    assert report.verdict.reproduced == 2, report.describe()
    for run_id in report.replays:
        replayed = store.load_manifest(run_id).entrypoint
        assert replayed is not None and (replayed.args, replayed.kwargs) == (
            ["o-7"],
            {"cents": 250},
        )
        assert _charged(store, run_id) == ["o-7"]


def test_a_decorated_async_call_replays_with_its_arguments_to_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ``async def`` task's kept run replays: the coroutine the call returns is run to its
    end, and the failure reproduces."""
    monkeypatch.setenv("SANDBOX_STORE", str(tmp_path))
    with pytest.raises(RuntimeError):
        asyncio.run(refund_await("o-9", 500))
    _the_kept_call_replays(tmp_path, ":refund_await", ["o-9", 500])


def _the_kept_call_replays(root: Path, target: str, args: list[object]) -> None:
    """The one run kept in ``root`` records a call of ``target`` (its ending) with ``args``
    and no keyword, and one replay of it reproduces, charging the same order."""
    capture.flush()  # the kept run is written in the background
    store = DirectoryStore(root)
    (kept,) = store.list()
    entry = kept.entrypoint
    assert entry is not None and entry.target is not None and entry.target.endswith(target)
    assert (entry.args, entry.kwargs) == (args, {})
    report = replay(kept.run_id, store=store, times=1)
    assert report.verdict.reproduced == 1, report.describe()
    assert _charged(store, report.replays[0]) == [args[0]]


_POOL = """
import json, multiprocessing, os, sys

from sandbox import capture
from sandbox.snapshot import DirectoryStore

STORE = os.environ["TRIAL_STORE"]


@capture.tool
def charge(order_id: str) -> str:
    return f"charged {order_id}"


@capture.run("pool-task", store=STORE, keep="failed", services="none")
def refund(order_id: str) -> str:
    done = charge(order_id)
    if int(order_id.rpartition("-")[2]) % 2:
        raise RuntimeError(f"refused {order_id}")
    return done


def task(order_id: str) -> list[object]:
    try:
        refund(order_id)
    except RuntimeError:
        pass
    kept = [str(m.failure) for m in DirectoryStore(STORE).list()]
    return [order_id, any(f"refused {order_id}" in k for k in kept)]  # kept as it returns


if __name__ == "__main__":
    with multiprocessing.get_context(sys.argv[1]).Pool(2) as pool:  # leaving: terminate
        print(json.dumps(pool.map(task, [f"o-{i}" for i in range(6)])))
"""


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_a_pool_process_has_its_failing_call_kept_before_the_call_returns(
    tmp_path: Path, start: str
) -> None:
    """In a ``multiprocessing`` pool's worker, a failing call's run is in the store by the
    time the call returns (the pool may kill the worker then: leaving ``with Pool()``
    terminates it); after the pool is gone, the store holds the three failing calls."""
    script = tmp_path / "pool_tasks.py"
    script.write_text(_POOL)
    store = tmp_path / "store"
    repo = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, str(script), start],
        env={**os.environ, "TRIAL_STORE": str(store), "PYTHONPATH": str(repo)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = dict(json.loads(done.stdout))
    assert seen == {f"o-{i}": bool(i % 2) for i in range(6)}
    kept = sorted(
        _charged(DirectoryStore(store), m.run_id)[0] for m in DirectoryStore(store).list()
    )
    assert kept == ["o-1", "o-3", "o-5"]


_celery = Celery("trial", set_as_current=False)


@_celery.task(bind=True, name="trial.refund_bound")
@capture.run("refund-bound", services="none", keep="failed", packages=False)
def refund_bound(self: Any, order_id: str, cents: int) -> str:
    done = charge(order_id)
    if cents > 100:
        raise RuntimeError(f"{self.name}: refund of {cents} for {order_id} refused")
    return done


def test_a_bound_celery_task_records_its_arguments_without_the_task_and_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Celery task made with ``bind=True`` is called with the task first: its run records
    the arguments after it, and replay calls the task with them (which passes the task
    again): the same tool call, the same error, reproduced."""
    monkeypatch.setenv("SANDBOX_STORE", str(tmp_path))
    result = refund_bound.apply(args=("o-4", 400))  # as a worker runs it: the task bound
    assert isinstance(result.result, RuntimeError)
    _the_kept_call_replays(tmp_path, ":refund_bound", ["o-4", 400])


class _Receipt:
    """A return value JSON cannot show but by its ``repr`` (its address: not comparable)."""


@capture.run("quote-task", services="none", packages=False)
def quote_task(order_id: str, opaque: bool = False) -> object:
    charge(order_id)
    capture.mark_failed(f"quoted {order_id}")
    return _Receipt() if opaque else {"quoted": order_id}


@pytest.mark.parametrize("opaque", [False, True])
def test_a_decorated_call_records_what_it_returned_and_its_replay_does_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opaque: bool
) -> None:
    """The call's return value is its run's result (none for one only ``repr`` can show),
    and each replay, calling the function again, records the same: replays of a run that
    changed nothing have no divergence (before, the replay's result was a step the
    original lacked)."""
    from sandbox.snapshot.events import FinalResult

    monkeypatch.setenv("SANDBOX_STORE", str(tmp_path))
    quote_task("o-3", opaque=opaque)
    capture.flush()
    store = DirectoryStore(tmp_path)
    (run,) = store.list()

    def results(run_id: str) -> list[object]:
        return [e.value for e in store.load_events(run_id) if isinstance(e, FinalResult)]

    assert results(run.run_id) == ([] if opaque else [{"quoted": "o-3"}])
    report = replay(run.run_id, store=store, times=2)
    assert report.verdict.reproduced == 2, report.describe()
    assert report.divergences == [None, None], report.describe()
    assert [results(r) for r in report.replays] == [results(run.run_id)] * 2


@capture.run("declined-task", services="none", keep="failed", packages=False)
def declined_task(order_id: str) -> str:
    done = charge(order_id)
    capture.mark_failed(f"refund {order_id} was declined")
    return done


@capture.run("declined-job", services="none", keep="failed", packages=False)
async def declined_job(order_id: str) -> str:
    await asyncio.sleep(0)
    done = charge(order_id)
    capture.mark_failed(f"refund {order_id} was declined")
    return done


@pytest.mark.parametrize("where", ["worker thread", "gathered task"])
def test_a_run_begun_in_a_worker_replays_without_a_divergence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A run begun in a worker's thread (a Celery/RQ pool) or in one of many tasks (an arq
    worker) records what it did there as its ``main``, as its replay, which runs the call
    in the replaying thread or in a task of its own, does: replays with nothing changed
    have no divergence (before, every step was on another task on each side)."""
    monkeypatch.setenv("SANDBOX_STORE", str(tmp_path))
    if where == "worker thread":
        worker = threading.Thread(target=declined_task, args=("o-4",), name="pool-worker-3")
        worker.start()
        worker.join()
    else:

        async def worker() -> None:
            await asyncio.gather(asyncio.sleep(0), declined_job("o-4"))

        asyncio.run(worker())
    capture.flush()
    store = DirectoryStore(tmp_path)
    (kept,) = store.list()
    tasks = {
        json.loads(line).get("task", "main")
        for line in (store.run_dir(kept.run_id) / "events.jsonl").read_text().splitlines()
    }
    assert tasks == {"main"}
    report = replay(kept.run_id, store=store, times=2)
    assert report.verdict.reproduced == 2, report.describe()
    assert report.divergences == [None, None], report.describe()
