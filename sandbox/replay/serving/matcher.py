"""Find the recorded event that answers a request made during replay.

Recorded boundary events are indexed by ``(kind, name, fingerprint)``. The n-th request with a
given fingerprint is answered by the n-th recorded event with that fingerprint, so a request
repeated three times gets the three recorded answers in their order. A recorded event's
fingerprint is the one the capture agent stored, or else the fingerprint of
:func:`~sandbox.replay.judging.semantics.request_of`.

When nothing matches, the miss mode decides:

- ``fail`` (default): raise :class:`~sandbox.errors.ReplayMismatchError`, naming the request,
  the nearest recorded requests of the same kind and name, and what differs;
- ``live``: return ``None``, telling the caller to make the call for real;
- ``position``: answer with the recorded event of that kind and name at the same position
  (the third ``llm`` call gets the third recorded one), whatever its request.

A matcher is safe to share between threads.
"""

from __future__ import annotations

import difflib
import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sandbox.errors import ReplayMismatchError, UnknownNameError
from sandbox.replay.judging.jsondiff import FieldDiff, format_diffs, json_diff, short
from sandbox.replay.judging.semantics import BOUNDARY_KINDS, request_of
from sandbox.snapshot.events import Event
from sandbox.snapshot.hashing import canonical_json
from sandbox.snapshot.normalize import normalize, request_fingerprint

MAX_CANDIDATES_SCANNED = 500
"""Distinct recorded requests compared when looking for the nearest ones."""


class MissMode(StrEnum):
    FAIL = "fail"
    LIVE = "live"
    POSITION = "position"

    @classmethod
    def parse(cls, value: str | MissMode) -> MissMode:
        try:
            return cls(value)
        except ValueError:
            raise UnknownNameError("miss mode", str(value), [m.value for m in cls]) from None


@dataclass(frozen=True)
class Candidate:
    """A recorded event ranked by how far its request is from the one made."""

    event: Event
    request: Any
    diffs: tuple[FieldDiff, ...]
    similarity: float

    def to_json(self) -> dict[str, object]:
        return {
            "seq": self.event.seq,
            "differences": len(self.diffs),
            "similarity": round(self.similarity, 3),
        }


def fingerprint_of(event: Event) -> str:
    """The stored fingerprint, or the fingerprint of the event's request view."""
    if event.fingerprint is not None:
        return event.fingerprint
    return request_fingerprint(event.kind, event.name, request_of(event))


