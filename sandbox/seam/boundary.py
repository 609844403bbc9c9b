"""The seam between an agent and the world: every boundary crossing goes through here.

This module is the contract capture and replay share. Nothing else in the project may
perform a boundary call (a tool call, a retrieval, a memory read or write, an HTTP or LLM
exchange, a clock read, a random or uuid draw, a retry attempt) behind its back.

How a crossing works
--------------------
Instrumented code (``@tool``, the httpx patch, ``now()``, the ``uuid4`` patch, the retry
wrapper ...) describes the crossing and hands over a zero-argument ``perform`` callable that
does the real thing::

    value = through(kind, name, request, perform, adapter)          # sync
    value = await athrough(kind, name, request, aperform, adapter)  # async

* ``kind`` is the event kind that will be recorded (``"tool"``, ``"http"``, ``"clock"`` ...;
  see :data:`sandbox.snapshot.events.EVENT_KINDS`).
* ``name`` says which one (tool name, ``"POST https://host/v1/chat/completions"``,
  ``"time.time"``, ``"uuid4"``, ``"retry:charge"``).
* ``request`` is a JSON value describing the call (tool arguments, the HTTP method, url,
  headers and body ...). Its fingerprint is
  ``sandbox.snapshot.normalize.request_fingerprint(kind, name, request)`` and is written to
  the event's ``fingerprint``: replay computes the same fingerprint from the live request to
  find the recorded event. The fingerprint is taken before redaction (secrets are dropped by
  normalization where they are known to live: authorization headers, API-key headers).
* ``adapter`` (an :class:`Adapter`) translates between the live response and the recorded
  event for this kind: :meth:`Adapter.record` turns an outcome into event(s) during capture,
  :meth:`Adapter.replay` rebuilds the response a caller expects from a recorded event.

When no boundary is installed, ``through`` just calls ``perform()``: instrumented code runs
unchanged and nearly free outside a capture or replay.

What a boundary implementation must do
--------------------------------------
A :class:`Boundary` is installed for the whole process with :func:`install` (replay installs
its own, one at a time; so does a captured command), or for one context with :func:`use` or
:func:`enter` (a ``contextvars`` override, which wins over the global one): each
``capture.run`` enters its :class:`sandbox.capture.recorder.Recorder` this way, so that many
runs record at once in one process, each in its own context (the asyncio tasks and threads
it starts inherit it; see :mod:`sandbox.capture.threads`).
``through`` builds a :class:`Call` with :meth:`Boundary.open` (span id in start order,
enclosing span, task id, start time, current retry attempt) and then delegates to
:meth:`Boundary.call` / :meth:`Boundary.acall` with the ``perform`` callable and the adapter.

* Capture (:class:`~sandbox.capture.recorder.Recorder`): runs ``perform()``, measures it, and
  calls ``adapter.record(call, outcome, recorder)``, which emits the event(s) and returns the
  value for the caller (it may wrap it: an HTTP response body is teed while it streams and the
  event is written when the stream closes).
* Replay: may return ``adapter.replay(call, event, blobs)`` for the recorded event (which
  raises :class:`RecordedError` when the recording holds an error, or the exception type the
  adapter knows how to rebuild), raise an injected error (a recorded timeout at the same
  attempt), or call ``perform()`` live (tools against the frozen containers), and may record
  the new trace the same way capture does.

While ``perform`` runs, the call's span is the *current span*: boundary calls made inside it
get it as ``parent_span``. Spans are allocated in start order; ``seq`` (the line number in
``events.jsonl``) is allocated when the event is written, in completion order. Both orders
are needed to replay a race.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, overload, runtime_checkable

from pydantic import JsonValue

from sandbox.errors import CaptureError
from sandbox.snapshot.events import ErrorInfo, Event
from sandbox.snapshot.normalize import request_fingerprint

T = TypeVar("T")
V = TypeVar("V")

_current_span: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "sandbox_current_span", default=None
)
_current_attempt: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "sandbox_current_attempt", default=None
)
_task_name: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "sandbox_task_name", default=None
)
_root: contextvars.ContextVar[weakref.ref[object] | None] = contextvars.ContextVar(
    "sandbox_root", default=None
)
"""The task (else thread) a run began in: what it does there is the run's ``main``."""
_installed_root: weakref.ref[object] | None = None
"""The thread that installed the process's boundary (see :func:`install`)."""
_BYPASS = object()
"""Set as the context's boundary by :func:`bypassed`: nothing is captured or replayed there."""
_context_boundary: contextvars.ContextVar[Boundary | object | None] = contextvars.ContextVar(
    "sandbox_boundary", default=None
)
_global_boundary: Boundary | None = None
_AUTO_TASK_NAME = re.compile(r"(?P<kind>Task)-(?P<number>\d+)(?P<rest>)")
"""An asyncio task's default name, numbered across the process (``Task-7``)."""
_AUTO_THREAD_NAME = re.compile(r"(?P<kind>ThreadPoolExecutor|Thread)-(?P<number>\d+)(?P<rest>.*)")
"""A thread's default name, numbered across the process too (an executor's by the
executor, its workers ``_0``, ``_1``... within it; a thread's ``Thread-3 (target)``)."""
_FIRST_NUMBER = {"ThreadPoolExecutor": 0}
"""The number Python gives the first of a kind (1 but for executors): a run's names are
then those a new process gives, as at a capture that ran in one."""


