"""One replayed run inside the current process: the clock frozen, the replay boundary
installed, the generators seeded and ``uuid4``/httpx (and the entropy sources, when the run
drew from them) patched as at capture.

The engine opens a :class:`ReplaySession` around an in-process entrypoint; the replay hook of
a replayed command (:mod:`sandbox.replay.command`) opens the same session inside the child
process. Either way, what the boundary saw besides the events (a mismatch, drift, injected
faults, turnstile stalls) comes out as a :class:`Served`, which a child hands to its parent as
JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.capture.children import follow_children
from sandbox.capture.entropy import URANDOM
from sandbox.capture.run import start_recording
from sandbox.errors import NetworkRefusedError, ReplayMismatchError
from sandbox.names import NAMING_BY_ORIGIN, NAMING_LABEL
from sandbox.replay.boundary import Drift, Injection, ReplayBoundary
from sandbox.replay.conditions.clock import FrozenClock, LiveClock, ReplayClock
from sandbox.replay.conditions.ordering import Turnstile
from sandbox.replay.isolation.environment import supplied_secrets
from sandbox.replay.isolation.netguard import REFUSED_EVENT, NetGuard, endpoint_of
from sandbox.replay.isolation.redirect import Redirect
from sandbox.replay.judging.jsondiff import MISSING, FieldDiff
from sandbox.replay.report import ClockMode, mismatch_from_json, mismatch_json
from sandbox.replay.serving.matcher import MissMode
from sandbox.replay.serving.policy import PolicySet, parse_rule
from sandbox.replay.serving.routing import canonical_name
from sandbox.replay.window import Labelled
from sandbox.seam import boundary as seam
from sandbox.snapshot.events import Event, StateTransition
from sandbox.snapshot.manifest import ForkEdits, Manifest
from sandbox.snapshot.store import RunWriter, Store

OF_VAR = "SANDBOX_REPLAY_OF"
RUN_VAR = "SANDBOX_REPLAY_RUN_ID"
OPTIONS_VAR = "SANDBOX_REPLAY_OPTIONS"


@dataclass(frozen=True)
class ReplayOptions:
    """How the boundaries of a replayed run are served."""

    policies: PolicySet = field(default_factory=PolicySet)
    miss: MissMode = MissMode.FAIL
    enforce_order: bool = True
    clocks: ClockMode = "frozen"
    sandbox: Mapping[str, str] = field(default_factory=dict)
    """Service name -> its endpoint in the sandbox: what the agent may connect to."""
    fork: ForkEdits | None = None
    """A fork's edits (:mod:`sandbox.replay.fork`); ``None`` for a replay."""
    inject_faults: bool = True
    """Raise the recorded timeouts and retry failures again (``False``: attempts run live,
    and a recorded answer that timed out is never served)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "rules": [str(rule) for rule in self.policies.rules],
            "defaults": dict(self.policies.defaults),
            "miss": self.miss.value,
            "enforce_order": self.enforce_order,
            "clocks": self.clocks,
            "sandbox": dict(self.sandbox),
            "fork": None if self.fork is None else self.fork.model_dump(mode="json"),
            "inject_faults": self.inject_faults,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReplayOptions:
        policies = PolicySet(
            tuple(parse_rule(str(text)) for text in data.get("rules", ())),
            dict(data["defaults"]) if data.get("defaults") else PolicySet().defaults,
        )
        clocks: ClockMode = "live" if data.get("clocks") == "live" else "frozen"
        return cls(
            policies=policies,
            miss=MissMode.parse(str(data.get("miss", "fail"))),
            enforce_order=bool(data.get("enforce_order", True)),
            clocks=clocks,
            sandbox={str(k): str(v) for k, v in dict(data.get("sandbox") or {}).items()},
            fork=None if data.get("fork") is None else ForkEdits.model_validate(data["fork"]),
            inject_faults=bool(data.get("inject_faults", True)),
        )


@dataclass
class Served:
    """What a replayed run's boundary saw besides its events."""

    mismatch: ReplayMismatchError | None = None
    drift: list[Drift] = field(default_factory=list)
    injected: list[Injection] = field(default_factory=list)
    stalls: int = 0
    exit_code: int | None = None
    """The exit code of a replayed command (``None`` in-process)."""
    refused: list[str] = field(default_factory=list)
    """Connections outside the sandbox that were refused
    (:mod:`sandbox.replay.isolation.netguard`)."""
    timed_out: float | None = None
    """The wall-clock limit (seconds) the run reached and was stopped at
    (:mod:`sandbox.replay.conditions.deadline`)."""
    stand_ins: list[str] = field(default_factory=list)
    """Recorded errors raised as a stand-in class (see :mod:`sandbox.replay.conditions.faults`)."""
    reached: bool = True
    """Whether the program entered the run's block (:mod:`sandbox.replay.window`)."""
    outside: int = 0
    """Crossings that could change state the program made outside the run's block (before
    it, or beside it in other threads)."""
    commands: dict[str, int] = field(default_factory=dict)
    """Service -> the commands it answered in the run's block
    (:meth:`~sandbox.replay.boundary.ReplayBoundary.answered`)."""

    @classmethod
    def of(cls, rec: ReplayBoundary, refused: Sequence[str] = ()) -> Served:
        window = rec.window
        return cls(
            rec.mismatch,
            list(rec.drift),
            list(rec.injected),
            rec.turnstile.stalls,
            refused=list(refused),
            stand_ins=list(rec.stand_ins),
            reached=window.reached,
            outside=window.crossings_outside,
            commands=dict(rec.commands),
        )

    def to_json(self) -> dict[str, Any]:
        m = self.mismatch
        return {
            "mismatch": None if m is None else mismatch_json(m),
            "drift": [
                {
                    "kind": d.kind,
                    "name": d.name,
                    "task": d.task,
                    "recorded_seq": d.recorded_seq,
                    "diffs": [f.to_json() for f in d.diffs],
                }
                for d in self.drift
            ],
            "injected": [
                {"name": i.name, "attempt": i.attempt, "error": i.error, "ran_live": i.ran_live}
                for i in self.injected
            ],
            "stalls": self.stalls,
            "exit_code": self.exit_code,
            "refused": list(self.refused),
            "stand_ins": list(self.stand_ins),
            "reached": self.reached,
            "outside": self.outside,
            "commands": dict(self.commands),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Served:
        raw = data.get("mismatch")
        mismatch = None if raw is None else mismatch_from_json(raw)
        drift = [
            Drift(
                d["kind"],
                d["name"],
                d["task"],
                int(d["recorded_seq"]),
                tuple(
                    FieldDiff(f["path"], f.get("expected", MISSING), f.get("actual", MISSING))
                    for f in d["diffs"]
                ),
            )
            for d in data.get("drift", ())
        ]
        injected = [
            Injection(i["name"], i.get("attempt"), i["error"], bool(i["ran_live"]))
            for i in data.get("injected", ())
        ]
        code = data.get("exit_code")
        return cls(
            mismatch,
            drift,
            injected,
            int(data.get("stalls", 0)),
            None if code is None else code,
            [str(r) for r in data.get("refused", ())],
            stand_ins=[str(s) for s in data.get("stand_ins", ())],
            reached=bool(data.get("reached", True)),
            outside=int(data.get("outside", 0)),
            commands={str(k): int(v) for k, v in (data.get("commands") or {}).items()},
        )


def replay_variables(
    store: Store, original: str, run_id: str, options: ReplayOptions, **more: str
) -> dict[str, str]:
    """The variables that start the replay hook: for the program (``result``: where it
    leaves its :class:`Served`), or for a child of it (``task``, ``events``: see
    :mod:`sandbox.capture.children`)."""
    settings = {**options.to_json(), "store": store.location, **more}
    return {OF_VAR: original, RUN_VAR: run_id, OPTIONS_VAR: json.dumps(settings)}


class ReplaySession:
    """Replay one run in this process, recording it through ``writer``; :meth:`close` undoes
    everything (the patches, the boundary, the clock) and closes the writer.

    The recording proper (the generators seeded, the ids and entropy drawn through the seam,
    the clients' hooks: :func:`sandbox.capture.run.start_recording`) begins at once, or, with
    ``at_hand_over``, when the program enters ``capture.run`` (the boundary's
    :meth:`~sandbox.replay.boundary.ReplayBoundary.hand_over`): where a run the program
    opened itself began at capture, after its imports; with its ``block`` labelled (its place
    among the program's blocks, or its call), at that block only (:mod:`sandbox.replay.window`).
    The clock, the network guard and the services' redirection hold from the start either
    way."""

    def __init__(
        self,
        writer: RunWriter,
        store: Store,
        original: Manifest,
        recording: Sequence[Event],
        options: ReplayOptions,
        *,
        follow: bool = True,
        at_hand_over: bool = False,
        block: Labelled | None = None,
    ) -> None:
        self.writer = writer
        self.clock: ReplayClock = (
            FrozenClock(original.clock.start)
            if options.clocks == "frozen" and original.clock is not None
            else LiveClock()
        )
        self._undo: list[Callable[[], None]] = []
        self._closed = False
        self._refusals: list[NetworkRefusedError] = []
        """The refusals the run met (not those of the program outside its block)."""
        allowed = (endpoint_of(url) for url in options.sandbox.values())
        self.guard = NetGuard(
            (e for e in allowed if e is not None),
            policies=options.policies,
            on_refusal=self._refused,
        )
        redirect = Redirect(
            original, options.sandbox, policies=options.policies, refuse=self.guard.note
        )
        try:
            # Clients are patched as the agent imports them (sandbox.capture.onimport).
            self._undo.append(redirect.install())
            self.clock.start()
            self.rec = ReplayBoundary(
                writer,
                store,
                recording,
                policies=options.policies,
                miss=options.miss,
                turnstile=Turnstile(
                    recording, enabled=options.enforce_order, canonical_name=canonical_name
                ),
                replay_clock=self.clock,
                fork=options.fork,
                inject_faults=options.inject_faults,
                seed=original.seeds.get("run"),
                supplied=supplied_secrets(original, os.environ),
            )
            self.rec.origin_naming = original.labels.get(NAMING_LABEL) == NAMING_BY_ORIGIN
            if block is not None:
                self.rec.window.opening, self.rec.window.call = block.opening, block.call
            self._undo.append(seam.install(self.rec))
            self._undo.append(self.guard.install())
            seed = original.seeds.get("run")
            if seed is not None:
                entropy = any(e.name == URANDOM for e in recording if e.kind == "random")
                ids = "uuid4" in original.seeds
                seeded = "random" in original.seeds  # not by a run that began under another
                run_seed: int = seed

                def start() -> None:
                    if not self._closed:
                        self._undo.extend(
                            start_recording(
                                self.rec, run_seed, ids=ids, entropy=entropy, generators=seeded
                            )
                        )

                if at_hand_over:
                    self.rec.on_hand_over = start
                else:
                    start()
            if follow:
                self._undo.append(self._follow_children(store, original.run_id, options))
        except BaseException:
            self._undo_all()
            self.clock.stop()
            writer.close()
            raise

    def _refused(self, error: NetworkRefusedError) -> None:
        """Note the refusal in the run's log: the verdict names it, whatever the agent does
        with the error. One met outside the run's block is not the run's."""
        if self.rec.window.outside:
            self.rec.window.refusals += 1
            return
        self._refusals.append(error)
        self.rec.emit(
            StateTransition,
            None,
            name=REFUSED_EVENT,
            target="refused",
            data={"host": error.host, "port": error.port, "message": str(error)},
        )

    def _follow_children(
        self, store: Store, original: str, options: ReplayOptions
    ) -> Callable[[], None]:
        """Replay the program's Python children as their recorded tasks, into this run."""

        def child_env(task: str, events: str) -> dict[str, str]:
            return replay_variables(
                store, original, self.writer.manifest.run_id, options, task=task, events=events
            )

        return follow_children(child_env, self.rec.adopt)

    def _undo_all(self) -> None:
        for step in reversed(self._undo):
            step()
        self._undo.clear()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            try:
                self.rec.flush_pending()
            finally:
                self._undo_all()
                self.rec.closed = True
                self.writer.close()
        finally:
            self.clock.stop()

    def served(self) -> Served:
        return Served.of(self.rec, [str(e) for e in self._refusals])
