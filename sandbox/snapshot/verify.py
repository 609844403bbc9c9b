"""Verify a run in a store, or a bundle file, and report every problem found.

A report lists problems (the run cannot be trusted) and warnings (worth knowing, not wrong),
each naming the file it is about: ``runs/<id>/events.jsonl``, ``blobs/sha256/<ab>/<sha256>``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from sandbox.errors import SandboxError
from sandbox.snapshot.bundle import (
    DEFAULT_LIMITS,
    BundleLimits,
    bundle_source,
    check_bundle,
    read_bundle,
)
from sandbox.snapshot.integrity import Problem, check_store_run
from sandbox.snapshot.store import Store


@dataclass
class VerifyReport:
    """What a verification found about one run or one bundle."""

    target: str
    run_id: str | None = None
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    events: int = 0
    blobs: int = 0
    state: str | None = None
    """A store run's state (:func:`~sandbox.snapshot.listing.run_state`): ``complete``,
    ``running`` or ``incomplete``; ``None`` for a bundle or an unreadable manifest."""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def complete(self) -> bool:
        """No problems, and the run (when one was read) is complete."""
        return self.ok and self.state in (None, "complete")

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "run_id": self.run_id,
            "ok": self.ok,
            "state": self.state,
            "events": self.events,
            "blobs": self.blobs,
            "problems": [str(p) for p in self.problems],
            "warnings": [str(w) for w in self.warnings],
        }


def verify_run(store: Store, run_id: str) -> VerifyReport:
    """Check run ``run_id`` of ``store``; an unknown run raises :class:`UnknownRunError`."""
    from sandbox.snapshot.listing import run_state

    check = check_store_run(store, run_id)
    return VerifyReport(
        target=f"run {run_id} in {store.location}",
        run_id=run_id,
        problems=check.problems,
        warnings=check.warnings,
        events=check.event_count,
        blobs=len(check.blob_keys),
        state=None if check.manifest is None else run_state(check.manifest),
    )


def verify_bundle(
    path: str | os.PathLike[str], limits: BundleLimits = DEFAULT_LIMITS
) -> VerifyReport:
    """Check a bundle file without importing it. A bundle refused as unsafe or unreadable is
    reported as one problem naming the file."""
    source = bundle_source(path)
    report = VerifyReport(target=f"bundle {source}")
    try:
        contents = read_bundle(path, limits)
    except SandboxError as exc:
        message = str(exc).removeprefix(f"{source}: ")
        report.problems.append(Problem(source, message))
        return report
    with contents:
        run_id, check, problems = check_bundle(contents)
    report.run_id = run_id
    report.problems.extend(problems)
    if check is not None:
        report.problems.extend(check.problems)
        report.warnings.extend(check.warnings)
        report.events = check.event_count
        report.blobs = len(check.blob_keys)
    return report
