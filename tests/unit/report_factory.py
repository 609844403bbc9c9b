"""A replay report built from real divergence and verdict types, for the report tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from sandbox.replay.divergence import Divergence, StateDiff, diff_states, first_divergence
from sandbox.replay.verdict import ReplayOutcome, Verdict, judge
from sandbox.snapshot import Manifest, Snapshot
from sandbox.snapshot.events import ErrorInfo, Event, FinalResult, LLMCall, Timeout, ToolCall
from sandbox.snapshot.manifest import ExceptionPredicate, Failure

HOSTILE = "<script>alert('x')</script>&\"<img src=x onerror=alert(1)>"


@dataclass
class FakeReport:
    """Shaped like ``sandbox.replay.ReplayReport`` (the attributes the page reads)."""

    original: str
    replays: list[str]
    verdict: Verdict
    divergences: list[Divergence | None]
    state_diffs: list[StateDiff] = field(default_factory=list)
    mismatch: object = None
    notes: list[str] = field(default_factory=list)


def _events(second_order: str, *, fail: bool, note: str = "") -> list[Event]:
    return [
        LLMCall(seq=0, wall=1.0, mono=0.1, name="plan", model="m", response={"text": note}),
        ToolCall(
            seq=1,
            wall=1.1,
            mono=0.2,
            name="place_order",
            args={"sku": "A1"},
            error=ErrorInfo(type="TimeoutError", message="read timed out"),
        ),
        Timeout(seq=2, parent=1, wall=1.2, mono=0.3, after=5.0, committed=True),
        ToolCall(
            seq=3,
            wall=1.3,
            mono=0.4,
            name="place_order",
            args={"sku": second_order},
            attempt=2,
            output={"order": 2},
        ),
        FinalResult(
            seq=4,
            wall=1.4,
            mono=0.5,
            error=ErrorInfo(type="DuplicateOrder", message="order placed twice") if fail else None,
            value=None if fail else {"ok": True},
        ),
    ]


def snapshot(run_id: str, events: list[Event], reason: str = "") -> Snapshot:
    manifest = Manifest(
        run_id=run_id,
        name="orders agent",
        created=datetime(2024, 3, 1, 12, tzinfo=UTC),
        status="complete",
        failure=Failure(reason=reason, predicate=ExceptionPredicate(type="DuplicateOrder"))
        if reason
        else None,
    )
    return Snapshot(manifest, events)


def build(*, reproduced: bool = True) -> tuple[Snapshot, Snapshot, FakeReport]:
    """An original run, one replay whose retried order differs, and the report of it."""
    original = snapshot("orders-1", _events("A1", fail=True, note=HOSTILE), HOSTILE)
    replayed = snapshot("orders-1-replay-1", _events("B2-changed", fail=reproduced, note=HOSTILE))
    div = first_divergence(original.events, replayed.events)
    verdict = judge(
        ExceptionPredicate(type="DuplicateOrder"),
        [ReplayOutcome.from_events(replayed.events, divergence=div)],
    )
    report = FakeReport(
        original=original.run_id,
        replays=[replayed.run_id],
        verdict=verdict,
        divergences=[div],
        state_diffs=diff_states({"db": {"orders": [1, 2]}}, {"db": {"orders": [1, 2, HOSTILE]}}),
        notes=[f"note {HOSTILE}"],
    )
    return original, replayed, report
