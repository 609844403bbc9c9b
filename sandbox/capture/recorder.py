"""The capture's boundary: performs every crossing for real and appends its event to the run.

A :class:`Recorder` is what ``with sandbox.capture.run(...) as rec`` hands out. It is the
capture implementation of :class:`sandbox.seam.boundary.Boundary`, and it also records what
is not a crossing: state transitions, the final result, timeouts, the failure.

Sequence numbers are allocated and lines handed on under one lock, so line *n* of
``events.jsonl`` is the event with ``seq`` *n*, in completion order. Each line is written with
one unbuffered ``write`` (see :class:`sandbox.snapshot.store.RunWriter`), so a killed process
leaves every event written before the kill: at once for most events, on the drain's thread,
a moment later, for those made from an exchange's bytes (:meth:`Recorder.emit_later`: see
:mod:`sandbox.capture.drain`).

A capture fails open: an error of the recorder's own (a full disk, an unwritable store, an
event it cannot write) never reaches the agent. The first one is written to stderr once, the
run is marked :attr:`Recorder.damaged` with its reason and records nothing more; the
agent's call returns or raises exactly what it did. (A replay's recorder fails closed.)
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, JsonValue
from pydantic_core import to_jsonable_python

from sandbox.capture import drain
from sandbox.capture.clock import SystemClock, TimeSource
from sandbox.errors import CaptureError
from sandbox.names import FAILURE_EVENT
from sandbox.redaction import Redactor, sensitive_header
from sandbox.seam.boundary import (
    Adapter,
    Call,
    Outcome,
    SpanAllocator,
    current_attempt,
    current_span,
    error_info,
    open_call,
    task_id,
)
from sandbox.snapshot.events import (
    BlobRef,
    Event,
    FinalResult,
    StateTransition,
    Timeout,
)
from sandbox.snapshot.hashing import ordered_json, sha256_bytes
from sandbox.snapshot.manifest import (
    ExceptionPredicate,
    Failure,
    MarkedPredicate,
    Predicate,
    ResultPredicate,
    SQLInvariant,
)
from sandbox.snapshot.store import RunWriter, Store, dump_event

T = TypeVar("T")

BLOB_THRESHOLD = 64 * 1024
"""Outputs and bodies larger than this (bytes, serialized) are stored as blobs."""
BINARY_MEDIA = (
    "image/",
    "audio/",
    "video/",
    "font/",
    "application/zip",
    "application/gzip",
    "application/x-gzip",
    "application/x-tar",
    "application/x-7z-compressed",
    "application/pdf",
    "application/wasm",
    "application/x-protobuf",
    "application/vnd.sqlite3",
)
"""Media types known to be binary: their blobs are stored as they are. Every other payload
(JSON of any vendor type, forms, XML, text, and unknown types) is redacted first."""
_COMMITTING_KINDS = frozenset({"tool", "http", "memory", "llm"})


_PLAIN_TYPES = frozenset({str, int, float, bool, type(None), dict})
"""Values written as they are (a dict or list holds JSON already: see :meth:`Recorder.jsonable`)."""


def _plain(value: Any) -> Any:
    if type(value) in _PLAIN_TYPES:
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_defaults=True)
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return [_plain(v) for v in value]
    return value


def fast_dump(event_type: type[Event], kind: str, fields: dict[str, Any]) -> bytes:
    """The line :func:`~sandbox.snapshot.store.dump_event` writes for these fields, without
    building the model: the kind first, then the fields in the model's order, those that
    equal their default left out (as there), written by :func:`ordered_json` in one call."""
    return _dump(kind, _order(event_type, tuple(fields)), fields)


def _dump(kind: str, order: tuple[tuple[str, Any], ...], fields: dict[str, Any]) -> bytes:
    """:func:`fast_dump` with the fields' order (:func:`_order`) worked out already."""
    out: dict[str, Any] = {"kind": kind}
    plain = _PLAIN_TYPES
    for name, default in order:
        value = fields[name]
        if value is default or (default is not _REQUIRED and value == default):
            continue
        out[name] = value if type(value) in plain else _plain(value)
    return ordered_json(out) + b"\n"


_REQUIRED: Any = object()
"""The default of a field that has none."""
_ORDERS: dict[tuple[type[Event], tuple[str, ...]], tuple[tuple[str, Any], ...]] = {}


