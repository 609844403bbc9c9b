"""Retries and timeouts: tenacity, recorded attempt by attempt.

:class:`Retrying` and :class:`AsyncRetrying` are tenacity's, with three additions:

* each attempt crosses the seam as a ``retry`` call named after the retry loop, with request
  ``{"attempt": n}``: replay can inject the recorded outcome of attempt *n* (a timeout that
  had already committed, say) or run it live. Code inside the attempt sees
  :func:`sandbox.seam.boundary.current_attempt` and its events carry ``attempt``;
* a ``retry`` event per attempt: number, outcome, exception, the wait before the next attempt
  (0 for the last), and the policy (stop, wait, retry strategies described as data);
* a ``timeout`` event when an attempt ends in a timeout exception, unless the code recorded
  one itself (``rec.timeout(after=..., committed=...)``). ``committed`` is ``True`` when a
  tool, HTTP or memory call inside the attempt had completed, else ``None`` (not knowable).

Only the call forms record attempts (``r(fn, *args)``, ``@r.wraps``, ``r.wraps(fn)``);
``for attempt in r`` is plain tenacity. ``sleep`` is tenacity's argument: inject it in tests.
:class:`AsyncRetrying` sleeps with ``asyncio.sleep`` unless given one; while a replay runs,
that sleep takes no time (:func:`virtual_async_sleep`), as the sync one does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import itertools
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tenacity
from pydantic import JsonValue

from sandbox.capture.shared import Shared
from sandbox.seam import boundary
from sandbox.seam.boundary import BlobReader, Call, Emitter, Outcome, RecordedError
from sandbox.snapshot.events import Event, RetryAttempt, Timeout

T = TypeVar("T")

TIMEOUT_ERRORS: tuple[type[BaseException], ...] = (
    TimeoutError,
    asyncio.TimeoutError,
    concurrent.futures.TimeoutError,
)


def is_timeout(exc: BaseException) -> bool:
    """A timeout: the builtin kinds, or any exception whose class name says ``Timeout``
    (``httpx.ReadTimeout``, ``openai.APITimeoutError`` ...)."""
    return isinstance(exc, TIMEOUT_ERRORS) or any(
        "Timeout" in cls.__name__ for cls in type(exc).__mro__
    )


def describe(strategy: object, depth: int = 0) -> JsonValue:
    """A tenacity strategy as data: its class and scalar settings, nested strategies too."""
    if strategy is None or isinstance(strategy, bool | int | float | str):
        return strategy
    if depth > 4:
        return repr(strategy)
    if isinstance(strategy, list | tuple):
        return [describe(s, depth + 1) for s in strategy]
    if isinstance(strategy, type):
        return strategy.__qualname__
    out: dict[str, JsonValue] = {"type": type(strategy).__name__}
    for key, value in vars(strategy).items() if hasattr(strategy, "__dict__") else []:
        if key.startswith("_") or (callable(value) and not hasattr(value, "__dict__")):
            continue
        if isinstance(value, type):
            out[key] = value.__qualname__
        elif isinstance(value, bool | int | float | str) or value is None:
            out[key] = value
        elif isinstance(value, list | tuple):
            out[key] = [describe(v, depth + 1) for v in value]
        elif hasattr(value, "__dict__"):
            out[key] = describe(value, depth + 1)
    return out


@dataclass
class _Pending:
    call: Call
    error: BaseException | None


_pending: contextvars.ContextVar[_Pending | None] = contextvars.ContextVar(
    "sandbox_retry_pending", default=None
)


class _AttemptAdapter:
    """The attempt itself records nothing at once: its ``retry`` event is written when
    tenacity has decided on the wait. A timeout ending it is recorded here."""

    def record(self, call: Call, outcome: Outcome[Any], emitter: Emitter) -> Any:
        _pending.set(_Pending(call, outcome.error))
        if outcome.error is not None and is_timeout(outcome.error):
            rec: Any = emitter
            if not rec.timed_out(call.span):
                emitter.emit(
                    Timeout,
                    None,
                    name=call.name,
                    task=call.task,
                    parent_span=call.span,
                    attempt=call.attempt,
                    after=outcome.duration,
                    committed=True if rec.committed_inside(call.span) else None,
                )
        return outcome.value

    def replay(self, call: Call, event: Event, blobs: BlobReader) -> Any:
        assert isinstance(event, RetryAttempt)
        if event.error is not None:
            raise RecordedError(event.error)
        return None


_ATTEMPT = _AttemptAdapter()

_virtual_sleep: Callable[[float], None] | None = None


def virtual_async_sleep(sleep: Callable[[float], None]) -> Callable[[], None]:
    """Make :class:`AsyncRetrying`'s default sleep call ``sleep`` (which takes no wall time:
    a replay clock's) instead of waiting; return the undo."""
    global _virtual_sleep
    _virtual_sleep = sleep

    def undo() -> None:
        global _virtual_sleep
        if _virtual_sleep is sleep:
            _virtual_sleep = None

    return undo


