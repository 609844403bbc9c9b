"""What must run before the process ends, however it ends: at the interpreter's exit and at
``os._exit``.

``os._exit`` ends the process at once, skipping :mod:`atexit`. Task workers end so: an RQ
work horse after each job, a ``multiprocessing`` child after its target, billiard's
children. A run kept there and still being finished in the background (see
:mod:`sandbox.capture.finisher`) would be lost with the process, silently. So once something
is registered here, ``os._exit`` is replaced (once per process) by a function that calls what
was registered, then exits with the status it was given. It waits only while something is
pending (each registered call bounds its own wait), and what it calls never raises.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Callable
from typing import NoReturn

_hooks: list[Callable[[], object]] = []
_lock = threading.Lock()
_original_exit = os._exit


def _after_fork() -> None:
    global _lock
    _lock = threading.Lock()  # a parent's thread may have held it


os.register_at_fork(after_in_child=_after_fork)


def _exit(status: int) -> NoReturn:
    """``os._exit`` once :func:`at_exit` registered something: what was registered, then
    the original."""
    for hook in list(_hooks):
        with contextlib.suppress(BaseException):
            hook()
    _original_exit(status)


def at_exit(hook: Callable[[], object]) -> None:
    """Call ``hook`` when the process ends: at the interpreter's exit (:mod:`atexit`) and at
    ``os._exit``; once however often it is registered."""
    with _lock:
        if hook in _hooks:
            return
        _hooks.append(hook)
        atexit.register(hook)
        os._exit = _exit
