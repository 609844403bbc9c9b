"""The replay engine in-process (no containers): recorded faults at the same attempts, the
turnstile with real threads, virtual retry sleeps, rebuilt exception types."""

from __future__ import annotations

import threading
import time
import types
import uuid
from pathlib import Path

import httpx
import pytest
import tenacity

from sandbox import capture
from sandbox.replay import PolicySet, ReplayPlan, replay
from sandbox.replay.conditions.faults import rebuild_error
from sandbox.replay.conditions.ordering import Turnstile
from sandbox.seam.boundary import RecordedError
from sandbox.snapshot.events import ErrorInfo, ToolCall
from sandbox.snapshot.manifest import Entrypoint, ResultPredicate
from sandbox.snapshot.store import DirectoryStore

WRITES: list[str] = []
SLOW_FIRST_ATTEMPT = {"on": False}


@capture.tool
def write(key: str) -> str:
    WRITES.append(key)
    return key


def agent() -> dict[str, object]:
    """Writes, then times out on attempt 1 when production is slow; retried by tenacity."""
    attempts = {"n": 0}

    def attempt() -> str:
        attempts["n"] += 1
        write("order")
        if SLOW_FIRST_ATTEMPT["on"] and attempts["n"] == 1:
            raise TimeoutError("gateway took too long")
        return "ok"

    retrying = capture.Retrying(
        "pay",
        stop=tenacity.stop_after_attempt(3),
        wait=tenacity.wait_fixed(30),
        retry=tenacity.retry_if_exception_type(TimeoutError),
        reraise=True,
    )
    status = retrying(attempt)
    ident = str(uuid.uuid4())
    return {"status": status, "writes": attempts["n"], "id": ident, "t": capture.now()}


def _capture(store: DirectoryStore) -> str:
    WRITES.clear()
    SLOW_FIRST_ATTEMPT["on"] = True
    real_time = tenacity.nap.time  # type: ignore[attr-defined]
    try:
        tenacity.nap.time = types.SimpleNamespace(sleep=lambda s: None)  # type: ignore[attr-defined]
        with capture.run(
            "unit",
            store=store,
            seed=3,
            entrypoint=Entrypoint(kind="callable", target=f"{__name__}:agent"),
            packages=False,
        ) as rec:
            rec.set_result(agent())
            rec.mark_failed("two writes", ResultPredicate(path="writes", op="gt", value=1))
    finally:
        tenacity.nap.time = real_time  # type: ignore[attr-defined]
        SLOW_FIRST_ATTEMPT["on"] = False
    return rec.run_id


def test_committed_timeout_is_injected_again_and_sleeps_are_virtual(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    run_id = _capture(store)
    original = store.load_events(run_id)
    WRITES.clear()
    start = time.monotonic()
    report = replay(run_id, store=store, times=2)
    assert time.monotonic() - start < 10  # two 30 s retry waits did not happen
    assert report.verdict.reproduced == 2, report.describe()
    assert report.divergences == [None, None], report.describe()
    assert any("pay attempt 1" in line and "ran" in line for line in report.injected)
    assert WRITES == ["order", "order"] * 2  # the committed attempt ran live each time
    replayed = store.load_events(report.replays[0])
    result = next(e for e in replayed if e.kind == "result")
    recorded = next(e for e in original if e.kind == "result")
    assert result.value == recorded.value  # same uuid, same clock reading


def test_tool_served_from_the_recording_does_not_run(tmp_path: Path) -> None:
    store = DirectoryStore(tmp_path)
    run_id = _capture(store)
    WRITES.clear()
    report = replay(run_id, store=store, policies=PolicySet().with_rule("recorded", "tool"))
    assert WRITES == []
    assert report.verdict.reproduced == 1, report.describe()


def test_a_plan_is_carried_out_with_options_given_by_name_over_it(tmp_path: Path) -> None:
    """``replay(run, plan, times=1)``: the plan's policies serve the tool from the recording,
    the keyword sets the number of runs over the plan's."""
    store = DirectoryStore(tmp_path)
    run_id = _capture(store)
    WRITES.clear()
    plan = ReplayPlan(times=3, policies=PolicySet().with_rule("recorded", "tool"))
    report = replay(run_id, plan, store=store, times=1)
    assert WRITES == []
    assert len(report.replays) == 1 and report.verdict.reproduced == 1, report.describe()
    assert report.policies == plan.policies.describe()


def test_rebuilt_errors_keep_their_type() -> None:
    error = rebuild_error(ErrorInfo(type="httpx.ReadTimeout", message="timed out"))
    assert isinstance(error, httpx.ReadTimeout)
    assert isinstance(rebuild_error(ErrorInfo(type="TimeoutError", message="x")), TimeoutError)
    stand_in = rebuild_error(ErrorInfo(type="nowhere.GatewayTimeout", message="late"))
    assert isinstance(stand_in, RecordedError) and isinstance(stand_in, TimeoutError)
    assert type(stand_in).__name__ == "GatewayTimeout"


def _tool(seq: int, task: str, name: str) -> ToolCall:
    return ToolCall(seq=seq, task=task, name=name, wall=0.0, mono=0.0, span=seq)


def test_turnstile_orders_real_threads_as_recorded() -> None:
    recording = [_tool(0, "b", "read"), _tool(1, "a", "read"), _tool(2, "b", "write")]
    gate = Turnstile(recording, timeout=5)
    seen: list[str] = []

    def task(name: str, calls: list[str], delay: float) -> None:
        time.sleep(delay)
        for call in calls:
            position = gate.enter(name, "tool", call)
            seen.append(f"{name}.{call}")
            gate.leave(position)

    threads = [
        threading.Thread(target=task, args=("a", ["read"], 0.0)),
        threading.Thread(target=task, args=("b", ["read", "write"], 0.05)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == ["b.read", "a.read", "b.write"]
    assert gate.stalls == 0


def test_turnstile_gives_up_when_a_predecessor_never_comes() -> None:
    gate = Turnstile([_tool(0, "a", "x"), _tool(1, "b", "y")], timeout=0.05)
    position = gate.enter("b", "tool", "y")
    gate.leave(position)
    assert gate.stalls == 1 and not gate.active


@pytest.mark.parametrize("enabled", [False])
def test_turnstile_off_or_single_task_costs_nothing(enabled: bool) -> None:
    gate = Turnstile([_tool(0, "a", "x"), _tool(1, "b", "y")], enabled=enabled)
    assert gate.enter("b", "tool", "y") is None
    assert not Turnstile([_tool(0, "a", "x"), _tool(1, "a", "y")]).active
