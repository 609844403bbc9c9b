"""The recorded order of concurrent boundary calls, enforced on replay (a turnstile).

Leaf calls (tool, retrieval, memory and HTTP calls with no boundary call inside them) are
put in the order they completed at capture. On replay, the *k*-th leaf call of task *T* to
boundary ``(kind, name)`` is the *k*-th such call of *T* in the recording; it waits until
every recorded leaf call that completed before it has completed in the replay too. Tasks are
told apart by their stable ids (thread or task names, or ``task_scope``), so name threads.

A wait that lasts longer than ``timeout`` (the replay took another path, so a predecessor
will never come) ends enforcement for the rest of the run, and is counted in
:attr:`Turnstile.stalls`. With fewer than two tasks in the recording there is nothing to
order and the turnstile costs nothing.

Threads wait in :meth:`Turnstile.enter`; asyncio tasks wait in :meth:`Turnstile.aenter`,
which suspends the task (never the event loop), so tasks of one loop can be put in order,
and threads and tasks can wait on each other.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence

from sandbox.snapshot.events import Event

ORDERED_KINDS = frozenset({"tool", "retrieval", "memory", "http"})
"""Kinds whose completion order is enforced."""
_NESTING_KINDS = ORDERED_KINDS | {"retry"}

StreamKey = tuple[str, str, str]


class Turnstile:
    """Thread-safe; one per replayed run."""

    def __init__(
        self,
        recording: Sequence[Event],
        *,
        enabled: bool = True,
        timeout: float = 5.0,
        canonical_name: Callable[[str, str], str] | None = None,
    ) -> None:
        parents = {
            e.parent_span
            for e in recording
            if e.kind in _NESTING_KINDS and e.parent_span is not None
        }
        leaves = sorted(
            (
                e
                for e in recording
                if e.kind in ORDERED_KINDS and e.span is not None and e.span not in parents
            ),
            key=lambda e: e.seq,
        )
        rename = canonical_name or (lambda kind, name: name)
        self._streams: dict[StreamKey, list[int]] = defaultdict(list)
        for position, event in enumerate(leaves):
            self._streams[(event.task, event.kind, rename(event.kind, event.name))].append(position)
        self.size = len(leaves)
        self.active = enabled and len({e.task for e in leaves}) > 1
        self.timeout = timeout
        self.stalls = 0
        self.waits = 0
        self._done = [False] * self.size
        self._next = 0
        self._seen: dict[StreamKey, int] = defaultdict(int)
        self._cond = threading.Condition()
        self._async_waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def _claim(self, task: str, kind: str, name: str) -> int | None:
        """This call's recorded position (``None``: not ordered). Hold the lock."""
        key = (task, kind, name)
        k = self._seen[key]
        self._seen[key] = k + 1
        positions = self._streams.get(key, ())
        return positions[k] if k < len(positions) else None

    def _turn(self, position: int) -> bool:
        return not self.active or self._next >= position

    def enter(self, task: str, kind: str, name: str) -> int | None:
        """Wait for this call's turn; return its position (hand it to :meth:`leave`)."""
        if not self.active or kind not in ORDERED_KINDS:
            return None
        with self._cond:
            position = self._claim(task, kind, name)
            if position is None:
                return None
            if not self._turn(position):
                self.waits += 1
                if not self._cond.wait_for(lambda: self._turn(position), self.timeout):
                    self._stall()
            return position

    async def aenter(self, task: str, kind: str, name: str) -> int | None:
        """:meth:`enter` for an asyncio task: the task waits, the event loop runs on."""
        if not self.active or kind not in ORDERED_KINDS:
            return None
        loop = asyncio.get_running_loop()
        with self._cond:
            position = self._claim(task, kind, name)
            if position is None or self._turn(position):
                return position
            self.waits += 1
        deadline = loop.time() + self.timeout
        while True:
            with self._cond:
                if self._turn(position):
                    return position
                woken: asyncio.Future[None] = loop.create_future()
                self._async_waiters.append((loop, woken))
            remaining = deadline - loop.time()
            try:
                if remaining <= 0:
                    raise TimeoutError
                await asyncio.wait_for(woken, remaining)
            except asyncio.CancelledError:
                self.leave(position)  # this call will not happen: do not hold up the others
                raise
            except TimeoutError:
                with self._cond:
                    if not self._turn(position):
                        self._stall()
                    return position

    def _stall(self) -> None:
        """A predecessor never came: stop enforcing (hold the lock)."""
        self.stalls += 1
        self.active = False
        self._wake()

    def _wake(self) -> None:
        """Let every waiter look again (hold the lock)."""
        self._cond.notify_all()
        waiters, self._async_waiters = self._async_waiters, []
        for loop, woken in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_resolve, woken)

    def leave(self, position: int | None) -> None:
        """Mark the call at ``position`` as completed."""
        if position is None:
            return
        with self._cond:
            self._done[position] = True
            while self._next < self.size and self._done[self._next]:
                self._next += 1
            self._wake()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
