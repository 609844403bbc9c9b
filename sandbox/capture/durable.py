"""A finished run reaches the disk off the agent's path.

Sealing a captured run writes its files whole (a temporary file and a rename: a killed
process never leaves half a manifest), but making them survive a power loss costs
milliseconds the agent would wait for at the end of every run. :func:`sync_later` hands the
files to one background thread. The thread gathers what is handed over for
:data:`BATCH_DELAY` seconds, then makes the whole batch durable at once: on Linux with one
``syncfs`` per file system holding it (one flush and one journal commit for any number of
runs, where an ``fsync`` of each file and folder costs a journal commit each, about 3 ms on a
virtual disk), elsewhere with an ``fsync`` of each. The process waits for it when it ends
(at exit and at ``os._exit``: :mod:`sandbox.capture.exits`), so the files are durable when
it has ended, and shortly after each run before.
:func:`flush` does the pending work now (a benchmark counts it inside its timed region).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from sandbox.capture.worker import Worker

BATCH_DELAY = 0.2
"""Seconds the syncer gathers paths before syncing them together: one journal commit for a
burst of runs, instead of one per file that would stall the next run's writes."""


def _fsync(path: Path) -> None:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) if path.is_dir() else os.O_RDONLY
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_SyncFS = Callable[[Path], None]


def _load_syncfs() -> _SyncFS | None:
    """``syncfs(2)`` of the file system holding a path (Linux), else ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        call = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int]
    call.restype = ctypes.c_int

    def syncfs(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            if call(fd) != 0:
                errno = ctypes.get_errno()
                raise OSError(errno, os.strerror(errno), str(path))
        finally:
            os.close(fd)

    return syncfs


_syncfs: list[_SyncFS | None] = []
"""The ``syncfs`` call, looked up by the worker on its first batch."""


def sync_paths(paths: Iterable[Path]) -> None:
    """Make ``paths`` (files, or folders for the names in them) durable: one ``syncfs``
    per file system where there is one, else (or when it fails) an ``fsync`` of each. A
    path gone already (a run deleted) is passed over."""
    if not _syncfs:
        _syncfs.append(_load_syncfs())
    syncfs = _syncfs[0]
    todo = list(dict.fromkeys(paths))  # once each, in order
    if syncfs is not None:
        devices: dict[int, list[Path]] = {}
        for path in todo:
            with contextlib.suppress(OSError):
                devices.setdefault(os.stat(path).st_dev, []).append(path)
        todo = []
        for group in devices.values():
            try:
                syncfs(group[0])
            except OSError:
                todo.extend(group)  # synced one by one below
    for path in todo:
        with contextlib.suppress(OSError):  # gone already (a run deleted), not syncable
            _fsync(path)


def flush(timeout: float | None = 30.0) -> bool:
    """Sync every path handed over so far now, without waiting for the batch to gather;
    whether it was done in time."""
    return _WORKER.hurry(timeout)


_WORKER: Worker[Path] = Worker("sandbox-sync", sync_paths, gather=BATCH_DELAY, at_exit=flush)


def sync_later(paths: Iterable[Path]) -> None:
    """Sync ``paths`` (files, or folders for the names in them) in the background."""
    _WORKER.submit(paths)


def wait(timeout: float | None = 30.0) -> bool:
    """Wait until every path handed over so far is synced; whether it was in time."""
    return _WORKER.wait(timeout)
