"""Pins shared among runs that start together, so that many concurrent runs cost a server
a couple of connections, not one each.

A pin (what a kind's :meth:`~sandbox.services.base.TouchedCapture.pin` holds: for a
database, a transaction holding an exported snapshot) is opened by the first run that needs
one for an endpoint; a run that starts while that pin is younger than the window
(:data:`WINDOW_ENV`, default :data:`DEFAULT_WINDOW_S` seconds) shares it instead of opening
its own. Each share is counted; the pin is closed when its last share is released, whether
its runs were kept (and dumped from it) or not. A run sharing a pin therefore holds the
state as of the pin, which may predate the run's own start by up to the window.

While runs keep coming, the next pin is opened ahead, off their path: a run that shares a
pin older than :data:`REFRESH_AT` of the window asks a background thread to open the next
one, which becomes the newest (shared by the runs that start from then on) when it is open.
The thread holds a share of it for one window, so a pin opened ahead that no run takes is
closed after its window. Under steady load no run waits for a pin to open; only the first
run after a quiet spell (longer than the window) opens one itself.
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import itertools
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from sandbox.errors import ServiceError

REFRESH_AT = 0.8
"""A pin older than this share of the window has its successor opened ahead."""
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
        self._ahead: set[str] = set()
        """Endpoints whose next pin is being opened ahead."""
        self._asks: queue.SimpleQueue[tuple[str, float, Callable[[], H]]] = queue.SimpleQueue()
        self._worker: threading.Thread | None = None

    def share(
        self, key: str, open_pin: Callable[[], H], *, within: float | None = None
    ) -> Share[H]:
        """A share of the newest pin of ``key`` when it is younger than ``within`` (default
        :func:`window`), else of a new one that ``open_pin`` opens (runs arriving meanwhile
        wait for it and share it). A share of a pin near the end of its window has the next
        one opened ahead (see the module documentation)."""
        limit = window() if within is None else within
        with self._lock:
            opening = self._opening.setdefault(key, threading.Lock())
            shared = self._shared(key, limit, open_pin)
        if shared is not None:
            return shared
        with opening:
            with self._lock:
                shared = self._shared(key, limit, open_pin)
                if shared is not None:
                    return shared
            hold = open_pin()
            entry = _Entry(hold, self._clock(), shares=1)
            with self._lock:
                if limit > 0:
                    self._newest[key] = entry
            return Share(self, key, entry)

    def _shared(self, key: str, limit: float, open_pin: Callable[[], H]) -> Share[H] | None:
        """A share of the newest pin of ``key`` if it is in its window (under the lock)."""
        entry = self._newest.get(key)
        if entry is None:
            return None
        age = self._clock() - entry.opened
        if age > limit:
            return None
        entry.shares += 1
        if age > limit * REFRESH_AT and key not in self._ahead:
            self._ahead.add(key)
            self._open_ahead(key, limit, open_pin)
        return Share(self, key, entry)

    def newest(self, key: str, accept: Callable[[H], bool]) -> Share[H] | None:
        """A share of the newest open pin of ``key`` if ``accept`` takes it, whatever its
        age (a state it holds may serve another purpose than a new run's start: the end
        state of runs that ended before it was taken); ``None`` otherwise."""
        with self._lock:
            entry = self._newest.get(key)
            if entry is None or not accept(entry.hold):
                return None
            entry.shares += 1
            return Share(self, key, entry)

    def _open_ahead(self, key: str, limit: float, open_pin: Callable[[], H]) -> None:
        """Ask the pool's thread to open the next pin of ``key`` (under the lock)."""
        self._asks.put((key, limit, open_pin))
        if self._worker is None or not self._worker.is_alive():
            # in no run's context: the pins' own statements are nobody's
            self._worker = threading.Thread(
                target=contextvars.Context().run,
                args=(self._work,),
                name="sandbox-pins-ahead",
                daemon=True,
            )
            self._worker.start()

    def _work(self) -> None:
        """Open the pins asked for, each made the newest of its endpoint once open, and
        give back the share held on each when its window is over."""
        held: list[tuple[float, int, str, _Entry[H]]] = []
        order = itertools.count()  # entries never compared
        while True:
            wait = max(0.0, held[0][0] - time.monotonic()) if held else None
            try:
                ask: tuple[str, float, Callable[[], H]] | None = self._asks.get(timeout=wait)
            except queue.Empty:
                ask = None
            now = time.monotonic()
            while held and held[0][0] <= now:
                _, _, done_key, done = heapq.heappop(held)
                try:
                    self._release(done_key, done)
                except Exception as error:  # a server gone: its pin is gone with it
                    with contextlib.suppress(Exception):
                        sys.stderr.write(f"sandbox: closing a pin failed: {error}\n")
            if ask is None:
                continue
            key, limit, open_pin = ask
            try:
                with self._opening[key]:
                    entry = _Entry(open_pin(), self._clock(), shares=1)
                    with self._lock:
                        self._newest[key] = entry
                heapq.heappush(held, (time.monotonic() + limit, next(order), key, entry))
            except Exception as error:  # the next run opens one itself
                with contextlib.suppress(Exception):
                    sys.stderr.write(f"sandbox: opening a pin ahead failed: {error}\n")
            finally:
                with self._lock:
                    self._ahead.discard(key)

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
