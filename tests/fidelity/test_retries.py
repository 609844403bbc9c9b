"""tenacity as people use it, with no sandbox wrapper: ``@tenacity.retry`` and ``for attempt
in Retrying(...)``. The first attempt times out after the server committed it; the retry
commits it again. Capture records each attempt; replay reproduces the duplicate every time,
with the same attempts (the timeout served from the recording)."""

from __future__ import annotations

import threading
import time

from sandbox.snapshot.events import RetryAttempt
from sandbox.snapshot.store import DirectoryStore
from tests.fidelity import harness


def slow_first(collection: str) -> harness.Handler:
    """A service whose first write commits, then answers too late for the client."""
    rows: list[dict[str, object]] = []
    lock = threading.Lock()

    def handle(path: str, body: dict[str, object]) -> tuple[int, object]:
        if path.endswith("/list"):
            return 200, {collection: [r for r in rows if r.items() >= body.items()]}
        with lock:
            rows.append(dict(body))
            first = len(rows) == 1
        if first:
            time.sleep(1.0)  # committed, but the client gave up at 0.3 s
        return 201, {"id": len(rows)}

    return handle


def attempts(events: list[object]) -> list[tuple[str, int | None, str, str | None]]:
    return [
        (e.name, e.attempt, e.outcome, e.error.type if e.error else None)
        for e in events
        if isinstance(e, RetryAttempt)
    ]


def _capture_and_replay(
    store: DirectoryStore, agent: str, env_name: str, collection: str, loop: str
) -> None:
    with harness.service(slow_first(collection), agent) as url:
        run = harness.capture(store, agent, harness.base_env(**{env_name: url}))
    assert run.manifest.failure is not None, run.output
    assert "2 " in run.manifest.failure.reason
    recorded = attempts(run.events)
    assert recorded == [
        (loop, 1, "error", "httpx.ReadTimeout"),
        (loop, 2, "success", None),
    ]

    result = harness.replay(store, run.run_id)

    harness.assert_reproduced_every_time(result)
    for events in harness.replayed_runs(store, result):
        assert attempts(events) == recorded


def test_tenacity_retry_decorator_is_recorded_and_replayed(store: DirectoryStore) -> None:
    _capture_and_replay(store, "hotel_booking", "HOTEL_URL", "bookings", "retry:__main__.book")


def test_tenacity_retrying_loop_is_recorded_and_replayed(store: DirectoryStore) -> None:
    _capture_and_replay(store, "card_charge", "PAYMENTS_URL", "charges", "retry:__main__.main")


def test_tenacity_retry_fails_again_as_recorded_when_the_call_is_live(
    store: DirectoryStore,
) -> None:
    """``@tenacity.retry`` around an HTTP call that timed out once at capture, after the
    booking committed. Replayed with HTTP live against the service, now fast: attempt 1 runs
    live (it books), then fails with the recorded timeout; attempt 2 books again, and the
    duplicate is back. (Without the recorded attempt injected, attempt 1 would succeed, the
    service would see one booking, and the verdict would be a false "gone".)"""
    slow = {"on": True}
    rows: list[dict[str, object]] = []

    def handle(path: str, body: dict[str, object]) -> tuple[int, object]:
        if path.endswith("/list"):
            return 200, {"bookings": [r for r in rows if r.items() >= body.items()]}
        rows.append(dict(body))
        if slow["on"] and len(rows) == 1:
            time.sleep(1.0)  # committed, but the client gave up at 0.3 s
        return 201, {"id": len(rows)}

    with harness.service(handle, "hotel_booking") as url:
        run = harness.capture(store, "hotel_booking", harness.base_env(HOTEL_URL=url))
        recorded = attempts(run.events)
        assert recorded == [
            ("retry:__main__.book", 1, "error", "httpx.ReadTimeout"),
            ("retry:__main__.book", 2, "success", None),
        ]
        slow["on"] = False
        rows.clear()

        result = harness.replay(store, run.run_id, None, "--live", "http", times=1)

        written = list(rows)
    assert written == [{"guest": "ada", "night": "2024-03-01"}] * 2, result.output
    harness.assert_reproduced_every_time(result, times=1)
    assert result.report["injected"] == [
        "retry:__main__.book attempt 1: httpx.ReadTimeout: timed out"
        " (the attempt ran, then failed as recorded)"
    ]
    (events,) = harness.replayed_runs(store, result)
    assert attempts(events) == recorded
