"""Two runs compared (``sandbox diff RUN_A RUN_B``): captured, replayed or forked, in any
pairing.

::

    comparison = compare_runs(store, "orders-...-a1b2c3", "orders-fork-...-d4e5f6")
    comparison.step          # 11: where B first parts from A (a seq of A's log)
    comparison.describe()    # the divergent step with its field-level diff, the steps only
                             # one run has, the end-state differences

The logs are aligned as a replay is compared with its original
(:func:`~sandbox.replay.judging.divergence.first_divergence`, by stream, by meaning).

End states are compared per service by their hashes; where both runs kept an end-state dump
(a capture, a fork) the differing rows, keys and files are named, read from the dumps
without any container (:func:`~sandbox.services.dumptext.dump_places`). A plain replay keeps
only the hash: the service is then named as different, with a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from sandbox.errors import SandboxError
from sandbox.replay.engine import comparable
from sandbox.replay.fork import describe_edits
from sandbox.replay.judging.divergence import (
    Divergence,
    EventSummary,
    StateDiff,
    diff_states,
    first_divergence,
    unmatched_steps,
)
from sandbox.replay.judging.jsondiff import MISSING
from sandbox.snapshot.events import Event
from sandbox.snapshot.manifest import Manifest, ServiceState
from sandbox.snapshot.store import Store

_CELL = re.compile(r"^table (?P<table>\S+) column (?P<column>\S+) \(row (?P<row>\d+)\)$")
"""Where a table's value is in a dump (:func:`~sandbox.services.dumptext.dump_places`)."""
SHOWN = 12
"""Steps and end-state differences :meth:`RunComparison.describe` lists of each kind."""


@dataclass
class RunComparison:
    """How run B differs from run A."""

    a: str
    b: str
    relation: str
    """How the two runs are related (``B is a fork of A: step 11 overridden``), or ``""``."""
    divergence: Divergence | None
    only_a: list[EventSummary]
    """Steps A has and B does not (by stream and position)."""
    only_b: list[EventSummary]
    end_state: list[StateDiff]
    notes: list[str] = field(default_factory=list)

    @property
    def step(self) -> int | None:
        """The seq (in A's log) of the first divergent step; for a step only B has, its
        seq in B's log. ``None`` when the runs do not part."""
        return None if self.divergence is None else self.divergence.step

    @property
    def same(self) -> bool:
        return self.divergence is None and not self.end_state

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "relation": self.relation,
            "same": self.same,
            "step": self.step,
            "divergence": self.divergence.to_json() if self.divergence else None,
            "only_a": [s.to_json() for s in self.only_a],
            "only_b": [s.to_json() for s in self.only_b],
            "end_state": [d.to_json() for d in self.end_state],
            "notes": list(self.notes),
        }

    def describe(self) -> str:
        lines = [f"A: {self.a}", f"B: {self.b}"]
        if self.relation:
            lines.append(self.relation)
        if self.same:
            lines.append("no difference: the same steps with the same meaning, the same end state")
        if self.divergence is not None:
            lines.append(f"first divergence at step {self.step}:")
            lines.extend(f"  {line}" for line in self.divergence.describe().splitlines())
        for name, steps in (("A", self.only_a), ("B", self.only_b)):
            if steps:
                lines.append(f"only in {name}: {len(steps)} step(s)")
                lines.extend(f"  {s.line()}" for s in steps[:SHOWN])
                if len(steps) > SHOWN:
                    lines.append(f"  ... and {len(steps) - SHOWN} more")
        if self.end_state:
            lines.append("end state (A -> B):")
            lines.extend(f"  {d.status}: {d.describe()}" for d in self.end_state[:SHOWN])
            if len(self.end_state) > SHOWN:
                lines.append(f"  ... and {len(self.end_state) - SHOWN} more differences")
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)


def relation(a: Manifest, b: Manifest) -> str:
    """``B is a fork of A: step 11 overridden`` and the like, or ``""``."""
    for child, parent, name in ((b, a, "B"), (a, b, "A")):
        other = "A" if name == "B" else "B"
        if child.replay_of == parent.run_id:
            if child.fork is not None:
                return f"{name} is a fork of {other}: {describe_edits(child.fork)}"
            return f"{name} is a replay of {other}"
    if a.replay_of is not None and a.replay_of == b.replay_of:
        return f"A and B both replay {a.replay_of}"
    return ""