@dataclass(eq=False)
class _TaskNumbers:
    """The numbers one boundary gives the tasks, threads and executors Python numbered
    (see :func:`_stable_name`)."""

    names: dict[str, str] = field(default_factory=dict)
    """A numbered name (``Task-7``, ``ThreadPoolExecutor-3``) and the one given."""
    counters: dict[str, Iterator[int]] = field(default_factory=dict)
    """The next number of each thing counted: a kind first crossing (``Task``), tasks
    created of a coroutine (``created fetch``) or given one name (``named rate``), a
    task's submissions to a thread pool (``submitted main/tools``)."""

    def count(self, key: str, first: int = 1) -> int:
        """The next number of ``key``, from ``first`` (under :data:`_numbers_lock`)."""
        return next(self.counters.setdefault(key, itertools.count(first)))


_task_numbers: weakref.WeakKeyDictionary[object, _TaskNumbers] = weakref.WeakKeyDictionary()
_numbers_lock = threading.RLock()
"""Re-entrant: a task created while it is held (by a finalizer the garbage collector runs
there, as an SDK client's ``__del__`` that closes it in a task) names itself under it."""


def _numbers(owner: object) -> _TaskNumbers:
    """The numbering of ``owner``'s tasks (under :data:`_numbers_lock`)."""
    return _task_numbers.setdefault(owner, _TaskNumbers())


_OUTSIDE = _TaskNumbers()
"""The numbering of tasks seen outside any boundary."""


OWN_REQUESTS = frozenset({"http", "clock", "random"})
"""The kinds whose request the instrumentation builds itself, from values no one changes
(an HTTP request's method, normalized URL and body parsed from its bytes; a draw's size):
their fingerprint can wait until it is asked."""


class _Fingerprint:
    """:attr:`Call.fingerprint`: made when first asked and kept in the call's own dict,
    where it is found from then on (``functools.cached_property`` takes a lock for each
    call it makes it for, up to Python 3.11: about a quarter of what the fingerprint costs)."""

    @overload
    def __get__(self, call: None, owner: type[Call]) -> _Fingerprint: ...
    @overload
    def __get__(self, call: Call, owner: type[Call] | None = None) -> str: ...
    def __get__(self, call: Call | None, owner: type[Call] | None = None) -> str | _Fingerprint:
        if call is None:
            return self
        made: str = request_fingerprint(call.kind, call.name, call.request)
        call.__dict__["fingerprint"] = made
        return made


@dataclass(frozen=True)
class Call:
    """One boundary crossing, as seen before it is performed."""

    kind: str
    name: str
    request: JsonValue
    span: int
    parent_span: int | None
    task: str
    started: float
    """Monotonic seconds since the run started, when the call began."""
    attempt: int | None = None

    fingerprint = _Fingerprint()
    """:func:`request_fingerprint` of the request (see the module documentation): taken
    when the call opens, or, for a request the instrumentation made itself and no one
    changes (:data:`OWN_REQUESTS`), when first asked (a run held in memory and dropped
    never asks)."""


@dataclass
class Outcome(Generic[T]):
    """What ``perform()`` gave: a value or an exception, and how long it took."""

    value: T | None = None
    error: BaseException | None = None
    duration: float = 0.0


class RecordedError(Exception):
    """Raised on replay in place of an exception recorded at capture whose type the adapter
    cannot rebuild. ``info`` is the recorded type and message."""

    def __init__(self, info: ErrorInfo) -> None:
        self.info = info
        super().__init__(f"{info.type}: {info.message}")


