"""``replay(run_id, plan)``: bring the captured environment up, re-run the agent as the
:class:`~sandbox.replay.plan.ReplayPlan` says (N times, every boundary served by its policy),
and judge whether the recorded failure came back.

::

    report = replay("orders-20240131T235930Z-a1b2c3", ReplayPlan(times=20), store="snapshots")
    report = replay("orders-20240131T235930Z-a1b2c3", store="snapshots", times=20)  # the same
    report.verdict.summary()      # 'failure reproduced: 20/20 runs'
    report.exit_code              # 1 reproduced, 0 gone, 2 could not be judged

Each replayed run is recorded as a new run of the store (``manifest.replay_of`` names the
original) by :class:`~sandbox.replay.boundary.ReplayBoundary`. Between runs the services
are reset to their restored state (no container restart). Per run the report keeps the
first divergence from the original, the services whose end state differs from the
original's, and the verdict's detail.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import socket
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sandbox.capture.run import finish_manifest, make_run_id
from sandbox.capture.served import MADE, MadeApp, request_replayer
from sandbox.errors import (
    NetworkRefusedError,
    ReplayError,
    ReplayMismatchError,
    SandboxError,
    UnknownNameError,
)
from sandbox.names import FAILURE_EVENT, IMPORTED_FROM_LABEL, REQUEST_EVENT, TRACE_SOURCE
from sandbox.replay.attached import ServicesUp
from sandbox.replay.boundary import MISMATCH_EVENT, Drift, Injection, ReplayStopped
from sandbox.replay.command import recorded_command, run_command
from sandbox.replay.conditions.deadline import Deadline, ReplayTimedOut, default_timeout
from sandbox.replay.fork import stored_edits
from sandbox.replay.isolation.environment import applied, restored_environment
from sandbox.replay.isolation.exits import Exits, ProcessExit, exits_caught
from sandbox.replay.isolation.netguard import REFUSED_EVENT
from sandbox.replay.isolation.pools import let_go_of_pools
from sandbox.replay.isolation.sealed import forget_project_modules, sealed_import
from sandbox.replay.isolation.trust import check_callable, check_trusted
from sandbox.replay.judging.coverage import boundary_calls, exercised
from sandbox.replay.judging.divergence import Divergence, StateDiff, first_divergence
from sandbox.replay.judging.endstate import end_state_diffs
from sandbox.replay.judging.verdict import (
    Expectation,
    ReplayOutcome,
    RunVerdict,
    Verdict,
    judge_run,
    marked_reason,
)
from sandbox.replay.plan import ReplayPlan
from sandbox.replay.report import (
    ReplayReport,
    cwd_note,
    mismatch_json,
    overlap_note,
    replay_notes,
)
from sandbox.replay.serving.policy import PolicySet
from sandbox.replay.serving.routing import canonical_name, canonical_url
from sandbox.replay.session import ReplayOptions, ReplaySession, Served
from sandbox.replay.source_signature import signature_in_source
from sandbox.replay.window import Labelled
from sandbox.seam.apploop import run_in_app_loop
from sandbox.snapshot.events import Event, HTTPExchange
from sandbox.snapshot.manifest import (
    Entrypoint,
    Failure,
    ForkEdits,
    Manifest,
    ServiceState,
)
from sandbox.snapshot.store import Store, as_store

ReplayProgress = Callable[[str, int, int], None]
"""``(message, done, total)``: called as the replay moves on; the library never prints."""
_OWN_EVENTS = frozenset({FAILURE_EVENT, MISMATCH_EVENT, REFUSED_EVENT, REQUEST_EVENT})


# --- running -------------------------------------------------------------------------------


def resolve_entrypoint(
    target: str,
    sealed: contextlib.AbstractContextManager[list[NetworkRefusedError]] | None = None,
) -> Callable[..., Any]:
    """``module:function`` (a dotted attribute path after the colon) as a callable. A module
    not found on ``sys.path`` is looked for in the working directory too, as ``python -m``
    does (the ``sandbox`` command run from the project that holds the agent). ``sealed``:
    held around the import (:func:`~sandbox.replay.isolation.sealed.sealed_import`)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ReplayError(f"entrypoint {target!r} is not module:function")
    with sealed or contextlib.nullcontext([]) as met:
        try:
            found: Any = _import(module_name)
        except ImportError as exc:
            if not met:
                raise ReplayError(
                    f"cannot import {module_name!r} for entrypoint {target!r}: {exc}"
                ) from None
        except Exception:
            # The module raised as it ran (it reads a variable the replay sets, say): it is
            # imported again inside each run, where what it raises is the run's, and judged.
            return _ImportedInRun(target)
    if met:  # it reached outside before the sandbox was up: again inside each run
        return _ImportedInRun(target)
    return _attribute(found, attr, target)


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.split(".")[0]
        if exc.name != top or os.getcwd() in sys.path or "" in sys.path:
            raise
        sys.path.insert(0, os.getcwd())
        return importlib.import_module(module_name)