def _order(event_type: type[Event], names: tuple[str, ...]) -> tuple[tuple[str, Any], ...]:
    """The fields ``names`` of ``event_type`` in the model's order, each with its default
    (worked out once for each set of names an emitter passes)."""
    key = (event_type, names)
    found = _ORDERS.get(key)
    if found is None:
        defaults = _defaults(event_type)
        present = set(names)
        found = tuple(
            (name, defaults.get(name, _REQUIRED)) for name in _names(event_type) if name in present
        )
        _ORDERS[key] = found
    return found


def _base(call: Call | None) -> dict[str, Any]:
    """The fields an event takes from its call, or, with none, from its context."""
    if call is not None:
        return {
            "task": call.task,
            "name": call.name,
            "fingerprint": call.fingerprint,
            "span": call.span,
            "parent_span": call.parent_span,
            "attempt": call.attempt,
        }
    return {"task": task_id(), "parent_span": current_span(), "attempt": current_attempt()}


def _line(
    event_type: type[Event], kind: str, base: dict[str, Any], stamp: tuple[int, float, float]
) -> bytes:
    """The log line of an event of ``event_type`` with the fields ``base`` and its
    ``(seq, wall, mono)`` stamp (added to ``base``). The first event of each shape (its
    type and the names of its fields, in order: a call site passes the same names each
    time) is validated by the model, those after it are trusted."""
    shape = (event_type, tuple(base))
    order = _VALIDATED.get(shape)
    base["seq"], base["wall"], base["mono"] = stamp
    if order is not None:
        return _dump(kind, order, base)
    line = dump_event(event_type(**base))
    _VALIDATED[shape] = _order(event_type, tuple(base))
    return line


_VALIDATED: dict[tuple[type[Event], tuple[str, ...]], tuple[tuple[str, Any], ...]] = {}
"""Each shape of event a recorder of this process wrote (its type, the names of its fields,
in the order its call site passes them) -> the fields' order: the first event of a shape is
validated by the model, those after it (in any run) are trusted."""

_NAMES: dict[type[Event], tuple[str, ...]] = {}


def _names(event_type: type[Event]) -> tuple[str, ...]:
    found = _NAMES.get(event_type)
    if found is None:
        found = _NAMES[event_type] = tuple(event_type.model_fields)
    return found


_KINDS: dict[type[Event], str] = {}


def _kind(event_type: type[Event]) -> str:
    found = _KINDS.get(event_type)
    if found is None:
        found = _KINDS[event_type] = str(event_type.model_fields["kind"].default)
    return found


_DEFAULTS: dict[type[Event], dict[str, Any]] = {}


def _defaults(event_type: type[Event]) -> dict[str, Any]:
    found = _DEFAULTS.get(event_type)
    if found is None:
        found = {
            name: info.default
            for name, info in event_type.model_fields.items()
            if not info.is_required()
        }
        _DEFAULTS[event_type] = found
    return found


def jsonable_value(value: object) -> JsonValue:
    """``value`` as JSON (pydantic's conversion; ``repr`` for what it cannot convert, bytes
    as UTF-8)."""
    result: JsonValue = to_jsonable_python(value, fallback=repr, bytes_mode="utf8")
    return result


_jsonable = jsonable_value  # the former private name


class _LaterLine:
    """The line of an event emitted by :meth:`Recorder.emit_later`, made when called:
    ``base``, its fields from the context it was emitted in, or, with ``call``, none yet
    (they are the call's, its fingerprint taken only now), updated with ``build``'s; nothing
    (the run damaged) when it cannot be made. One object (slots) for what a held run keeps
    of each such event, instead of a ``partial`` with its bound method and arguments: each
    object a held run keeps is one more for the garbage collector to scan."""

    __slots__ = ("base", "build", "call", "event_type", "kind", "recorder", "stamp")

    def __init__(
        self,
        recorder: Recorder,
        event_type: type[Event],
        kind: str,
        call: Call | None,
        base: dict[str, Any] | None,
        build: Callable[[Recorder], dict[str, Any]],
        stamp: tuple[int, float, float],
    ) -> None:
        self.recorder = recorder
        self.event_type = event_type
        self.kind = kind
        self.call = call
        self.base = base
        self.build = build
        self.stamp = stamp

    def __call__(self) -> bytes:
        recorder = self.recorder
        try:
            base = _base(self.call) if self.base is None else self.base
            base.update(self.build(recorder))
            return _line(self.event_type, self.kind, base, self.stamp)
        except Exception as exc:
            recorder.damage(exc)
            return b""


