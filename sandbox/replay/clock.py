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


class FrozenClock:
    """freezegun at ``start``; moves forward only."""

    def __init__(self, start: datetime) -> None:
        import freezegun

        # asyncio keeps real monotonic time: a frozen event loop never wakes a sleeping task
        self._freezer = freezegun.freeze_time(start, real_asyncio=True)
        self._factory: Any = None
        self._now = start.timestamp()
        self._lock = threading.Lock()
        self._nap = _TenacitySleep(self.sleep)

    def start(self) -> None:
        self._factory = self._freezer.start()
        self._nap.start()

    def stop(self) -> None:
        self._nap.stop()
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