async def _async_sleep(seconds: float) -> None:
    virtual = _virtual_sleep
    if virtual is None:
        await asyncio.sleep(seconds)
        return
    virtual(seconds)
    await asyncio.sleep(0)  # still let the other tasks run


class _Recording:
    """Shared by the sync and async classes: wraps the strategies and emits events."""

    record_name: str
    policy: dict[str, JsonValue]

    def _setup(self, name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        self.record_name = f"retry:{name}"
        self.policy = {
            key: describe(kwargs[key])
            for key in ("stop", "wait", "retry")
            if kwargs.get(key) is not None
        }
        stop = kwargs.get("stop", tenacity.stop_never)
        retry = kwargs.get("retry", tenacity.retry_if_exception_type())
        user_before_sleep = kwargs.get("before_sleep")

        def recording_retry(rs: tenacity.RetryCallState) -> bool:
            decision = bool(retry(rs))
            if not decision:
                self._emit(rs, 0.0)
            return decision

        def recording_stop(rs: tenacity.RetryCallState) -> bool:
            decision = bool(stop(rs))
            if decision:
                self._emit(rs, 0.0)
            return decision

        def recording_before_sleep(rs: tenacity.RetryCallState) -> None:
            self._emit(rs, rs.next_action.sleep if rs.next_action else 0.0)
            if user_before_sleep is not None:
                user_before_sleep(rs)

        return {
            **kwargs,
            "retry": recording_retry,
            "stop": recording_stop,
            "before_sleep": recording_before_sleep,
        }

    def _emit(self, rs: tenacity.RetryCallState, wait: float) -> None:
        pending = _pending.get()
        active = boundary.current()
        emit = getattr(active, "emit", None)
        if pending is None or emit is None:
            return
        _pending.set(None)
        failed = pending.error is not None
        emit(
            RetryAttempt,
            pending.call,
            outcome="error" if failed else "success",
            error=boundary.error_info(pending.error) if pending.error else None,
            wait=wait,
            policy=self.policy,
        )


class Retrying(_Recording, tenacity.Retrying):
    """``tenacity.Retrying`` whose attempts are recorded (call forms only)."""

    def __init__(self, name: str = "retry", **kwargs: Any) -> None:
        self._user_kwargs = dict(kwargs)
        super().__init__(**self._setup(name, kwargs))

    def copy(self, **kwargs: Any) -> Retrying:  # type: ignore[override]
        return Retrying(self.record_name.removeprefix("retry:"), **{**self._user_kwargs, **kwargs})

    def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        counter = itertools.count(1)

        def attempt(*a: Any, **kw: Any) -> T:
            number = next(counter)
            with boundary.attempt_scope(number):
                value: T = boundary.through(
                    "retry", self.record_name, {"attempt": number}, lambda: fn(*a, **kw), _ATTEMPT
                )
                return value

        return super().__call__(attempt, *args, **kwargs)

    def wraps(self, f: Callable[..., T]) -> Callable[..., T]:  # type: ignore[override]
        @functools.wraps(f)
        def wrapped(*args: Any, **kwargs: Any) -> T:
            return self.copy()(f, *args, **kwargs)

        return wrapped


class AsyncRetrying(_Recording, tenacity.AsyncRetrying):
    """``tenacity.AsyncRetrying`` whose attempts are recorded (call forms only)."""

    def __init__(self, name: str = "retry", **kwargs: Any) -> None:
        self._user_kwargs = dict(kwargs)
        kwargs.setdefault("sleep", _async_sleep)
        super().__init__(**self._setup(name, kwargs))

    def copy(self, **kwargs: Any) -> AsyncRetrying:  # type: ignore[override]
        return AsyncRetrying(
            self.record_name.removeprefix("retry:"), **{**self._user_kwargs, **kwargs}
        )

    async def __call__(  # type: ignore[override]
        self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any
    ) -> T:
        counter = itertools.count(1)

        async def attempt(*a: Any, **kw: Any) -> T:
            number = next(counter)
            with boundary.attempt_scope(number):
                value: T = await boundary.athrough(
                    "retry", self.record_name, {"attempt": number}, lambda: fn(*a, **kw), _ATTEMPT
                )
                return value

        result: T = await super().__call__(attempt, *args, **kwargs)
        return result

    def wraps(self, f: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:  # type: ignore[override]
        @functools.wraps(f)
        async def wrapped(*args: Any, **kwargs: Any) -> T:
            return await self.copy()(f, *args, **kwargs)

        return wrapped


def retrying(name: str = "retry", **kwargs: Any) -> Retrying:
    """``Retrying(name, stop=..., wait=..., sleep=...)``: tenacity, recorded."""
    return Retrying(name, **kwargs)


# --- tenacity's own decorators and loops -----------------------------------------------------


def _loop_name(rs: tenacity.RetryCallState) -> str:
    """``retry:<module.function>``: the decorated function, or the function whose ``for
    attempt in Retrying(...)`` loop this is."""
    if rs.fn is not None:
        return f"retry:{tenacity._utils.get_callback_name(rs.fn)}"
    frame: Any = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(_OWN_FRAMES):
        frame = frame.f_back
    if frame is None:
        return "retry:loop"
    return f"retry:{frame.f_globals.get('__name__', '?')}.{frame.f_code.co_qualname}"


_OWN_FRAMES = ("tenacity", __name__)


def patch_tenacity() -> Callable[[], None]:
    """Record the attempts of plain ``tenacity`` retries (``@tenacity.retry`` on a function
    or a coroutine function, ``Retrying()(fn)``, ``for attempt in Retrying(...)``, ``async for
    attempt in AsyncRetrying(...)``), with no change to the agent: a ``retry`` event per
    attempt (number, outcome, error, wait, policy), and code inside an attempt sees
    :func:`~sandbox.seam.boundary.current_attempt`. Return the undo.

    Unlike :class:`Retrying`, the attempts do not cross the seam: on replay they run again,
    and what fails inside them fails from the recording (an HTTP timeout, say). An attempt
    that failed at capture but succeeds live (its call served live, the service fast now)
    fails again with the recorded error once it ran (:meth:`Recorder.attempt_fault`), so
    the recorded attempt schedule repeats in the same order. Installed once for every run
    of the process (counted)."""
    return _TENACITY.acquire()


def _patch_tenacity() -> Callable[[], None]:
    import tenacity.asyncio

    original = tenacity.BaseRetrying.iter
    original_async = tenacity.asyncio.AsyncRetrying.iter

    def iter(self: tenacity.BaseRetrying, retry_state: tenacity.RetryCallState) -> Any:
        if isinstance(self, _Recording):
            return original(self, retry_state)
        outcome = _attempt_ended(retry_state)
        if outcome is not None:
            outcome = _as_recorded(retry_state, outcome)
        do: Any = None
        try:
            do = original(self, retry_state)
            return do
        finally:
            _decided(self, retry_state, outcome, do)

    async def aiter(
        self: tenacity.asyncio.AsyncRetrying, retry_state: tenacity.RetryCallState
    ) -> Any:
        if isinstance(self, _Recording):
            return await original_async(self, retry_state)
        outcome = _attempt_ended(retry_state)
        if outcome is not None:
            outcome = _as_recorded(retry_state, outcome)
        do: Any = None
        try:
            do = await original_async(self, retry_state)
            return do
        finally:
            _decided(self, retry_state, outcome, do)

    tenacity.BaseRetrying.iter = iter  # type: ignore[method-assign]
    tenacity.asyncio.AsyncRetrying.iter = aiter  # type: ignore[method-assign]

    def undo() -> None:
        if tenacity.BaseRetrying.iter is iter:
            tenacity.BaseRetrying.iter = original  # type: ignore[method-assign]
        if tenacity.asyncio.AsyncRetrying.iter is aiter:
            tenacity.asyncio.AsyncRetrying.iter = original_async  # type: ignore[method-assign]

    return undo


_TENACITY = Shared(_patch_tenacity)


def _attempt_ended(rs: tenacity.RetryCallState) -> Any:
    """Leave the attempt's scope; return its outcome (``None`` before the first attempt)."""
    token = rs.__dict__.pop("_sandbox_attempt", None)
    if token is not None:
        boundary._current_attempt.reset(token)
    return rs.outcome


def _as_recorded(rs: tenacity.RetryCallState, outcome: Any) -> Any:
    """The attempt's outcome, or the recorded failure a replay puts in its place."""
    fault = getattr(boundary.current(), "attempt_fault", None)
    if fault is None:
        return outcome
    error = fault(_loop_name(rs), rs.attempt_number, bool(outcome.failed))
    if error is None:
        return outcome
    rs.set_exception((type(error), error, None))
    return rs.outcome


def _decided(retrying: Any, rs: tenacity.RetryCallState, outcome: Any, do: Any) -> None:
    """tenacity decided what follows an attempt (``do``; ``None`` when it raised): record
    the attempt that ended, and enter the next one's scope."""
    if isinstance(do, tenacity.DoAttempt):
        rs.__dict__["_sandbox_attempt"] = boundary._current_attempt.set(rs.attempt_number)
    if outcome is not None:
        wait = float(do) if isinstance(do, tenacity.DoSleep) else 0.0
        _emit_attempt(retrying, rs, outcome, wait)


def _emit_attempt(
    retrying: tenacity.BaseRetrying, rs: tenacity.RetryCallState, outcome: Any, wait: float
) -> None:
    emit = getattr(boundary.current(), "emit", None)
    if emit is None:
        return
    error = outcome.exception() if outcome.failed else None
    emit(
        RetryAttempt,
        None,
        name=_loop_name(rs),
        attempt=rs.attempt_number,
        outcome="error" if error is not None else "success",
        error=boundary.error_info(error) if error is not None else None,
        wait=wait,
        policy={key: describe(getattr(retrying, key)) for key in ("stop", "wait", "retry")},
    )
