"""Kept runs are finished off the agent's path.

When a run under ``keep="failed"`` (or a rate) ends kept, what remains to do costs time the
agent must not wait for: its services' states are captured (a Postgres dump of the tables
it touched from the pinned snapshot, its Redis keys as they are now), its blobs written,
its manifest sealed and the run published to the store. :func:`submit` hands that to one
background thread; the run's pinned states stay held until it is done. A request served by
the agent answers as soon as its own work is done, whether its run is kept or not.

One thread, one kept run at a time: however many runs fail at once, their captures use a
couple of connections to each service, not one each (runs finished together share dumps
where they can, see :class:`sandbox.services.postgres.PinnedPostgres`).

:func:`wait` blocks until every run handed over so far is finished (a test, a benchmark, a
service shutting down); the interpreter waits for it at exit, up to :data:`EXIT_WAIT_S`.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import queue
import sys
import threading
from collections.abc import Callable

EXIT_WAIT_S = 120.0
"""How long the interpreter waits at exit for the kept runs still being finished."""

_queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
_worker: threading.Thread | None = None
_lock = threading.Lock()
_pending = 0
_idle = threading.Condition(_lock)


def _run() -> None:
    global _pending
    while True:
        job = _queue.get()
        try:
            contextvars.Context().run(job)  # no run's context: the job's own work is unseen
        except BaseException as error:  # a job handles its own errors; never lose the thread
            with contextlib.suppress(Exception):
                sys.stderr.write(f"sandbox: finishing a kept run failed: {error!r}\n")
        finally:
            with _idle:
                _pending -= 1
                _idle.notify_all()


def _at_exit() -> None:
    if wait(EXIT_WAIT_S):
        from sandbox.capture.durable import wait as synced

        synced()  # the files the jobs handed to the syncer


def submit(job: Callable[[], None]) -> None:
    """Run ``job`` on the background thread, after the jobs submitted before it."""
    global _worker, _pending
    with _lock:
        if _worker is None or not _worker.is_alive():
            if _worker is None:
                atexit.register(_at_exit)
            _worker = threading.Thread(target=_run, name="sandbox-finish", daemon=True)
            _worker.start()
        _pending += 1
        _queue.put(job)


def pending() -> int:
    """How many jobs are submitted and not finished yet."""
    with _lock:
        return _pending


def wait(timeout: float | None = 60.0) -> bool:
    """Wait until every kept run handed over so far is finished (in the store, or marked
    damaged); whether it was in time."""
    if threading.current_thread() is _worker:
        return _pending <= 1
    with _idle:
        return _idle.wait_for(lambda: _pending == 0, timeout)