class Emitter(Protocol):
    """What an adapter needs from a capture to write events."""

    def emit(self, event_type: type[Event], call: Call | None, /, **fields: Any) -> int:
        """Write one event (seq, wall, mono, task ... filled in); return its seq."""
        ...

    def store_payload(self, data: bytes, media_type: str) -> Any:
        """Store bytes as a (redacted) blob; return its :class:`BlobRef`."""
        ...

    def jsonable(self, value: object) -> tuple[JsonValue, Any]:
        """``(value as JSON, None)``, or ``(None, BlobRef)`` when it is too large."""
        ...

    def defer(self, key: object, finish: Callable[[], None]) -> None:
        """Register an event that will be written later (a streaming body); ``finish`` is
        called at the end of the run if it is still pending."""
        ...

    def undefer(self, key: object) -> None: ...


BlobReader = Callable[[str], bytes]
"""Reads a blob by SHA-256 (replay hands the store's ``get_blob``)."""


class Adapter(Protocol[T]):
    """Per-kind translation between a live response and its recorded event."""

    def record(self, call: Call, outcome: Outcome[T], emitter: Emitter) -> T:
        """Capture: emit the event(s) for ``outcome``; return the value for the caller (or
        raise ``outcome.error``)."""
        ...

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> T:
        """Replay: rebuild the value the caller expects from the recorded ``event``, or raise
        the recorded error."""
        ...


@runtime_checkable
class RecordsReplayed(Protocol[T]):
    """An adapter whose replayed value is already complete (an HTTP response rebuilt from the
    recording, its body read) and is recorded as such, not through :meth:`Adapter.record`
    (which would wait for the body to stream)."""

    def record_replayed(self, call: Call, value: T, emitter: Emitter) -> T:
        """Replay: emit the event(s) for ``value``, rebuilt by :meth:`Adapter.replay`."""
        ...


@runtime_checkable
class RewritesRequest(Protocol):
    """An adapter whose request body can be edited before it goes out live (a fork's model
    call sent with another model or parameters)."""

    def rewrite_json(self, edit: Callable[[Any], Any]) -> None:
        """Send ``edit(body)`` instead of the request's JSON body."""
        ...


@runtime_checkable
class Boundary(Protocol):
    """Decides how a boundary crossing is served: live and recorded (capture), from the
    recording, live, or spied (replay)."""

    def open(self, kind: str, name: str, request: JsonValue) -> Call: ...

    def call(self, call: Call, perform: Callable[[], T], adapter: Adapter[T]) -> T: ...

    async def acall(
        self, call: Call, perform: Callable[[], Awaitable[T]], adapter: Adapter[T]
    ) -> T: ...

    @property
    def names_by_origin(self) -> bool:
        """Whether, here and now, the asyncio tasks the run creates are named as it creates
        them (:func:`task_created`) and the work it hands to thread pools is named
        by its submission (:func:`pool_work_name`); else tasks are numbered as they first
        cross, as Python numbers them (``Task-3``), and pool work is named by its worker
        thread (a run captured before this naming, and what a replayed program does
        outside the run's block)."""


# --- installing a boundary -----------------------------------------------------------------


def current() -> Boundary | None:
    """The boundary serving this context, or ``None`` when nothing captures or replays."""
    local = _context_boundary.get()
    if local is None:
        return _global_boundary
    return None if local is _BYPASS else local  # type: ignore[return-value]


def in_context() -> bool:
    """Whether this context has a boundary of its own (a run's, see :func:`enter`)."""
    local = _context_boundary.get()
    return local is not None and local is not _BYPASS


def installed() -> Boundary | None:
    """The boundary installed for the whole process (a replay's), if any."""
    return _global_boundary


def enter(boundary: Boundary) -> Callable[[], None]:
    """Serve this context (and the tasks and threads it starts) with ``boundary`` until the
    returned function is called (in the same context: a ``with`` block's exit)."""
    token = _context_boundary.set(boundary)
    rooted = _root.set(weakref.ref(_here()))
    return _Leave(boundary, token, rooted)


class _Leave:
    """What :func:`enter` returns (one object, no closure: a run in flight keeps it, and
    each object it keeps is one more for the garbage collector)."""

    __slots__ = ("boundary", "rooted", "token")

    def __init__(
        self,
        boundary: Boundary,
        token: contextvars.Token[Boundary | object | None],
        rooted: contextvars.Token[weakref.ref[object] | None],
    ) -> None:
        self.boundary, self.token, self.rooted = boundary, token, rooted

    def __call__(self) -> None:
        try:
            _root.reset(self.rooted)
            _context_boundary.reset(self.token)
        except ValueError:  # left from another context: clear this one's
            if _context_boundary.get() is self.boundary:
                _context_boundary.set(None)
                _root.set(None)