def compare_runs(store: Store, a: str, b: str) -> RunComparison:
    """Compare run ``b`` with run ``a`` of ``store``; see the module documentation."""
    run_a, run_b = store.load(a), store.load(b)
    manifest_a, manifest_b = run_a.manifest, run_b.manifest
    notes: list[str] = []
    events_a = _unshadowed(comparable(run_a.events), manifest_b, a, notes)
    events_b = _unshadowed(comparable(run_b.events), manifest_a, b, notes)
    only_a, only_b = unmatched_steps(events_a, events_b)
    return RunComparison(
        a=a,
        b=b,
        relation=relation(manifest_a, manifest_b),
        divergence=_by_seq(first_divergence(events_a, events_b)),
        only_a=[EventSummary.of(e) for e in only_a],
        only_b=[EventSummary.of(e) for e in only_b],
        end_state=end_state_differences(store, manifest_a, manifest_b, notes),
        notes=notes,
    )


def _by_seq(divergence: Divergence | None) -> Divergence | None:
    """The divergence with its step as the seq ``sandbox show`` prints (of A's event; of
    B's for a step only B has), not its index among the compared events."""
    if divergence is None:
        return None
    side = divergence.actual if divergence.reason == "extra" else divergence.expected
    return replace(divergence, step=side.seq) if side is not None else divergence


def _unshadowed(events: list[Event], other: Manifest, run_id: str, notes: list[str]) -> list[Event]:
    """``events`` without what ran inside the calls ``other`` (a fork of this run) overrode:
    the override answers for the whole call, so what the call did inside is not compared."""
    if other.fork is None or other.replay_of != run_id or not other.fork.overrides:
        return events
    steps = {o.step for o in other.fork.overrides}
    spans = {e.span for e in events if e.seq in steps and e.span is not None}
    parent_of = {e.span: e.parent_span for e in events if e.span is not None}

    def inside(event: Event) -> bool:
        span = event.parent_span
        while span is not None:
            if span in spans:
                return True
            span = parent_of.get(span)
        return False

    kept = [e for e in events if not inside(e)]
    if len(kept) < len(events):
        listed = ", ".join(str(s) for s in sorted(steps))
        notes.append(
            f"{len(events) - len(kept)} step(s) inside overridden step(s) {listed} are not "
            "compared: the override answers for the whole call"
        )
    return kept


def end_state_differences(
    store: Store, a: Manifest, b: Manifest, notes: list[str]
) -> list[StateDiff]:
    """Per service, how B's end state differs from A's (see the module documentation);
    what cannot be compared is said in ``notes``."""
    states_b = {s.name: s for s in b.services}
    out: list[StateDiff] = []
    for state_a in a.services:
        state_b = states_b.pop(state_a.name, None)
        if state_b is None:
            out.append(StateDiff(state_a.name, "", "present", MISSING))
        else:
            out.extend(_service_difference(store, state_a, state_b, notes))
    out.extend(StateDiff(name, "", MISSING, "present") for name in states_b)
    return out


def _service_difference(
    store: Store, a: ServiceState, b: ServiceState, notes: list[str]
) -> list[StateDiff]:
    if a.hash_after is None or b.hash_after is None:
        notes.append(f"{a.name}: one of the runs has no end state recorded; not compared")
        return []
    if a.hash_after == b.hash_after:
        return []
    if a.after is not None and b.after is not None:
        try:
            before, after = _logical(store, a), _logical(store, b)
            for table in [*before["tables"], *after["tables"]]:  # a dump lists no empty table
                before["tables"].setdefault(table, [])
                after["tables"].setdefault(table, [])
            return diff_states({a.name: before}, {b.name: after})
        except SandboxError as exc:
            notes.append(f"{a.name}: the end-state dumps could not be read ({exc})")
    else:
        notes.append(
            f"{a.name}: a replayed run keeps only its end state's hash; fork it "
            "(sandbox replay --until) to keep the rows"
        )
    return [StateDiff(a.name, "", a.hash_after, b.hash_after)]


def _logical(store: Store, state: ServiceState) -> dict[str, Any]:
    """An end-state dump as the replay's end-state diff describes a service: a database's
    ``tables`` (name -> rows, their values as text), anything else by where it is."""
    from sandbox.services.dumptext import dump_places

    assert state.after is not None
    tables: dict[str, dict[int, dict[str, str]]] = {}
    other: dict[str, str] = {}
    for where, text in dump_places(state.after.media_type, store.get_blob(state.after.sha256)):
        cell = _CELL.match(where)
        if cell is None:
            other[where] = text
            continue
        table = cell["table"].removeprefix("public.")
        tables.setdefault(table, {}).setdefault(int(cell["row"]), {})[cell["column"]] = text
    logical: dict[str, Any] = {"tables": {t: list(rows.values()) for t, rows in tables.items()}}
    return {**logical, **other} if other else logical
