"""``@capture.run(name, keep="failed")`` on task-worker functions (arq-style ``async def
job(ctx, ...)`` run concurrently, Celery/RQ-style sync tasks in worker threads): each call is
its own run holding its own calls, and only the failing calls are kept."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from sandbox import capture
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
