"""Async agents on replay: the recorded order of two racing asyncio tasks is enforced (the
turnstile suspends a task, not the loop), and async retry attempts fail as recorded."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest
import tenacity

from sandbox import capture
from sandbox.replay import replay
from sandbox.replay.conditions.ordering import Turnstile
from sandbox.snapshot.events import ToolCall
from sandbox.snapshot.manifest import Entrypoint, ResultPredicate
from sandbox.snapshot.store import DirectoryStore

DB: dict[str, Path] = {}
INTERLEAVE = {"on": False}
"""At capture the two tasks interleave (each yields between its read and its write); the
code replayed does not, so only the recorded order brings the lost update back."""


@capture.tool
async def read_balance(account: str) -> int:
    with sqlite3.connect(DB["path"]) as db:
        (cents,) = db.execute("SELECT cents FROM balance WHERE account = ?", (account,)).fetchone()
    return int(cents)


@capture.tool
async def write_balance(account: str, cents: int) -> None:
    with sqlite3.connect(DB["path"]) as db:
        db.execute("UPDATE balance SET cents = ? WHERE account = ?", (cents, account))


async def deposit(cents: int, late: bool) -> None:
    if late and not INTERLEAVE["on"]:
        for _ in range(3):
            await asyncio.sleep(0)
    balance = await read_balance("acme")
    if INTERLEAVE["on"]:
        await asyncio.sleep(0)
    await write_balance("acme", balance + cents)


async def _deposits() -> dict[str, int]:
    with sqlite3.connect(DB["path"]) as db:
        db.execute("CREATE TABLE IF NOT EXISTS balance (account TEXT PRIMARY KEY, cents INT)")
        db.execute("INSERT OR REPLACE INTO balance VALUES ('acme', 100)")
    await asyncio.gather(
        asyncio.create_task(deposit(10, late=False), name="payer-a"),
        asyncio.create_task(deposit(10, late=True), name="payer-b"),
    )
    with sqlite3.connect(DB["path"]) as db:
        (cents,) = db.execute("SELECT cents FROM balance").fetchone()
    return {"balance": int(cents)}


def deposits() -> dict[str, int]:
    return asyncio.run(_deposits())


def _capture_race(store: DirectoryStore, tmp_path: Path) -> str:
    DB["path"] = tmp_path / "bank.sqlite"
    INTERLEAVE["on"] = True
    try:
        with capture.run(
            "async-race",
            store=store,
            seed=1,
            entrypoint=Entrypoint(kind="callable", target=f"{__name__}:deposits"),
            packages=False,
        ) as rec:
            result = deposits()
            rec.set_result(result)
            rec.mark_failed("lost update", ResultPredicate(path="balance", op="ne", value=120))
    finally:
        INTERLEAVE["on"] = False
    assert result == {"balance": 110}
    return rec.run_id


def test_racing_tasks_reproduce_in_the_recorded_order(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path / "store")
    run_id = _capture_race(store, tmp_path)
    recorded = [(e.task, e.name) for e in store.load_events(run_id) if isinstance(e, ToolCall)]
    assert recorded == [
        ("payer-a", "read_balance"),
        ("payer-b", "read_balance"),
        ("payer-a", "write_balance"),
        ("payer-b", "write_balance"),
    ]
    assert deposits() == {"balance": 120}  # the code as replayed does not race by itself

    enforced = replay(run_id, store=store, times=3)
    assert enforced.verdict.reproduced == 3, enforced.describe()
    assert enforced.divergences == [None, None, None], enforced.describe()
    replayed = [
        (e.task, e.name) for e in store.load_events(enforced.replays[0]) if isinstance(e, ToolCall)
    ]
    assert replayed == recorded

    free = replay(run_id, store=store, times=3, enforce_order=False)
    assert free.verdict.reproduced == 0, free.describe()
    assert free.divergences[0] is not None


def test_async_turnstile_gives_up_when_a_predecessor_never_comes() -> None:
    recording = [
        ToolCall(seq=i, task=task, name=name, wall=0.0, mono=0.0, span=i)
        for i, (task, name) in enumerate([("a", "x"), ("b", "y")])
    ]
    gate = Turnstile(recording, timeout=0.05)

    async def late_b() -> int | None:
        return await gate.aenter("b", "tool", "y")

    start = time.monotonic()
    position = asyncio.run(late_b())
    assert position == 1 and gate.stalls == 1 and not gate.active
    assert time.monotonic() - start < 2


CALLS: list[int] = []
SLOW = {"on": False}


@capture.tool
async def charge(order: str) -> str:
    CALLS.append(len(CALLS))
    return order


async def _pay() -> dict[str, object]:
    attempts = {"n": 0}

    async def attempt() -> str:
        attempts["n"] += 1
        await charge("order-7")
        if SLOW["on"] and attempts["n"] == 1:
            raise TimeoutError("gateway took too long")
        return "ok"

    retrying = capture.AsyncRetrying(
        "pay",
        stop=tenacity.stop_after_attempt(3),
        wait=tenacity.wait_fixed(30),
        retry=tenacity.retry_if_exception_type(TimeoutError),
        reraise=True,
    )
    status = await retrying(attempt)
    return {"status": status, "charges": attempts["n"]}


def pay() -> dict[str, object]:
    with capture.task_scope("payer"):  # a stable task id (asyncio numbers its tasks)
        return asyncio.run(_pay())


def test_async_retry_fault_is_injected_again(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    SLOW["on"] = True
    undo = capture.retry.virtual_async_sleep(lambda s: None)  # no 30 s wait at capture
    try:
        with capture.run(
            "async-pay",
            store=store,
            seed=2,
            entrypoint=Entrypoint(kind="callable", target=f"{__name__}:pay"),
            packages=False,
        ) as rec:
            rec.set_result(pay())
            rec.mark_failed("charged twice", ResultPredicate(path="charges", op="gt", value=1))
    finally:
        undo()
        SLOW["on"] = False
    CALLS.clear()
    start = time.monotonic()
    report = replay(rec.run_id, store=store, times=2)
    assert time.monotonic() - start < 10  # the 30 s retry waits were virtual
    assert report.verdict.reproduced == 2, report.describe()
    assert report.divergences == [None, None], report.describe()
    assert any("pay attempt 1" in line and "ran" in line for line in report.injected)
    assert len(CALLS) == 4  # the committed first attempt ran live, then failed as recorded


JOB_LOOPS: list[asyncio.AbstractEventLoop] = []
"""The event loop each call of ``refund_job`` ran on."""


@capture.run("refund-job", packages=False, services="none")
async def refund_job(order: str) -> dict[str, str]:
    """An async task (an arq job, say) whose module-level clients live on the loop they were
    first used on."""
    JOB_LOOPS.append(asyncio.get_running_loop())
    capture.mark_failed(f"refunded {order} twice")
    return {"order": order}


def test_an_async_task_replays_on_one_event_loop_for_the_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every replay of an ``async def`` entrypoint runs on one loop that stays open (as a
    worker's does), so a client the task made on it at the first serves the next (a loop per
    replay closed it under the next: ``Event loop is closed``)."""
    monkeypatch.setenv("SANDBOX_STORE", str(tmp_path / "store"))
    store = DirectoryStore(tmp_path / "store")
    assert asyncio.run(refund_job("o-1")) == {"order": "o-1"}
    (manifest,) = store.list()
    JOB_LOOPS.clear()
    report = replay(manifest.run_id, store=store, times=3)
    assert report.verdict.reproduced == 3, report.describe()
    assert len(JOB_LOOPS) == 3 and all(loop is JOB_LOOPS[0] for loop in JOB_LOOPS)
    assert JOB_LOOPS[0].is_running()
