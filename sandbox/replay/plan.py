"""What a replay should do: one frozen :class:`ReplayPlan`, the one place its options, their
defaults and their checks are written.

::

    plan = ReplayPlan(times=5, policies=PolicySet().with_rule("live", "tool"), timeout=60)
    report = replay("orders-20240131T235930Z-a1b2c3", plan, store="snapshots")

The command line (:meth:`ReplayPlan.from_command_line`, from its words), ``sandbox pytest``'s
generated tests, ``explain``, ``sweep``, the pytest plugin and forks build one;
:func:`sandbox.replay.engine.replay` carries it out. Where the run is (the store), how
progress is told and services someone else brought up are arguments of the replay, not of
the plan. A plan is checked when it is made: a bad value is a
:class:`~sandbox.errors.ReplayError` (or an :class:`~sandbox.errors.UnknownNameError` listing
the valid names) before anything comes up.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.errors import ReplayError, UnknownNameError
from sandbox.replay.report import ClockMode
from sandbox.replay.serving.matcher import MissMode
from sandbox.replay.serving.policy import PolicySet
from sandbox.snapshot.manifest import ForkEdits, Predicate

CLOCK_MODES: tuple[ClockMode, ...] = ("frozen", "live")


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay of a run should do. Every field has its default: ``ReplayPlan()`` replays
    once with model and HTTP calls from the recording, tools live against the restored
    services, clocks frozen, the recorded faults injected and the recorded order enforced."""

    times: int = 1
    """How many runs (at least one)."""
    policies: PolicySet = field(default_factory=PolicySet)
    """How each boundary is served (:mod:`sandbox.replay.serving.policy`)."""
    miss: MissMode = MissMode.FAIL
    """What a request the recording lacks gets (its name is accepted too: ``"live"``)."""
    enforce_order: bool = True
    """Concurrent calls complete in their recorded order
    (:mod:`sandbox.replay.conditions.ordering`)."""
    clocks: ClockMode = "frozen"
    """``frozen`` at the recorded start, or ``live`` (real clocks in the agent and the
    containers)."""
    entrypoint: str | None = None
    """``module:function`` run instead of the recorded entrypoint (the fixed one)."""
    services: Mapping[str, str] | None = None
    """Service name -> endpoint: replay against services already up instead of bringing them
    up (no Docker; :mod:`sandbox.replay.attached`)."""
    trust: bool = False
    """Run an imported run's command or code outside the project on this host
    (:mod:`sandbox.replay.isolation.trust`)."""
    predicate: Predicate | None = None
    """Judge the runs by this predicate instead of the recorded failure's (or give one to a
    run that has none)."""
    fork: ForkEdits | None = None
    """Each run is a fork of the run with these edits (:mod:`sandbox.replay.fork`)."""
    inject_faults: bool = True
    """Raise the recorded timeouts and retry failures again
    (:mod:`sandbox.replay.conditions.faults`)."""
    empty: tuple[str, ...] = ()
    """Services brought up empty instead of with their captured state."""
    timeout: float | None = None
    """Seconds each run may take before it is stopped and judged inconclusive (default: ten
    times the recorded run's duration, at least a minute;
    :mod:`sandbox.replay.conditions.deadline`)."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables set by hand for the replayed runs, over the recorded ones (a value redacted
    at capture, one the capture never saw); the restored services' bindings still win."""

    def __post_init__(self) -> None:
        if self.times < 1:
            raise ReplayError(f"times must be at least 1, got {self.times}")
        if self.clocks not in CLOCK_MODES:
            raise UnknownNameError("clock mode", str(self.clocks), list(CLOCK_MODES))
        if self.timeout is not None and self.timeout <= 0:
            raise ReplayError(f"timeout must be a positive number of seconds, got {self.timeout:g}")
        if self.empty and self.services is not None:
            raise ReplayError("empty services need the sandbox to bring the services up")
        # Values from callers that are not type-checked (a generated test, a pytest marker)
        # come in their plain forms: a miss mode by name, a list of services.
        object.__setattr__(self, "miss", MissMode.parse(self.miss))
        object.__setattr__(self, "empty", tuple(self.empty))
        object.__setattr__(self, "env", dict(self.env))
        if self.services is not None:
            object.__setattr__(self, "services", dict(self.services))

    @classmethod
    def from_command_line(
        cls,
        *,
        miss: str = "fail",
        predicate: str | None = None,
        services_file: str | Path | None = None,
        env: Sequence[str] = (),
        until: int | None = None,
        overrides: Sequence[str] = (),
        model: str | None = None,
        params: Sequence[str] = (),
        **options: Any,
    ) -> ReplayPlan:
        """The plan ``sandbox replay``'s options give, in their words: the miss mode by name,
        a predicate's text, a services JSON file (name -> endpoint), ``NAME=VALUE`` variables,
        a fork's ``--until STEP``, ``--override STEP=JSON|FILE``, ``--model`` and ``--param
        KEY=VALUE``; ``options`` are the other fields, as they are."""
        from sandbox.replay.attached import load_services
        from sandbox.replay.fork import fork_edits
        from sandbox.replay.isolation.environment import given_variable
        from sandbox.snapshot.predicate_syntax import parse_predicate

        return cls(
            miss=MissMode.parse(miss),
            predicate=parse_predicate(predicate) if predicate is not None else None,
            services=load_services(services_file) if services_file is not None else None,
            env=dict(given_variable(text) for text in env),
            fork=fork_edits(until=until, overrides=overrides, model=model, params=params),
        ).with_options(**options)

    def with_options(self, **options: Any) -> ReplayPlan:
        """A copy with these fields changed (checked as a new plan); a name that is no field
        is an :class:`~sandbox.errors.UnknownNameError` listing them."""
        names = [f.name for f in dataclasses.fields(self)]
        for name in options:
            if name not in names:
                raise UnknownNameError("replay option", name, names)
        return dataclasses.replace(self, **options) if options else self

    def served_by(self) -> PolicySet:
        """The policies in force: :attr:`policies`, with the clock served live when
        :attr:`clocks` is ``live``."""
        return self.policies.with_rule("live", "clock") if self.clocks == "live" else self.policies
