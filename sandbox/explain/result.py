"""What ``explain`` found, as data stored with the run (``explain.json`` in its folder,
written atomically) and as the text ``sandbox explain`` and ``sandbox show`` print."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from sandbox.errors import StoreError
from sandbox.snapshot.store import Store

EXPLAIN_FILE = "explain.json"
EXPLAIN_VERSION = 1
TrialOutcome = Literal["reproduced", "not reproduced", "inconclusive"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class ConditionResult(_Model):
    key: str
    held: str
    """The condition as the replay holds it."""
    released: str
    """What a trial did instead."""
    verdict: Literal["needed", "not needed", "unjudged", "untested"]
    """``needed``: a judged trial without it did not reproduce; ``not needed``: a trial
    without it reproduced; ``unjudged``: it was kept because every trial without it was
    inconclusive; ``untested``: the budget ran out first."""
    evidence: int | None = None
    """The number (from 1) of the trial that shows the verdict."""


class TrialResult(_Model):
    number: int
    released: list[str]
    """Keys of the conditions released in this trial (the rest were held)."""
    outcome: TrialOutcome
    reproduced: int
    gone: int
    inconclusive: int
    total: int
    detail: str = ""
    """Why runs could not be judged, or the first run's detail."""


class Explanation(_Model):
    """The smallest set of recorded conditions found to reproduce the failure."""

    version: int = EXPLAIN_VERSION
    run_id: str
    created: str
    status: Literal["explained", "incomplete", "not reproduced"]
    """``explained``: ddmin finished; ``incomplete``: the budget ran out first (the set may
    not be minimal); ``not reproduced``: the failure did not reproduce with every condition
    held, so there was nothing to explain."""
    times: int
    quorum: int
    budget: int
    replays: int
    """Replays the trials ran."""
    one_at_a_time: int
    """Replays a one-condition-at-a-time search would run: a trial with everything held,
    then one per condition released alone."""
    conditions: list[ConditionResult]
    trials: list[TrialResult]

    def of(self, verdict: str) -> list[ConditionResult]:
        return [c for c in self.conditions if c.verdict == verdict]

    def summary_lines(self) -> list[str]:
        """The verdict in a few lines: what the failure needs, what it does not, what was
        kept without a judgement."""
        if self.status == "not reproduced":
            return ["the failure did not reproduce with every recorded condition held"]
        lines = [
            "the failure needs: "
            + ("; ".join(c.held for c in self.of("needed")) or "none of the recorded conditions"),
            "it does not need: " + ("; ".join(c.held for c in self.of("not needed")) or "-"),
        ]
        lines.extend(f"kept, could not judge without it: {c.held}" for c in self.of("unjudged"))
        lines.extend(f"kept, not tested (budget spent): {c.held}" for c in self.of("untested"))
        if self.status == "incomplete":
            lines.append(
                f"the budget of {self.budget} replays ran out before the search finished: "
                "the set may not be the smallest"
            )
        return lines

    def describe(self) -> str:
        """:meth:`summary_lines` (with the trial that shows each kept condition), the trials,
        and the counts."""
        lines = self.summary_lines()
        if self.status == "not reproduced" and self.trials:
            first = self.trials[0]
            lines[0] += f" ({first.outcome}: {first.detail}): there is nothing to explain"
        for c in self.of("unjudged"):
            trial = self.trials[c.evidence - 1] if c.evidence else None
            if trial is not None:
                lines.append(f"  {c.key}: trial {trial.number} was inconclusive: {trial.detail}")
        lines.append(
            f"{len(self.trials)} trials, {self.replays} replays ({self.times} per trial; a "
            f"trial reproduces when {self.quorum} of {self.times} runs do); a "
            f"one-condition-at-a-time search would need {self.one_at_a_time} replays"
        )
        for t in self.trials:
            released = ", ".join(t.released) if t.released else "nothing"
            lines.append(
                f"  trial {t.number}: released {released}: {t.outcome} "
                f"({t.reproduced}/{t.total} reproduced)"
            )
        return "\n".join(lines)


def save_explanation(store: Store, explanation: Explanation) -> None:
    """Keep ``explain.json`` beside the run (atomically)."""
    if not store.exists(explanation.run_id):
        raise StoreError(f"run {explanation.run_id} is not in the store")
    data = explanation.model_dump_json(indent=2).encode()
    store.put_run_file(explanation.run_id, EXPLAIN_FILE, data)


def load_explanation(store: Store, run_id: str) -> Explanation | None:
    """The stored explanation of a run, ``None`` when there is none; a damaged or newer file
    is a :class:`StoreError`."""
    data = store.get_run_file(run_id, EXPLAIN_FILE)
    if data is None:
        return None
    from pydantic import ValidationError

    try:
        found = Explanation.model_validate_json(data)
    except ValidationError as exc:
        raise StoreError(f"{EXPLAIN_FILE} of run {run_id} cannot be read: {exc}") from None
    if found.version > EXPLAIN_VERSION:
        raise StoreError(
            f"{EXPLAIN_FILE} of run {run_id} has version {found.version}; this checkout reads "
            f"up to {EXPLAIN_VERSION}"
        )
    return found
