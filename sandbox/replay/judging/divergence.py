"""Where a replayed run first departs from the original, and how the end states differ.

**Alignment.** Each log is split into streams keyed by ``(task, kind, name)``; the k-th event
of a stream in the original is compared with the k-th event of the same stream in the replay.
Two tasks that interleave differently therefore do not diverge, while any change inside one
task's calls to one boundary does. Events are compared by their meaning
(:func:`~sandbox.replay.judging.semantics.semantic_view`): times, sequence numbers, durations and
fingerprints are ignored.

**Which divergence is first.** Walking the original in log order, the first event that is
changed or has no counterpart in the replay (``changed``, ``missing``); walking the replay,
the first event beyond the end of its stream in the original (``extra``). Of the two, the one
earlier in its own log; on a tie, the original's. For a ``missing`` or ``extra`` step the other
side shows, for context, the event at the same position in the same task.

The search is linear in the number of events: the values are compared directly first, and
normalized views and field-level diffs are built only for the divergent step.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Literal

from sandbox.replay.judging.jsondiff import MISSING, FieldDiff, format_diffs, json_diff, short
from sandbox.replay.judging.semantics import RAW_GETTERS, semantic_view
from sandbox.snapshot.events import Event
from sandbox.snapshot.manifest import ServiceState

StreamKey = tuple[str, str, str]
Reason = Literal["changed", "missing", "extra"]

_stream_key: Any = attrgetter("task", "kind", "name")


@dataclass(frozen=True)
class EventSummary:
    """One side of a divergent step: where the event sits and what it meant."""

    seq: int
    task: str
    kind: str
    name: str
    attempt: int | None
    request: Any
    response: Any

    @classmethod
    def of(cls, event: Event) -> EventSummary:
        view = semantic_view(event)
        return cls(
            event.seq,
            event.task,
            event.kind,
            event.name,
            event.attempt,
            view["request"],
            view["response"],
        )

    def line(self, width: int = 60) -> str:
        """``#12 [main] tool refund {"order": 42} -> {"output": ...}``."""
        attempt = f" (attempt {self.attempt})" if self.attempt else ""
        name = f" {self.name}" if self.name else ""
        return (
            f"#{self.seq} [{self.task}] {self.kind}{name}{attempt} "
            f"{short(self.request, width)} -> {short(self.response, width)}"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "seq": self.seq,
            "task": self.task,
            "kind": self.kind,
            "name": self.name,
            "attempt": self.attempt,
            "request": self.request,
            "response": self.response,
        }


@dataclass(frozen=True)
class Divergence:
    """The first divergent step, expected (original) and actual (replay) side by side."""

    reason: Reason
    step: int
    """Index of the step in the original log (``changed``, ``missing``) or in the replay
    (``extra``)."""
    stream: StreamKey
    occurrence: int
    """Which event of the stream (0 for the first)."""
    expected: EventSummary | None
    actual: EventSummary | None
    diffs: tuple[FieldDiff, ...] = field(default=())
    """Field-level differences between the two sides' semantic views."""

    def describe(self) -> str:
        task, kind, name = self.stream
        what = f"{kind} {name!r}" if name else kind
        nth = f"call #{self.occurrence + 1} of {what} in task {task!r}"
        head = {
            "changed": f"step {self.step}: {nth} differs",
            "missing": f"step {self.step}: the replay never made {nth}",
            "extra": f"replay step {self.step}: {nth} was not in the original",
        }[self.reason]
        lines = [
            head,
            f"  expected: {self.expected.line() if self.expected else '(nothing)'}",
            f"  actual:   {self.actual.line() if self.actual else '(nothing)'}",
        ]
        if self.diffs:
            lines.append(format_diffs(list(self.diffs), indent="    "))
        return "\n".join(lines)

    def to_json(self) -> dict[str, object]:
        return {
            "reason": self.reason,
            "step": self.step,
            "stream": list(self.stream),
            "occurrence": self.occurrence,
            "expected": self.expected.to_json() if self.expected else None,
            "actual": self.actual.to_json() if self.actual else None,
            "diffs": [d.to_json() for d in self.diffs],
        }


def same_meaning(a: Event, b: Event) -> bool:
    """Whether two events mean the same (see :func:`semantic_view`)."""
    if a.kind != b.kind:
        return False
    get = RAW_GETTERS[a.kind]
    if get(a) == get(b):
        return True
    return not json_diff(semantic_view(a), semantic_view(b))


def event_diffs(expected: Event, actual: Event) -> tuple[FieldDiff, ...]:
    return tuple(json_diff(semantic_view(expected), semantic_view(actual)))


