"""Pins shared among runs that start together, so that many concurrent runs cost a server
a couple of connections, not one each.

A pin (what a kind's :meth:`~sandbox.services.base.TouchedCapture.pin` holds: for a
database, a transaction holding an exported snapshot) is opened by the first run that needs
one for an endpoint; a run that starts while that pin is younger than the window
(:data:`WINDOW_ENV`, default :data:`DEFAULT_WINDOW_S` seconds) shares it instead of opening
its own. Each share is counted; the pin is closed when its last share is released, whether
its runs were kept (and dumped from it) or not. A run sharing a pin therefore holds the
state as of the pin, which may predate the run's own start by up to the window.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from sandbox.errors import ServiceError

WINDOW_ENV = "SANDBOX_PIN_SHARE_S"
DEFAULT_WINDOW_S = 1.0
"""A run starting within this many seconds of an open pin of its endpoint shares it."""


class Hold(Protocol):
    def close(self) -> None: ...


H = TypeVar("H", bound=Hold)


def window() -> float:
    """Seconds during which a new pin is shared: :data:`WINDOW_ENV`, or the default (0: no
    sharing)."""
    raw = os.environ.get(WINDOW_ENV, "").strip()
    if not raw:
        return DEFAULT_WINDOW_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value < 0:
        raise ServiceError(f"{WINDOW_ENV}={raw!r}: expected a number of seconds")
    return value


@dataclass
class _Entry(Generic[H]):
    hold: H
    opened: float
    shares: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    """Serialises the users of the hold (its connection is one)."""


class Share(Generic[H]):
    """One run's share of a pin; :meth:`release` gives it back (once)."""

    def __init__(self, pool: PinPool[H], key: str, entry: _Entry[H]) -> None:
        self._pool = pool
        self._key = key
        self._entry = entry
        self._released = False

    @property
    def hold(self) -> H:
        return self._entry.hold

    @property
    def lock(self) -> threading.Lock:
        return self._entry.lock

    @property
    def shares(self) -> int:
        """How many runs hold this pin now (this one included, until released)."""
        return self._entry.shares

    def release(self) -> None:
        if self._released:
            return
        self._released = True
        self._pool._release(self._key, self._entry)


class PinPool(Generic[H]):
    """The open pins of a process, by endpoint."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._newest: dict[str, _Entry[H]] = {}
        self._opening: dict[str, threading.Lock] = {}

    def share(
        self, key: str, open_pin: Callable[[], H], *, within: float | None = None
    ) -> Share[H]:
        """A share of the newest pin of ``key`` when it is younger than ``within`` (default
        :func:`window`), else of a new one that ``open_pin`` opens (runs arriving meanwhile
        wait for it and share it)."""
        limit = window() if within is None else within
        with self._lock:
            opening = self._opening.setdefault(key, threading.Lock())
        with opening:
            with self._lock:
                entry = self._newest.get(key)
                if entry is not None and self._clock() - entry.opened <= limit:
                    entry.shares += 1
                    return Share(self, key, entry)
            hold = open_pin()
            entry = _Entry(hold, self._clock(), shares=1)
            with self._lock:
                if limit > 0:
                    self._newest[key] = entry
            return Share(self, key, entry)

    def _release(self, key: str, entry: _Entry[H]) -> None:
        with self._lock:
            entry.shares -= 1
            if entry.shares > 0:
                return
            if self._newest.get(key) is entry:
                del self._newest[key]
        entry.hold.close()

    def open_count(self) -> int:
        """Pins open and still shareable (for tests and benches)."""
        with self._lock:
            return len(self._newest)
