"""One background thread that does a kind of work handed over to it, in order.

Capture hands two kinds of work off the agent's path this way: finishing a kept run
(:mod:`sandbox.capture.finisher`) and making written files durable
(:mod:`sandbox.capture.durable`). Each is a :class:`Worker`: a daemon thread started on the
first item (outside any run, whichever run's code handed it over), a count of the items not
done yet, a wait for them, and the interpreter waiting for them at exit. (The events of
HTTP exchanges, handed over at every exchange, have a leaner thread of their own:
:mod:`sandbox.capture.drain`.)

That wait is :func:`sandbox.capture.exits.at_exit`'s: at the interpreter's exit and at an
``os._exit`` too (an RQ work horse ends so after each job, a ``multiprocessing`` child after
its target), where the items still queued would be lost with the process. A child made by
``fork`` starts with no items: those the parent had queued stay the parent's.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from sandbox.capture import exits

T = TypeVar("T")


class Worker(Generic[T]):
    """Hands items to ``handle`` on one daemon thread named ``name``.

    With ``gather`` > 0 the thread waits that many seconds after an item arrives (or until
    :meth:`hurry`) and hands every item queued by then to ``handle`` in one batch; with 0,
    one item at a time. ``gathers`` says which items are worth that wait when they come
    first (default: all); one that is not is handed over at once, with whatever is queued
    behind it. ``handle`` handles its own errors: one that escapes is passed over, the
    thread never dies of it. ``at_exit`` is registered with :func:`sandbox.capture.exits.at_exit`
    when the first item is handed over. :meth:`spent` says what the thread has done and what
    it cost."""

    def __init__(
        self,
        name: str,
        handle: Callable[[list[T]], None],
        *,
        gather: float = 0.0,
        gathers: Callable[[T], bool] | None = None,
        at_exit: Callable[[], object] | None = None,
    ) -> None:
        self._name = name
        self._handle = handle
        self._gather = gather
        self._gathers = gathers
        self._at_exit = at_exit
        self._fresh()
        after_fork = weakref.WeakMethod(self._after_fork)
        os.register_at_fork(after_in_child=lambda: (call := after_fork()) and call())

    def _fresh(self) -> None:
        self._queue: queue.SimpleQueue[T] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._hurry = threading.Event()
        self._serial = threading.RLock()
        self._pending = 0
        self._done = 0
        self._cpu = 0.0

    def _after_fork(self) -> None:
        """In the child: none of the parent's items, nor its thread or its locks (which a
        parent's thread may have held)."""
        self._fresh()

    def submit(self, items: Iterable[T]) -> None:
        """Queue ``items``, after the ones handed over before them."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                if self._at_exit is not None:
                    exits.at_exit(self._at_exit)
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                contextvars.Context().run(self._thread.start)  # no run's: its work is unseen
            for item in items:
                self._pending += 1
                self._queue.put(item)

    def handle_now(self, items: Iterable[T]) -> None:
        """Hand ``items`` to ``handle`` at once, on the caller's thread (one batch at a time,
        as on the worker's own thread; a batch may hand over more: the lock is reentrant)."""
        batch = list(items)
        with self._serial:
            cpu = self._timed(batch)
        with self._lock:
            self._done += len(batch)
            self._cpu += cpu

    def pending(self) -> int:
        """How many items are handed over and not done yet."""
        with self._lock:
            return self._pending

    def spent(self) -> tuple[int, float]:
        """How many items have been handled (on the thread or by :meth:`handle_now`), and the
        CPU seconds spent on them (the handling thread's time, not the time it waited)."""
        with self._lock:
            return self._done, self._cpu

    def on_thread(self) -> bool:
        """Whether the caller runs on the worker's own thread."""
        return threading.current_thread() is self._thread

    def wait(self, timeout: float | None) -> bool:
        """Wait until every item handed over so far is done; whether it was in time."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def hurry(self, timeout: float | None) -> bool:
        """:meth:`wait`, the batch handled without waiting for it to gather."""
        self._hurry.set()
        try:
            return self.wait(timeout)
        finally:
            self._hurry.clear()

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            if self._gather > 0:
                if self._gathers is None or self._gathers(batch[0]):
                    self._hurry.wait(self._gather)
                with contextlib.suppress(queue.Empty):
                    while True:
                        batch.append(self._queue.get_nowait())
            cpu = self._timed(batch)
            with self._idle:
                self._pending -= len(batch)
                self._done += len(batch)
                self._cpu += cpu
                self._idle.notify_all()

    def _timed(self, batch: list[T]) -> float:
        """Hand ``batch`` to ``handle`` (an error it lets escape is passed over); the CPU
        seconds that took on this thread."""
        began = time.thread_time()
        with contextlib.suppress(Exception):
            self._handle(batch)
        return time.thread_time() - began