def install(boundary: Boundary) -> Callable[[], None]:
    """Install ``boundary`` for the whole process (every thread); return the uninstaller.

    Only one boundary is installed at a time: installing a second is a :class:`CaptureError`.
    """
    global _global_boundary, _installed_root
    if _global_boundary is not None:
        raise CaptureError(
            "a capture or replay is already active in this process; finish it before "
            "starting another (or use sandbox.seam.boundary.use for one context)"
        )
    _global_boundary = boundary
    _installed_root = weakref.ref(threading.current_thread())

    def uninstall() -> None:
        global _global_boundary, _installed_root
        if _global_boundary is boundary:
            _global_boundary = None
            _installed_root = None

    return uninstall


@contextlib.contextmanager
def _set_within(var: contextvars.ContextVar[V], value: V) -> Iterator[None]:
    """``var`` is ``value`` within the block (and the tasks it starts)."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def use(boundary: Boundary | None) -> contextlib.AbstractContextManager[None]:
    """Serve boundary crossings in this context (and tasks it starts) with ``boundary``."""
    return _set_within(_context_boundary, boundary)


def bypassed() -> contextlib.AbstractContextManager[None]:
    """Nothing is captured or replayed in this context and the tasks it starts: for a
    transport whose traffic is already recorded a level up (an MCP client's HTTP)."""
    return _set_within(_context_boundary, _BYPASS)


# --- the crossing itself --------------------------------------------------------------------


def through(
    kind: str,
    name: str,
    request: JsonValue,
    perform: Callable[[], T],
    adapter: Adapter[T],
    *,
    lead: float = 0.0,
) -> T:
    """Cross a boundary (sync): see the module docstring. ``lead``: the seconds since the
    program asked for the crossing (what the wrapper spent deciding to make it): the call
    began that much earlier."""
    boundary = current()
    if boundary is None:
        return perform()
    call = boundary.open(kind, name, request)
    if lead > 0:
        call.__dict__["started"] = call.started - lead
    token = _current_span.set(call.span)
    try:
        return boundary.call(call, perform, adapter)
    finally:
        _current_span.reset(token)


async def athrough(
    kind: str,
    name: str,
    request: JsonValue,
    perform: Callable[[], Awaitable[T]],
    adapter: Adapter[T],
) -> T:
    """Cross a boundary (async): see the module docstring."""
    boundary = current()
    if boundary is None:
        return await perform()
    call = boundary.open(kind, name, request)
    token = _current_span.set(call.span)
    try:
        return await boundary.acall(call, perform, adapter)
    finally:
        _current_span.reset(token)


# --- helpers every boundary implementation shares -------------------------------------------


def current_span() -> int | None:
    return _current_span.get()


def current_attempt() -> int | None:
    """The retry attempt (1, 2 ...) the current code runs in, if any."""
    return _current_attempt.get()


def attempt_scope(number: int | None) -> contextlib.AbstractContextManager[None]:
    """The code in the block runs as retry attempt ``number``."""
    return _set_within(_current_attempt, number)


def task_scope(name: str) -> contextlib.AbstractContextManager[None]:
    """Name the task for events emitted in this context (overrides the automatic id)."""
    return _set_within(_task_name, name)


def root_here() -> Callable[[], None]:
    """What the calling task (else thread) does is the run's ``main`` until the returned
    function is called (in the same context), as what the run's code did in the task or
    thread it began in (see :func:`task_id`): a replay that runs that code in a task of its
    own, or meets the run's ``capture.run`` in one, calls it there."""
    token = _root.set(weakref.ref(_here()))

    def undo() -> None:
        with contextlib.suppress(ValueError):  # left from another context: it ends with it
            _root.reset(token)

    return undo


def _here() -> object:
    """The running asyncio task, else the current thread."""
    loop = asyncio.events._get_running_loop()
    task = asyncio.current_task(loop) if loop is not None else None
    return task if task is not None else threading.current_thread()


def task_id() -> str:
    """Which task emits: a name set with :func:`task_scope`; ``main`` for the task (else
    thread) the run began in, wherever that was (a request's task, a worker's thread), so
    that a replay, which runs the run's code elsewhere, names it alike; else the asyncio
    task name; else, for work handed to a thread pool, its submission's name
    (:func:`pool_work_name`); else the thread name (``main`` for the main thread); tasks,
    threads and executors named by Python's own numbering are renumbered for each run. Name
    tasks and threads for ids that stay the same from run to run."""
    named = _task_name.get()
    if named is not None:
        return named
    loop = asyncio.events._get_running_loop()
    task = asyncio.current_task(loop) if loop is not None else None
    root = _root.get() or _installed_root
    if task is not None:
        if root is not None and root() is task:
            return "main"
        name = task.get_name()
        found = _AUTO_TASK_NAME.fullmatch(name)
        if found is not None:
            return _stable_name(found)
        return (_renamed.get(task) or name) if _renamed else name
    thread = threading.current_thread()
    if thread is threading.main_thread() or (root is not None and root() is thread):
        return "main"
    work = _pool_work.name
    if work is not None:
        return work
    found = _AUTO_THREAD_NAME.fullmatch(thread.name)
    return _stable_name(found) if found is not None else thread.name


def _stable_name(found: re.Match[str]) -> str:
    """asyncio numbers unnamed tasks (``Task-7``), and Python threads and executors
    (``ThreadPoolExecutor-3_0``, ``Thread-5 (work)``), across the whole process, so a
    replay in the capturing process would see other numbers: each kind is numbered again
    from its first number (:data:`_FIRST_NUMBER`) in the order they first cross the
    boundary, for each boundary (each run) on its own; an executor's workers keep their
    ``_0``, ``_1``, a thread its target's name."""
    owner: object = current() or _OUTSIDE
    key = f"{found['kind']}-{found['number']}"
    numbers = _task_numbers.get(owner)
    given = numbers.names.get(key) if numbers is not None else None
    if given is None:
        with _numbers_lock:
            numbers = _numbers(owner)
            given = numbers.names.get(key)
            if given is None:
                kind = found["kind"]
                given = numbers.names[key] = (
                    f"{kind}-{numbers.count(kind, _FIRST_NUMBER.get(kind, 1))}"
                )
    return given + found["rest"]


class _PoolWork(threading.local):
    name: str | None = None
    """The name of the submitted work this pool worker thread runs (:func:`pool_work`)."""


_pool_work = _PoolWork()


def pool_work_name(prefix: str) -> str | None:
    """The task name of a function the current task hands now to the thread pool whose
    workers' names begin with ``prefix`` (``asyncio``, ``ThreadPoolExecutor-3``): the
    submitting task's, the pool's and which of that task's submissions to the pool in this
    run it is (``fetch-2/asyncio#1``), not the worker's: which idle worker takes it varies
    from run to run, and so does the order in which concurrent tasks (a tool beside a
    framework's callbacks) hand work to one pool, while each task's own order does not.
    ``None`` outside a boundary that names pool work so."""
    owner = current()
    if owner is None or not owner.names_by_origin:
        return None
    submitter = task_id()
    found = _AUTO_THREAD_NAME.fullmatch(prefix)
    pool = _stable_name(found) if found is not None else prefix
    key = f"{submitter}/{pool}"
    with _numbers_lock:
        return f"{key}#{_numbers(owner).count(f'submitted {key}')}"


def task_created(task: asyncio.Task[Any]) -> None:
    """``task`` was just created in this context. Unnamed (``Task-57``), it is named now for
    the run by the coroutine it runs and the order the run creates tasks of that coroutine
    in (``fetch_rate-2``, ``Agent.run-1``, ``outer.inner-1`` for a nested function), not
    by the order tasks first cross: tasks that run side by side (``gather``'s) cross in an
    order that varies from run to run, while the code that creates them does so in its
    own order; and a library's own tasks that a replay does not create (a subprocess's
    pipes, a connection's reader: the replay serves their exchanges from the recording)
    run other coroutines, so they do not shift the names of the run's. Named, it keeps
    its name if it is the first task the run creates with that name; the next are told
    apart by the order they were created in (``lookup-2``): pydantic-ai names each tool
    call's task by its tool, so two calls of one tool run side by side under one name.
    Nothing outside a boundary that names tasks so."""
    owner = current()
    if owner is None or not owner.names_by_origin:
        return
    name = task.get_name()
    found = _AUTO_TASK_NAME.fullmatch(name)
    coro = task.get_coro()
    if found is not None and coro is not None:
        made = str(getattr(coro, "__qualname__", "") or type(coro).__qualname__)
        made = made.replace("<locals>.", "")  # ``outer.inner``
        with _numbers_lock:
            numbers = _numbers(owner)
            numbers.names[f"{found['kind']}-{found['number']}"] = (
                f"{made}-{numbers.count(f'created {made}')}"
            )
    elif found is None:
        with _numbers_lock:
            nth = _numbers(owner).count(f"named {name}")
        if nth > 1:
            _renamed[task] = f"{name}-{nth}"


_renamed: weakref.WeakKeyDictionary[asyncio.Task[Any], str] = weakref.WeakKeyDictionary()
"""The name a task created with another's name goes by in its run (:func:`task_created`)."""


@contextlib.contextmanager
def pool_work(name: str) -> Iterator[None]:
    """The current thread (a pool's worker) runs the submitted work ``name`` in the block:
    its events are that task's (see :func:`task_id`), whatever context the work switches
    to (``asyncio.to_thread`` runs it in a copy of its own)."""
    before, _pool_work.name = _pool_work.name, name
    try:
        yield
    finally:
        _pool_work.name = before


@dataclass
class SpanAllocator:
    """Hands out span ids in start order, thread-safely (``itertools.count`` is atomic under
    the GIL)."""

    _counter: Iterator[int] = field(default_factory=itertools.count)

    def next(self) -> int:
        return next(self._counter)


def open_call(
    spans: SpanAllocator, kind: str, name: str, request: JsonValue, started: float
) -> Call:
    """Build a :class:`Call` for a crossing starting now (shared by capture and replay)."""
    # The fields are set in the instance's dict, as the dataclass's own __init__ leaves
    # them: a frozen dataclass sets each through object.__setattr__, which made it half
    # of what opening a crossing cost.
    call: Call = _new_call(Call)
    fields = call.__dict__
    fields["kind"] = kind
    fields["name"] = name
    fields["request"] = request
    if kind not in OWN_REQUESTS:  # the agent's own values: as they are when the call opens
        fields["fingerprint"] = request_fingerprint(kind, name, request)
    fields["span"] = spans.next()
    fields["parent_span"] = _current_span.get()
    fields["task"] = task_id()
    fields["started"] = started
    fields["attempt"] = _current_attempt.get()
    return call


_new_call = object.__new__


_ERROR_VALUE_LIMIT = 16_384
"""Characters of JSON an exception argument or attribute may take to be recorded."""


def error_info(exc: BaseException) -> ErrorInfo:
    """An exception as data: ``module.QualName`` (builtins without module), message, and the
    arguments and attributes that are JSON (see :class:`ErrorInfo`). An exception group's
    message goes on with the exceptions it holds (``unhandled errors in a TaskGroup (1
    sub-exception): RuntimeError: ...``)."""
    args = [_error_value(a) for a in exc.args]
    attrs: dict[str, JsonValue] = {}
    for name, value in vars(exc).items() if hasattr(exc, "__dict__") else ():
        if name.startswith("__"):
            continue
        found = _error_value(value)
        if found is not _NOT_JSON:
            attrs[name] = found
    message = str(exc)
    if isinstance(exc, BaseExceptionGroup):  # name what went wrong, not only the group
        leaves = _leaves(exc)
        message += ": " + "; ".join(f"{qualified_name(type(e))}: {e}" for e in leaves[:3])
        message += f"; and {len(leaves) - 3} more" if len(leaves) > 3 else ""
    plain = args == [message] or any(a is _NOT_JSON for a in args)  # (message,): the default
    return ErrorInfo(
        type=qualified_name(type(exc)), message=message, args=None if plain else args, attrs=attrs
    )


_NOT_JSON: Any = object()


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The exceptions of a group that are no group themselves (an anyio ``TaskGroup``'s
    ``ExceptionGroup`` wraps the error of the task that failed), in order."""
    found: list[BaseException] = []
    for exc in group.exceptions:
        found += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return found


def _error_value(value: object) -> Any:
    """``value`` as JSON (a pydantic model as ``{"model": ..., "value": ...}``), else
    ``_NOT_JSON``."""
    import json

    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        try:
            dumped = value.model_dump(mode="json", by_alias=True)
        except Exception:
            return _NOT_JSON
        value = {"model": qualified_name(type(value)), "value": dumped}
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return _NOT_JSON
    return json.loads(text) if len(text) <= _ERROR_VALUE_LIMIT else _NOT_JSON


def qualified_name(cls: type) -> str:
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module}.{cls.__qualname__}"


def copy_context_run(fn: Callable[..., T], *args: Any) -> T:
    """Run ``fn`` in a copy of the current context (for threads started by instrumented code)."""
    return contextvars.copy_context().run(fn, *args)