class Matcher:
    """Answers replayed requests from a recording; see the module documentation."""

    def __init__(
        self,
        events: Iterable[Event],
        *,
        on_miss: MissMode | str = MissMode.FAIL,
        nearest: int = 3,
    ) -> None:
        self.on_miss = MissMode.parse(on_miss)
        self.nearest = nearest
        self._by_fingerprint: dict[tuple[str, str, str], list[Event]] = defaultdict(list)
        self._by_name: dict[tuple[str, str], list[Event]] = defaultdict(list)
        for event in events:
            if event.kind not in BOUNDARY_KINDS:
                continue
            fp = fingerprint_of(event)
            self._by_fingerprint[(event.kind, event.name, fp)].append(event)
            self._by_name[(event.kind, event.name)].append(event)
        self._served: dict[tuple[str, str, str], int] = defaultdict(int)
        self._calls: dict[tuple[str, str], int] = defaultdict(int)
        self._used: set[int] = set()
        self._lock = threading.Lock()

    def match(self, kind: str, name: str, request: Any) -> Event | None:
        """The recorded answer to this request; ``None`` only in miss mode ``live``."""
        fp = request_fingerprint(kind, name, request)
        key = (kind, name, fp)
        with self._lock:
            position = self._calls[(kind, name)]
            self._calls[(kind, name)] = position + 1
            recorded = self._by_fingerprint.get(key, [])
            nth = self._served[key]
            if nth < len(recorded):
                self._served[key] = nth + 1
                event = recorded[nth]
                self._used.add(id(event))
                return event
            if self.on_miss is MissMode.LIVE:
                return None
            same_name = self._by_name.get((kind, name), [])
            if self.on_miss is MissMode.POSITION and position < len(same_name):
                event = same_name[position]
                self._used.add(id(event))
                return event
        raise self.mismatch(kind, name, request, repeat=(nth, len(recorded)), position=position)

    def skip(self, events: Iterable[Event]) -> None:
        """Take ``events`` (recorded ones, in log order) as if they had been answered: the
        crossings of a recorded attempt that is not run again are not the next attempt's."""
        with self._lock:
            for event in sorted(events, key=lambda e: e.seq):
                if event.kind not in BOUNDARY_KINDS:
                    continue
                key = (event.kind, event.name, fingerprint_of(event))
                recorded = self._by_fingerprint.get(key, [])
                nth = self._served[key]
                if nth < len(recorded) and recorded[nth] is event:
                    self._served[key] = nth + 1
                    self._calls[(event.kind, event.name)] += 1
                    self._used.add(id(event))

    def peek(self, kind: str, name: str, request: Any) -> Event | None:
        """The recorded event :meth:`match` would answer this request with next (by
        fingerprint), without taking it; ``None`` when the recording has none."""
        key = (kind, name, request_fingerprint(kind, name, request))
        with self._lock:
            recorded = self._by_fingerprint.get(key, [])
            nth = self._served.get(key, 0)
            return recorded[nth] if nth < len(recorded) else None

    def unused(self) -> list[Event]:
        """Recorded boundary events no request has been answered with yet (in log order)."""
        with self._lock:
            events = [e for group in self._by_name.values() for e in group]
            return sorted((e for e in events if id(e) not in self._used), key=lambda e: e.seq)

    def candidates(self, kind: str, name: str, request: Any) -> list[Candidate]:
        """Recorded requests of this kind and name, nearest first (one per distinct request)."""
        actual = normalize(request)
        actual_text = canonical_json(actual).decode()
        seen: set[str] = set()
        ranked: list[Candidate] = []
        for event in self._by_name.get((kind, name), []):
            fp = fingerprint_of(event)
            if fp in seen:
                continue
            seen.add(fp)
            if len(seen) > MAX_CANDIDATES_SCANNED:
                break
            expected = request_of(event)
            diffs = tuple(json_diff(expected, actual))
            text = canonical_json(expected).decode()
            similarity = difflib.SequenceMatcher(None, text, actual_text).quick_ratio()
            ranked.append(Candidate(event, expected, diffs, similarity))
        ranked.sort(key=lambda c: (len(c.diffs), -c.similarity, c.event.seq))
        return ranked

    def mismatch(
        self,
        kind: str,
        name: str,
        request: Any,
        *,
        repeat: tuple[int, int] = (0, 0),
        position: int | None = None,
    ) -> ReplayMismatchError:
        """The error for a request with no recorded answer (returned, not raised)."""
        actual = normalize(request)
        what = f"{kind} {name!r}" if name else kind
        nth, recorded_times = repeat
        if recorded_times:
            return ReplayMismatchError(
                f"{what}: this request was recorded {recorded_times} time(s) and is now made "
                f"a {_ordinal(nth + 1)} time; the replayed run repeats a call the original "
                f"did not\n  request: {short(actual, 200)}",
                kind=kind,
                name=name,
                actual=actual,
                expected=actual,
            )
        ranked = self.candidates(kind, name, request)
        call = f" (call #{position + 1} of {what})" if position is not None else ""
        if not ranked:
            names = sorted({n for k, n in self._by_name if k == kind})
            close = difflib.get_close_matches(name, names, n=3)
            hint = (
                f"; did you mean {', '.join(repr(c) for c in close)}?"
                if close
                else (
                    f"; recorded {kind} names: {', '.join(repr(n) for n in names[:10])}"
                    if names
                    else f"; nothing of kind {kind!r} was recorded"
                )
            )
            return ReplayMismatchError(
                f"no recorded {what}{call}{hint}\n  request: {short(actual, 200)}",
                kind=kind,
                name=name,
                actual=actual,
            )
        best = ranked[0]
        lines = [
            f"no recorded {what} matches this request{call}",
            f"  request: {short(actual, 200)}",
            f"  nearest recorded (seq {best.event.seq}, {len(best.diffs)} difference(s)):",
            format_diffs(list(best.diffs), indent="    "),
        ]
        others = ranked[1 : self.nearest]
        if others:
            lines.append(
                "  other candidates: "
                + ", ".join(f"seq {c.event.seq} ({len(c.diffs)} diff.)" for c in others)
            )
        return ReplayMismatchError(
            "\n".join(lines),
            kind=kind,
            name=name,
            actual=actual,
            expected=best.request,
            diff=[d.to_json() for d in best.diffs],
            candidates=[c.to_json() for c in ranked[: self.nearest]],
        )


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
