"""Clean up live environments on normal exit, on exceptions, on SIGINT and on SIGTERM.

Environments register here while they are up. At interpreter exit (``atexit``) and when
SIGINT or SIGTERM arrives, every live environment is closed; then the signal's previous
handler runs (Python's SIGINT handler raises :class:`KeyboardInterrupt`), or, when it was the
default action, the signal is sent again so the process ends with the usual status. A
SIGKILL cannot be caught: :func:`sandbox.containers.gc.gc` removes what such a process left.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, Protocol


class Closeable(Protocol):
    def close(self) -> None: ...


_live: dict[int, Closeable] = {}
_lock = threading.Lock()
_installed = False


def register(obj: Closeable) -> None:
    _install()
    with _lock:
        _live[id(obj)] = obj


def unregister(obj: Closeable) -> None:
    with _lock:
        _live.pop(id(obj), None)


def close_all() -> None:
    with _lock:
        items = list(_live.values())
        _live.clear()
    for obj in items:
        with contextlib.suppress(Exception):
            obj.close()


def _install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(close_all)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous = signal.getsignal(sig)
        if previous is signal.SIG_IGN:
            continue
        signal.signal(sig, _handler(previous))


def _handler(previous: object) -> Callable[[int, FrameType | None], Any]:
    def handle(signum: int, frame: FrameType | None) -> None:
        close_all()
        if callable(previous):
            previous(signum, frame)
        else:  # SIG_DFL (or unknown): end the process as the signal would have
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    return handle
