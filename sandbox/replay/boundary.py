"""The replay's boundary: serves every crossing by its policy and records the new run.

:class:`ReplayBoundary` is a :class:`~sandbox.capture.recorder.Recorder` (the replay is
written exactly as a capture is, event by event, and the capture's markers ``result``,
``state`` and ``mark_failed`` work unchanged) whose :meth:`call` decides how each crossing
is served:

* **recorded**: the recorded event is found by the :class:`~sandbox.replay.serving.matcher.Matcher`
  and the adapter rebuilds the response (or the recorded error, as the original exception
  type: see :mod:`sandbox.replay.conditions.faults`). What a crossing is matched as (a model call by
  its meaning, HTTP by its canonical URL) is :mod:`sandbox.replay.serving.routing`'s;
* **live**: ``perform()`` runs (tools against the restored services);
* **spy**: live, and a difference from the recorded output is kept in :attr:`drift`.

Retry attempts replay the recorded faults: an attempt that failed at capture fails again
with the same error. When it had timed out after its side effect committed (``committed``),
the attempt runs live first, so the retry repeats the write exactly as it did; when it timed
out before committing, it does not run. Seeding crossings run live (they only seed local
generators); clock and random draws that the recording lacks are served live.

A request with no recorded answer under miss mode ``fail`` stops the run: the mismatch is
kept in :attr:`mismatch` and :class:`ReplayStopped` (a ``BaseException``, so that an agent's
``except Exception`` or a retry loop cannot swallow it) is raised at that call and at every
later one. Under miss mode ``live`` it is served live, as under a live policy: a model or
HTTP call reaches where it was sent (the network guard lets that crossing through).
A sandbox error raised into the agent at a crossing is recorded as that call's error, so
the verdict sees it even when the agent catches it.

The sync and async paths share one serving core (:meth:`ReplayBoundary._serving`): it answers
from the recording, or hands back a :class:`_Live` run whose ``perform()`` the thin
:meth:`~ReplayBoundary.call` / :meth:`~ReplayBoundary.acall` shells run or await.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Literal, TypeVar

from pydantic import JsonValue

from sandbox.capture.clock import TimeSource
from sandbox.capture.recorder import BLOB_THRESHOLD, Recorder, jsonable_value
from sandbox.errors import ReplayError, ReplayMismatchError, SandboxError
from sandbox.redaction import Redactor
from sandbox.replay.conditions.clock import LiveClock, ReplayClock
from sandbox.replay.conditions.faults import is_timeout_info, rebuild_error, stand_in_reason
from sandbox.replay.conditions.ordering import Turnstile
from sandbox.replay.fork import Fork
from sandbox.replay.isolation.environment import PLACEHOLDER
from sandbox.replay.isolation.liveprocess import live_process_variables
from sandbox.replay.isolation.netguard import live_crossing
from sandbox.replay.judging.jsondiff import FieldDiff, json_diff
from sandbox.replay.report import mismatch_json
from sandbox.replay.serving.matcher import Matcher, MissMode
from sandbox.replay.serving.mcp import RecordedServers, policy_target
from sandbox.replay.serving.policy import LIVE, Policy, PolicySet
from sandbox.replay.serving.routing import Route, prepare_recording, route
from sandbox.replay.window import CHANGE_NOTHING, Window
from sandbox.seam.boundary import (
    Adapter,
    Call,
    Outcome,
    RecordedError,
    RecordsReplayed,
    RewritesRequest,
    task_id,
)
from sandbox.snapshot.events import (
    ErrorInfo,
    Event,
    HTTPExchange,
    LLMCall,
    RetryAttempt,
    StateTransition,
    Timeout,
    ToolCall,
)
from sandbox.snapshot.manifest import ForkEdits
from sandbox.snapshot.store import RunWriter, Store

T = TypeVar("T")
ServedAs = Literal["recorded", "live", "override"]

MISMATCH_EVENT = "sandbox.replay.mismatch"


class ReplayStopped(BaseException):
    """Raised into the agent at a request the recording cannot answer (miss mode ``fail``)."""

    def __init__(self, mismatch: ReplayMismatchError) -> None:
        super().__init__(str(mismatch))
        self.mismatch = mismatch


@dataclass(frozen=True)
class Drift:
    """A spied call whose live output differs from the recorded one."""

    kind: str
    name: str
    task: str
    recorded_seq: int
    diffs: tuple[FieldDiff, ...]

    def describe(self) -> str:
        first = self.diffs[0].describe() if self.diffs else ""
        return (
            f"{self.kind} {self.name!r} [{self.task}] drifted from seq {self.recorded_seq}: {first}"
        )


@dataclass(frozen=True)
class Injection:
    """A recorded fault raised again at the same attempt."""

    name: str
    attempt: int | None
    error: str
    ran_live: bool


# --- the boundary --------------------------------------------------------------------------


class ReplayBoundary(Recorder):
    """Replays one run against a recording; see the module documentation."""

    replaying = True

    @property
    def names_by_origin(self) -> bool:
        """As the capture named tasks and pool work, inside the run's block; outside it,
        where the capture had no run, as then."""
        return self.origin_naming and not self.window.outside

    def __init__(
        self,
        writer: RunWriter,
        store: Store,
        recording: Sequence[Event],
        *,
        policies: PolicySet | None = None,
        miss: MissMode | str = MissMode.FAIL,
        turnstile: Turnstile | None = None,
        replay_clock: ReplayClock | None = None,
        clock: TimeSource | None = None,
        blob_threshold: int = BLOB_THRESHOLD,
        fork: ForkEdits | None = None,
        inject_faults: bool = True,
        seed: int | None = None,
        supplied: Mapping[str, str] | None = None,
    ) -> None:
        # The store's placeholder key: a replayed secret reads as the recorded one did, so
        # a recorded message (an exception's, with a placeholder) is found in the replay's.
        redactor = Redactor(key=store.placeholder_key())
        super().__init__(
            writer, store, redactor=redactor, clock=clock, blob_threshold=blob_threshold
        )
        self.seed = seed
        """The run's seed: the entropy of the processes the replay starts live."""
        self.on_hand_over: Callable[[], None] | None = None
        """Called the first time the program enters ``capture.run`` (see :meth:`hand_over`)."""
        self.window = Window()
        """Which ``capture.run`` block of the program is the run (see :class:`Window`)."""
        self.origin_naming = True
        """Whether the run was captured naming its tasks as it created them and its pool
        work by submission (its label says so: one captured before did not)."""
        self.policies = policies or PolicySet()
        self.blobs = store.get_blob
        prepared = prepare_recording(recording, self.blobs)
        self.fork: Fork | None = None
        self._served: dict[int, ServedAs] = {}
        if fork is not None:
            self.fork = Fork(fork, prepared, self.policies, self.blobs, store.put_blob)
            prepared = self.fork.recording
        self.inject_faults = inject_faults
        self._recorded = Matcher(
            prepared if inject_faults else [e for e in prepared if not timed_out(e)], on_miss=miss
        )
        self._counterparts = Matcher(prepared, on_miss=MissMode.LIVE)
        self._next_start = _next_starts(prepared)
        self._http_by_span = {
            e.span: e for e in prepared if isinstance(e, HTTPExchange) and e.span is not None
        }
        self._timeouts = {
            e.parent_span: e
            for e in prepared
            if isinstance(e, Timeout) and e.parent_span is not None
        }
        self._inside = _inside_attempts(prepared)
        self._loop_attempts: dict[tuple[str, str], collections.deque[RetryAttempt]] = {}
        for e in prepared:  # tenacity's own loops: attempts recorded without a crossing
            if isinstance(e, RetryAttempt) and e.span is None:
                self._loop_attempts.setdefault((e.task, e.name), collections.deque()).append(e)
        self.turnstile = turnstile or Turnstile(recording, enabled=False)
        self.replay_clock: ReplayClock = replay_clock or LiveClock()
        self.mismatch: ReplayMismatchError | None = None
        self.drift: list[Drift] = []
        self.injected: list[Injection] = []
        self.stand_ins: list[str] = []
        """Recorded errors raised as a stand-in class, and why (for the report)."""
        self.served_live_on_miss = 0
        self.commands: collections.Counter[str] = collections.Counter()
        """Service -> the commands it answered within the run's block (:meth:`answered`)."""
        self._state_lock = threading.Lock()
        self._mcp_servers = RecordedServers(prepared)
        self.supplied = dict(supplied or {})
        """Placeholder -> the secret the user supplied for it
        (:func:`~sandbox.replay.isolation.environment.supplied_secrets`)."""
        self._states: dict[str, StateTransition] = {}
        for e in reversed(prepared):
            if isinstance(e, StateTransition):
                self._states[e.name] = e

    def recorded_state(self, name: str) -> StateTransition | None:
        return self._states.get(name)

    def unredacted(self, text: str) -> str:
        if not self.supplied or "<" not in text:
            return text
        return PLACEHOLDER.sub(lambda m: self.supplied.get(m.group(0), m.group(0)), text)

    def answered(self, service: str) -> None:
        """A command of the run's went through to ``service`` and was answered
        (:func:`sandbox.seam.clients.answered`): the run read or wrote the restored
        state (a connection elsewhere is refused, :mod:`sandbox.replay.isolation.redirect`)."""
        if not self.window.outside:
            self.commands[service] += 1

    def hand_over(self, call: str | None = None) -> None:
        """The replayed program entered ``capture.run``: when that block is the run (see
        :class:`~sandbox.replay.window.Window`), the session's deferred start of the
        recording (seeds, ids, entropy, clients' hooks) runs now, once, in this task, as the
        capture's did (:class:`sandbox.replay.session.ReplaySession`)."""
        with self._state_lock:
            if not self.window.enter(call, self.redactor.text):
                return
            start, self.on_hand_over = self.on_hand_over, None
        if start is not None:
            start()

    def hand_back(self, exc: BaseException | None) -> None:
        """The replayed program left that ``capture.run`` with ``exc``: recorded there, in
        its task, as the capture recorded it (what stops or times out the replay is not the
        program's). When the block was the run, the window's ``on_close`` follows."""
        with self._state_lock:
            ends = self.window.leave()
        if ends is None:
            return
        if isinstance(exc, (Exception, SystemExit)):
            self.record_exception(exc)  # then what is still waiting, as the capture's end
            self.flush_pending()
        if ends:
            with self._state_lock:
                self.window.close()
            if self.window.on_close is not None:
                self.window.on_close()

    # --- Boundary ------------------------------------------------------------------------

    def call(self, call: Call, perform: Callable[[], T], adapter: Adapter[T]) -> T:
        """Serve ``call`` by its policy (:meth:`_serving`); outside the run's block, as the
        program makes it."""
        if self.window.outside:
            with self._made_outside(call):
                return perform()
        where = self._route(call)
        position = self.turnstile.enter(call.task, call.kind, where.order_name)
        try:
            serving = self._serving(call, where, adapter)
            if isinstance(serving, _Answered):
                return serving.value
            with serving.running():
                value = perform()
            return serving.succeeded(value)
        finally:
            self.turnstile.leave(position)

    async def acall(
        self, call: Call, perform: Callable[[], Awaitable[T]], adapter: Adapter[T]
    ) -> T:
        """:meth:`call` for async crossings: the task waits for its turn (the event loop
        runs on), then the same serving (:meth:`_serving`)."""
        if self.window.outside:
            with self._made_outside(call):
                return await perform()
        where = self._route(call)
        position = await self.turnstile.aenter(call.task, call.kind, where.order_name)
        try:
            serving = self._serving(call, where, adapter)
            if isinstance(serving, _Answered):
                return serving.value
            with serving.running():
                value = await perform()
            return serving.succeeded(value)
        finally:
            self.turnstile.leave(position)

    @contextlib.contextmanager
    def _made_outside(self, call: Call) -> Iterator[None]:
        """Around ``call`` made outside the run's block: counted when it could have changed
        state (not a clock read or a draw, not a request that failed refused)."""
        refusals = self.window.refusals
        try:
            yield
        except BaseException:
            if self.window.refusals == refusals:
                self.window.count(call.kind)
            raise
        self.window.count(call.kind)

    def mcp_server(self, transport: dict[str, JsonValue]) -> tuple[str, bool]:
        """:class:`sandbox.capture.mcp.MCPServing`: the recorded server behind ``transport``
        and whether the ``mcp`` policy serves it from the recording."""
        self._check_stopped()
        try:
            name = self._mcp_servers.find(transport)
        except ReplayMismatchError as exc:
            self._stop(exc)
            raise ReplayStopped(exc) from None
        return name, self.policies.policy_for("mcp", name).serves_recording

    def mcp_reach(self, server: str) -> contextlib.AbstractContextManager[None]:
        """A live MCP server's exchanges pass the network guard: its policy named it."""
        return live_crossing("http", self.policies.policy_for("mcp", server))

    def mcp_process_env(self, server: str) -> dict[str, str]:
        """:class:`sandbox.capture.mcp.MCPServing`: a live server's process runs under this
        replay's clock and seeded entropy (:mod:`sandbox.replay.isolation.liveprocess`)."""
        return live_process_variables(self.replay_clock, self.seed, f"mcp:{server}")

    # --- serving -------------------------------------------------------------------------

    def _plan(self, call: Call, where: Route) -> tuple[Policy | None, Event | None]:
        """How to serve a crossing that is not a retry attempt: the recorded ``event`` to
        answer with, or (event ``None``) live under ``policy`` (``None``: no drift report)."""
        if call.kind == "random" and call.name.endswith(".seed"):
            return None, None
        policy = self.policies.policy_for(*policy_target(where.kind, where.name))
        if self.fork is not None:
            return self._plan_fork(call, where, self.fork, policy)
        if not policy.serves_recording:
            return policy, None
        event = self._match(where)
        # A request the recording has no answer for, served live (miss mode live): it
        # reaches where it was sent, as a live policy's would.
        return (LIVE if event is None else None), event

    def _plan_fork(
        self, call: Call, where: Route, fork: Fork, policy: Policy
    ) -> tuple[Policy | None, Event | None]:
        """:meth:`_plan` in a fork (:mod:`sandbox.replay.fork`): an overridden step answers
        with its override; at the fork and after it, the fork's policies serve."""
        matcher = self._recorded if policy.serves_recording else self._counterparts
        upcoming = matcher.peek(where.kind, where.name, where.request)
        if upcoming is not None and upcoming.seq in fork.overridden:
            matcher.match(where.kind, where.name, where.request)
            self._note_served(call, "override")
            return None, upcoming
        if fork.reached(upcoming, latch_on_miss=where.kind not in CHANGE_NOTHING):
            policy = fork.after.policy_for(*policy_target(where.kind, where.name))
        event = self._match(where) if policy.serves_recording else None
        self._note_served(call, "live" if event is None else "recorded")
        return (None if policy.serves_recording else policy), event

    def _route(self, call: Call) -> Route:
        self._check_stopped()
        where = route(call)
        if where.kind != "http":
            return where
        # A recorded HTTP request is matched as it was written (redacted, with the store's
        # key): so is this one; what a mismatch shows of it is redacted too.
        redacted = replace(
            call, name=self.redactor.text(call.name), request=self.redactor.value(call.request)
        )
        return route(redacted)

    def _serving(self, call: Call, where: Route, adapter: Adapter[T]) -> _Answered[T] | _Live[T]:
        """How a crossing is served, for the sync and the async path alike: answered from the
        recording (or failed as recorded) now, or a :class:`_Live` run of ``perform()``."""
        if call.kind == "retry":
            return self._serving_attempt(call, where, adapter)
        policy, event = self._plan(call, where)
        if event is None:
            return self._live(call, where, adapter, policy)
        return _Answered(self._serve_recorded(call, where, adapter, event))

    def _live(
        self, call: Call, where: Route, adapter: Adapter[T], policy: Policy | None
    ) -> _Live[T]:
        """A live run; the clock moves to the start of its recorded counterpart. A fork's
        live model call goes out with the fork's model and parameters."""
        if self.fork is not None and where.kind == "llm" and isinstance(adapter, RewritesRequest):
            adapter.rewrite_json(self.fork.request_body)
        counterpart = self._counterparts.match(where.kind, where.name, where.request)
        if counterpart is not None:
            self.replay_clock.reach(counterpart.wall - _duration(counterpart))
        return _Live(self, call, where, adapter, policy, counterpart, self.clock.monotonic())

    def _match(self, where: Route) -> Event | None:
        try:
            return self._recorded.match(where.kind, where.name, where.request)
        except ReplayMismatchError as exc:
            if where.kind in CHANGE_NOTHING or (self.fork is not None and self.fork.past):
                with self._state_lock:
                    self.served_live_on_miss += 1
                return None
            self._stop(exc)
            raise ReplayStopped(exc) from None

    def _serve_recorded(
        self, call: Call, where: Route, adapter: Adapter[T], event: Event | None
    ) -> T:
        if event is None:
            raise ReplayError(f"no recorded answer for {where.kind} {where.name!r}")
        started = event.wall - _duration(event)
        self.replay_clock.reach(started)
        try:
            try:
                value = adapter.replay(call, self._answer(where, event), self.blobs)
            except RecordedError as recorded:
                error = self._rebuilt(recorded.info)
                adapter.record(call, Outcome(error=error), self)
                raise error from None
            except SandboxError as exc:  # ours, raised into the agent: the log keeps it
                adapter.record(call, Outcome(error=exc), self)
                raise
            if isinstance(adapter, RecordsReplayed):  # complete as read (an HTTP response)
                return adapter.record_replayed(call, value, self)  # type: ignore[no-any-return]
            return adapter.record(call, Outcome(value=value), self)
        finally:
            self.replay_clock.reach(self._after(event))

    def _after(self, event: Event) -> float:
        """Where the clock stands once the recorded ``event`` is served: at the start of the
        event after it in the log (else at its own end), so that what the program reads
        between the two is the time it read at the capture just before the next one (a
        UUIDv7, say, whose draw depends on whether two ids fall in one millisecond), not
        the previous event's time."""
        return self._next_start.get(event.seq, event.wall)

    def _answer(self, where: Route, event: Event) -> Event:
        """The recorded event the adapter rebuilds the answer from: a model call made over
        HTTP is answered with its recorded HTTP exchange."""
        if where.kind != "llm":
            return event
        parent = event.parent_span
        exchange = self._http_by_span.get(parent) if parent is not None else None
        if exchange is None:
            raise ReplayError(
                f"the recorded model call seq {event.seq} has no HTTP exchange to answer with"
            )
        return exchange

    def _recorded_fault(self, call: Call, where: Route) -> tuple[RetryAttempt, bool] | None:
        """The recorded failure of this retry attempt, and whether the attempt runs live
        first (it committed before failing at capture); ``None``: it succeeded, run live."""
        policy = self._retry_policies().policy_for("retry", where.name)
        serves = policy.serves_recording and self.inject_faults
        event = self._match(where) if serves else None
        if not isinstance(event, RetryAttempt) or event.error is None:
            self._note_served(call, "live")
            return None
        self._note_served(call, "recorded")
        timeout = self._timeouts.get(event.span) if event.span is not None else None
        inside = self._inside.get(event.span, []) if event.span is not None else []
        if timeout is None or timeout.committed is True or self._times_out_served(inside):
            # It committed, or it timed out in a crossing the recording answers, as all it
            # did: it runs again, its crossings answered as they were, and fails as it did.
            return event, True
        # Timed out before anything committed, with crossings that would be live: running
        # it would add a side effect. Its recorded crossings are the attempt's, not the next.
        self._recorded.skip(inside)
        return event, False

    def _times_out_served(self, events: Sequence[Event]) -> bool:
        """Whether the attempt that recorded ``events`` timed out in one of its crossings
        (a recorded timeout answer) and every crossing of it is answered from the recording
        now: run again, it ends in that timeout, as it did. (A timeout from outside the
        recording, a slow attempt, is not: run again, the attempt would go on.)"""
        if self.fork is not None or not (self.inject_faults and any(map(timed_out, events))):
            return False
        for event in events:
            if event.kind in _OUTCOME_KINDS:
                continue
            try:
                policy = self.policies.policy_for(*policy_target(event.kind, event.name))
            except SandboxError:
                return False
            if not policy.serves_recording:
                return False
        return True

    def attempt_fault(self, loop: str, attempt: int, failed: bool) -> BaseException | None:
        """An attempt of one of tenacity's own loops has ended: when the same attempt failed
        at capture (the next recorded attempt of this loop in this task) and it succeeded
        live, it fails again with the recorded error, in the recorded order. It ran live
        first: the plain loop cannot tell whether it had committed, so the retry repeats the
        side effect as it did at capture."""
        with self._state_lock:
            queue = self._loop_attempts.get((task_id(), loop))
            event = queue.popleft() if queue else None
        if event is None or event.attempt != attempt or event.error is None or failed:
            return None
        policy = self._retry_policies().policy_for("retry", loop)
        if not (policy.serves_recording and self.inject_faults):
            return None
        self._note_injection(loop, attempt, event, ran_live=True)
        return self._rebuilt(event.error)

    def _retry_policies(self) -> PolicySet:
        """The policies retry attempts follow now (a fork's, once past its step)."""
        return self.fork.after if self.fork is not None and self.fork.past else self.policies

    def _fail_attempt(
        self, call: Call, adapter: Adapter[T], event: RetryAttempt, ran: float | None
    ) -> BaseException:
        """Record the attempt as failed with the recorded error; return that error. ``ran``:
        when the attempt started running live (``None``: it did not run)."""
        assert event.error is not None
        injected = self._rebuilt(event.error)
        self._note_injection(call.name, call.attempt, event, ran_live=ran is not None)
        duration = 0.0 if ran is None else self.clock.monotonic() - ran
        adapter.record(call, Outcome(error=injected, duration=duration), self)
        return injected

    def _serving_attempt(
        self, call: Call, where: Route, adapter: Adapter[T]
    ) -> _Answered[T] | _Live[T]:
        """A retry attempt: run live, and fail as the recorded attempt failed."""
        fault = self._recorded_fault(call, where)
        if fault is None:
            return self._live(call, where, adapter, None)
        event, runs_first = fault
        if not runs_first:
            raise self._fail_attempt(call, adapter, event, None)
        # It runs live, then fails as at capture (where it failed after committing).
        return _Live(self, call, where, adapter, None, None, self.clock.monotonic(), fault=event)

    # --- bookkeeping ---------------------------------------------------------------------

    def _note_served(self, call: Call, how: ServedAs) -> None:
        if self.fork is not None:
            self._served[call.span] = how

    def emit_fields(
        self, event_type: type[Event], call: Call | None, fields: dict[str, Any]
    ) -> int:
        """:meth:`Recorder.emit_fields` (which :meth:`Recorder.emit` calls too); in a fork,
        the event says how its crossing was served. Outside the run's block (see
        :class:`~sandbox.replay.window.Window`) nothing is the run's to record."""
        if self.window.outside:
            return -1
        if self._served:
            span = call.span if call is not None else fields.get("parent_span")
            if isinstance(span, int) and (call is not None or event_type is LLMCall):
                how = self._served.get(span)
                if how is not None:
                    fields = {**fields, "served": how}
        return super().emit_fields(event_type, call, fields)

    def _rebuilt(self, info: ErrorInfo) -> BaseException:
        """The recorded error raised again (:func:`rebuild_error`); a stand-in is noted."""
        error = rebuild_error(info)
        if isinstance(error, RecordedError):
            note = (
                f"The recorded {info.type} was raised as a stand-in of that name "
                f"({stand_in_reason(info)}): an except clause for the original class does "
                "not catch it."
            )
            with self._state_lock:
                if note not in self.stand_ins:
                    self.stand_ins.append(note)
        return error

    def _note_injection(
        self, name: str, attempt: int | None, event: RetryAttempt, *, ran_live: bool
    ) -> None:
        assert event.error is not None
        error = f"{event.error.type}: {event.error.message}"
        with self._state_lock:
            self.injected.append(Injection(name, attempt, error, ran_live))

    def _spy(self, call: Call, where: Route, recorded: Event, value: object) -> None:
        expected: Any
        actual: Any
        if isinstance(recorded, ToolCall):
            expected = recorded.output
            if recorded.output_blob is not None:
                expected = json.loads(self.blobs(recorded.output_blob.sha256))
            actual = jsonable_value(value)
        elif isinstance(recorded, HTTPExchange):
            expected, actual = recorded.status, getattr(value, "status_code", None)
        else:
            expected, actual = getattr(recorded, "value", None), jsonable_value(value)
        diffs = tuple(json_diff(expected, actual))
        if diffs:
            with self._state_lock:
                self.drift.append(Drift(where.kind, where.name, call.task, recorded.seq, diffs))

    def _stop(self, exc: ReplayMismatchError) -> None:
        with self._state_lock:
            if self.mismatch is not None:
                return
            self.mismatch = exc
        self.emit(
            StateTransition,
            None,
            name=MISMATCH_EVENT,
            target="stopped",
            data=mismatch_json(exc),
        )

    def _check_stopped(self) -> None:
        if self.mismatch is not None:
            raise ReplayStopped(self.mismatch)

    def unused(self) -> list[Event]:
        """Recorded events no recorded-policy request was answered with."""
        return self._recorded.unused()


