"""Retries and timeouts through tenacity, with an injected sleep (nothing really sleeps)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import tenacity

from sandbox import capture
from sandbox.snapshot.events import RetryAttempt, Timeout, ToolCall
from sandbox.snapshot.store import DirectoryStore


def test_first_attempt_times_out_after_committing_second_succeeds(store: DirectoryStore) -> None:
    slept: list[float] = []
    charges: list[int] = []

    @capture.tool
    def charge(order: int) -> str:
        charges.append(order)
        return f"charged {order}"

    def pay(order: int) -> str:
        receipt = charge(order)
        if len(charges) == 1:
            raise TimeoutError("gateway did not confirm in 2s")
        return receipt

    retrying = capture.retrying(
        "pay",
        stop=tenacity.stop_after_attempt(3),
        wait=tenacity.wait_fixed(1.5),
        sleep=slept.append,
    )
    with capture.run("retry", store=store, seed=1) as rec:
        assert retrying(pay, 7) == "charged 7"
    assert slept == [1.5] and charges == [7, 7]  # the bug: charged twice

    events = store.load_events(rec.run_id)
    attempts = [e for e in events if isinstance(e, RetryAttempt)]
    assert [(a.attempt, a.outcome, a.wait) for a in attempts] == [
        (1, "error", 1.5),
        (2, "success", 0.0),
    ]
    assert attempts[0].error is not None and attempts[0].error.type == "TimeoutError"
    assert "did not confirm" in attempts[0].error.message
    assert attempts[0].name == "retry:pay"
    assert attempts[0].policy["stop"] == {"type": "stop_after_attempt", "max_attempt_number": 3}
    assert attempts[0].policy["wait"] == {"type": "wait_fixed", "wait_fixed": 1.5}
    (timeout,) = [e for e in events if isinstance(e, Timeout)]
    assert timeout.attempt == 1 and timeout.committed is True
    assert timeout.parent_span == attempts[0].span
    tools = [e for e in events if isinstance(e, ToolCall)]
    assert [t.attempt for t in tools] == [1, 2]
    assert tools[0].parent_span == attempts[0].span and tools[1].parent_span == attempts[1].span
    # Order in the log: tool(1), timeout(1), retry(1), tool(2), retry(2).
    kinds = [e.kind for e in events if e.kind in {"tool", "timeout", "retry"}]
    assert kinds == ["tool", "timeout", "retry", "tool", "retry"]


def test_explicit_timeout_and_final_failure(store: DirectoryStore) -> None:
    slept: list[float] = []

    def flaky() -> None:
        capture.timeout(after=30.0, committed=False)
        raise TimeoutError("upstream slow")

    retrying = capture.retrying(
        "flaky",
        stop=tenacity.stop_after_attempt(2),
        wait=tenacity.wait_exponential(multiplier=1, min=2, max=10),
        sleep=slept.append,
        reraise=True,
    )
    with pytest.raises(TimeoutError), capture.run("retry-fail", store=store, seed=1) as rec:
        retrying(flaky)
    events = store.load_events(rec.run_id)
    timeouts = [e for e in events if isinstance(e, Timeout)]
    assert [(t.attempt, t.after, t.committed) for t in timeouts] == [
        (1, 30.0, False),
        (2, 30.0, False),
    ]
    attempts = [e for e in events if isinstance(e, RetryAttempt)]
    assert [(a.attempt, a.outcome, a.wait) for a in attempts] == [
        (1, "error", 2.0),
        (2, "error", 0.0),
    ]
    assert slept == [2.0]
    assert store.load_manifest(rec.run_id).failure is not None


def test_async_retrying(store: DirectoryStore) -> None:
    calls: list[int] = []

    async def asleep(seconds: float) -> None:
        calls.append(-1)

    async def work() -> str:
        calls.append(1)
        if len([c for c in calls if c == 1]) < 2:
            raise ConnectionError("reset")
        return "ok"

    retrying = capture.AsyncRetrying(
        "awork", stop=tenacity.stop_after_attempt(3), wait=tenacity.wait_fixed(0.5), sleep=asleep
    )

    async def main() -> Any:
        return await retrying(work)

    with capture.run("aretry", store=store, seed=1) as rec:
        assert asyncio.run(main()) == "ok"
    attempts = [e for e in store.load_events(rec.run_id) if isinstance(e, RetryAttempt)]
    assert [(a.attempt, a.outcome, a.wait) for a in attempts] == [
        (1, "error", 0.5),
        (2, "success", 0.0),
    ]
    assert attempts[0].error is not None and attempts[0].error.type == "ConnectionError"


def test_plain_tenacity_is_recorded_without_wrapping(store: DirectoryStore) -> None:
    """``@tenacity.retry`` (sync and async) and ``for``/``async for`` loops over tenacity's own
    classes: one ``retry`` event per attempt, and calls inside see the attempt number."""
    fails = {"book": 1, "loop": 2, "abook": 1, "aloop": 1}
    fast: dict[str, Any] = {
        "stop": tenacity.stop_after_attempt(4),
        "wait": tenacity.wait_fixed(0.001),
    }

    @capture.tool
    def lookup(what: str) -> str:
        return what

    def flaky(what: str) -> str:
        lookup(what)  # a tool call inside the attempt
        if fails[what] > 0:
            fails[what] -= 1
            raise ConnectionError(what)
        return what

    @tenacity.retry(**fast)
    def book() -> str:
        return flaky("book")

    @tenacity.retry(**fast)
    async def abook() -> str:
        return flaky("abook")

    def loop() -> None:
        for attempt in tenacity.Retrying(**fast):
            with attempt:
                flaky("loop")

    async def aloop() -> None:
        async for attempt in tenacity.AsyncRetrying(**fast):
            with attempt:
                flaky("aloop")

    async def both() -> None:
        await abook()
        await aloop()

    with capture.run("plain", store=store, packages=False) as rec:
        book()
        loop()
        asyncio.run(both())
    events = store.load_events(rec.run_id)
    attempts = [(e.name, e.attempt, e.outcome) for e in events if isinstance(e, RetryAttempt)]
    here = f"retry:{__name__}.test_plain_tenacity_is_recorded_without_wrapping.<locals>"
    assert attempts == [
        (f"{here}.book", 1, "error"),
        (f"{here}.book", 2, "success"),
        (f"{here}.loop", 1, "error"),
        (f"{here}.loop", 2, "error"),
        (f"{here}.loop", 3, "success"),
        (f"{here}.abook", 1, "error"),
        (f"{here}.abook", 2, "success"),
        (f"{here}.aloop", 1, "error"),
        (f"{here}.aloop", 2, "success"),
    ]
    tools = [e.attempt for e in events if isinstance(e, ToolCall)]
    assert tools == [1, 2, 1, 2, 3, 1, 2, 1, 2]
    assert next(e for e in events if isinstance(e, RetryAttempt)).wait == pytest.approx(0.001)