class _ImportedInRun:
    """An entrypoint whose module is imported as each run calls it, afresh: the project's
    modules a run imported are forgotten when it returns, so that the next run imports
    them again, as a new process would (what they opened at import, to the sandbox, the
    reset between runs has closed). Its parameters, as its source writes them, are its
    signature (none to look at when they cannot be read)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.module_name, _, self.attr = target.partition(":")
        self.__signature__ = signature_in_source(self.module_name, self.attr)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        before = set(sys.modules)
        try:
            found = importlib.import_module(self.module_name)
            return callable_entry(_attribute(found, self.attr, self.target))(*args, **kwargs)
        finally:
            forget_project_modules(set(sys.modules) - before)


def _attribute(found: Any, attr: str, target: str) -> Callable[..., Any]:
    """The callable at the dotted ``attr`` of a module; for ``attr()``, what replays a
    request through the app it makes (:class:`~sandbox.capture.served.MadeApp`)."""
    module_name = target.partition(":")[0]
    if attr.endswith(MADE):
        return MadeApp(_attribute(found, attr.removesuffix(MADE), target), target)
    for part in attr.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise ReplayError(f"{module_name!r} has no {attr!r} (entrypoint {target!r})")
    if not callable(found):
        raise ReplayError(f"entrypoint {target!r} is not callable")
    return found  # type: ignore[no-any-return]


def callable_entry(found: Callable[..., Any]) -> Callable[..., Any]:
    """What a replay calls for the object an entrypoint names: an ASGI app that captures
    its requests (what the middleware records when given no entrypoint) replays the
    recorded request through itself; anything else is called as it is."""
    return request_replayer(found) or found


def _called(
    manifest: Manifest, target: str, override: str | None, function: Callable[..., Any]
) -> Entrypoint:
    """What each replay calls: ``target`` with the arguments the run recorded (a decorated
    task's call). An entrypoint given instead of the recorded one gets them when its
    parameters take them (the fixed task itself), none otherwise (a function that supplies
    its own). One whose module raised as it was imported before the replay is looked at in
    its source; when its ``def`` is not there to read, it gets them."""
    recorded = manifest.entrypoint
    args = list(recorded.args) if recorded else []
    kwargs = dict(recorded.kwargs) if recorded else {}
    if override and (args or kwargs) and not _takes(function, args, kwargs):
        args, kwargs = [], {}
    return Entrypoint(kind="callable", target=target, cwd=os.getcwd(), args=args, kwargs=kwargs)


def _takes(function: Callable[..., Any], args: list[Any], kwargs: dict[str, Any]) -> bool:
    """Whether ``function``'s parameters take these arguments (not when it has no
    signature to look at)."""
    try:
        inspect.signature(function).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return False
    return True


def _no_function() -> None:
    raise ReplayError("a recorded command is replayed in a child process, not called")


def _target(manifest: Manifest, override: str | None) -> str:
    if override:
        return override
    entry = manifest.entrypoint
    if entry is not None and entry.kind == "callable" and entry.target:
        return entry.target
    what = " ".join(entry.command) if entry and entry.command else "nothing"
    raise ReplayError(
        f"run {manifest.run_id} was captured from a command ({what}); replay runs a "
        "module:function in-process: give entrypoint='module:function'"
    )


def comparable(events: Sequence[Event]) -> list[Event]:
    """Events as compared across runs: the replayer's own notes left out, local HTTP
    servers' ports dropped."""
    out: list[Event] = []
    for event in events:
        if event.kind == "state" and event.name in _OWN_EVENTS:
            continue
        if isinstance(event, HTTPExchange):
            event = event.model_copy(
                update={"name": canonical_name("http", event.name), "url": canonical_url(event.url)}
            )
        out.append(event)
    return out


