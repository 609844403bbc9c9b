"""How much of the recorded run a replayed run exercised, and what it raised that the
recording did not.

A run that completed without the failure is *gone* only when it exercised the recorded run:
an agent that catches its own error (a ``KeyError`` for a variable, a refused connection),
makes none of the recorded calls and returns a polite answer proves nothing about the bug.
A run that made none of them but read or wrote the restored state (a fix that reads the
database where the run read a stale cache, and so never asks the model) did exercise it:
the state the failure came from. The state used is told by the services themselves
(Postgres: the restored tables whose statistics counters moved, not its catalogs nor a
statement that failed, :class:`~sandbox.services.base.UsedState`) or by the clients
(Redis: the commands answered, :func:`sandbox.seam.clients.answered`).

**Coverage** counts the recorded boundary calls the agent made (model, tool, retrieval, memory
and HTTP calls, retry attempts; a call made inside another is part of it, and the HTTP
exchange that carries a model call is that call) that the replay made again, aligned as
:func:`~sandbox.replay.judging.divergence.first_divergence` aligns them: the k-th call of ``(task,
kind, name)`` in the recording is made when the replay has a k-th one. A fix that
legitimately takes a shorter path makes fewer of them.

**Raised** lists the replayed calls that raised an exception the recording's call did not (a
live tool that reads a variable the replay lacks): the run went on, so the agent caught it.
One that stands where the recorded run made a call (the recording has a k-th call there)
means the replay did not do what the capture did at that step.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.snapshot.events import ErrorInfo, Event

CALL_KINDS = frozenset({"llm", "tool", "retrieval", "memory", "http", "retry"})
"""Kinds of event that are a call across the boundary (clock reads and random draws are values
served, timeouts notes on an attempt, states and results outcomes)."""

StreamKey = tuple[str, str, str]


def _key(event: Event) -> StreamKey:
    return event.task, event.kind, event.name


def boundary_calls(events: Sequence[Event]) -> tuple[Event, ...]:
    """The calls of a log the agent made itself, in order: a call made inside another (an
    HTTP request inside a tool) is part of that call, and the HTTP exchange that carries a
    model call is that model call."""
    spans = {e.span: e for e in events if e.kind in CALL_KINDS and e.span is not None}
    carried = {e.parent_span for e in events if e.kind == "llm" and e.parent_span in spans}

    def enclosing(event: Event) -> int | None:
        if event.kind == "llm" and event.parent_span in carried:
            return spans[event.parent_span].parent_span  # the carrier's enclosing call
        return event.parent_span

    return tuple(
        e
        for e in events
        if e.kind in CALL_KINDS
        and not (e.kind == "http" and e.span in carried)
        and enclosing(e) not in spans
    )


def _bare(type_name: str) -> str:
    """A type's name without its module: a recorded fault raised again may be a stand-in
    class of the same name (:mod:`sandbox.replay.conditions.faults`)."""
    return type_name.rsplit(".", 1)[-1]


def raised_types(events: Sequence[Event]) -> frozenset[str]:
    """The exception types (bare names) a log records, on its calls and its final result."""
    return frozenset(
        _bare(error.type) for e in events if (error := getattr(e, "error", None)) is not None
    )


@dataclass(frozen=True)
class Coverage:
    """Recorded boundary calls the replay made again, of those recorded, and the restored
    state it used when it made none of them."""

    made: int
    recorded: int
    state: tuple[str, ...] = ()
    """What of the restored state the replay read or wrote, described (``"db read table
    public.users"``, ``"2 Redis commands answered"``); only looked for when it made none of
    the recorded calls."""

    @property
    def nothing(self) -> bool:
        """The recording made calls, the replay made none of them, and used none of the
        restored state."""
        return self.recorded > 0 and self.made == 0 and not self.state

    def describe(self) -> str:
        """``18/20 recorded calls made``; with none made, the restored state used, if any
        (``0/1 recorded calls made; the restored state used: db read table public.users``)."""
        calls = f"{self.made}/{self.recorded} recorded calls made"
        if self.made or not self.state:
            return calls
        return f"{calls}; the restored state used: {', '.join(self.state)}"

    def to_json(self) -> dict[str, Any]:
        return {"made": self.made, "recorded": self.recorded, "state": list(self.state)}


@dataclass(frozen=True)
class Raised:
    """An exception a replayed call raised where the recording's did not."""

    call: str
    """``tool lookup #1``: the kind, the name and which call of that name."""
    error: ErrorInfo
    at_recorded: bool
    """The recorded run made this call (and it did not raise this there)."""


def exercised(
    recorded: Sequence[Event],
    replayed: Sequence[Event],
    captured_errors: Collection[str] = (),
    *,
    state: Sequence[str] = (),
) -> tuple[Coverage, tuple[Raised, ...]]:
    """The coverage of ``recorded`` calls by ``replayed`` ones (both :func:`boundary_calls`;
    ``state``: the restored state used, described), and the replayed calls that
    raised what the capture did not: their recorded counterpart did not raise that type, or
    (a call the recording lacks) no recorded event raised it (``captured_errors``:
    :func:`raised_types`). Types are compared by their bare names."""
    lengths = Counter(map(_key, recorded))
    by_stream: dict[StreamKey, list[Event]] = defaultdict(list)
    for event in recorded:
        by_stream[_key(event)].append(event)
    seen: dict[StreamKey, int] = defaultdict(int)
    raised: list[Raised] = []
    for event in replayed:
        key = _key(event)
        k = seen[key]
        seen[key] = k + 1
        error: ErrorInfo | None = getattr(event, "error", None)
        if error is None:
            continue
        counterpart = by_stream[key][k] if k < lengths[key] else None
        if counterpart is None:
            if _bare(error.type) in captured_errors:
                continue
        else:
            before: ErrorInfo | None = getattr(counterpart, "error", None)
            if before is not None and _bare(before.type) == _bare(error.type):
                continue
        call = f"{event.kind} {event.name or '(unnamed)'} #{k + 1}"
        raised.append(Raised(call, error, at_recorded=counterpart is not None))
    made = sum(min(n, seen.get(key, 0)) for key, n in lengths.items())
    return Coverage(made, len(recorded), tuple(state)), tuple(raised)