@dataclass(frozen=True)
class _Answered(Generic[T]):
    """A crossing answered without running ``perform()``."""

    value: T


@dataclass
class _Live(Generic[T]):
    """A crossing that runs ``perform()``: the sync and async shells run it inside
    :meth:`running` and hand its value to :meth:`succeeded`."""

    boundary: ReplayBoundary
    call: Call
    where: Route
    adapter: Adapter[T]
    policy: Policy | None
    counterpart: Event | None
    started: float
    fault: RetryAttempt | None = None
    """The recorded failure of this retry attempt, raised once it has run."""

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Around ``perform()``: the network guard lets a live policy through, and a failure
        is recorded before it reaches the agent."""
        b = self.boundary
        try:
            with live_crossing(self.where.kind, self.policy):
                yield
        except BaseException as exc:
            duration = b.clock.monotonic() - self.started
            self.adapter.record(self.call, Outcome(error=exc, duration=duration), b)
            raise
        finally:
            self._ends()

    def succeeded(self, value: T) -> T:
        b = self.boundary
        if self.fault is not None:
            raise b._fail_attempt(self.call, self.adapter, self.fault, self.started)
        duration = b.clock.monotonic() - self.started
        result = self.adapter.record(self.call, Outcome(value=value, duration=duration), b)
        if self.policy is not None and self.policy.reports_drift and self.counterpart is not None:
            b._spy(self.call, self.where, self.counterpart, value)
        return result

    def _ends(self) -> None:
        if self.counterpart is not None:
            self.boundary.replay_clock.reach(self.boundary._after(self.counterpart))


_OUTCOME_KINDS = frozenset({"timeout", "retry"})
"""Kinds recorded inside an attempt that say how it ended, not crossings it made."""


def _inside_attempts(events: Sequence[Event]) -> dict[int, list[Event]]:
    """For each recorded retry attempt (its span), the events recorded inside it, nested
    calls' included, in log order."""
    children: dict[int, list[Event]] = collections.defaultdict(list)
    for event in events:
        if event.parent_span is not None:
            children[event.parent_span].append(event)
    inside: dict[int, list[Event]] = {}
    for event in events:
        if isinstance(event, RetryAttempt) and event.span is not None:
            found: list[Event] = []
            pending = [event.span]
            while pending:
                for child in children.get(pending.pop(), []):
                    found.append(child)
                    if child.span is not None and child.span != event.span:
                        pending.append(child.span)
            inside[event.span] = sorted(found, key=lambda e: e.seq)
    return inside


def timed_out(event: Event) -> bool:
    """A recorded answer that was a timeout: not served when faults are not injected."""
    return is_timeout_info(getattr(event, "error", None))


def _next_starts(recording: Sequence[Event]) -> dict[int, float]:
    """Each recorded event's seq -> when the event after it in the log began (its wall time
    less its duration), for the events that have one after them."""
    ordered = sorted(recording, key=lambda e: e.seq)
    return {
        event.seq: max(after.wall - _duration(after), event.wall)
        for event, after in itertools.pairwise(ordered)
    }


def _duration(event: Event) -> float:
    duration = getattr(event, "duration", 0.0)
    return float(duration) if isinstance(duration, int | float) else 0.0