TRACED_KINDS = frozenset({"llm", "tool", "http", "result"})
"""What a run imported from a trace recorded: the steps a replay of it is compared on."""


def from_trace(manifest: Manifest) -> bool:
    """The run was imported from an OpenTelemetry trace (not captured)."""
    return manifest.labels.get(IMPORTED_FROM_LABEL) == TRACE_SOURCE


def as_traced(events: Sequence[Event]) -> list[Event]:
    """Events as a trace records them, for comparing a replay with a run imported from one:
    the steps a trace has no span for (clock reads, random draws, retries ...) left out,
    and HTTP request headers, which a trace does not keep (an agent's client sends its own:
    not a divergence)."""
    return [
        e.model_copy(update={"request_headers": {}}) if isinstance(e, HTTPExchange) else e
        for e in events
        if e.kind in TRACED_KINDS
    ]


@dataclass
class _Run:
    run_id: str
    verdict: RunVerdict
    divergence: Divergence | None
    state_diffs: list[StateDiff]
    mismatch: ReplayMismatchError | None
    drift: list[Drift]
    injected: list[Injection]
    stalls: int
    refused: list[str] = field(default_factory=list)
    stand_ins: list[str] = field(default_factory=list)


@dataclass
class _Settings:
    store: Store
    manifest: Manifest
    recording: list[Event]
    compared: list[Event]
    """The original log as runs are compared with it (:func:`comparable`)."""
    expected: Expectation
    function: Callable[..., Any]
    plan: ReplayPlan
    policies: PolicySet
    """The policies in force (:meth:`ReplayPlan.served_by`)."""
    timeout: float
    """Seconds a run may take before it is stopped (:mod:`sandbox.replay.conditions.deadline`):
    the plan's, else the default for the recording."""
    called: Entrypoint
    """What ``function`` is: its target and the arguments it is called with, as each
    replay's manifest records it."""
    command: Entrypoint | None = None
    """The recorded command, run again in a child process (``None``: ``function`` in-process)."""
    traced: bool = False
    """The original was imported from a trace: divergence is looked for in what a trace
    records (:func:`as_traced`)."""