def first_divergence(
    original: Sequence[Event],
    replayed: Sequence[Event],
    *,
    ignore_kinds: Collection[str] = (),
) -> Divergence | None:
    """The first step where ``replayed`` departs from ``original``, or ``None``."""
    if ignore_kinds:
        skip = frozenset(ignore_kinds)
        original = [e for e in original if e.kind not in skip]
        replayed = [e for e in replayed if e.kind not in skip]
    streams: dict[StreamKey, list[Event]] = defaultdict(list)
    for event in replayed:
        streams[_stream_key(event)].append(event)

    found: tuple[int, Reason, StreamKey, int, Event, Event | None] | None = None
    seen: dict[StreamKey, int] = defaultdict(int)
    empty: list[Event] = []
    for i, event in enumerate(original):
        key = _stream_key(event)
        k = seen[key]
        seen[key] = k + 1
        lst = streams.get(key, empty)
        if k >= len(lst):
            found = (i, "missing", key, k, event, None)
            break
        other = lst[k]
        if not same_meaning(event, other):
            found = (i, "changed", key, k, event, other)
            break

    # Extras: replayed events beyond the length of their stream in the original. Only the
    # part of the replay before the original-side divergence can win, so stop there.
    totals = Counter(map(_stream_key, original))
    horizon = found[0] if found is not None else len(replayed)
    extra: tuple[int, StreamKey, int, Event] | None = None
    counts: dict[StreamKey, int] = defaultdict(int)
    for j, event in enumerate(replayed):
        if j >= horizon:
            break
        key = _stream_key(event)
        k = counts[key]
        counts[key] = k + 1
        if k >= totals.get(key, 0):
            extra = (j, key, k, event)
            break

    if extra is not None:
        j, key, k, added = extra
        context = _same_task_position(original, replayed, j)
        return _build("extra", j, key, k, context, added)
    if found is None:
        return None
    i, reason, key, k, expected, counterpart = found
    if counterpart is None:
        counterpart = _same_task_position(replayed, original, i)
    return _build(reason, i, key, k, expected, counterpart)


def unmatched_steps(a: Sequence[Event], b: Sequence[Event]) -> tuple[list[Event], list[Event]]:
    """The steps only one log has, aligned as :func:`first_divergence` aligns them: the k-th
    event of a stream ``(task, kind, name)`` in ``a`` beyond that stream's length in ``b``,
    and the other way round."""
    return _beyond(a, Counter(map(_stream_key, b))), _beyond(b, Counter(map(_stream_key, a)))


def _beyond(events: Sequence[Event], lengths: Counter[StreamKey]) -> list[Event]:
    seen: dict[StreamKey, int] = defaultdict(int)
    out: list[Event] = []
    for event in events:
        key = _stream_key(event)
        seen[key] += 1
        if seen[key] > lengths.get(key, 0):
            out.append(event)
    return out


def _same_task_position(
    target: Sequence[Event], source: Sequence[Event], index: int
) -> Event | None:
    """The event of ``target`` at the same position within its task as ``source[index]``."""
    task = source[index].task
    position = sum(1 for e in source[:index] if e.task == task)
    for event in target:
        if event.task == task:
            if position == 0:
                return event
            position -= 1
    return None


def _build(
    reason: Reason,
    step: int,
    key: StreamKey,
    occurrence: int,
    expected: Event | None,
    actual: Event | None,
) -> Divergence:
    diffs = event_diffs(expected, actual) if expected and actual else ()
    return Divergence(
        reason=reason,
        step=step,
        stream=key,
        occurrence=occurrence,
        expected=EventSummary.of(expected) if expected else None,
        actual=EventSummary.of(actual) if actual else None,
        diffs=diffs,
    )


# --- end states ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StateDiff:
    """A difference in one service's end state (a row, key or file), or in its presence."""

    service: str
    path: str
    expected: Any
    actual: Any

    @property
    def field(self) -> FieldDiff:
        return FieldDiff(self.path, self.expected, self.actual)

    @property
    def change(self) -> str:
        return self.field.change

    @property
    def status(self) -> str:
        """The change seen from the replay: ``missing`` (recorded, not left by the replay),
        ``extra`` (left by the replay only) or ``changed``."""
        return {"added": "extra", "removed": "missing"}.get(self.change, "changed")

    def describe(self) -> str:
        return f"{self.service}: {self.field.describe()}"

    def to_json(self) -> dict[str, object]:
        return {
            "service": self.service,
            **self.field.to_json(),
        }


def diff_states(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> list[StateDiff]:
    """What differs between two end states, each ``service name → JSON logical state``.

    A logical state is whatever JSON its service kind produces (tables of rows, Redis keys,
    file paths with hashes); a service present on one side only is one whole-value diff.
    """
    out: list[StateDiff] = []
    for service in [*expected, *(s for s in actual if s not in expected)]:
        if service not in actual:
            out.append(StateDiff(service, "", expected[service], MISSING))
        elif service not in expected:
            out.append(StateDiff(service, "", MISSING, actual[service]))
        else:
            out.extend(
                StateDiff(service, d.path, d.expected, d.actual)
                for d in json_diff(expected[service], actual[service])
            )
    return out


def diff_state_hashes(
    expected: Sequence[ServiceState], actual: Sequence[ServiceState]
) -> list[StateDiff]:
    """Services whose end-state hash differs (the quick check before a full state diff)."""
    return diff_states(
        {s.name: s.hash_after for s in expected},
        {s.name: s.hash_after for s in actual},
    )
