"""What a report page shows: two runs side by side (:class:`Comparison`), and how a replay's
report becomes one (:func:`replay_comparison`).

A page compares a *before* run (the original, or run A of a diff) with an *after* run (the
replay, a fork, or run B): the first step where they part, and how their services' end states
differ. A replay's page adds its verdict; a diff of two runs has none.

::

    comparison = Comparison(run_a, run_b, divergence=div, state_diffs=diffs,
                            labels=("run A", "run B"))
    page = render(comparison)                    # sandbox.report.render
    comparison, verdict = replay_comparison(store, report)
    page = render(comparison, verdict)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sandbox.errors import StoreError
from sandbox.explain.result import Explanation, load_explanation
from sandbox.replay.judging.divergence import Divergence, StateDiff
from sandbox.replay.judging.verdict import Verdict
from sandbox.snapshot.snapshot import Snapshot
from sandbox.snapshot.store import DirectoryStore, Store

if TYPE_CHECKING:
    from sandbox.replay import ReplayReport
    from sandbox.replay.compare import RunComparison


@dataclass(frozen=True)
class Comparison:
    """Two runs, where they part, and how their end states differ."""

    before: Snapshot
    """The original run (or run A)."""
    after: Snapshot | None
    """The replayed, forked or other run (run B); ``None`` when its log is not at hand."""
    divergence: Divergence | None = None
    """The first divergent step of ``after`` from ``before``
    (:func:`~sandbox.replay.judging.divergence.first_divergence`)."""
    state_diffs: Sequence[StateDiff] = ()
    """Rows, keys and files whose end state differs between the two runs."""
    labels: tuple[str, str] = ("original", "replay")
    """What each side is called on the page."""
    title: str = ""
    """The page's heading (default: ``replay of <before>`` or ``<before> vs <after>``)."""
    notes: Sequence[str] = ()
    """Sentences the page lists under the verdict (policies, clocks, injected faults ...)."""
    mismatch: Mapping[str, Any] | None = None
    """The request the recording could not answer, as the replay report keeps it."""
    blobs: Callable[[str], bytes] | None = None
    """Reads a blob by SHA-256 (``store.get_blob``): retrieved documents are shown with
    their content when it is at hand."""
    explanation: Explanation | None = None
    """What ``sandbox explain`` found the original's failure needs, when it was run."""

    @property
    def heading(self) -> str:
        if self.title:
            return self.title
        if self.after is None or self.labels[0] == "original":
            return f"Replay of {self.before.run_id}"
        return f"{self.before.run_id} vs {self.after.run_id}"


def _shown_replay(report: ReplayReport, store: Store) -> int | None:
    """Which replayed run the page shows: the first that diverged, else the first replay,
    of those the store holds."""
    count = len(report.replays)
    candidates = [i for i, d in enumerate(report.divergences[:count]) if d is not None]
    candidates += range(count)
    return next((i for i in candidates if store.exists(report.replays[i])), None)


def diff_comparison(store: Store, comparison: RunComparison) -> Comparison:
    """The page's input for ``sandbox diff``: run A against run B, where they part and how
    their end states differ; no verdict."""
    return Comparison(
        store.load(comparison.a),
        store.load(comparison.b),
        divergence=comparison.divergence,
        state_diffs=comparison.end_state,
        labels=("run A", "run B"),
        notes=[note for note in (comparison.relation, *comparison.notes) if note],
        blobs=store.get_blob,
    )


def replay_comparison(store: Store, report: ReplayReport) -> tuple[Comparison, Verdict]:
    """The page's input for a replay report: the original against the replayed run shown
    (its divergence and end-state differences), and the verdict of all N runs."""
    before = store.load(report.original)
    shown = _shown_replay(report, store)
    after = store.load(report.replays[shown]) if shown is not None else None
    divergence = (
        report.divergences[shown] if shown is not None and shown < len(report.divergences) else None
    )
    diffs = (
        report.state_diffs[shown] if shown is not None and shown < len(report.state_diffs) else []
    )
    comparison = Comparison(
        before,
        after,
        divergence=divergence,
        state_diffs=diffs,
        notes=report.notes,
        mismatch=report.mismatch,
        blobs=store.get_blob,
        explanation=_explanation(store, report.original),
    )
    return comparison, report.verdict


def _explanation(store: Store, run_id: str) -> Explanation | None:
    """The stored explanation of ``run_id``; none when there is none or it cannot be read
    (the page is drawn without that section)."""
    if not isinstance(store, DirectoryStore):
        return None
    try:
        return load_explanation(store, run_id)
    except StoreError:
        return None
