"""The replay's clock: frozen at the recorded start, moved forward to each recorded event's
time as the replay reaches it, with retry sleeps that take no wall time.

:class:`FrozenClock` freezes ``time`` and ``datetime`` in this process with freezegun.
:class:`LiveClock` leaves the real clock alone (``clocks="live"``). Both make tenacity's
default sleep virtual while the replay runs: the recorded waits are kept in the events, but
nobody waits for them.
"""

from __future__ import annotations

import threading
import types
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
    """Swaps the ``time`` tenacity's default sleep calls for one whose sleep is virtual."""

    def __init__(self, sleep: Any) -> None:
        self._sleep = sleep
        self._saved: Any = None
        self._undo_async: Any = None

    def start(self) -> None:
        import tenacity.nap

        from sandbox.capture.retry import virtual_async_sleep

        self._saved = getattr(tenacity.nap, "time")  # noqa: B009
        setattr(tenacity.nap, "time", types.SimpleNamespace(sleep=self._sleep))  # noqa: B010
        self._undo_async = virtual_async_sleep(self._sleep)

    def stop(self) -> None:
        import tenacity.nap

        if self._undo_async is not None:
            self._undo_async()
            self._undo_async = None
        if self._saved is not None:
            setattr(tenacity.nap, "time", self._saved)  # noqa: B010
            self._saved = None


class _LocalTime:
    """freezegun's local time follows the process's time zone (``TZ``), as the real clock's
    does: naive ``datetime.now()``, ``date.today()``, ``time.localtime()`` and
    ``time.strftime`` give the frozen instant in local time (freezegun alone gives UTC, or a
    fixed offset that it also adds to aware times)."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def start(self) -> None:
        import time

        import freezegun.api as api

        real_datetime, real_date, real_localtime = (
            api.real_datetime,
            api.real_date,
            api.real_localtime,
        )

        def now(cls: Any, tz: Any = None) -> Any:
            return api.datetime_to_fakedatetime(real_datetime.fromtimestamp(time.time(), tz))

        def today(cls: Any) -> Any:
            return api.datetime_to_fakedatetime(real_datetime.fromtimestamp(time.time()))

        def date_today(cls: Any) -> Any:
            return api.date_to_fakedate(real_date.fromtimestamp(time.time()))

        def fromtimestamp(cls: Any, t: float, tz: Any = None) -> Any:
            return api.datetime_to_fakedatetime(real_datetime.fromtimestamp(t, tz))

        def localtime(t: float | None = None) -> time.struct_time:
            return real_localtime(time.time() if t is None else t)

        self._patch(api.FakeDatetime, "now", classmethod(now))
        self._patch(api.FakeDatetime, "today", classmethod(today))
        self._patch(api.FakeDatetime, "fromtimestamp", classmethod(fromtimestamp))
        self._patch(api.FakeDatetime, "timestamp", real_datetime.timestamp)
        self._patch(api.FakeDate, "today", classmethod(date_today))
        self._patch(api, "fake_localtime", localtime)  # what freezegun's strftime calls
        self._patch(time, "localtime", localtime)

    def _patch(self, owner: Any, name: str, value: Any) -> None:
        self._saved.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, value)

    def stop(self) -> None:
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)
        self._saved.clear()


class FrozenClock:
    """freezegun at ``start``, local time in the process's time zone; moves forward only."""

    def __init__(self, start: datetime) -> None:
        import freezegun

        # asyncio keeps real monotonic time: a frozen event loop never wakes a sleeping task
        self._freezer = freezegun.freeze_time(start, real_asyncio=True)
        self._factory: Any = None
        self._now = start.timestamp()
        self._lock = threading.Lock()
        self._nap = _TenacitySleep(self.sleep)
        self._local = _LocalTime()

    def start(self) -> None:
        self._factory = self._freezer.start()
        self._local.start()
        self._nap.start()

    def stop(self) -> None:
        self._nap.stop()
        self._local.stop()
        if self._factory is not None:
            self._freezer.stop()
            self._factory = None

    def reach(self, wall: float) -> None:
        with self._lock:
            if self._factory is not None and wall > self._now:
                self._factory.move_to(datetime.fromtimestamp(wall, UTC))
                self._now = wall

    def sleep(self, seconds: float) -> None:
        with self._lock:
            if self._factory is not None and seconds > 0:
                self._factory.tick(seconds)
                self._now += seconds


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
