"""The seam replay builds on: a boundary that serves the recording instead of the world.

This tiny replayer is test code: it shows that the recorded events plus each adapter's
``replay`` are enough to hand back the same tool outputs, ids, times and HTTP responses.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import pytest

from sandbox import capture
from sandbox.capture.http import patch_httpx
from sandbox.capture.ids import patch_uuid4
from sandbox.seam import boundary
from sandbox.seam.boundary import Adapter, Call, SpanAllocator, open_call
from sandbox.snapshot.events import Event
from sandbox.snapshot.normalize import request_fingerprint
from sandbox.snapshot.store import DirectoryStore

T = TypeVar("T")


class ServeRecorded:
    """Serves each crossing with the next recorded event of the same kind and fingerprint."""

    names_by_origin = True

    def __init__(self, store: DirectoryStore, run_id: str) -> None:
        self.store = store
        self.spans = SpanAllocator()
        self.queues: dict[tuple[str, str], deque[Event]] = defaultdict(deque)
        for event in store.load_events(run_id):
            if event.fingerprint is not None:
                self.queues[(event.kind, event.fingerprint)].append(event)
        self.live: list[str] = []

    def open(self, kind: str, name: str, request: Any) -> Call:
        return open_call(self.spans, kind, name, request, 0.0)

    def call(self, call: Call, perform: Callable[[], T], adapter: Adapter[T]) -> T:
        queue = self.queues.get((call.kind, call.fingerprint))
        if not queue:
            self.live.append(call.name)
            return perform()
        return adapter.replay(call, queue.popleft(), self.store.get_blob)

    async def acall(
        self, call: Call, perform: Callable[[], Awaitable[T]], adapter: Adapter[T]
    ) -> T:
        queue = self.queues.get((call.kind, call.fingerprint))
        if not queue:
            return await perform()
        return adapter.replay(call, queue.popleft(), self.store.get_blob)


def test_a_replay_boundary_serves_recorded_responses(store: DirectoryStore, fake_api: Any) -> None:
    counter = {"n": 0}

    @capture.tool
    def next_ticket(prefix: str) -> str:
        counter["n"] += 1
        return f"{prefix}-{counter['n']}"

    @capture.tool
    def fails() -> None:
        raise PermissionError("denied")

    def agent() -> tuple[Any, ...]:
        with httpx.Client() as client:
            body = client.get(f"{fake_api.url}/status").json()
        try:
            fails()
        except Exception as exc:
            error = str(exc)
        return (
            next_ticket("T"),
            next_ticket("T"),
            str(__import__("uuid").uuid4()),
            capture.now(),
            body,
            error,
        )

    with capture.run("seam", store=store, seed=8) as rec:
        recorded = agent()
    assert isinstance(boundary.current(), type(None))
    hits = len(fake_api.requests)

    replayer = ServeRecorded(store, rec.run_id)
    undo = [patch_uuid4(seed=999), patch_httpx()]  # a different seed: ids come from the log
    try:
        with boundary.use(replayer):
            replayed = agent()
    finally:
        for u in undo:
            u()
    assert replayed[:5] == recorded[:5]
    assert replayed[5] == "PermissionError: denied"  # the recorded error, raised again
    assert counter["n"] == 2  # the tool was not run again
    assert len(fake_api.requests) == hits  # nor the HTTP request made
    assert replayer.live == []


def test_nothing_installed_means_plain_calls() -> None:
    assert boundary.current() is None
    assert boundary.through("tool", "x", {}, lambda: 41 + 1, None) == 42  # type: ignore[arg-type]
    with pytest.raises(ZeroDivisionError):
        boundary.through("tool", "x", {}, lambda: 1 / 0, None)  # type: ignore[arg-type]


def test_an_opened_call_is_the_frozen_dataclass_its_fields_make() -> None:
    """open_call fills a Call without its __init__: it equals the one the dataclass makes
    of the same fields, field for field, and stays frozen."""
    spans = SpanAllocator()
    with boundary.attempt_scope(2), boundary.task_scope("worker"):
        call = open_call(spans, "tool", "lookup", {"id": 7}, 1.5)
    made = Call(**{f.name: getattr(call, f.name) for f in dataclasses.fields(Call)})
    assert call.fingerprint == made.fingerprint  # taken at once by one, when asked by the other
    assert call == made and repr(call) == repr(made) and vars(call) == vars(made)
    assert (call.span, call.task, call.attempt, call.started) == (0, "worker", 2, 1.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.name = "other"  # type: ignore[misc]


def test_a_call_takes_the_agents_request_fingerprint_as_it_opens_and_its_own_when_asked() -> None:
    """A tool's request (the agent's values) is fingerprinted as the call opens: changed
    afterwards (a tool that mutates its arguments), the fingerprint stays the one replay
    will compute from the live request. An HTTP request (built by the instrumentation from
    bytes) is fingerprinted only when asked (a held run dropped never asks), the same."""
    spans = SpanAllocator()
    args: dict[str, Any] = {"items": [1, 2]}
    tool = open_call(spans, "tool", "lookup", args, 0.0)
    args["items"].append(3)
    assert tool.fingerprint == request_fingerprint("tool", "lookup", {"items": [1, 2]})
    request = {"method": "GET", "url": "http://h/x", "body": None}
    http = open_call(spans, "http", "GET h", request, 0.0)
    assert "fingerprint" not in vars(http)
    assert http.fingerprint == request_fingerprint("http", "GET h", request)
    assert vars(http)["fingerprint"] == http.fingerprint
