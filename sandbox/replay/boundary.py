"""The replay's boundary: serves every crossing by its policy and records the new run.

:class:`ReplayBoundary` is a :class:`~sandbox.capture.recorder.Recorder` (the replay is
written exactly as a capture is, event by event, and the capture's markers ``result``,
``state`` and ``mark_failed`` work unchanged) whose :meth:`call` decides how each crossing
is served:

* **recorded**: the recorded event is found by the :class:`~sandbox.replay.matcher.Matcher`
  and the adapter rebuilds the response (or the recorded error, as the original exception
  type: see :mod:`sandbox.replay.faults`). Model calls are matched on their meaning (model,
  messages, parameters, tools), not on the HTTP exchange, so a local model server on another
  port still matches; HTTP calls to loopback addresses ignore the port for the same reason;
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
later one.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import JsonValue

from sandbox.capture import llm
from sandbox.capture.boundary import Adapter, Call, Outcome, RecordedError
from sandbox.capture.clock import Clock
from sandbox.capture.http import HTTPAdapter
from sandbox.capture.recorder import BLOB_THRESHOLD, Recorder, jsonable_value
from sandbox.errors import ReplayError, ReplayMismatchError
from sandbox.replay.clock import LiveClock, ReplayClock
from sandbox.replay.faults import rebuild_error
from sandbox.replay.jsondiff import FieldDiff, json_diff
from sandbox.replay.matcher import Matcher, MissMode
from sandbox.replay.mcp import RecordedServers, policy_target
from sandbox.replay.netguard import live_crossing
from sandbox.replay.ordering import Turnstile
from sandbox.replay.policy import Policy, PolicySet
from sandbox.replay.report import mismatch_json
from sandbox.replay.semantics import request_of
from sandbox.snapshot.events import (
    Event,
    HTTPExchange,
    LLMCall,
    RetryAttempt,
    StateTransition,
    Timeout,
    ToolCall,
)
from sandbox.snapshot.normalize import normalize_url, request_fingerprint
from sandbox.snapshot.store import DirectoryStore, RunWriter

T = TypeVar("T")

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
MISMATCH_EVENT = "sandbox.replay.mismatch"
LIVE_ON_MISS = frozenset({"clock", "random", "retry", "timeout"})
"""Kinds served live when the recording has no answer (a fixed agent may draw more ids)."""


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


@dataclass(frozen=True)
class Route:
    """How a crossing is looked up: the kind and name it is matched as, and its request."""

    kind: str
    name: str
    request: JsonValue
    order_name: str


# --- canonical names -----------------------------------------------------------------------


def canonical_url(url: str) -> str:
    """``url`` normalized, with the port of a loopback host dropped (local servers move)."""
    url = normalize_url(url)
    parts = urlsplit(url)
    if parts.hostname in LOOPBACK and parts.port is not None:
        return urlunsplit(parts._replace(netloc="127.0.0.1"))
    if parts.hostname in LOOPBACK:
        return urlunsplit(parts._replace(netloc="127.0.0.1"))
    return url


def canonical_http_name(name: str) -> str:
    method, sep, url = name.partition(" ")
    return f"{method} {canonical_url(url)}" if sep else name


def canonical_name(kind: str, name: str) -> str:
    return canonical_http_name(name) if kind == "http" else name


def legacy_llm_fingerprint(event: Event) -> bool:
    """A model call fingerprinted under its API name (``openai.chat``) instead of the model
    name it is matched under: what captures made before they agreed with replay."""
    api = event.provider_meta.get("api") if isinstance(event, LLMCall) else None
    return (
        isinstance(api, str)
        and api != event.name
        and event.fingerprint == request_fingerprint("llm", api, request_of(event))
    )


def prepare_recording(events: Sequence[Event], blobs: Callable[[str], bytes]) -> list[Event]:
    """The recorded events as the replay matches them: HTTP calls with loopback ports
    dropped; model calls keep the fingerprint the capture took under the model's name (an
    older snapshot's, taken under the API name, is dropped: the matcher then fingerprints the
    recorded request)."""
    out: list[Event] = []
    for event in events:
        if event.kind == "llm" and legacy_llm_fingerprint(event):
            out.append(event.model_copy(update={"fingerprint": None}))
        elif isinstance(event, HTTPExchange):
            body: Any = event.request_body
            if event.request_blob is not None:
                raw = blobs(event.request_blob.sha256)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
            name = canonical_http_name(event.name)
            request = {"method": event.method, "url": canonical_url(event.url), "body": body}
            out.append(
                event.model_copy(
                    update={"name": name, "fingerprint": request_fingerprint("http", name, request)}
                )
            )
        else:
            out.append(event)
    return out


def route(call: Call) -> Route:
    """What the crossing is matched as: a model call by its meaning, HTTP by canonical URL."""
    if call.kind != "http" or not isinstance(call.request, dict):
        return Route(call.kind, call.name, call.request, call.name)
    order_name = canonical_http_name(call.name)
    method = str(call.request.get("method", ""))
    url = str(call.request.get("url", ""))
    api = llm.endpoint_kind(method, urlsplit(url).path)
    if api is not None:
        parsed = llm.parse_request(api, call.request.get("body"))
        request: JsonValue = {
            "model": parsed.model,
            "messages": parsed.messages,
            "params": parsed.params,
            "tools": parsed.tools,
        }
        return Route("llm", parsed.model, request, order_name)
    request = {**call.request, "url": canonical_url(url)}
    return Route("http", order_name, request, order_name)


# --- the boundary --------------------------------------------------------------------------


class ReplayBoundary(Recorder):
    """Replays one run against a recording; see the module documentation."""

    replaying = True

    def __init__(
        self,
        writer: RunWriter,
        store: DirectoryStore,
        recording: Sequence[Event],
        *,
        policies: PolicySet | None = None,
        miss: MissMode | str = MissMode.FAIL,
        turnstile: Turnstile | None = None,
        replay_clock: ReplayClock | None = None,
        clock: Clock | None = None,
        blob_threshold: int = BLOB_THRESHOLD,
    ) -> None:
        super().__init__(writer, store, clock=clock, blob_threshold=blob_threshold)
        self.policies = policies or PolicySet()
        self.blobs = store.get_blob
        prepared = prepare_recording(recording, self.blobs)
        self._recorded = Matcher(prepared, on_miss=miss)
        self._counterparts = Matcher(prepared, on_miss=MissMode.LIVE)
        self._http_by_span = {
            e.span: e for e in prepared if isinstance(e, HTTPExchange) and e.span is not None
        }
        self._timeouts = {
            e.parent_span: e
            for e in prepared
            if isinstance(e, Timeout) and e.parent_span is not None
        }
        self.turnstile = turnstile or Turnstile(recording, enabled=False)
        self.replay_clock: ReplayClock = replay_clock or LiveClock()
        self.mismatch: ReplayMismatchError | None = None
        self.drift: list[Drift] = []
        self.injected: list[Injection] = []
        self.served_live_on_miss = 0
        self._state_lock = threading.Lock()
        self._mcp_servers = RecordedServers(prepared)

    # --- Boundary ------------------------------------------------------------------------

    def call(self, call: Call, perform: Callable[[], T], adapter: Adapter[T]) -> T:
        self._check_stopped()
        where = route(call)
        position = self.turnstile.enter(call.task, call.kind, where.order_name)
        try:
            return self._serve(call, where, perform, adapter)
        finally:
            self.turnstile.leave(position)

    async def acall(
        self, call: Call, perform: Callable[[], Awaitable[T]], adapter: Adapter[T]
    ) -> T:
        """:meth:`call` for async crossings: the same policies, recorded order (the task
        waits for its turn, the event loop runs on) and injected retry faults."""
        self._check_stopped()
        where = route(call)
        position = await self.turnstile.aenter(call.task, call.kind, where.order_name)
        try:
            return await self._aserve(call, where, perform, adapter)
        finally:
            self.turnstile.leave(position)

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

    # --- serving -------------------------------------------------------------------------

    def _plan(self, call: Call, where: Route) -> tuple[Policy | None, Event | None]:
        """How to serve a crossing that is not a retry attempt: the recorded ``event`` to
        answer with, or (event ``None``) live under ``policy`` (``None``: no drift report)."""
        if call.kind == "random" and call.name.endswith(".seed"):
            return None, None
        policy = self.policies.policy_for(*policy_target(where.kind, where.name))
        if not policy.serves_recording:
            return policy, None
        return None, self._match(where)

    def _serve(self, call: Call, where: Route, perform: Callable[[], T], adapter: Adapter[T]) -> T:
        if call.kind == "retry":
            return self._serve_attempt(call, where, perform, adapter)
        policy, event = self._plan(call, where)
        if event is None:
            return self._run_live(call, where, perform, adapter, policy)
        return self._serve_recorded(call, where, adapter, event)

    async def _aserve(
        self, call: Call, where: Route, perform: Callable[[], Awaitable[T]], adapter: Adapter[T]
    ) -> T:
        if call.kind == "retry":
            return await self._aserve_attempt(call, where, perform, adapter)
        policy, event = self._plan(call, where)
        if event is None:
            return await self._arun_live(call, where, perform, adapter, policy)
        return self._serve_recorded(call, where, adapter, event)

    def _match(self, where: Route) -> Event | None:
        try:
            return self._recorded.match(where.kind, where.name, where.request)
        except ReplayMismatchError as exc:
            if where.kind in LIVE_ON_MISS:
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
            if where.kind in {"llm", "http"}:
                return self._replay_http(call, where, adapter, event)
            try:
                value = adapter.replay(call, event, self.blobs)
            except RecordedError as recorded:
                error = rebuild_error(recorded.info)
                adapter.record(call, Outcome(error=error), self)
                raise error from None
            return adapter.record(call, Outcome(value=value), self)
        finally:
            self.replay_clock.reach(event.wall)

    def _replay_http(self, call: Call, where: Route, adapter: Adapter[T], event: Event) -> T:
        exchange: Event | None = event
        if where.kind == "llm":
            parent = event.parent_span
            exchange = self._http_by_span.get(parent) if parent is not None else None
        if exchange is None:
            raise ReplayError(
                f"the recorded model call seq {event.seq} has no HTTP exchange to answer with"
            )
        try:
            response: Any = adapter.replay(call, exchange, self.blobs)
        except RecordedError as recorded:
            error = rebuild_error(recorded.info)
            adapter.record(call, Outcome(error=error), self)
            raise error from None
        if isinstance(adapter, HTTPAdapter):  # record the exchange (and model call) as read
            adapter.emit_exchange(call, self, response, response.content, None)
        return response  # type: ignore[no-any-return]

    def _run_live(
        self,
        call: Call,
        where: Route,
        perform: Callable[[], T],
        adapter: Adapter[T],
        policy: Policy | None,
    ) -> T:
        counterpart = self._live_begins(where)
        start = self.clock.monotonic()
        try:
            with live_crossing(where.kind, policy):
                value = perform()
        except BaseException as exc:
            adapter.record(call, Outcome(error=exc, duration=self.clock.monotonic() - start), self)
            raise
        finally:
            self._live_ends(counterpart)
        return self._live_done(call, where, adapter, policy, counterpart, value, start)

    async def _arun_live(
        self,
        call: Call,
        where: Route,
        perform: Callable[[], Awaitable[T]],
        adapter: Adapter[T],
        policy: Policy | None,
    ) -> T:
        counterpart = self._live_begins(where)
        start = self.clock.monotonic()
        try:
            with live_crossing(where.kind, policy):
                value = await perform()
        except BaseException as exc:
            adapter.record(call, Outcome(error=exc, duration=self.clock.monotonic() - start), self)
            raise
        finally:
            self._live_ends(counterpart)
        return self._live_done(call, where, adapter, policy, counterpart, value, start)

    def _live_begins(self, where: Route) -> Event | None:
        """The recorded counterpart of a live call; the clock moves to its start."""
        counterpart = self._counterparts.match(where.kind, where.name, where.request)
        if counterpart is not None:
            self.replay_clock.reach(counterpart.wall - _duration(counterpart))
        return counterpart

    def _live_ends(self, counterpart: Event | None) -> None:
        if counterpart is not None:
            self.replay_clock.reach(counterpart.wall)

    def _live_done(
        self,
        call: Call,
        where: Route,
        adapter: Adapter[T],
        policy: Policy | None,
        counterpart: Event | None,
        value: T,
        start: float,
    ) -> T:
        result = adapter.record(
            call, Outcome(value=value, duration=self.clock.monotonic() - start), self
        )
        if policy is not None and policy.reports_drift and counterpart is not None:
            self._spy(call, where, counterpart, value)
        return result

    def _recorded_fault(self, where: Route) -> tuple[RetryAttempt, bool] | None:
        """The recorded failure of this retry attempt, and whether the attempt runs live
        first (it committed before failing at capture); ``None``: it succeeded, run live."""
        policy = self.policies.policy_for("retry", where.name)
        event = self._match(where) if policy.serves_recording else None
        if not isinstance(event, RetryAttempt) or event.error is None:
            return None
        timeout = self._timeouts.get(event.span) if event.span is not None else None
        # Timed out before anything committed: running it would add a side effect.
        return event, not (timeout is not None and timeout.committed is not True)

    def _fail_attempt(
        self, call: Call, adapter: Adapter[T], event: RetryAttempt, ran: float | None
    ) -> BaseException:
        """Record the attempt as failed with the recorded error; return that error. ``ran``:
        when the attempt started running live (``None``: it did not run)."""
        assert event.error is not None
        injected = rebuild_error(event.error)
        self._note_injection(call, event, ran_live=ran is not None)
        duration = 0.0 if ran is None else self.clock.monotonic() - ran
        adapter.record(call, Outcome(error=injected, duration=duration), self)
        return injected

    def _serve_attempt(
        self, call: Call, where: Route, perform: Callable[[], T], adapter: Adapter[T]
    ) -> T:
        """A retry attempt: run live, and fail as the recorded attempt failed."""
        fault = self._recorded_fault(where)
        if fault is None:
            return self._run_live(call, where, perform, adapter, None)
        event, runs_first = fault
        if not runs_first:
            raise self._fail_attempt(call, adapter, event, None)
        start = self.clock.monotonic()
        try:
            perform()
        except BaseException as exc:
            adapter.record(call, Outcome(error=exc, duration=self.clock.monotonic() - start), self)
            raise
        # It succeeded live but failed at capture (after committing): fail it the same way.
        raise self._fail_attempt(call, adapter, event, start)

    async def _aserve_attempt(
        self, call: Call, where: Route, perform: Callable[[], Awaitable[T]], adapter: Adapter[T]
    ) -> T:
        """:meth:`_serve_attempt` for an async retry loop."""
        fault = self._recorded_fault(where)
        if fault is None:
            return await self._arun_live(call, where, perform, adapter, None)
        event, runs_first = fault
        if not runs_first:
            raise self._fail_attempt(call, adapter, event, None)
        start = self.clock.monotonic()
        try:
            await perform()
        except BaseException as exc:
            adapter.record(call, Outcome(error=exc, duration=self.clock.monotonic() - start), self)
            raise
        raise self._fail_attempt(call, adapter, event, start)

    # --- bookkeeping ---------------------------------------------------------------------

    def _note_injection(self, call: Call, event: RetryAttempt, *, ran_live: bool) -> None:
        assert event.error is not None
        with self._state_lock:
            self.injected.append(
                Injection(
                    call.name, call.attempt, f"{event.error.type}: {event.error.message}", ran_live
                )
            )

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


def _duration(event: Event) -> float:
    duration = getattr(event, "duration", 0.0)
    return float(duration) if isinstance(duration, int | float) else 0.0