def _replay_once(
    s: _Settings, index: int, endpoints: Mapping[str, str], services: Sequence[ServiceState]
) -> _Run:
    original = s.manifest
    run_id = make_run_id(f"{original.name or 'run'}-{_what(s.plan.fork)}", time.time())
    manifest = original.model_copy(
        update={
            "run_id": run_id,
            "created": datetime.now(UTC),
            "status": "running",
            "pid": os.getpid(),
            "entrypoint": s.command or s.called,
            "failure": None,
            "exit_code": None,
            "event_count": None,
            "events_sha256": None,
            "replay_of": original.run_id,
            "fork": None
            if s.plan.fork is None
            else stored_edits(s.plan.fork, s.store.placeholder_key()),
            "labels": {
                **original.labels,
                "replay.policies": s.policies.describe(),
                "replay.clocks": s.plan.clocks,
                "replay.enforce_order": str(s.plan.enforce_order).lower(),
                "replay.index": str(index + 1),
                **({} if s.plan.inject_faults else {"replay.faults": "not injected"}),
                "replay.host": socket.gethostname(),
            },
        }
    )
    writer = s.store.begin(manifest)
    options = ReplayOptions(
        s.policies,
        s.plan.miss,
        s.plan.enforce_order,
        s.plan.clocks,
        endpoints,
        s.plan.fork,
        inject_faults=s.plan.inject_faults,
    )
    served: Served
    exit_code: int | None = None
    exited: int | None = None
    if s.command is not None:
        served = run_command(
            s.command,
            writer=writer,
            store=s.store,
            original=original.run_id,
            options=options,
            timeout=s.timeout,
        )
        exit_code = served.exit_code
    else:
        let_go_of_pools()  # made before this run: to where the run was, or reset since
        session = ReplaySession(writer, s.store, original, s.recording, options)
        limit = Deadline(s.timeout)
        exits = Exits()
        try:
            with limit.armed(), exits_caught() as exits:
                value = s.function(*s.called.args, **s.called.kwargs)
                if inspect.iscoroutine(value):  # an async function's: run it to its end
                    value = run_in_app_loop(value)  # on the loop every replay's runs on
            session.rec.offer_result(value)
        except (ReplayStopped, ReplayTimedOut, ProcessExit):
            pass
        except (Exception, SystemExit) as exc:
            if not limit.expired:
                session.rec.record_exception(exc)
        finally:
            session.close()
        served = session.served()
        served.timed_out = s.timeout if limit.expired else None
        exited = exits.code

    logged = s.store.load_events(run_id)
    events = comparable(logged)
    uncaptured = outside_capture(services, endpoints)  # before anything else reads a table
    used: list[str] = []
    if s.expected.calls and not exercised(s.expected.calls, boundary_calls(events))[0].made:
        used += state_used(services, endpoints)  # the run's own reads, not the end state's
        used += [
            f"{n} {service} command{'s' * (n > 1)} answered"
            for service, n in served.commands.items()
        ]
    after = [_end_state(s, state, endpoints) for state in services]
    divergence = (
        first_divergence(as_traced(s.compared), as_traced(events))
        if s.traced
        else first_divergence(s.compared, events)
    )
    stopped = served.mismatch
    outcome = ReplayOutcome.from_events(
        events,
        endpoints=endpoints,
        kinds={state.name: state.kind for state in services},
        divergence=divergence,
        exit_code=exit_code,
        mismatch=None
        if stopped is None
        else f"stopped at {stopped.kind} {stopped.name!r}: the recording has no answer",
        stalls=served.stalls,
        state=tuple(used),
        refused=served.refused[0] if served.refused else None,
        timed_out=served.timed_out,
        uncaptured=uncaptured,
        marked=marked_reason(logged),  # the replayer's own notes are not compared
        exited=exited,
        **_outside_block(Labelled.of(s.manifest.labels).block, served),
    )
    verdict = judge_run(index, s.expected, outcome)
    failure = (
        Failure(reason=f"reproduced: {verdict.detail}"[:500], predicate=s.expected.predicate)
        if verdict.reproduced
        else None
    )
    finish_manifest(
        s.store,
        writer.manifest.model_copy(update={"services": after, "failure": failure}),
        writer,
        exit_code=served.exit_code,
    )
    return _Run(
        run_id,
        verdict,
        divergence,
        end_state_diffs(s.store, services, after, endpoints) if services else [],
        served.mismatch,
        served.drift,
        served.injected,
        served.stalls,
        served.refused,
        served.stand_ins,
    )


def _outside_block(block: str | None, served: Served) -> dict[str, str | None]:
    """What the program did outside the recorded run's ``block`` (a script's run, labelled
    with it), described: it never entered the block (``unreached``), or crossed into state
    beside or before it (``before``)."""
    if block is None:
        return {"unreached": None, "before": None}
    unreached = (
        None
        if served.reached
        else f"the program never entered its {block}, the recorded run's: the replay did not "
        "reach the run (replay the run's own function with --entrypoint module:function)"
    )
    before = (
        f"the program made {served.outside} crossing(s) outside the recorded run's {block} "
        "(before it, or beside it), against the state restored for the run"
        if served.outside
        else None
    )
    return {"unreached": unreached, "before": before}


def _what(fork: ForkEdits | None) -> str:
    return "replay" if fork is None else "fork"


def _end_state(s: _Settings, state: ServiceState, endpoints: Mapping[str, str]) -> ServiceState:
    """A replayed run's end state: its hash; a fork keeps the dump too (``sandbox diff``
    shows its rows against another run's)."""
    endpoint = endpoints.get(state.name)
    if s.plan.fork is not None and endpoint is not None:
        from sandbox.services.statecapture import capture_end_state

        with contextlib.suppress(SandboxError):
            return capture_end_state(state, endpoint, s.store)
    return state.model_copy(update={"after": None, "hash_after": _hash(state, endpoints)})


