"""A wall-clock limit on one replayed run: an agent that hangs never hangs the replay.

``sandbox replay --timeout SECONDS`` (default :func:`default_timeout`: ten times the recorded
run's duration, at least a minute) stops a run that takes longer, and the run is
judged *inconclusive* with the reason "timeout after N s" (never *gone*: the failure may
have been on its way).

A recorded command runs in a process group of its own, killed whole when the time is up
(:mod:`sandbox.replay.command`). A function replayed in-process is interrupted by
:meth:`Deadline.armed`: in the main thread a real-time timer (``SIGALRM``) raises
:class:`ReplayTimedOut` wherever the agent is, a blocking ``sleep`` or lock wait included,
and keeps raising it every second until the agent lets go; in another thread the exception
is set asynchronously on that thread (it lands at the next Python instruction, so a call
blocked inside C returns first). :class:`ReplayTimedOut` is a ``BaseException``: an agent's
``except Exception`` does not swallow it.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import FrameType

from sandbox.names import TIMEOUT_FACTOR, TIMEOUT_FLOOR
from sandbox.snapshot.events import Event

_AGAIN = 1.0
"""Seconds between two interruptions of an agent that caught the first one."""


class ReplayTimedOut(BaseException):
    """Raised inside a replayed agent whose run is past its wall-clock limit."""


def recorded_duration(events: Sequence[Event]) -> float:
    """Seconds from the recorded run's start to its last event."""
    return max((e.mono for e in events), default=0.0)


BEFORE_MAX = 1800.0
"""The most the time a program ran before the run's block adds to the default limit."""


def default_timeout(events: Sequence[Event], before: float = 0.0) -> float:
    """Ten times the recorded duration, at least a minute (:mod:`sandbox.names`); with
    ``before``, the seconds the recorded program ran before the run's block (which its
    replay runs again), twice those more, at most :data:`BEFORE_MAX` (a service's request
    comes after all the time the service ran)."""
    run = max(TIMEOUT_FLOOR, TIMEOUT_FACTOR * recorded_duration(events))
    return run + min(2 * max(before, 0.0), BEFORE_MAX)


def describe(seconds: float) -> str:
    """``timeout after 5 s``: the reason a stopped run gives."""
    return f"timeout after {seconds:g} s"


@dataclass
class Deadline:
    """A limit of ``seconds`` (``None``: none) on the code run inside :meth:`armed`."""

    seconds: float | None
    expired: bool = False
    """The limit was reached (the agent was interrupted)."""

    @contextlib.contextmanager
    def armed(self) -> Iterator[None]:
        """Interrupt the code run inside with :class:`ReplayTimedOut` once the limit is
        reached."""
        if self.seconds is None:
            yield
        elif threading.current_thread() is threading.main_thread():
            with _alarm(self, self.seconds):
                yield
        else:
            with _async_raise(self, self.seconds):
                yield


@contextlib.contextmanager
def _alarm(state: Deadline, seconds: float) -> Iterator[None]:
    def interrupt(signum: int, frame: FrameType | None) -> None:
        state.expired = True
        raise ReplayTimedOut(describe(seconds))

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, seconds, _AGAIN)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def _async_raise(state: Deadline, seconds: float) -> Iterator[None]:
    target = ctypes.c_ulong(threading.get_ident())
    done = threading.Event()

    def watch() -> None:
        wait = seconds
        while not done.wait(wait):
            state.expired = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(ReplayTimedOut))
            wait = _AGAIN

    watcher = threading.Thread(target=watch, name="sandbox-replay-deadline", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
        watcher.join()
        ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)  # one not delivered yet
