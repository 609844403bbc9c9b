"""``explain(run_id)``: which recorded conditions does the failure need?

::

    found = explain("orders-20240131T235930Z-a1b2c3", store="snapshots", times=2, budget=40)
    print(found.describe())    # the failure needs: the recorded timeouts and retries ...

Each trial replays the run ``times`` times with some conditions released
(:mod:`sandbox.explain.conditions`); :func:`sandbox.explain.ddmin.ddmin` chooses the trials.
A trial **reproduces** when the failure reproduced in at least ``quorum`` of its runs
(default: most of them, ``times // 2 + 1``); it **does not reproduce** only when, even if
every run that could not be judged had reproduced, the quorum would not be reached; anything
else is **inconclusive** and never releases a condition.

The services come up once per clock mode (frozen, and live when a trial lets the clock go)
and are reset between runs and trials; a released part of their state is removed after each
reset. A request that the recording has no answer for (the agent took another path once a
condition was released) is answered live by default (``miss="live"``): the recorded answer
does not exist for it. The trials' replays are not kept as runs; the explanation is stored
with the run (:mod:`sandbox.explain.result`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sandbox.errors import ReplayError, SandboxError
from sandbox.explain import parts as state_parts
from sandbox.explain.conditions import Condition, Release, conditions_of, release
from sandbox.explain.ddmin import Search, classify, ddmin
from sandbox.explain.result import (
    ConditionResult,
    Explanation,
    TrialOutcome,
    TrialResult,
    save_explanation,
)
from sandbox.replay.engine import replay
from sandbox.replay.judging.verdict import Verdict
from sandbox.replay.plan import ReplayPlan
from sandbox.replay.serving.matcher import MissMode
from sandbox.replay.serving.policy import PolicySet
from sandbox.snapshot.manifest import Manifest, Predicate
from sandbox.snapshot.store import Store, as_store

ExplainProgress = Callable[[str, int, int], None]
"""``(message, replays done, budget)``; the library never prints."""


def trial_outcome(verdict: Verdict, quorum: int) -> TrialOutcome:
    """See the module documentation."""
    if verdict.reproduced >= quorum:
        return "reproduced"
    if verdict.reproduced + verdict.inconclusive < quorum:
        return "not reproduced"
    return "inconclusive"


@dataclass
class _Up:
    """The services of one bring-up, with parts of their state removed after each reset."""

    endpoints: dict[str, str]
    env: dict[str, str]
    kinds: dict[str, str]
    restore: Callable[[], None]
    removed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def reset(self) -> None:
        self.restore()
        for service, names in self.removed.items():
            state_parts.remove(self.kinds[service], self.endpoints[service], names)


class _Sandboxes:
    """One bring-up per clock mode, made when a trial first needs it."""

    def __init__(
        self,
        manifest: Manifest,
        store: Store,
        stack: contextlib.ExitStack,
        tell: Callable[[str], None],
    ) -> None:
        self.manifest = manifest
        self.store = store
        self.stack = stack
        self.tell = tell
        self.up: dict[str, _Up] = {}

    def get(self, clocks: str) -> _Up:
        found = self.up.get(clocks)
        if found is not None:
            return found
        manifest = self.manifest
        if not manifest.services:
            found = _Up({}, {}, {}, lambda: None)
        else:
            from sandbox.containers import bring_up

            frozen_at = manifest.clock.start if clocks == "frozen" and manifest.clock else None
            env = self.stack.enter_context(
                bring_up(
                    manifest.services,
                    self.store,
                    frozen_at=frozen_at,
                    progress=self.tell,
                )
            )
            found = _Up(
                {name: ep.url for name, ep in env.services.items()},
                env.env,
                {name: ep.kind for name, ep in env.services.items()},
                env.reset,
            )
        self.up[clocks] = found
        return found


@dataclass
class _Trials:
    """Runs trials and keeps their results."""

    run_id: str
    store: Store
    conditions: Sequence[Condition]
    sandboxes: _Sandboxes
    baseline: PolicySet
    times: int
    quorum: int
    budget: int
    miss: str
    entrypoint: str | None
    trust: bool
    progress: ExplainProgress | None
    predicate: Predicate | None
    done: list[int] = field(default_factory=lambda: [0])
    """Replays done, shared with the bring-up's progress lines."""
    used: int = 0
    results: list[TrialResult] = field(default_factory=list)
    by_set: dict[frozenset[str], int] = field(default_factory=dict)

    def afford(self) -> bool:
        return self.used + self.times <= self.budget

    def __call__(self, kept: frozenset[str]) -> TrialOutcome:
        released = [c.key for c in self.conditions if c.key not in kept]
        settings = release(self.baseline, released)
        number = len(self.results) + 1
        self._tell(f"trial {number}: released {', '.join(released) or 'nothing'}")
        try:
            verdict = self._replay(settings)
        except SandboxError as exc:
            if not released:
                raise  # the baseline itself cannot run: nothing to explain, say why
            # e.g. a part of a service's state that cannot be removed: not judged
            self.used += self.times
            result = TrialResult(
                number=number,
                released=released,
                outcome="inconclusive",
                reproduced=0,
                gone=0,
                inconclusive=self.times,
                total=self.times,
                detail=f"the trial could not run: {exc}"[:300],
            )
        else:
            odd = next((r for r in verdict.runs if r.outcome == "inconclusive"), None)
            detail = odd or (verdict.runs[0] if verdict.runs else None)
            result = TrialResult(
                number=number,
                released=released,
                outcome=trial_outcome(verdict, self.quorum),
                reproduced=verdict.reproduced,
                gone=verdict.gone,
                inconclusive=verdict.inconclusive,
                total=verdict.total,
                detail=detail.detail[:300] if detail is not None else "",
            )
        self.results.append(result)
        self.by_set[kept] = number
        self._tell(f"trial {number}: {result.outcome} ({result.reproduced}/{result.total})")
        return result.outcome

    def _replay(self, settings: Release) -> Verdict:
        """One trial's N replays; their runs are removed from the store afterwards."""
        up = self.sandboxes.get(settings.clocks)
        up.removed = settings.parts
        up.reset()
        plan = ReplayPlan(
            times=self.times,
            policies=settings.policies,
            miss=MissMode.parse(self.miss),
            enforce_order=settings.enforce_order,
            clocks="live" if settings.clocks == "live" else "frozen",
            inject_faults=settings.inject_faults,
            entrypoint=self.entrypoint,
            trust=self.trust,
            predicate=self.predicate,
        )
        report = replay(self.run_id, plan, store=self.store, services_up=up)
        self.used += self.times
        for replayed in report.replays:
            with contextlib.suppress(OSError):
                self.store.delete(replayed)
        return report.verdict

    def _tell(self, message: str) -> None:
        self.done[0] = self.used
        if self.progress is not None:
            self.progress(message, self.used, self.budget)


