"""``ci-repro``: replay every captured failure in a store and report the ones that no longer
behave as expected.

A run that was captured as failed is an *expected reproduction*: its failure must come back
when it is replayed, or the snapshot has stopped being a usable test case (the environment or
the replayer changed under it). Once it is marked fixed (:mod:`sandbox.regress.marks`), its
replay is expected to be *gone*, and a reproduction means the bug came back. Runs without an
observed failure, unfinished runs and runs that are themselves replays are skipped. The
replays go through :func:`sandbox.replay.engine.replay` with its defaults (recorded model
calls, tools live against the frozen containers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sandbox.errors import SandboxError
from sandbox.regress.shard import Shard
from sandbox.replay.judging.verdict import EXIT_CODES, Outcome, Verdict
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import Store


class _Report(Protocol):
    @property
    def verdict(self) -> Verdict: ...


Replayer = Callable[..., _Report]
"""``replay(run_id, *, store, times, **options)``, as :func:`sandbox.replay.engine.replay`
(``options``: fields of :class:`~sandbox.replay.plan.ReplayPlan`)."""


def expected_reproductions(store: Store) -> list[Manifest]:
    """The runs that were captured failing, and so must reproduce (oldest first)."""
    return [
        m
        for m in store.list()
        if m.status == "complete"
        and m.replay_of is None
        and m.failure is not None
        and m.failure.observed
    ]


@dataclass(frozen=True)
class RunCheck:
    run_id: str
    reason: str
    reproduced: int
    total: int
    error: str | None = None
    """Why the failure could not be judged: a :class:`SandboxError` that stopped the replay,
    or the reasons its runs were inconclusive."""
    gone: int = 0
    inconclusive: int = 0
    expected: Outcome = "reproduced"
    """``gone`` for a failure marked fixed: then a reproduction is the bug coming back."""
    fixed_by: str | None = None

    @property
    def outcome(self) -> Outcome:
        """As a replay's verdict: reproduced in one run at least, else inconclusive when one
        run (or the replay) could not be judged, else gone."""
        if self.error is None and self.reproduced > 0:
            return "reproduced"
        if self.error is not None or self.inconclusive > 0 or self.total == 0:
            return "inconclusive"
        return "gone"

    @property
    def ok(self) -> bool:
        """The outcome is the expected one (never when it could not be judged)."""
        return self.outcome == self.expected

    def to_json(self) -> dict[str, object]:
        return {
            "run": self.run_id,
            "reason": self.reason,
            "outcome": self.outcome,
            "expected": self.expected,
            "fixed_by": self.fixed_by,
            "reproduced": self.reproduced,
            "gone": self.gone,
            "inconclusive": self.inconclusive,
            "total": self.total,
            "error": self.error,
            "ok": self.ok,
        }

    @classmethod
    def of(cls, manifest: Manifest, verdict: Verdict) -> RunCheck:
        error = None
        if verdict.outcome == "inconclusive":
            first = next((r for r in verdict.runs if r.outcome == "inconclusive"), None)
            error = "could not judge: " + (
                f"{first.label.removeprefix('could not judge: ')}: {first.detail}"
                if first is not None
                else "no run was judged"
            )
        return cls(
            manifest.run_id,
            reason_of(manifest),
            verdict.reproduced,
            verdict.total,
            error=error,
            gone=verdict.gone,
            inconclusive=verdict.inconclusive,
            **expectation(manifest),
        )


def reason_of(manifest: Manifest) -> str:
    return manifest.failure.reason if manifest.failure else ""


def expectation(manifest: Manifest) -> dict[str, Any]:
    """What a replay of ``manifest`` is expected to give (the :class:`RunCheck` fields)."""
    if manifest.fixed is None:
        return {"expected": "reproduced"}
    return {"expected": "gone", "fixed_by": manifest.fixed.by}


@dataclass(frozen=True)
class CheckReport:
    checks: tuple[RunCheck, ...] = field(default=())

    @property
    def lost(self) -> list[RunCheck]:
        """Captured failures whose replay was not as expected (or could not be judged)."""
        return [c for c in self.checks if not c.ok]

    @property
    def exit_code(self) -> int:
        """The verdict's codes, over the captured failures: 1 when every one behaved as
        expected (reproduced; gone for one marked fixed), 0 when one did not (an open
        failure gone, a fixed one back; and every one was judged), or there are none, 2
        when one could not be judged. With no run marked fixed, for a single run, the exit
        code of ``sandbox replay``."""
        if any(c.outcome == "inconclusive" for c in self.checks):
            return EXIT_CODES["inconclusive"]
        if self.lost or not self.checks:
            return EXIT_CODES["gone"]
        return EXIT_CODES["reproduced"]

    def to_json(self) -> dict[str, object]:
        return {
            "exit_code": self.exit_code,
            "checks": [c.to_json() for c in self.checks],
        }


def select_runs(
    store: Store, runs: Sequence[str] | None = None, shard: Shard | None = None
) -> list[Manifest]:
    """The expected reproductions to check: those named in ``runs`` (each must be one), of
    ``shard`` when given."""
    manifests = expected_reproductions(store)
    if runs is not None:
        wanted = set(runs)
        unknown = wanted - {m.run_id for m in manifests}
        if unknown:
            raise SandboxError("not captured failures in this store: " + ", ".join(sorted(unknown)))
        manifests = [m for m in manifests if m.run_id in wanted]
    if shard is not None:
        manifests = [m for m in manifests if shard.holds(m.run_id)]
    return manifests


def check_store(
    store: Store,
    *,
    times: int = 1,
    runs: Sequence[str] | None = None,
    replayer: Replayer | None = None,
    on_run: Callable[[Manifest], None] | None = None,
    shard: Shard | None = None,
    **replay_options: Any,
) -> CheckReport:
    """Replay each expected reproduction ``times`` times; see the module documentation.

    ``runs`` limits the check to these run ids (each must be an expected reproduction).
    ``shard`` keeps the runs of one CI shard (:mod:`sandbox.regress.shard`).
    ``on_run`` is called before each replay (for progress). A :class:`SandboxError` raised by
    one replay is recorded against that run, and the others still run.
    """
    if replayer is None:
        from sandbox.replay.engine import replay as replayer_fn

        replayer = replayer_fn
    manifests = select_runs(store, runs, shard)
    checks = []
    for manifest in manifests:
        if on_run is not None:
            on_run(manifest)
        try:
            report = replayer(manifest.run_id, store=store, times=times, **replay_options)
        except SandboxError as exc:
            checks.append(
                RunCheck(
                    manifest.run_id,
                    reason_of(manifest),
                    0,
                    times,
                    error=str(exc),
                    inconclusive=times,
                    **expectation(manifest),
                )
            )
            continue
        checks.append(RunCheck.of(manifest, report.verdict))
    return CheckReport(tuple(checks))
