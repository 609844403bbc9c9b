"""The replay's clock: frozen at the recorded start, moved forward as the replay makes the
recorded calls (to each one's start, then, once it is answered, to the start of the event
after it in the log: :meth:`sandbox.replay.boundary.ReplayBoundary._after`), with retry
sleeps that take no wall time.

:class:`FrozenClock` freezes the wall clock of this process with time-machine, which patches
the C functions behind ``time.time``, ``time.localtime``, ``time.strftime``,
``datetime.datetime.now`` and the like: ``datetime.datetime`` stays the real class (a library
that builds a schema for it at import, as pydantic does, or subclasses it, works), names
imported before the freeze (``from time import time``) are frozen too, and local time follows
the process's time zone (``TZ``). Monotonic clocks stay real, so event loops keep waking.
A client's own idea of now is the frozen time too where the kind's client hook says how
(:attr:`~sandbox.seam.clients.ClientHook.frozen_now`: SQLite's ``'now'`` in the connections
``sqlite3.connect`` opens while the clock is frozen); the clock of a process other than a
Python one the replay starts is not (:mod:`sandbox.replay.isolation.liveprocess`).
:class:`LiveClock` leaves the real clock alone (``clocks="live"``). Both make tenacity's
default sleep virtual while the replay runs: the recorded waits are kept in the events, but
nobody waits for them; under a frozen clock tenacity's own timer (``stop_after_delay``) sees
them pass.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from sandbox.capture.clients import client_hooks


class ReplayClock(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def reach(self, wall: float) -> None:
        """Move time forward to ``wall`` (seconds since the epoch); never backwards."""
        ...

    def sleep(self, seconds: float) -> None:
        """A sleep that takes no wall time (time moves on when it is frozen)."""
        ...


class _TenacitySleep:
    """Swaps the ``time`` tenacity's default sleep calls for one whose sleep is virtual, and
    (``monotonic``) the timer tenacity measures its delays with."""

    def __init__(self, sleep: Any, monotonic: Callable[[], float] | None = None) -> None:
        self._sleep = sleep
        self._monotonic = monotonic
        self._saved: Any = None
        self._saved_timer: Any = None
        self._undo_async: Any = None

    def start(self) -> None:
        import tenacity
        import tenacity.nap

        from sandbox.capture.retry import virtual_async_sleep

        self._saved = getattr(tenacity.nap, "time")  # noqa: B009
        setattr(tenacity.nap, "time", types.SimpleNamespace(sleep=self._sleep))  # noqa: B010
        if self._monotonic is not None:
            self._saved_timer = getattr(tenacity, "time")  # noqa: B009
            timer = types.SimpleNamespace(monotonic=self._monotonic)
            setattr(tenacity, "time", timer)  # noqa: B010
        self._undo_async = virtual_async_sleep(self._sleep)

    def stop(self) -> None:
        import tenacity
        import tenacity.nap

        if self._undo_async is not None:
            self._undo_async()
            self._undo_async = None
        if self._saved_timer is not None:
            setattr(tenacity, "time", self._saved_timer)  # noqa: B010
            self._saved_timer = None
        if self._saved is not None:
            setattr(tenacity.nap, "time", self._saved)  # noqa: B010
            self._saved = None


class FrozenClock:
    """time-machine at ``start``, not ticking, local time in the process's time zone; moves
    forward only."""

    def __init__(self, start: datetime) -> None:
        self._now = start.timestamp()
        self._travel: Any = None
        self._traveller: Any = None
        self._lock = threading.Lock()
        self._nap = _TenacitySleep(self.sleep, self.monotonic)
        self._clients: list[Callable[[], None]] = []

    @property
    def now(self) -> float:
        """The frozen time (seconds since the epoch)."""
        return self._now

    def start(self) -> None:
        time_machine = _time_machine()
        self._travel = time_machine.travel(_instant(self._now), tick=False)
        self._traveller = self._travel.start()
        self._clients = [hook.frozen_now() for hook in client_hooks() if hook.frozen_now]
        self._nap.start()

    def stop(self) -> None:
        self._nap.stop()
        for undo in reversed(self._clients):
            undo()
        self._clients = []
        if self._travel is not None:
            self._travel.stop()
            self._travel = self._traveller = None

    def monotonic(self) -> float:
        """The frozen time, as a timer that the virtual sleeps and :meth:`reach` move on."""
        return self._now

    def reach(self, wall: float) -> None:
        with self._lock:
            if self._traveller is not None and wall > self._now:
                self._traveller.move_to(_instant(wall))
                self._now = wall

    def sleep(self, seconds: float) -> None:
        with self._lock:
            if self._traveller is not None and seconds > 0:
                self._traveller.shift(seconds)
                self._now += seconds


def _time_machine() -> Any:
    """time-machine, imported without its pytest plugin when pytest is not imported already
    (importing pytest would cost a replayed process most of a second)."""
    if "time_machine" in sys.modules or "pytest" in sys.modules:
        import time_machine

        return time_machine
    sys.modules["pytest"] = None  # type: ignore[assignment]  # makes ``import pytest`` fail
    try:
        import time_machine
    finally:
        if sys.modules.get("pytest", 0) is None:
            del sys.modules["pytest"]
    return time_machine


def _instant(wall: float) -> datetime:
    """``wall`` to the microsecond, as time-machine takes it exactly: a naive datetime in UTC
    (an aware one would make it set ``TZ`` to its zone; a float loses the microseconds)."""
    return datetime.fromtimestamp(wall, UTC).replace(tzinfo=None)


class LiveClock:
    """The real clock; retry sleeps are still virtual."""

    def __init__(self) -> None:
        self._nap = _TenacitySleep(self.sleep)

    def start(self) -> None:
        self._nap.start()

    def stop(self) -> None:
        self._nap.stop()

    def reach(self, wall: float) -> None:
        return None

    def sleep(self, seconds: float) -> None:
        return None
