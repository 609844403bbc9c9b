"""The replay's clock: frozen at the recorded start, moved forward to each recorded event's
time as the replay reaches it, with retry sleeps that take no wall time.

:class:`FrozenClock` freezes the wall clock of this process with time-machine, which patches
the C functions behind ``time.time``, ``time.localtime``, ``time.strftime``,
``datetime.datetime.now`` and the like: ``datetime.datetime`` stays the real class (a library
that builds a schema for it at import, as pydantic does, or subclasses it, works), names
imported before the freeze (``from time import time``) are frozen too, and local time follows
the process's time zone (``TZ``). Monotonic clocks stay real, so event loops keep waking.
SQLite's ``'now'`` (``datetime('now')``, ``date()``, ``strftime('%s', 'now')`` ... in the
connections ``sqlite3.connect`` opens while the clock is frozen) is the frozen time too; its
``CURRENT_TIMESTAMP`` keywords are not (they cannot be overridden), nor is the clock of a
process other than a Python one the replay starts (:mod:`sandbox.replay.liveprocess`).
:class:`LiveClock` leaves the real clock alone (``clocks="live"``). Both make tenacity's
default sleep virtual while the replay runs: the recorded waits are kept in the events, but
nobody waits for them; under a frozen clock tenacity's own timer (``stop_after_delay``) sees
them pass.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
import types
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol


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


class _SQLiteNow:
    """SQLite's date and time functions, in the connections opened while it runs, read
    ``'now'`` (or no time value) as this process's ``time.time()``: each call is evaluated
    by SQLite itself, on a private connection, with the frozen instant in place of
    ``'now'``."""

    FUNCTIONS = {"date": 0, "time": 0, "datetime": 0, "julianday": 0, "unixepoch": 0}
    FUNCTIONS_WITH_FORMAT = {"strftime": 1}

    def __init__(self) -> None:
        self._active = False
        self._undo: list[Callable[[], None]] = []
        self._private: Any = None
        self._lock = threading.Lock()

    def start(self) -> None:
        import sqlite3
        import sqlite3.dbapi2

        self._active = True
        for owner in {sqlite3, sqlite3.dbapi2}:
            self._wrap(owner)

    def _wrap(self, owner: Any) -> None:
        original = owner.connect

        def connect(*args: Any, **kwargs: Any) -> Any:
            conn = original(*args, **kwargs)
            if self._active:
                self._freeze(conn, original)
            return conn

        owner.connect = connect

        def undo() -> None:
            if owner.connect is connect:
                owner.connect = original

        self._undo.append(undo)

    def _freeze(self, conn: Any, connect: Any) -> None:
        with self._lock:
            if self._private is None:
                self._private = connect(":memory:", check_same_thread=False)
        for name, at in {**self.FUNCTIONS, **self.FUNCTIONS_WITH_FORMAT}.items():
            conn.create_function(name, -1, self._function(name, at))

    def _function(self, name: str, at: int) -> Callable[..., Any]:
        def evaluate(*args: Any) -> Any:
            values = list(args)
            now = datetime.fromtimestamp(time.time(), UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
            if len(values) <= at:
                values.append(now)
            elif isinstance(values[at], str) and values[at].strip().lower() == "now":
                values[at] = now
            marks = ", ".join("?" * len(values))
            with self._lock:
                return self._private.execute(f"SELECT {name}({marks})", values).fetchone()[0]

        return evaluate

    def stop(self) -> None:
        self._active = False  # a wrapper someone wrapped again stays, and does nothing
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        with self._lock:
            if self._private is not None:
                with contextlib.suppress(Exception):
                    self._private.close()
                self._private = None


class FrozenClock:
    """time-machine at ``start``, not ticking, local time in the process's time zone; moves
    forward only."""

    def __init__(self, start: datetime) -> None:
        self._now = start.timestamp()
        self._travel: Any = None
        self._traveller: Any = None
        self._lock = threading.Lock()
        self._nap = _TenacitySleep(self.sleep, self.monotonic)
        self._sqlite = _SQLiteNow()

    @property
    def now(self) -> float:
        """The frozen time (seconds since the epoch)."""
        return self._now

    def start(self) -> None:
        time_machine = _time_machine()
        self._travel = time_machine.travel(_instant(self._now), tick=False)
        self._traveller = self._travel.start()
        self._sqlite.start()
        self._nap.start()

    def stop(self) -> None:
        self._nap.stop()
        self._sqlite.stop()
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