class Recorder:
    """Records one run. Thread- and task-safe."""

    replaying: ClassVar[bool] = False
    """A replay's recorder: ``capture.run`` inside the replay hands over to it."""

    @property
    def names_by_origin(self) -> bool:
        """Tasks are named as the run creates them and pool work by its submission
        (:attr:`sandbox.seam.boundary.Boundary.names_by_origin`)."""
        return True

    def __init__(
        self,
        writer: RunWriter,
        store: Store,
        *,
        redactor: Redactor | None = None,
        clock: TimeSource | None = None,
        blob_threshold: int = BLOB_THRESHOLD,
        start_seq: int = 0,
    ) -> None:
        self.writer = writer
        self.store = store
        self.redactor = redactor or Redactor()
        self.clock: TimeSource = clock or SystemClock()
        self._monotonic = self.clock.monotonic
        self._time = self.clock.time
        self.blob_threshold = blob_threshold
        self.t0 = self._monotonic()
        self.failure: Failure | None = None
        self.result: JsonValue = None
        self.has_result = False
        self._lock = threading.Lock()
        self._seq = start_seq
        self._spans = SpanAllocator()
        self._pending: dict[object, Callable[[], None]] = {}
        self._ok_children: Counter[int] = Counter()
        self._timed_out_spans: set[int] = set()
        self._headers_seen: dict[tuple[tuple[str, str], ...], tuple[object, dict[str, str]]] = {}
        self.env_reads: set[str] = set()
        """Environment variables the run read (see :mod:`sandbox.capture.envreads`)."""
        self.written_blobs: dict[str, bool] = {}
        """Redacted blobs this run stored: key -> whether this run created it."""
        self._blobs_lock = threading.Lock()
        """Guards :attr:`written_blobs` alone: a line made late (:meth:`emit_later`) stores
        its blobs under the store's lock, which an event appended under :attr:`_lock`
        may be waiting for."""
        self.closed = False
        self._drained = not self.replaying and not writer.holds_lines
        """Whether the lines go to the log through :mod:`sandbox.capture.drain`."""
        self._handed = 0
        """Lines handed to the drain (under the lock)."""
        self._written = 0
        """Lines the drain wrote (or let go): all of them when it equals :attr:`_handed`."""
        self.uuid4_source: Callable[[], Any] | None = None
        """The run's seeded ``uuid4`` generator (see :mod:`sandbox.capture.ids`)."""
        self.damaged: str | None = None
        """Why the capture of this run failed (its own error, never the agent's), if it did."""
        self.overlapped = 0
        """How many other runs of this process recorded while this one did (its services'
        end states, taken when it ends, may hold their writes)."""
        self._exception: BaseException | None = None
        """The exception recorded as the one that ended the run."""

    @property
    def run_id(self) -> str:
        return self.writer.manifest.run_id

    @property
    def event_count(self) -> int:
        return self._seq

    def hand_over(self, call: str | None = None) -> None:
        """The program entered ``capture.run`` while this recorder serves it (``call``: the
        decorated call of the script that opened it, labelled): a replay's recorder of a run
        the program opened itself begins recording there when the block is the run's (see
        :class:`sandbox.replay.boundary.ReplayBoundary`); a capture's does nothing."""

    def hand_back(self, exc: BaseException | None) -> None:
        """The program left the ``capture.run`` it entered while this recorder serves it,
        with ``exc`` escaping: a replay's recorder records it there, in that task, as the
        capture did; a capture's does nothing."""

    # --- Boundary ------------------------------------------------------------------------

    def open(self, kind: str, name: str, request: JsonValue) -> Call:
        return open_call(self._spans, kind, name, request, self._monotonic() - self.t0)

    def call(self, call: Call, perform: Callable[[], T], adapter: Adapter[T]) -> T:
        start = self._monotonic()
        try:
            value = perform()
        except BaseException as exc:
            self._record(call, Outcome(error=exc, duration=self._monotonic() - start), adapter)
            raise
        return self._record(call, Outcome(value=value, duration=self._monotonic() - start), adapter)

    async def acall(
        self, call: Call, perform: Callable[[], Awaitable[T]], adapter: Adapter[T]
    ) -> T:
        start = self._monotonic()
        try:
            value = await perform()
        except BaseException as exc:
            self._record(call, Outcome(error=exc, duration=self._monotonic() - start), adapter)
            raise
        return self._record(call, Outcome(value=value, duration=self._monotonic() - start), adapter)

    def _record(self, call: Call, outcome: Outcome[T], adapter: Adapter[T]) -> T:
        """``adapter.record``; an error of the recording itself damages the run and the
        caller gets the outcome unchanged (a capture fails open)."""
        try:
            return adapter.record(call, outcome, self)
        except Exception as exc:
            if exc is outcome.error or self.replaying:
                raise
            self.damage(exc)
            if outcome.error is not None:
                raise outcome.error from None
            return outcome.value  # type: ignore[return-value]

    def damage(self, error: BaseException | str) -> None:
        """Mark the run damaged by an error of the capture's own (the first reason stays),
        warning once on stderr; it records nothing more. A replay's recorder raises it."""
        if self.replaying:
            if isinstance(error, BaseException):
                raise error
            raise CaptureError(error)
        if self.damaged is not None:
            return
        reason = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        self.damaged = reason[:500]
        with contextlib.suppress(Exception):  # nowhere left to say it
            sys.stderr.write(
                f"sandbox: capture of run {self.run_id} failed, the agent goes on "
                f"unrecorded (the run is marked damaged): {self.damaged}\n"
            )

    # --- Emitter -------------------------------------------------------------------------

    def elapsed(self) -> float:
        return self._monotonic() - self.t0

    def emit(self, event_type: type[Event], call: Call | None, /, **fields: Any) -> int:
        return self.emit_fields(event_type, call, fields)

    def emit_fields(
        self, event_type: type[Event], call: Call | None, fields: dict[str, Any]
    ) -> int:
        """:meth:`emit` with the fields in a dict (read, not kept, not changed)."""
        if self.closed or self.damaged is not None:
            # Not the run's any more (a thread that outlived it), or no longer recorded.
            if self.replaying:
                raise CaptureError(f"run {self.run_id} is finished; no more events can be added")
            return -1
        try:
            return self._emit(event_type, call, fields)
        except Exception as exc:
            self.damage(exc)
            return -1

    def _emit(self, event_type: type[Event], call: Call | None, fields: dict[str, Any]) -> int:
        base = _base(call)
        base.update(fields)
        kind = _kind(event_type)
        with self._lock:
            seq = self._seq
            wall, mono = self._time(), self._monotonic() - self.t0
            if call is not None and "duration" not in fields:
                # An instant's crossing (a draw) is stamped as it began: where a replay's
                # clock stands for what the program read just before it (see ReplayBoundary).
                wall -= max(0.0, mono - call.started)
            self._append(_line(event_type, kind, base, (seq, wall, mono)))
            self._seq = seq + 1
            self._count(kind, base["parent_span"], failed=bool(fields.get("error")))
        return seq

    def emit_later(
        self,
        event_type: type[Event],
        call: Call | None,
        build: Callable[[Recorder], dict[str, Any]],
        *,
        failed: bool,
        size: int,
    ) -> int:
        """:meth:`emit_fields` with the fields that ``build(self)`` makes (``failed``:
        whether they hold an error), off the agent's path: on the drain's thread when the
        run's lines go to its log as they come (:mod:`sandbox.capture.drain`), only if the
        event leaves memory when they are held (most such runs are let go: the work would
        be for nothing; ``size``: about how many bytes the event holds until then); at once
        for a replay's recorder, or a held log spilled to disk. Its place in the log, times
        and context are the event's as it happens. ``build`` must read nothing that changes
        afterwards; an error of it damages the run."""
        if not (self._drained or self.writer.holds_lines):
            return self.emit_fields(event_type, call, build(self))
        if self.closed or self.damaged is not None:
            return -1
        if self._drained and (
            size > drain.ITEM_BYTES or self._handed - self._written >= drain.LINES
        ):
            self._caught_up()  # the agent waits, as it would for its lines made here
        base: dict[str, Any] | None
        if call is None:
            context = _base(None)  # the context's fields: as they are now
            base, parent = context, context["parent_span"]
        else:
            base, parent = None, call.parent_span  # the call's fields: taken with the line
        kind = _kind(event_type)
        with self._lock:
            seq = self._seq
            stamp = (seq, self._time(), self._monotonic() - self.t0)
            later = _LaterLine(self, event_type, kind, call, base, build, stamp)
            if self._drained:
                self._handed += 1
                drain.put(self._write, later)
            else:
                self.writer.append_pending(later, self.redactor.bytes, size)
            self._seq = seq + 1
            self._count(kind, parent, failed=failed)
        return seq

    def _count(self, kind: str, parent: int | None, *, failed: bool) -> None:
        """Note an event of ``kind`` under span ``parent`` (under the lock)."""
        if parent is not None and kind in _COMMITTING_KINDS and not failed:
            self._ok_children[parent] += 1
        if kind == "timeout" and parent is not None:
            self._timed_out_spans.add(parent)

    def adopt(self, events: Sequence[Event]) -> None:
        """Append events written elsewhere (a child process's), renumbered after this log's."""
        with self._lock:
            for event in events:
                self._append(dump_event(event.model_copy(update={"seq": self._seq})))
                self._seq += 1

    def _append(self, line: bytes) -> None:
        """Append an event's line, not redacted yet, after those handed to the drain
        (under the lock)."""
        if self._caught_up():
            self.writer.append_pending(line, self.redactor.bytes)

    def _write(self, line: drain.Line) -> None:
        """Write a line the drain hands back: an error damages the run; nothing once the
        run is damaged, or closed (a line handed over by a thread that outlived it)."""
        try:
            if self.damaged is None and not self.closed:
                self.writer.append_pending(line, self.redactor.bytes)
        except Exception as exc:
            if not self.closed:
                self.damage(exc)
        finally:
            self._written += 1  # on the drain's thread alone

    def redact_headers(self, headers: Sequence[tuple[str, str]]) -> dict[str, str]:
        """Headers with sensitive values replaced; those values become secrets everywhere.
        The same headers again (a client's, mostly) give the same result while no secret
        was learned meanwhile: it is remembered (the same dict: read it, do not change it)."""
        key = tuple(headers)
        known = self._headers_seen.get(key)
        if known is not None and known[0] is self.redactor.state:
            return known[1]
        for name, value in headers:
            if sensitive_header(name):
                _, sep, rest = value.partition(" ")
                self.redactor.add_secret(rest if sep and rest else value)
        redacted = self.redactor.headers(headers)
        if len(self._headers_seen) >= 256:
            self._headers_seen.clear()
        self._headers_seen[key] = (self.redactor.state, redacted)
        return redacted

    def store_payload(self, data: bytes, media_type: str) -> BlobRef:
        if media_type.lower().startswith(BINARY_MEDIA):
            return self._put(data, media_type)
        return self.put_redacted(self.redactor.bytes(data), media_type)

    def _put(self, data: bytes, media_type: str) -> BlobRef:
        """Store a blob; a failure damages the run (its reference is still returned)."""
        if self.damaged is None:
            try:
                return self.store.put_blob(data, media_type)
            except Exception as exc:
                self.damage(exc)
        return BlobRef(sha256=sha256_bytes(data), size=len(data), media_type=media_type)

    def put_redacted(self, data: bytes, media_type: str) -> BlobRef:
        """Store an already-redacted blob, noting it for :mod:`sandbox.capture.scrub`."""
        key = sha256_bytes(data)
        try:
            created = self.damaged is None and not self.store.has_blob(key)
        except Exception as exc:
            self.damage(exc)
            created = False
        ref = self._put(data, media_type)
        with self._blobs_lock:
            self.written_blobs[key] = self.written_blobs.get(key, False) or created
        return ref

    def jsonable(self, value: object) -> tuple[JsonValue, BlobRef | None]:
        data = jsonable_value(value)
        if data is None or isinstance(data, bool | int | float):
            return data, None
        if isinstance(data, str):
            if len(data) <= self.blob_threshold // 4:
                return data, None
            raw = data.encode("utf-8", "surrogateescape")
            if len(raw) <= self.blob_threshold:
                return data, None
            return None, self.store_payload(raw, "text/plain; charset=utf-8")
        raw = ordered_json(data)
        if len(raw) <= self.blob_threshold:
            return data, None
        return None, self.store_payload(raw, "application/json")

    def defer(self, key: object, finish: Callable[[], None]) -> None:
        with self._lock:
            self._pending[key] = finish

    def undefer(self, key: object) -> None:
        with self._lock:
            self._pending.pop(key, None)

    def flush_pending(self) -> None:
        """Write the events still waiting (response bodies never read to the end)."""
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
        for finish in pending:
            finish()
        self._caught_up()

    def _caught_up(self) -> bool:
        """Wait until the drain has written the lines this run handed it (none: at once);
        whether it did (in 30 s, else the run is damaged)."""
        if self._written == self._handed or drain.settle():
            return True
        self.damage("its events were not written within 30 s")
        return False

    # --- what is not a crossing ----------------------------------------------------------

    def committed_inside(self, span: int) -> bool:
        """Whether a tool, HTTP or memory call directly inside ``span`` completed."""
        return self._ok_children.get(span, 0) > 0

    def timed_out(self, span: int) -> bool:
        return span in self._timed_out_spans

    def attempt_fault(self, loop: str, attempt: int, failed: bool) -> BaseException | None:
        """For tenacity's own retries (their attempts do not cross the seam): the error that
        attempt ``attempt`` of retry loop ``loop``, just ended (``failed`` or not), must end
        with instead of its own outcome; ``None``: its outcome stands. A capture keeps every
        outcome; a replay fails the attempt again as it failed at capture."""
        return None

    def state(self, target: str, source: str | None = None, **data: object) -> int:
        """Record an agent state transition (``source`` -> ``target``) with its data."""
        jdata = {k: jsonable_value(v) for k, v in data.items()}
        return self.emit(
            StateTransition, None, name=target, source=source, target=target, data=jdata
        )

    def recorded_state(self, name: str) -> StateTransition | None:
        """The first ``state`` event named ``name`` of the run this recorder replays; a
        capture's recorder replays none."""
        return None

    def unredacted(self, text: str) -> str:
        """``text`` recorded, with each placeholder whose secret the user supplied to the
        replay this recorder makes put back (a capture's: unchanged)."""
        return text

    def set_result(self, value: object) -> int:
        """Record the run's final result (what a :class:`ResultPredicate` is checked against)."""
        jvalue, blob = self.jsonable(value)
        if blob is not None:
            jvalue = {"blob": blob.sha256}
        self.result = jvalue
        self.has_result = True
        return self.emit(FinalResult, None, name="result", value=jvalue)

    def offer_result(self, value: object) -> None:
        """Record ``value``, what the run's code returned, as its result unless one is
        recorded already or it is ``None`` or what JSON cannot show but by ``repr`` (that
        text differs from one process to the next: a replay would differ by it alone).
        Capture, its decorator and middleware, and replay all offer alike, so a run and its
        replay record the same result or none."""
        if value is None or self.has_result:
            return
        try:
            to_jsonable_python(value, bytes_mode="utf8")
        except Exception:  # no JSON form of its own: not a result to compare
            return
        self.set_result(value)

    def timeout(self, after: float, committed: bool | None = None, name: str = "") -> int:
        """Record that the current attempt timed out after ``after`` seconds; ``committed``
        says whether its side effect had already happened (``None``: not knowable)."""
        return self.emit(Timeout, None, name=name, after=after, committed=committed)

    def mark_failed(
        self,
        reason: str,
        predicate: ExceptionPredicate | SQLInvariant | ResultPredicate | None = None,
        error: BaseException | None = None,
    ) -> None:
        """Mark the run as showing the failure; ``predicate`` is how replay recognizes it
        (none and no ``error``: a replayed run that marks itself failed again shows it)."""
        pred: Predicate | None = predicate
        if pred is None and error is None:
            pred = MarkedPredicate()
        self.failure = Failure(
            reason=reason, predicate=pred, error=error_info(error) if error else None
        )
        self.emit(
            StateTransition,
            None,
            name=FAILURE_EVENT,
            target="failed",
            data={"failure": self.failure.model_dump(mode="json")},
        )

    def record_exception(self, exc: BaseException) -> None:
        """The exception that ended the run: a final ``result`` event with the error, and the
        failure (unless one was marked already). The same exception is recorded once (it
        may reach the program's top after the ``capture.run`` it escaped recorded it)."""
        with self._lock:
            if exc is self._exception:
                return
            self._exception = exc
        info = error_info(exc)
        self.emit(FinalResult, None, name="result", error=info)
        if self.failure is None:
            self.failure = Failure(
                reason=f"{info.type}: {info.message}"[:500],
                predicate=ExceptionPredicate(
                    type=info.type, message_contains=info.message[:200] or None
                ),
                error=info,
            )
