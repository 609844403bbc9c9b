"""``ci-repro``: replay every captured failure in a store and report the ones that no longer
reproduce.

A run that was captured as failed is an *expected reproduction*: its failure must come back
when it is replayed, or the snapshot has stopped being a usable test case (the environment or
the replayer changed under it). Runs without an observed failure, unfinished runs and runs
that are themselves replays are skipped. The replays go through :func:`sandbox.replay.engine.replay`
with its defaults (recorded model calls, tools live against the frozen containers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sandbox.errors import SandboxError
from sandbox.replay.verdict import Verdict
from sandbox.snapshot.manifest import Manifest
from sandbox.snapshot.store import DirectoryStore


class _Report(Protocol):
    @property
    def verdict(self) -> Verdict: ...


Replayer = Callable[..., _Report]
"""``replay(run_id, *, store, times, ...)``, as :func:`sandbox.replay.engine.replay`."""


def expected_reproductions(store: DirectoryStore) -> list[Manifest]:
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
    """Why the run could not be replayed or judged (a :class:`SandboxError`)."""

    @property
    def ok(self) -> bool:
        return self.error is None and self.reproduced > 0

    def to_json(self) -> dict[str, object]:
        return {
            "run": self.run_id,
            "reason": self.reason,
            "reproduced": self.reproduced,
            "total": self.total,
            "error": self.error,
            "ok": self.ok,
        }


@dataclass(frozen=True)
class CheckReport:
    checks: tuple[RunCheck, ...] = field(default=())

    @property
    def lost(self) -> list[RunCheck]:
        """Expected reproductions that did not happen (or could not be judged)."""
        return [c for c in self.checks if not c.ok]

    @property
    def exit_code(self) -> int:
        """0 when every expected reproduction happened, 1 otherwise."""
        return 1 if self.lost else 0

    def to_json(self) -> dict[str, object]:
        return {
            "exit_code": self.exit_code,
            "checks": [c.to_json() for c in self.checks],
        }


def check_store(
    store: DirectoryStore,
    *,
    times: int = 1,
    runs: Sequence[str] | None = None,
    replayer: Replayer | None = None,
    on_run: Callable[[Manifest], None] | None = None,
    **replay_options: Any,
) -> CheckReport:
    """Replay each expected reproduction ``times`` times; see the module documentation.

    ``runs`` limits the check to these run ids (each must be an expected reproduction).
    ``on_run`` is called before each replay (for progress). A :class:`SandboxError` raised by
    one replay is recorded against that run, and the others still run.
    """
    if replayer is None:
        from sandbox.replay.engine import replay as replayer_fn

        replayer = replayer_fn
    manifests = expected_reproductions(store)
    if runs is not None:
        wanted = set(runs)
        unknown = wanted - {m.run_id for m in manifests}
        if unknown:
            raise SandboxError("not captured failures in this store: " + ", ".join(sorted(unknown)))
        manifests = [m for m in manifests if m.run_id in wanted]
    checks = []
    for manifest in manifests:
        if on_run is not None:
            on_run(manifest)
        reason = manifest.failure.reason if manifest.failure else ""
        try:
            report = replayer(manifest.run_id, store=store, times=times, **replay_options)
        except SandboxError as exc:
            checks.append(RunCheck(manifest.run_id, reason, 0, times, error=str(exc)))
            continue
        verdict = report.verdict
        mismatch = getattr(report, "mismatch", None)
        refused = list(getattr(report, "refused", None) or [])
        error = None
        if refused and not verdict.reproduced_any:
            error = f"inconclusive, a connection outside the sandbox was refused: {refused[0]}"
        elif mismatch is not None and not verdict.reproduced_any:
            message = mismatch.get("message") if isinstance(mismatch, dict) else mismatch
            error = "stopped by a request the recording cannot answer: " + (
                str(message).splitlines()[0] if str(message) else "(no message)"
            )
        checks.append(
            RunCheck(manifest.run_id, reason, verdict.reproduced, verdict.total, error=error)
        )
    return CheckReport(tuple(checks))
