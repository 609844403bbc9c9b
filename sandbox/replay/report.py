"""The report of a replay: what N replays of a run showed (:class:`ReplayReport`), the notes
that explain its verdict, and a recording mismatch as JSON (:func:`mismatch_json`, the one
place a :class:`~sandbox.errors.ReplayMismatchError` becomes data).

:func:`sandbox.replay.engine.replay` builds the report; the CLI, the HTML page, the pytest
plugin and ``ci-repro`` read it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sandbox.capture.recorder import jsonable_value
from sandbox.errors import ReplayMismatchError
from sandbox.names import OVERLAPPED_LABEL
from sandbox.replay.fork import describe_edits
from sandbox.replay.judging.divergence import Divergence, StateDiff
from sandbox.replay.judging.jsondiff import short
from sandbox.replay.judging.verdict import Verdict
from sandbox.snapshot.manifest import ForkEdits

ClockMode = Literal["frozen", "live"]
_NOTED = frozenset({"mismatch", "refused"})
"""Reasons for an inconclusive run that the notes explain on their own."""


def mismatch_json(exc: ReplayMismatchError) -> dict[str, Any]:
    """A recording mismatch as JSON: what the run log, a replayed child and the report keep."""
    return {
        "kind": exc.kind,
        "name": exc.name,
        "message": str(exc),
        "expected": jsonable_value(exc.expected),
        "actual": jsonable_value(exc.actual),
        "diff": jsonable_value(exc.diff),
        "candidates": jsonable_value(exc.candidates),
    }


def mismatch_from_json(data: Mapping[str, Any]) -> ReplayMismatchError:
    """The mismatch :func:`mismatch_json` wrote."""
    return ReplayMismatchError(
        str(data["message"]),
        kind=data.get("kind"),
        name=data.get("name"),
        actual=data.get("actual"),
        expected=data.get("expected"),
        diff=data.get("diff"),
        candidates=data.get("candidates"),
    )


@dataclass
class ReplayReport:
    """What N replays of a run showed."""

    original: str
    replays: list[str]
    verdict: Verdict
    divergences: list[Divergence | None]
    """First divergence from the original, per replayed run."""
    state_diffs: list[list[StateDiff]]
    """How each replayed run's end state differs from the original's: rows, keys and files
    missing, extra or changed (:mod:`sandbox.replay.judging.endstate`), per replayed run."""
    mismatch: dict[str, Any] | None
    """The request the recording could not answer (miss mode ``fail``), when one stopped it."""
    notes: list[str]
    entrypoint: str
    policies: str
    clocks: ClockMode = "frozen"
    enforce_order: bool = True
    drift: list[str] = field(default_factory=list)
    injected: list[str] = field(default_factory=list)
    seconds: float = 0.0
    refused: list[str] = field(default_factory=list)
    """Connections outside the sandbox that were refused: the runs that saw one are
    inconclusive (:mod:`sandbox.replay.isolation.netguard`)."""
    fork: ForkEdits | None = None
    """The edits when the runs are forks (:mod:`sandbox.replay.fork`)."""
    stalls: int = 0
    """Times the turnstile gave up the recorded order of concurrent calls (a wait past its
    timeout: the replay took another path), summed over the runs; a run that stalled and
    showed no divergence is inconclusive (reason ``order``), and the notes say so."""

    @property
    def exit_code(self) -> int:
        """1 reproduced, 0 gone (every run judged), 2 none reproduced and some inconclusive
        (a mismatch, a refused connection, another exception ...)."""
        return self.verdict.exit_code

    def to_json(self) -> dict[str, Any]:
        return {
            "original": self.original,
            "replays": list(self.replays),
            "entrypoint": self.entrypoint,
            "policies": self.policies,
            "clocks": self.clocks,
            "enforce_order": self.enforce_order,
            "verdict": self.verdict.to_json(),
            "exit_code": self.exit_code,
            "divergences": [d.to_json() if d else None for d in self.divergences],
            "state_diffs": [[d.to_json() for d in run] for run in self.state_diffs],
            "mismatch": self.mismatch,
            "drift": list(self.drift),
            "injected": list(self.injected),
            "notes": list(self.notes),
            "refused": list(self.refused),
            "seconds": round(self.seconds, 3),
            "fork": None if self.fork is None else self.fork.model_dump(mode="json"),
            "stalls": self.stalls,
        }

    def describe(self) -> str:
        """A few readable paragraphs: verdict, notes, mismatch, first divergence."""
        what = "replay" if self.fork is None else f"fork ({describe_edits(self.fork)})"
        lines = [
            f"{what} of {self.original} ({self.entrypoint}): {self.verdict.summary()}",
            f"  policies: {self.policies}; clocks {self.clocks}; "
            f"order {'enforced' if self.enforce_order else 'not enforced'}",
        ]
        lines.extend(f"  - {note}" for note in self.notes)
        if self.mismatch is not None:
            lines.append("mismatch:")
            lines.extend(f"  {line}" for line in str(self.mismatch["message"]).splitlines())
        first = next((d for d in self.divergences if d is not None), None)
        if first is not None:
            lines.append("first divergence (first run that diverged):")
            lines.extend(f"  {line}" for line in first.describe().splitlines())
        ends = next((run for run in self.state_diffs if run), None)
        if ends:
            lines.append("end state (first run whose end state differs from the original's):")
            lines.extend(f"  {d.status}: {d.describe()}" for d in ends[:12])
            if len(ends) > 12:
                lines.append(f"  ... and {len(ends) - 12} more differences")
        return "\n".join(lines)


def overlap_note(labels: Mapping[str, str], report: ReplayReport) -> list[str]:
    """The note saying that the original's end states may hold other runs' writes, when its
    capture overlapped other runs of its process and an end state differs."""
    overlapped = labels.get(OVERLAPPED_LABEL)
    if not overlapped or not any(report.state_diffs):
        return []
    return [
        f"The original's end states were taken as it ended, and {overlapped} other run(s) of "
        "its process recorded while it ran (requests served alongside it): their writes are "
        "in those end states, so a difference there need not be this run's."
    ]


def cwd_note(ran_in: str | None, here: str) -> list[str]:
    """The note saying that a recorded command ran in its recorded working directory
    ``ran_in``, not in ``here`` (where the replay was started): the code it ran is the one
    there, not a copy beside it."""
    if not ran_in or os.path.realpath(ran_in) == os.path.realpath(here):
        return []
    return [
        f"The recorded command ran in its recorded working directory {ran_in}, not in "
        f"{here}: the code replayed is the one there (replay from that folder, or give an "
        "--entrypoint, to replay another copy)."
    ]


def replay_notes(
    report: ReplayReport, *, refused_runs: int, stalls: int, override: str | None
) -> list[str]:
    """The sentences that explain ``report``'s verdict: ``refused_runs`` runs saw a refused
    connection, the turnstile gave up ``stalls`` times, ``override``: the entrypoint
    replayed instead of the recorded one."""
    runs = len(report.replays)
    notes: list[str] = []
    v = report.verdict
    if report.refused:
        notes.append(
            f"Inconclusive in {refused_runs} of {runs} run(s): the agent tried to reach outside "
            f"the sandbox and was refused ({report.refused[0]})."
        )
    if report.mismatch is not None:
        m = report.mismatch
        what = f"{m['kind']} call {m['name']!r}" if m["name"] else f"{m['kind']} call"
        notes.append(
            f"The replay stopped at a {what} that the recording cannot answer: the agent's "
            "request changed since the capture (code or prompt), so the failure could not be "
            "judged. The mismatch below shows what differs."
        )
        for diff in m["diff"][:3]:
            notes.append(
                f"At {diff.get('path') or 'the request'}: the recording has "
                f"{short(diff.get('expected'), 120)}, "
                f"the replay sent {short(diff.get('actual'), 120)}."
            )
    elif v.reproduced == v.total:
        notes.append(f"The failure reproduced in every run ({v.reproduced}/{v.total}).")
    elif report.refused:
        notes.append(
            f"The failure reproduced in {v.reproduced} of {v.total} runs; a run that was "
            "refused a connection is never counted as gone."
        )
    elif v.reproduced_any:
        notes.append(
            f"The failure reproduced in {v.reproduced} of {v.total} runs ({v.gone} gone, "
            f"{v.inconclusive} could not be judged): the replay is not fully deterministic "
            "(see the first divergence)."
        )
    elif v.outcome == "gone":
        with_what = f"with {override} " if override else ""
        covered = v.coverage
        made = f" ({covered.describe()} in the least-covering run)" if covered else ""
        notes.append(
            f"The failure is gone: {with_what}every one of the {v.total} runs completed, "
            f"exercised the recorded run{made}, was judged, and did not show it."
        )
    # (a mismatch and a refused connection have their own notes)
    other = [r for r in v.runs if r.outcome == "inconclusive" and r.reason not in _NOTED]
    if other:
        reasons = ", ".join(dict.fromkeys(r.label.removeprefix("could not judge: ") for r in other))
        notes.append(
            f"{len(other)} of {v.total} run(s) could not be judged ({reasons}): that is not "
            f'"the failure is gone". Run {other[0].run + 1}: {other[0].detail}.'
        )
    if report.injected:
        notes.append(f"Recorded faults injected again: {'; '.join(report.injected)}.")
    if stalls:
        notes.append(
            f"The recorded order of concurrent calls could not be kept in {stalls} run(s): "
            "the replay took another path, so enforcement was dropped there."
        )
    if report.clocks == "live":
        notes.append("Clocks were live: no frozen time in the agent or the containers.")
    if report.drift:
        notes.append(f"{len(report.drift)} spied call(s) drifted from the recording.")
    changed = {d.service for run in report.state_diffs for d in run}
    if changed and not report.mismatch:
        notes.append(
            "End state differs from the original's in: " + ", ".join(sorted(changed)) + "."
        )
    return notes
