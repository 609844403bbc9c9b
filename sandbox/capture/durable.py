"""A finished run reaches the disk off the agent's path.

Sealing a captured run writes its files whole (a temporary file and a rename: a killed
process never leaves half a manifest), but the ``fsync`` that makes them survive a power
loss costs milliseconds the agent would wait for at the end of every run. :func:`sync_later`
hands the files to one background thread that syncs them; the interpreter waits for it at
exit, so the files are durable when the process ends, and shortly after each run before.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import queue
import threading
import time
from collections.abc import Iterable
from pathlib import Path

_queue: queue.SimpleQueue[Path] = queue.SimpleQueue()
_worker: threading.Thread | None = None
_lock = threading.Lock()
_pending = 0
_idle = threading.Condition(_lock)


def _sync(path: Path) -> None:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) if path.is_dir() else os.O_RDONLY
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


BATCH_DELAY = 0.2
"""Seconds the syncer gathers paths before syncing them together: one journal commit for a
burst of runs, instead of one per file that would stall the next run's writes."""


def _run() -> None:
    global _pending
    while True:
        batch = [_queue.get()]
        time.sleep(BATCH_DELAY)
        with contextlib.suppress(queue.Empty):
            while True:
                batch.append(_queue.get_nowait())
        for path in dict.fromkeys(batch):  # once each, in order
            with contextlib.suppress(OSError):  # gone already (a run deleted), not syncable
                _sync(path)
        with _idle:
            _pending -= len(batch)
            _idle.notify_all()


def sync_later(paths: Iterable[Path]) -> None:
    """Sync ``paths`` (files, or folders for the names in them) in the background."""
    global _worker, _pending
    with _lock:
        if _worker is None or not _worker.is_alive():
            _worker = threading.Thread(target=_run, name="sandbox-sync", daemon=True)
            _worker.start()
            atexit.register(wait)
        for path in paths:
            _pending += 1
            _queue.put(path)


def wait(timeout: float | None = 30.0) -> bool:
    """Wait until every path handed over so far is synced; whether it was in time."""
    with _idle:
        return _idle.wait_for(lambda: _pending == 0, timeout)
