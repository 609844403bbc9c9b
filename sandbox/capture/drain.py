"""A run's HTTP exchanges are made into event lines and written off the agent's path.

An exchange's event costs more than the crossing it records: its fields read from the
headers and bodies, its fingerprint, the JSON, the redaction of the line, a write. A run
whose lines go to its log as they come (``keep="all"``) hands each such event
(:meth:`~sandbox.capture.recorder.Recorder.emit_later`), stamped and in order, to one
background thread (:func:`put`) that makes, redacts and writes it while the agent goes on,
most often to wait for its next answer, when the thread has the interpreter to itself.
Every other event is written on the agent's thread once the lines its run handed over
before it are written, so line *n* of a log is still the event with ``seq`` *n*. A run with
:data:`LINES` lines waiting, or an exchange holding more than :data:`ITEM_BYTES`, waits for
them before handing over more: what waits in memory stays bounded.

What a crash loses: the lines handed over and not written yet (the thread keeps up with a
run that waits on the network: none, or a few). The process waits for them when it ends
(at exit, at ``os._exit``, at a signal it raises against itself:
:mod:`sandbox.capture.exits`), and a run waits for its own when it ends (:func:`settle`,
which every way of ending a run calls through
:meth:`~sandbox.capture.recorder.Recorder.flush_pending`) before its log is closed.

The thread is its own, not a :class:`~sandbox.capture.worker.Worker`: a hand-over is one
put on a queue (no lock the thread also takes, no count kept), which the agent's thread
pays at every exchange; a count's lock shared with the thread cost the agent's thread 5 to
20 µs an exchange in waits for the interpreter's lock. A child made by ``fork`` starts
with none of the parent's lines (they stay the parent's to write) and no thread.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable

from sandbox.capture import exits

LINES = 256
"""Lines of one run waiting on the thread before the next one waits for them (the agent
making exchanges faster than the thread writes them: what they hold stays bounded)."""
ITEM_BYTES = 1024 * 1024
"""An exchange holding more (its bodies) waits for the run's lines before it is handed
over: one such at a time held in memory."""

Line = bytes | Callable[[], bytes]
"""An event's line not redacted yet, or what makes it."""
Item = tuple[Callable[[Line], None], Line] | threading.Event
"""A line and what writes it, or a mark that is set once the lines before it are written."""

_queue: queue.SimpleQueue[Item] = queue.SimpleQueue()
_thread: threading.Thread | None = None
_starting = threading.Lock()


def _run(items: queue.SimpleQueue[Item]) -> None:
    while True:
        batch = [items.get()]
        with contextlib.suppress(queue.Empty):
            while True:
                batch.append(items.get_nowait())
        for item in batch:
            if isinstance(item, threading.Event):
                item.set()
            else:
                write, line = item
                with contextlib.suppress(Exception):  # its own to handle: never the next ones'
                    write(line)


def _start() -> None:
    global _thread
    with _starting:
        if _thread is None:
            exits.at_exit(settle)
            thread = threading.Thread(target=_run, args=(_queue,), name="sandbox-events")
            thread.daemon = True
            contextvars.Context().run(thread.start)  # no run's: its work is unseen
            _thread = thread


def put(write: Callable[[Line], None], line: Line) -> None:
    """Have ``write(line)`` called on the thread, after the lines handed over before it
    (``write`` handles its own errors)."""
    if _thread is None:
        _start()
    _queue.put((write, line))


def settle(timeout: float | None = 30.0) -> bool:
    """Wait until every line handed over so far is written; whether it was in time."""
    thread = _thread
    if thread is None or threading.current_thread() is thread:
        return True
    mark = threading.Event()
    _queue.put(mark)
    return mark.wait(timeout)


def _after_fork() -> None:
    global _queue, _thread, _starting
    _queue, _thread, _starting = queue.SimpleQueue(), None, threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