def explain(
    run_id: str,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    times: int = 2,
    budget: int = 40,
    quorum: int | None = None,
    policies: PolicySet | None = None,
    miss: str = "live",
    entrypoint: str | None = None,
    trust: bool = False,
    progress: ExplainProgress | None = None,
    save: bool = True,
    predicate: Predicate | None = None,
) -> Explanation:
    """Find the smallest set of recorded conditions that still reproduces the failure of
    ``run_id``; see the module documentation. ``policies`` is the baseline (what a plain
    ``sandbox replay`` would use); ``predicate`` judges the trials instead of the recorded
    failure's; the result is stored with the run unless ``save`` is false."""
    if times < 1:
        raise ReplayError(f"times must be at least 1, got {times}")
    need = quorum if quorum is not None else times // 2 + 1
    if not 1 <= need <= times:
        raise ReplayError(f"quorum must be between 1 and times ({times}), got {need}")
    if budget < times:
        raise ReplayError(f"the budget ({budget} replays) is less than one trial ({times})")
    st = as_store(store)
    manifest = st.load_manifest(run_id)
    recording = st.load_events(run_id)
    baseline = policies or PolicySet()

    done = [0]

    def tell(line: str) -> None:
        if progress is not None:
            progress(line, done[0], budget)

    with contextlib.ExitStack() as stack:
        sandboxes = _Sandboxes(manifest, st, stack, tell)
        frozen = sandboxes.get("frozen")
        parts = {
            name: state_parts.parts_of(frozen.kinds[name], endpoint)
            for name, endpoint in frozen.endpoints.items()
        }
        conditions = conditions_of(manifest, recording, baseline, parts)
        trials = _Trials(
            run_id,
            st,
            conditions,
            sandboxes,
            baseline,
            times,
            need,
            budget,
            miss,
            entrypoint,
            trust,
            progress,
            predicate,
            done,
        )
        search = Search(trials, trials.afford)
        keys = [c.key for c in conditions]
        everything = frozenset(keys)
        status = "explained"
        verdicts: dict[str, tuple[str, int | None]] = {}
        if search.test(everything) != "reproduced":
            status = "not reproduced"
        else:
            kept, finished = ddmin(keys, search)
            if not finished:
                status = "incomplete"
            found = search.outcomes.get(frozenset(kept))
            shown = trials.by_set.get(frozenset(kept)) if found == "reproduced" else None
            for key in keys:
                if key not in kept:
                    verdicts[key] = ("not needed", shown)
            for key, (why, trial_set) in classify(kept, keys, search).items():
                evidence = trials.by_set.get(trial_set) if trial_set is not None else None
                verdicts[key] = (why, evidence)
    explanation = Explanation(
        run_id=run_id,
        created=datetime.now(UTC).isoformat(),
        status=status,
        times=times,
        quorum=need,
        budget=budget,
        replays=trials.used,
        one_at_a_time=(1 + len(conditions)) * times,
        conditions=[
            ConditionResult(
                key=c.key,
                held=c.held,
                released=c.released,
                verdict=verdicts.get(c.key, ("untested", None))[0],
                evidence=verdicts.get(c.key, ("untested", None))[1],
            )
            for c in conditions
        ],
        trials=trials.results,
    )
    if save:
        save_explanation(st, explanation)
    return explanation