def outside_capture(states: Sequence[ServiceState], endpoints: Mapping[str, str]) -> str | None:
    """What a replayed run read or wrote outside a service's partial capture (the first
    service's, described), or why that could not be read; ``None`` when it stayed inside
    (see the kind's :class:`~sandbox.services.base.TouchedCapture`)."""
    from sandbox.services.base import TouchedCapture
    from sandbox.services.registry import get_kind

    for state in states:
        endpoint = endpoints.get(state.name)
        if not endpoint:
            continue
        kind = get_kind(state.kind)
        if not isinstance(kind, TouchedCapture):
            continue
        rows = kind.captured_parts(state.meta)
        if rows is None:
            continue
        try:
            found = kind.outside_capture(endpoint, rows)
        except SandboxError as exc:
            return f"{state.name}: what the run read outside its partial capture is unknown: {exc}"
        if found:
            more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            return f"{state.name}: the run {found[0]}{more}"
    return None


def state_used(states: Sequence[ServiceState], endpoints: Mapping[str, str]) -> list[str]:
    """What the replayed run read or wrote of the restored services that tell it
    (:class:`~sandbox.services.base.UsedState`), each described with the service's name;
    a service that cannot tell is passed over (the run may then be judged to have
    exercised nothing: inconclusive, never a false "gone")."""
    from sandbox.services.base import UsedState
    from sandbox.services.registry import get_kind

    used: list[str] = []
    for state in states:
        endpoint = endpoints.get(state.name)
        kind = get_kind(state.kind)
        if not endpoint or not isinstance(kind, UsedState):
            continue
        with contextlib.suppress(SandboxError):
            used += [f"{state.name} {what}" for what in kind.used_since_restore(endpoint)]
    return used


def partial_notes(states: Sequence[ServiceState]) -> list[str]:
    """A sentence for each service whose capture holds only part of its state."""
    from sandbox.services.base import capture_note
    from sandbox.services.registry import kinds

    notes = []
    for state in states:
        said = capture_note(kinds().get(state.kind), state.meta)
        if said is not None and said.startswith("partial"):
            notes.append(
                f"{state.name}'s state was captured {said}: a run that reads or writes "
                "state outside it (another table, key or file) cannot be judged."
            )
    return notes


def emptied(states: Sequence[ServiceState], empty: Collection[str]) -> list[ServiceState]:
    """``states`` with the services named in ``empty`` holding no captured state (they are
    brought up empty); an unknown name is an :class:`UnknownNameError`."""
    names = [s.name for s in states]
    for name in empty:
        if name not in names:
            raise UnknownNameError("service", name, names)
    return [s.model_copy(update={"before": None}) if s.name in empty else s for s in states]


def _hash(state: ServiceState, endpoints: Mapping[str, str]) -> str | None:
    from sandbox.services.registry import get_kind

    endpoint = endpoints.get(state.name)
    if endpoint is None:
        return None
    try:
        return get_kind(state.kind).state_hash(endpoint)
    except UnknownNameError:
        return None


