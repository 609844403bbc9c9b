"""The semantic view ignores exactly the volatile fields, and the fast comparison reads every
field the view reads (otherwise a divergence could be missed)."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.replay.judging.divergence import same_meaning
from sandbox.replay.judging.semantics import RAW_GETTERS, semantic_view
from sandbox.snapshot.events import (
    EVENT_ADAPTER,
    BlobRef,
    ErrorInfo,
    Event,
    RetrievedDoc,
)

IGNORED = {
    "seq",
    "served",
    "parent",
    "wall",
    "mono",
    "fingerprint",
    "duration",
    "started",
    "usage",
    "provider_meta",
    "streamed",
    "response_headers",
    "wait",
    "after",
    "provider",
    "template",
    "variables",
    "tool_schema",
    "task",
    "span",
    "parent_span",
    "mcp",
}
"""Fields replay does not compare. ``task`` aligns streams; ``template`` and ``variables``
resolve into ``messages``, which are compared; ``tool_schema`` is the code's, not the run's;
``mcp`` (server, method, transport) is in the name already, but for the transport, which
moves between machines."""

SAMPLES: dict[str, dict[str, Any]] = {
    "llm": {"messages": [{"role": "user", "content": "hi"}], "response": "yo"},
    "tool": {"args": {"a": 1}, "output": 1},
    "retrieval": {"query": "q"},
    "memory": {"op": "read", "key": "k", "value": 1},
    "http": {"method": "GET", "url": "https://x.test/", "status": 200},
    "clock": {"value": 1.0},
    "random": {"source": "uuid4", "value": "u"},
    "retry": {"outcome": "error"},
    "timeout": {"after": 1.0},
    "state": {"target": "done"},
    "result": {"value": 1},
}

SHA = "a" * 64


def changed(field: str, value: Any) -> Any:
    if field in {"error"}:
        return ErrorInfo(type="Changed", message="changed")
    if field.endswith("blob"):
        return BlobRef(sha256=SHA, size=1)
    if field == "documents":
        return [RetrievedDoc(id="d", sha256=SHA)]
    if field == "op":
        return "write"
    if field == "outcome":
        return "success"
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    if isinstance(value, str):
        return value + "-changed"
    if isinstance(value, dict):
        return {**value, "changed": "1"}
    if isinstance(value, list):
        return [*value, "changed"]
    return 7  # None-valued fields: attempt, seed, status, committed, parent, source ...


def event_of(kind: str) -> Event:
    base = {"seq": 1, "wall": 1.0, "mono": 1.0, "name": "n", "kind": kind}
    return EVENT_ADAPTER.validate_python({**base, **SAMPLES[kind]})


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_every_field_is_compared_or_deliberately_ignored(kind: str) -> None:
    event = event_of(kind)
    for field in type(event).model_fields:
        if field == "kind":
            continue
        other = event.model_copy(update={field: changed(field, getattr(event, field))})
        view_differs = semantic_view(event) != semantic_view(other)
        if field in IGNORED:
            assert not view_differs, f"{kind}.{field} is meant to be ignored"
            assert same_meaning(event, other)
        elif kind == "memory" and field == "value":
            continue  # compared as the read's response (checked below)
        else:
            assert view_differs, f"{kind}.{field} is neither compared nor ignored"
            getter = RAW_GETTERS[kind]
            assert getter(event) != getter(other), f"fast path misses {kind}.{field}"
            assert not same_meaning(event, other)


def test_memory_value_is_a_read_response_and_a_write_request() -> None:
    read = event_of("memory")
    assert semantic_view(read)["response"] == {"value": 1}
    write = read.model_copy(update={"op": "write"})
    assert semantic_view(write)["request"] == {"op": "write", "key": "k", "value": 1}
    assert not same_meaning(write, write.model_copy(update={"value": 2}))
