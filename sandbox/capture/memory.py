"""Agent memory reads and writes through the seam (``memory`` events)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Emitter, Outcome
from sandbox.snapshot.events import Event, MemoryOp

T = TypeVar("T")


class MemoryAdapter:
    """Records the key and the value read or written; replay hands back the value read."""

    def __init__(self, op: Literal["read", "write", "delete"], key: str, value: Any = None):
        self.op = op
        self.key = key
        self.value = value

    def record(self, call: Call, outcome: Outcome[Any], emitter: Emitter) -> Any:
        shown = outcome.value if self.op == "read" else self.value
        value, blob = emitter.jsonable(shown)
        if blob is not None:
            value = {"blob": blob.sha256}
        emitter.emit(MemoryOp, call, op=self.op, key=self.key, value=value)
        return outcome.value

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        assert isinstance(event, MemoryOp)
        value = event.value
        if isinstance(value, dict) and set(value) == {"blob"}:
            return json.loads(blobs(str(value["blob"])))
        return value


def memory_read(key: str, fetch: Callable[[], T]) -> T:
    """``fetch()`` the value under ``key`` from the agent's memory, recording it."""
    value: T = boundary.through(
        "memory", key, {"op": "read", "key": key}, fetch, MemoryAdapter("read", key)
    )
    return value


def memory_write(key: str, value: T, commit: Callable[[T], object] | None = None) -> None:
    """Record a write of ``value`` under ``key``; ``commit(value)`` performs it."""

    def perform() -> None:
        if commit is not None:
            commit(value)

    from sandbox.capture.recorder import jsonable_value

    boundary.through(
        "memory",
        key,
        {"op": "write", "key": key, "value": jsonable_value(value)},
        perform,
        MemoryAdapter("write", key, value),
    )


def memory_delete(key: str, commit: Callable[[], object] | None = None) -> None:
    def perform() -> None:
        if commit is not None:
            commit()

    boundary.through(
        "memory", key, {"op": "delete", "key": key}, perform, MemoryAdapter("delete", key)
    )


async def amemory_read(key: str, fetch: Callable[[], Awaitable[T]]) -> T:
    value: T = await boundary.athrough(
        "memory", key, {"op": "read", "key": key}, fetch, MemoryAdapter("read", key)
    )
    return value


async def amemory_write(
    key: str, value: T, commit: Callable[[T], Awaitable[object]] | None = None
) -> None:
    async def perform() -> None:
        if commit is not None:
            await commit(value)

    from sandbox.capture.recorder import jsonable_value

    await boundary.athrough(
        "memory",
        key,
        {"op": "write", "key": key, "value": jsonable_value(value)},
        perform,
        MemoryAdapter("write", key, value),
    )