def replay(
    run_id: str,
    plan: ReplayPlan | None = None,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    progress: ReplayProgress | None = None,
    services_up: ServicesUp | None = None,
    **options: Any,
) -> ReplayReport:
    """Replay ``run_id`` as ``plan`` says (:class:`~sandbox.replay.plan.ReplayPlan`: how many
    times, the policies, a fork, another entrypoint ...); see the module documentation.

    ``options`` set fields of the plan by name, over ``plan``'s (the short form:
    ``replay(run_id, store="snapshots", times=20)``); a name that is no field of the plan is
    an :class:`~sandbox.errors.UnknownNameError`. ``store`` holds the run (default: the
    configured one). ``progress`` is told as the replay moves on. ``services_up`` replays
    against services someone else brought up and resets
    (:class:`~sandbox.replay.attached.ServicesUp`: reset between runs, not before the
    first)."""
    plan = (plan or ReplayPlan()).with_options(**options)
    if plan.empty and services_up is not None:
        raise ReplayError("empty services need the sandbox to bring the services up")
    began = time.monotonic()
    st = as_store(store)
    manifest = st.load_manifest(run_id)
    if manifest.status != "complete":
        raise ReplayError(f"run {run_id} is incomplete (its capture never finished)")
    entrypoint, trust = plan.entrypoint, plan.trust
    check_trusted(manifest, trust=trust, override=entrypoint)
    given = dict(plan.env)
    local = None if "://" in st.location else Path(st.location)
    restored = restored_environment(manifest, {**os.environ, **given}, store_root=local)
    command = recorded_command(manifest, entrypoint)
    target = _target(manifest, entrypoint) if command is None else " ".join(command.command)
    function: Callable[..., Any]
    if command is None:
        resolved = resolve_entrypoint(target, sealed_import(manifest, plan.served_by()))
        called = _called(manifest, target, entrypoint, resolved)
        function = callable_entry(
            check_callable(manifest, resolved, called, trust=trust, override=entrypoint)
        )
    else:  # a recorded command runs in a child process: nothing is called here
        function, called = _no_function, _called(manifest, target, entrypoint, _no_function)
    recording = st.load_events(run_id)
    compared = comparable(recording)
    settings = _Settings(
        store=st,
        manifest=manifest,
        recording=recording,
        compared=compared,
        traced=from_trace(manifest),
        expected=Expectation.of(manifest.failure, compared, plan.predicate),
        function=function,
        called=called,
        plan=plan,
        policies=plan.served_by(),
        command=command,
        timeout=plan.timeout
        if plan.timeout is not None
        else default_timeout(recording, Labelled.of(manifest.labels).ran_before if command else 0),
    )
    times = plan.times

    def tell(message: str, done: int) -> None:
        if progress is not None:
            progress(message, done, times)

    runs: list[_Run] = []
    with contextlib.ExitStack() as stack:
        endpoints: dict[str, str] = {}
        binding: dict[str, str] = {}
        reset: Callable[[], None] | None = None
        if services_up is not None:
            endpoints, binding = dict(services_up.endpoints), dict(services_up.env)
            reset = services_up.reset
        elif manifest.services and plan.services is not None:
            from sandbox.replay.attached import attach

            attached = attach(manifest.services, plan.services, progress=lambda line: tell(line, 0))
            endpoints, binding, reset = attached.endpoints, attached.env, attached.reset
        elif manifest.services:
            from sandbox.containers import bring_up

            frozen_at = manifest.clock.start if plan.clocks == "frozen" and manifest.clock else None
            up = stack.enter_context(
                bring_up(
                    emptied(manifest.services, plan.empty),
                    st,
                    frozen_at=frozen_at,
                    progress=lambda line: tell(line, 0),
                )
            )
            endpoints = {name: ep.url for name, ep in up.services.items()}
            binding, reset = up.env, up.reset
        stack.enter_context(applied({**restored, **given, **binding}))
        for i in range(times):
            if i > 0 and reset is not None:
                reset()
            tell(f"replay {i + 1}/{times}", i)
            run = _replay_once(settings, i, endpoints, manifest.services)
            runs.append(run)
            tell(f"replay {i + 1}/{times}: {run.verdict.detail}", i + 1)

    verdict = Verdict(settings.expected.predicate, tuple(r.verdict for r in runs))
    mismatch = next((r.mismatch for r in runs if r.mismatch is not None), None)
    report = ReplayReport(
        original=run_id,
        replays=[r.run_id for r in runs],
        verdict=verdict,
        divergences=[r.divergence for r in runs],
        state_diffs=[r.state_diffs for r in runs],
        mismatch=mismatch_json(mismatch) if mismatch is not None else None,
        notes=[],
        entrypoint=target,
        policies=settings.policies.describe(),
        clocks=plan.clocks,
        enforce_order=plan.enforce_order,
        drift=sorted({d.describe() for r in runs for d in r.drift}),
        injected=sorted(
            {
                f"{i.name} attempt {i.attempt}: {i.error}"
                + (" (the attempt ran, then failed as recorded)" if i.ran_live else "")
                for r in runs
                for i in r.injected
            }
        ),
        seconds=time.monotonic() - began,
        refused=sorted({line for r in runs for line in r.refused}),
        fork=plan.fork,
        stalls=sum(r.stalls for r in runs),
    )
    report.notes = replay_notes(
        report,
        refused_runs=sum(1 for r in runs if r.refused),
        stalls=report.stalls,
        override=entrypoint,
    )
    report.notes.extend(partial_notes(manifest.services))
    report.notes.extend(overlap_note(manifest.labels, report))
    report.notes.extend(cwd_note(command.cwd if command else None, os.getcwd()))
    report.notes.extend(dict.fromkeys(note for r in runs for note in r.stand_ins))
    return report
