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
"""

from __future__ import annotations

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

    def enter(self, task: str, kind: str, name: str) -> int | None:
        """Wait for this call's turn; return its position (hand it to :meth:`leave`)."""
        if not self.active or kind not in ORDERED_KINDS:
            return None
        key = (task, kind, name)
        with self._cond:
            k = self._seen[key]
            self._seen[key] = k + 1
            positions = self._streams.get(key, ())
            if k >= len(positions):
                return None
            position = positions[k]
            if self._next < position:
                self.waits += 1
                if not self._cond.wait_for(
                    lambda: not self.active or self._next >= position, self.timeout
                ):
                    self.stalls += 1
                    self.active = False
                    self._cond.notify_all()
            return position

    def leave(self, position: int | None) -> None:
        """Mark the call at ``position`` as completed."""
        if position is None:
            return
        with self._cond:
            self._done[position] = True
            while self._next < self.size and self._done[self._next]:
                self._next += 1
            self._cond.notify_all()
